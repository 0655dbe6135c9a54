import Dispatch
import Foundation
import LabstreamCore
import Synchronization
import Testing

@testable import LabstreamEngine

/// The committer bounds how far a body runs ahead of what is durable: a background fill hands a
/// checkpoint over only once the one before it is committed; a reader's body may queue one more
/// behind the sync, never two.
@Suite struct CheckpointCommitterTests {
    @Test(arguments: [false, true])
    func aSubmitWaitsForTheCheckpointsBeforeIt(queueBehindSync: Bool) {
        let syncing = DispatchSemaphore(value: 0), release = DispatchSemaphore(value: 0)
        let committed = Mutex<[Int64]>([])
        let lane = Lane(name: "checkpoint")
        defer { lane.close() }
        let committer = CheckpointCommitter(queueBehindSync: queueBehindSync, lane: lane) { c throws(LabstreamError) in
            syncing.signal()
            release.wait()
            committed.withLock { $0.append(c.piece.lower) }
        }
        let submitted = Mutex(0)
        let allSubmitted = DispatchSemaphore(value: 0)
        Thread {
            for i in Int64(0)..<4 {
                try? committer.submit(.init(piece: ByteRange(i, i + 1), digest: "d\(i)", validator: nil))
                submitted.withLock { $0 += 1 }
            }
            allSubmitted.signal()
        }.start()
        // While checkpoint n is being made durable, the body may have handed over n + 1 (strict)
        // or n + 2 (a queue of one behind the sync), and no more.
        let ahead = queueBehindSync ? 2 : 1
        var ranAhead = false
        for n in 0..<4 {
            syncing.wait()  // checkpoint n is being made durable and stays so
            if n + ahead < 4 {
                ranAhead = ranAhead || allSubmitted.wait(timeout: .now() + 0.3) == .success
                #expect(!ranAhead && submitted.withLock { $0 } == n + ahead, "while \(n) syncs")
            }
            release.signal()
        }
        if !ranAhead { allSubmitted.wait() }
        #expect(committer.finish() == nil)
        #expect(committed.withLock { $0 } == [0, 1, 2, 3])
    }
}
