import Foundation
import LabstreamBackends
import LabstreamCore
import LabstreamStore

/// One ranged request's answer, from the wire to durable commits. Long bodies are committed in
/// checkpoints as they arrive (`CheckpointCommitter`), so a crash or a dropped connection loses
/// a checkpoint or two, not the whole segment; pieces are gathered and written together when
/// `BodyCoalescing` says; readers waiting inside the range are served bytes as they are written
/// when the answer carries the attempt's validator. Used by one thread, once (`run`). It reaches
/// its file only through `RangeSink`: never the file's state or its locks.
final class RangeFetch {
    let sink: any RangeSink
    let engine: any TransferHost
    let range: ByteRange
    let attempt: AttemptID
    let checkpointBytes: Int64
    /// This fetch's share of the rate limit (0: none).
    let rate: Int64
    let started = Date()
    let body: GatheredBody
    let checkpoints: CheckpointCommitter

    /// Where the next checkpoint starts: what is committed of this range ends here.
    private(set) var checkpointStart: Int64
    /// Body bytes received so far (pacing).
    var received: Int64 = 0
    /// Up to where writeback was started.
    var writtenBack: Int64
    /// Whether readers may have this answer's bytes before they are committed: only when it
    /// carries the attempt's validator (pinned here by the first answer), so no reader can be
    /// served two versions of the file. Decided at the first write.
    var servable: Bool?
    /// The validator the answer carries.
    var answerValidator: Validator?
    /// A failure of the body's own writing (not the transport's).
    var sinkError: LabstreamError?
    /// Asked at every piece of the body: true ends it there, keeping what arrived (a prefetch
    /// whose playback stopped).
    let cancelled: (@Sendable () -> Bool)?

    /// `lane`: the thread this fetch's checkpoints are made durable and committed on.
    init(
        sink: any RangeSink, range: ByteRange, attempt: AttemptID, background: Bool, rate: Int64, lane: Lane, engine: any TransferHost,
        cancelled: (@Sendable () -> Bool)? = nil
    ) {
        self.sink = sink
        self.cancelled = cancelled
        self.engine = engine
        self.range = range
        self.attempt = attempt
        checkpointBytes = engine.settings.checkpointBytes
        self.rate = rate
        // A whole-file stream passes over the durable prefix again: those bytes are not written.
        let prefix = sink.durablePrefix(of: attempt)
        checkpointStart = range.lower == 0 && range.upper == sink.file.size ? min(prefix, range.upper) : range.lower
        writtenBack = checkpointStart
        body = GatheredBody(at: checkpointStart)
        checkpoints = CheckpointCommitter(queueBehindSync: !background, lane: lane) { [sink, engine] c throws(LabstreamError) in
            try sink.sync()
            // The response's validator is pinned with its first committed bytes.
            guard sink.commit(c.piece, digest: c.digest, validator: c.validator, attempt: attempt, engine: engine) else {
                throw .remoteChanged("a newer attempt replaced this one")
            }
        }
    }

    /// Asks for the range and takes the answer in; what it came to. Whatever arrived of a body
    /// cut short is committed (the attempt check refuses stale bytes); `checkpointStart` then
    /// says where the rest begins.
    func run(validator: Validator?, backend: any MediaBackend) -> Result<FileTransfer.Fetched, FetchFailure> {
        let checksWhenSent = sink.authChecks
        let request = backend.rangeRequest(for: sink.file, range: range, validator: validator)
        let expectation = RangeExpectation(range: range, total: sink.file.size, validator: validator)
        var outcome: Result<FileTransfer.Fetched, FetchFailure>
        do {
            let result = try backend.transport.fetchRange(request, expectation: expectation) { bytes, offset, seen in
                try receive(bytes, at: offset, seen: seen)
            }
            try? writeGathered(answerValidator)
            outcome = sinkError.map { .failure(.local($0)) } ?? judged(result, asked: request, backend: backend, checksWhenSent: checksWhenSent)
        } catch {
            // A body cut short keeps what arrived (a stale attempt's bytes are refused here too).
            if sinkError == nil { try? writeGathered(answerValidator) }
            if let sinkError {
                outcome = .failure(.local(sinkError))
            } else {
                if case .unreachable = error { engine.markUnreachable(sink.file.key.server, .offline) }
                if case .stalled = error { outcome = .failure(.stall(error.asLabstreamError)) } else { outcome = .failure(.transport(error.asLabstreamError)) }
            }
        }
        // Every checkpoint is in before the body is finished, so nothing of it is planned again meanwhile.
        if let failed = checkpoints.finish() { outcome = .failure(.local(failed)) }
        if case .failure = outcome, body.writtenUpTo > checkpointStart {
            // Cut short (a drop, a stall, the daemon stopping): what arrived is the answer's own,
            // already judged and possibly read, so it is kept. The attempt check refuses stale bytes.
            let arrived = ByteRange(checkpointStart, body.writtenUpTo)
            if (try? sink.sync()) != nil,
                sink.commit(arrived, digest: body.takeDigest(), validator: answerValidator, attempt: attempt, engine: engine)
            {
                checkpointStart = arrived.upper
            }
        }
        return outcome
    }

