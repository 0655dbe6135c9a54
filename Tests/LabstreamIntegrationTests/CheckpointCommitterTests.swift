import Dispatch
import Foundation
import LabstreamCore
@testable import LabstreamEngine
import Synchronization
import Testing

/// The committer bounds how far a body runs ahead of what is durable: a checkpoint is handed
/// over only once the one before it is committed.
@Suite struct CheckpointCommitterTests {
    @Test func aSubmitWaitsUntilTheCheckpointBeforeItIsCommitted() {
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
        // The second must not be handed over while the first is outstanding.
        let ranAhead = allSubmitted.wait(timeout: .now() + 0.5) == .success
        #expect(!ranAhead && submitted.withLock { $0 } == 1)
        release.signal()
        syncing.wait()   // the second is being made durable: the third still waits
        let ranAheadAgain = allSubmitted.wait(timeout: .now() + 0.5) == .success
        #expect(!ranAheadAgain && submitted.withLock { $0 } == 2)
        release.signal()
        syncing.wait()   // the third
        if !ranAhead && !ranAheadAgain { allSubmitted.wait() }
        release.signal()
        #expect(committer.finish() == nil)
        #expect(committed.withLock { $0 } == [0, 1, 2])
    }
}
