import Foundation
import LabstreamBackends
import LabstreamCore
import LabstreamStore

// The small views of the transfer engine its subsystems share. Each subsystem's own protocol
// (`ValidationHost`, `ManagedEntriesHost`, …, at the end of its file) is made of these and the
// few members only it uses, so its signature says what it can touch; `TransferEngine` is the one
// host, and a test drives a subsystem through a double of its protocol.

/// A server's backend and whether it answers now.
protocol ServerAccess: AnyObject, Sendable {
    var log: @Sendable (String) -> Void { get }
    func backend(for server: String) -> (any MediaBackend)?
    func reachability(of server: String) -> Reachability
}

/// The index's rows and the files they name: read and written (stamped with `now`), a change
/// told to status readers, new files (a copy, a next version) told to the tree.
protocol RowAccess: AnyObject, Sendable {
    var index: OfflineIndex { get }
    var layout: DataLayout { get }
    var log: @Sendable (String) -> Void { get }
    /// Seconds since the epoch, as the index records them.
    func now() -> Int64
    /// Something a status reader shows changed.
    func noteChange()
    /// Files appeared in the tree without a catalog sync: the tree is rebuilt from the index.
    func treeChanged()
}

/// The catalog as the engine holds it, read only.
protocol CatalogAccess: AnyObject, Sendable {
    func catalogFile(_ key: FileKey) -> TreeFile?
    func catalogFiles() -> TreeFileLookup
    /// The tree entry of any row: a catalog file, a copy at another quality, a next version.
    func treeFile(for row: DownloadRow) -> TreeFile?
    /// The tree entry a copy at another quality has (or will have).
    func derivedTreeFile(_ row: DownloadRow) -> TreeFile?
}

/// The journal of work a server is to be asked to undo (encodings to stop, jobs to cancel,
/// entries to delete); `settle` acts on a server's answer to one.
protocol CleanupAccess: AnyObject, Sendable {
    var journal: CleanupJournal { get }
    var log: @Sendable (String) -> Void { get }
}

/// What a subsystem may do to a file's transfer, which the engine opens (or finds open) and
/// drives as its host: the subsystem never holds the host itself.
protocol TransferDriving: AnyObject, Sendable {
    /// Tops up `file`'s segment train; throws when its transfer cannot be opened.
    func fillTransfer(of file: TreeFile) throws(LabstreamError) -> FileTransfer.FillState
    /// Fails `file` for good with `reason` (a retry asks again).
    func stopFetching(_ file: TreeFile, reason: StatusReason) throws(LabstreamError)
}

extension TransferEngine: ServerAccess, RowAccess, CatalogAccess, CleanupAccess, TransferDriving {
    func fillTransfer(of file: TreeFile) throws(LabstreamError) -> FileTransfer.FillState { try transfer(for: file).fill(engine: self) }

    func stopFetching(_ file: TreeFile, reason: StatusReason) throws(LabstreamError) {
        try transfer(for: file).stopFetching(reason: reason, engine: self)
    }
}
