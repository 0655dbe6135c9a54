import Foundation
import LabstreamBackends
import LabstreamCore
import LabstreamStore

/// One copy for one file reached through two servers (issue 41 item 4). Before a file with
/// nothing stored is fetched (a pin's fill, or a first read), a whole copy another server's file
/// has here is looked for: matched by what both servers say (`SharedCopy.source`) and confirmed
/// by a few small ranges read from this file's server (`AdoptionProbe`, at most 256 KiB), it
/// becomes this file's too, by a hard link (`OfflineIndex.shareCopy`). Anything doubtful is
/// fetched on its own. Each file is looked at once per run, and again when pinned anew (a copy
/// still waiting for its check holds the file's fill until the check is done).
extension TransferEngine {
    @discardableResult
    func shareStoredCopy(_ file: TreeFile) -> Bool {
        guard file.key.kind == .original, file.size > 0,
            sharingLooked.withLock({ $0.insert(file.key).inserted })
        else { return false }
        // A server that keeps its own record of this device's copies (Silo) checks what it hands
        // out against its manifest: its files are fetched through it.
        guard let backend = backend(for: file.key.server), !(backend is any ManagedDownloadRegistry), reachability(of: file.key.server) == .online,
            ((try? index.download(file.key)) ?? nil)?.present.isEmpty ?? true,
            let wanted = (try? index.fileIdentity(file.key)) ?? nil,
            let copies = try? index.wholeCopies(size: file.size, otherThan: file.key.server), !copies.isEmpty
        else { return false }
        let stored = copies.compactMap { c in
            OfflineIndex.fileGroup(ofPartial: layout.absolute(c.row.partialPath)).map { SharedCopy.Stored(identity: c.identity, group: $0) }
        }
        guard let source = SharedCopy.source(for: wanted, among: stored), let sourceRow = copies.first(where: { $0.row.key == source.identity.key })?.row
        else { return false }
        // A copy still waiting for its playback check is shared once it passes: the fill holds
        // this file until then, and looks again.
        if sourceRow.awaitingValidation && checksFinishedCopy(of: sourceRow.key) {
            sharingLooked.withLock { _ = $0.remove(file.key) }
            return true
        }
        let shown = catalogPath(of: sourceRow.key)?.joined(separator: "/") ?? sourceRow.key.description
        let name = file.path.joined(separator: "/")
        let confirmed = CopyProbe.confirm(sourceRow, as: file, partial: layout.absolute(sourceRow.partialPath), backend: backend, index: index)
        guard confirmed.agrees else {
            log("\(name) looks like \(shown), but a few of its bytes read otherwise: it is fetched on its own")
            return false
        }
        // No transfer of the file may open between the check that it holds nothing and the commit.
        opening.lock()
        defer { opening.unlock() }
        guard retireTransfers([file.key]) else { return false }
        do {
            _ = try index.shareCopy(
                sourceRow, with: file.key, layout: layout, validator: confirmed.validator, tag: file.etag, reason: .shared(with: shown), now: now())
        } catch {
            log("\(name): \(error.userMessage)")
            return false
        }
        log("\(name) is the same file as \(shown) (confirmed by its bytes): stored once, under both paths")
        noteChange()
        return true
    }
}