    /// One piece of the body, at `offset` in the file.
    func receive(_ bytes: UnsafeRawBufferPointer, at offset: Int64, seen: Validator?) throws {
        if rate > 0 {
            // Pace the body to this transfer's share of the rate limit.
            let due = Double(received) / Double(rate) - Date().timeIntervalSince(started)
            if due > 0 { usleep(useconds_t(min(due, 1) * 1_000_000)) }
        }
        if engine.isStopping {
            try? writeGathered(seen)  // what arrived before the stop is kept
            sinkError = .fetchFailed("the daemon is stopping")
            throw LabstreamError.fetchFailed("stopping")
        }
        if cancelled?() == true {
            try? writeGathered(seen)
            sinkError = .fetchFailed("cancelled")
            throw LabstreamError.fetchFailed("cancelled")
        }
        answerValidator = seen
        let skip = Int(min(max(checkpointStart - offset, 0), Int64(bytes.count)))
        if skip < bytes.count {
            if !body.fits(bytes.count - skip) { try writeGathered(seen) }
            body.append(UnsafeRawBufferPointer(rebasing: bytes[skip...]))
        }
        received += Int64(bytes.count)
        let pending = body.pending
        let checkpointDue = pending.upper - checkpointStart >= checkpointBytes && pending.upper < range.upper
        if sink.mustWrite(pending, checkpointDue: checkpointDue) { try writeGathered(seen) }
    }

    /// Writes what was gathered, then lets readers have it, starts its writeback and submits a
    /// checkpoint when one is due. A failure is the body's (`sinkError`).
    func writeGathered(_ seen: Validator?) throws(LabstreamError) {
        do throws(LabstreamError) { try writeGatheredBytes(seen) } catch {
            sinkError = error
            throw error
        }
    }

    private func writeGatheredBytes(_ seen: Validator?) throws(LabstreamError) {
        let attempt = self.attempt
        guard let piece = try body.flush({ bytes, offset throws(LabstreamError) in try sink.write(bytes, at: offset, attempt: attempt) }) else { return }
        servable = try sink.wrote(piece, attempt: attempt, validator: seen, servable: servable)
        if piece.upper - writtenBack >= 1 << 20 {
            sink.startWriteback(ByteRange(max(writtenBack, checkpointStart), piece.upper))
            writtenBack = piece.upper
        }
        if piece.upper - checkpointStart >= checkpointBytes && piece.upper < range.upper {
            try checkpoints.submit(.init(piece: ByteRange(checkpointStart, piece.upper), digest: body.takeDigest(), validator: seen))
            checkpointStart = piece.upper
        }
    }

    /// What a whole answer that reached the end of the transport comes to.
    func judged(
        _ result: RangeTransferResult, asked request: HTTPRequest, backend: any MediaBackend, checksWhenSent: Int
    ) -> Result<FileTransfer.Fetched, FetchFailure> {
        if result.verdict.isAccept {
            // The transport reports a finished prefix as `accept`; one cut short is a drop.
            guard case .accept(let seen, _) = result.verdict, result.bytesWritten == range.count else {
                return .failure(.cutShort("the connection ended after \(result.bytesWritten) of \(range.count) bytes"))
            }
            do {
                try sink.sync()
                return .success(.init(validator: seen, received: range.upper - checkpointStart, digest: body.takeDigest()))
            } catch {
                return .failure(.local(error))
            }
        }
        if case .reject = result.verdict, result.status == 401 {
            return .failure(sink.afterUnauthorized(backend: backend, engine: engine, checksWhenSent: checksWhenSent))
        }
        if case .reject = result.verdict, let registry = backend as? any ManagedDownloadRegistry,
            let why = registry.byteRefusal(of: sink.file.key, status: result.status)
        {
            return .failure(FetchFailure(error: .refused(why), kind: .validation))
        }
        // The file's address named its old version: a new attempt reads it where it is now.
        if case .reject = result.verdict, let movable = backend as? any MovableSources,
            let why = movable.sourceMoved(sink.file, asked: request, status: result.status)
        {
            return .failure(FetchFailure(error: .remoteChanged(why), kind: .validation))
        }
        return .failure(FetchFailure.answer(result.verdict, status: result.status, retryAfter: result.retryAfter)!)
    }
}

/// All a ranged answer may do to its file (`FileTransfer` is the one sink); each call takes the
/// file's own locks, so a fetch never holds them nor touches the state they guard.
protocol RangeSink: AnyObject, Sendable {
    var file: TreeFile { get }
    /// How much of `attempt` is durable from byte 0 (a whole-file stream passes over it again).
    func durablePrefix(of attempt: AttemptID) -> Int64
    /// Whether the gathered `pending` bytes must be written now (`BodyCoalescing`: a reader waits
    /// inside them, or a checkpoint is due).
    func mustWrite(_ pending: ByteRange, checkpointDue: Bool) -> Bool
    /// Writes bytes of `attempt`, unless a newer attempt owns the file.
    func write(_ bytes: UnsafeRawBufferPointer, at offset: Int64, attempt: AttemptID) throws(LabstreamError)
    /// `piece` of `attempt`, carrying `validator`, is written: readers may have it when the answer
    /// is servable (decided at its first write, when `servable` is nil: it carries the attempt's
    /// validator, pinned by the first answer). Returns that verdict.
    func wrote(_ piece: ByteRange, attempt: AttemptID, validator: Validator?, servable: Bool?) throws(LabstreamError) -> Bool
    /// Makes what was written durable; starts the writeback of `range` early.
    func sync() throws(LabstreamError)
    func startWriteback(_ range: ByteRange)
    /// Records a durable piece of `attempt` (its range and digest); false when a newer attempt replaced it.
    func commit(_ piece: ByteRange, digest: String, validator: Validator?, attempt: AttemptID, engine: any TransferHost) -> Bool
    /// The sign-in checks 401s made so far (`TransferMachine.authChecks`), read as a request goes out.
    var authChecks: Int { get }
    /// What a `401` for a request sent at `checksWhenSent` checks comes to (the sign-in is
    /// checked once per transfer).
    func afterUnauthorized(backend: any MediaBackend, engine: any TransferHost, checksWhenSent: Int) -> FetchFailure
}
