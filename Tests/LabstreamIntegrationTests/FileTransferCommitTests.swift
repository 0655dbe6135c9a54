import Dispatch
import Foundation
import LabstreamBackends
import LabstreamCore
import LabstreamStore
import Synchronization
import Testing

@testable import LabstreamEngine

/// A commit's index transaction runs with the file's lock let go (holding the commit token): a
/// reader of bytes already committed is served meanwhile; the row changes made meanwhile (a
/// second commit, a pause) land after it, and none is lost.
@Suite struct FileTransferCommitTests {
    /// A host whose clock (asked by the index transaction) can hold the next commit mid-way.
    final class Host: TransferHost, @unchecked Sendable {
        let settings = TransferEngine.Settings()
        let log: @Sendable (String) -> Void = { _ in }
        let holdNext = Mutex(false)
        let held = DispatchSemaphore(value: 0), release = DispatchSemaphore(value: 0)
        let pool = FetchPool(size: 1)

        func now() -> Int64 {
            if holdNext.withLock({ h in
                defer { h = false }; return h
            }) {
                held.signal()
                release.wait()
            }
            return 1
        }
        func noteChange() {}
        func backend(for server: String) -> (any MediaBackend)? { nil }
        func reachability(of server: String) -> Reachability { .online }
        func markUnreachable(_ server: String, _ state: Reachability) {}
        func lookForServerSoon() {}
        func room(for bytes: Int64, of key: FileKey) -> StorageBudget.Room { .fits }
        func setAside(_ path: String) throws(LabstreamError) {}
        func checksFinishedCopy(of key: FileKey) -> Bool { true }
        func wakeValidation() {}
        func wakeFill() {}
        func fileFailed() {}
        func dropped(_ key: FileKey) {}
        func runFetch(background: Bool, _ job: @escaping FetchPool.Job) { pool.submit(background: background, job) }
        func fetchStarted() -> Int64 { 0 }
        func fetchEnded() {}
        var isStopping: Bool { false }
    }

    @Test func aCommitsIndexTransactionHoldsNoReaderAndLosesNoChangeMadeMeanwhile() throws {
        let scratch = Scratch("commit")
        let layout = DataLayout(root: scratch.path)
        let index = try OfflineIndex(path: layout.indexPath)
        let file = TreeFile(path: ["f.mkv"], key: FileKey(server: "home", itemId: "i", sourceId: "s"), size: Int64(4 * MiB), modified: 0, etag: "e")
        let transfer = try FileTransfer.open(file: file, index: index, layout: layout)
        let host = Host()
        let attempt = transfer.snapshot().attempt
        transfer.setPinned(true, engine: host)
        let bytes = [UInt8](repeating: 7, count: MiB)
        func piece(_ n: Int) throws -> ByteRange {
            let range = ByteRange(offset: Int64(n * MiB), length: Int64(MiB))
            let written = bytes.withUnsafeBytes { b in Result { () throws(LabstreamError) in try transfer.write(b, at: range.lower, attempt: attempt) } }
            try written.get()
            try transfer.sync()
            return range
        }
        #expect(transfer.commit(try piece(0), digest: "d0", validator: nil, attempt: attempt, engine: host))

        // The next commit stops inside its index transaction.
        let second = try piece(1), third = try piece(2)
        host.holdNext.withLock { $0 = true }
        let committed = DispatchGroup()
        DispatchQueue.global().async(group: committed) { #expect(transfer.commit(second, digest: "d1", validator: nil, attempt: attempt, engine: host)) }
        host.held.wait()
        // A reader of committed bytes is served meanwhile (the file's lock is not held).
        #expect(try transfer.readPresent(ByteRange(0, 4096), attempt: attempt) == [UInt8](repeating: 7, count: 4096))
        #expect(transfer.snapshot().present == RangeSet([ByteRange(0, Int64(MiB))]))
        // A second commit and a pause, asked now, wait for it and then land on top of it.
        DispatchQueue.global().async(group: committed) { #expect(transfer.commit(third, digest: "d2", validator: nil, attempt: attempt, engine: host)) }
        DispatchQueue.global().async(group: committed) { try? transfer.apply(.pause, engine: host) }
        host.release.signal()
        committed.wait()

        let live = transfer.snapshot()
        let stored = try #require(try index.download(file.key))
        for row in [live, stored] {
            #expect(row.present.contains(ByteRange(0, Int64(3 * MiB))), "\(row.present)")
            #expect(row.status == .paused && row.pauseCause == .user, "\(row.status)")
        }
        #expect(try index.segments(file.key, attempt: attempt).map(\.digest) == ["d0", "d1", "d2"])
    }
}
