import Dispatch
import Foundation
import LabstreamCore
@testable import LabstreamEngine
import Synchronization
import Testing

/// The committer bounds how far a body runs ahead of what is durable: one checkpoint may wait
/// while another is synced, never more.
@Suite struct CheckpointCommitterTests {
    @Test func aSubmitWaitsWhileACheckpointIsQueuedBehindTheOneBeingSynced() {
        let syncing = DispatchSemaphore(value: 0), release = DispatchSemaphore(value: 0)
        let committed = Mutex<[Int64]>([])
        let committer = CheckpointCommitter { c throws(LabstreamError) in
            syncing.signal()
            release.wait()
            committed.withLock { $0.append(c.piece.lower) }
        }
        let submitted = Mutex(0)
        let allSubmitted = DispatchSemaphore(value: 0)
        Thread {
            for i in Int64(0)..<3 {
                try? committer.submit(.init(piece: ByteRange(i, i + 1), digest: "d\(i)", validator: nil))
                submitted.withLock { $0 += 1 }
            }
            allSubmitted.signal()
        }.start()
        syncing.wait()   // the first is being made durable and stays so
        // The second queues behind it; the third must not be taken while both are outstanding.
        let ranAhead = allSubmitted.wait(timeout: .now() + 0.5) == .success
        #expect(!ranAhead && submitted.withLock { $0 } == 2)
        release.signal()
        syncing.wait()   // the second is being made durable: the third may queue now
        if !ranAhead { allSubmitted.wait() }
        release.signal()
        syncing.wait()
        release.signal()
        #expect(committer.finish() == nil)
        #expect(committed.withLock { $0 } == [0, 1, 2])
    }
}
