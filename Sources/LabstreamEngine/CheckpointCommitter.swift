import Foundation
import LabstreamCore

/// Makes one body's checkpoints durable and commits them on a thread of their own, in order, so
/// the body keeps arriving while the disk syncs. When the disk is slower than the network the
/// body waits, so a crash loses little (unbounded, the queue grew to whole segments under load):
/// a background fill hands a checkpoint over only once the one before it is committed, losing
/// at most the one being synced and the one being filled; a body a reader waits on may queue one
/// more behind the sync, so that the reader is not held up by each `fdatasync` (measured in
/// docs/PERFORMANCE.md: the strict bound halves what a kill refetches and costs a pin 5 %, a
/// cold read 9 %). A failed
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
    /// Whether a checkpoint may wait queued while the one before it is synced (a reader's body).
    let queueBehindSync: Bool

    /// `commit` syncs the file and records the checkpoint, on `lane` (the fetch's own, from the
    /// fetch pool); it throws to stop the body.
    init(queueBehindSync: Bool, lane: Lane, commit: @escaping @Sendable (Checkpoint) throws(LabstreamError) -> Void) {
        self.queueBehindSync = queueBehindSync
        lane.run { [self] in
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
    }

    private func take() -> Checkpoint? {
        condition.lock()
        defer { condition.unlock() }
        while pending.isEmpty && !closed { condition.wait() }
        guard !pending.isEmpty else { return nil }
        busy = true
        condition.broadcast()  // a body waiting to queue the next one may now
        return pending.removeFirst()
    }

    /// Hands a checkpoint over, first waiting until the one before it is committed (or, with
    /// `queueBehindSync`, taken up); throws the failure of an earlier one.
    func submit(_ checkpoint: Checkpoint) throws(LabstreamError) {
        condition.lock()
        defer { condition.unlock() }
        while (!pending.isEmpty || (busy && !queueBehindSync)) && failure == nil { condition.wait() }
        if let failure { throw failure }
        pending.append(checkpoint)
        condition.broadcast()
    }

    /// Waits until every queued checkpoint is committed (or dropped), gives the lane back, and
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
