import Foundation
import LabstreamCore

/// Makes one body's checkpoints durable and commits them on a thread of its own, in order, so
/// the body keeps arriving while the disk syncs. When the disk is slower than the network the
/// body waits: a checkpoint is handed over only once the one before it is committed, so a crash
/// loses at most the checkpoint being synced and the one being filled (unbounded, the queue
/// grew to whole segments under load; with one more allowed to wait, a kill refetched twice as
/// much for 5 % more pin throughput, docs/PERFORMANCE.md). A failed
/// checkpoint (the disk, or a newer attempt owning the row) drops the ones after it and stops
/// the body at its next chunk. `condition` guards every `var`.
final class CheckpointCommitter: @unchecked Sendable {
    struct Checkpoint {
        var piece: ByteRange
        var digest: String
        var validator: Validator?
    }

    let condition = NSCondition()
    var pending: [Checkpoint] = []
    var busy = false
    var closed = false
    var failure: LabstreamError?

    /// `commit` syncs the file and records the checkpoint; it throws to stop the body.
    init(commit: @escaping @Sendable (Checkpoint) throws(LabstreamError) -> Void) {
        let thread = Thread { [self] in
            while let next = take() {
                do throws(LabstreamError) { try commit(next) } catch {
                    condition.withLock {
                        failure = failure ?? error
                        pending.removeAll()
                    }
                }
                condition.withLock {
                    busy = false
                    condition.broadcast()
                }
            }
        }
        thread.name = "checkpoint"
        thread.start()
    }

    private func take() -> Checkpoint? {
        condition.lock()
        defer { condition.unlock() }
        while pending.isEmpty && !closed { condition.wait() }
        guard !pending.isEmpty else { return nil }
        busy = true
        condition.broadcast()   // a body waiting to queue the next one may now
        return pending.removeFirst()
    }

    /// Hands a checkpoint over, first waiting until the one before it is committed; throws the
    /// failure of an earlier one.
    func submit(_ checkpoint: Checkpoint) throws(LabstreamError) {
        condition.lock()
        defer { condition.unlock() }
        while (!pending.isEmpty || busy) && failure == nil { condition.wait() }
        if let failure { throw failure }
        pending.append(checkpoint)
        condition.broadcast()
    }

    /// Waits until every queued checkpoint is committed (or dropped), ends the thread, and
    /// returns the first failure.
    func finish() -> LabstreamError? {
        condition.lock()
        defer { condition.unlock() }
        closed = true
        condition.broadcast()
        while !pending.isEmpty || busy { condition.wait() }
        return failure
    }
}
