import Foundation
import LabstreamBackends
import LabstreamCore
import LabstreamStore

/// One ranged request's answer, from the wire to durable commits. Long bodies are committed in
/// checkpoints as they arrive (`CheckpointCommitter`), so a crash or a dropped connection loses
/// a checkpoint or two, not the whole segment; pieces are gathered and written together when
/// `BodyCoalescing` says; readers waiting inside the range are served bytes as they are written
/// when the answer carries the attempt's validator. Used by one thread, once (`run`).
final class RangeFetch {
    let transfer: FileTransfer
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

    init(transfer: FileTransfer, range: ByteRange, attempt: AttemptID, background: Bool, rate: Int64, engine: any TransferHost) {
        self.transfer = transfer
        self.engine = engine
        self.range = range
        self.attempt = attempt
        checkpointBytes = engine.settings.checkpointBytes
        self.rate = rate
        // A whole-file stream passes over the durable prefix again: those bytes are not written.
        let prefix = transfer.condition.withLock { transfer.row.attempt == attempt ? transfer.row.present.contiguousLength(from: 0) : 0 }
        checkpointStart = range.lower == 0 && range.upper == transfer.file.size ? min(prefix, range.upper) : range.lower
        writtenBack = checkpointStart
        body = GatheredBody(at: checkpointStart)
        checkpoints = CheckpointCommitter(queueBehindSync: !background) { [transfer, engine] c throws(LabstreamError) in
            try transfer.partial.sync()
            // The response's validator is pinned with its first committed bytes.
            guard transfer.commit(c.piece, digest: c.digest, validator: c.validator, attempt: attempt, engine: engine) else {
                throw .remoteChanged("a newer attempt replaced this one")
            }
        }
    }

    /// Asks for the range and takes the answer in; what it came to. Whatever arrived of a body
    /// cut short is committed (the attempt check refuses stale bytes); `checkpointStart` then
    /// says where the rest begins.
    func run(validator: Validator?, backend: any MediaBackend) -> Result<FileTransfer.Fetched, FetchFailure> {
        let request = backend.rangeRequest(for: transfer.file, range: range, validator: validator)
        let expectation = RangeExpectation(range: range, total: transfer.file.size, validator: validator)
        var outcome: Result<FileTransfer.Fetched, FetchFailure>
        do {
            let result = try backend.transport.fetchRange(request, expectation: expectation) { bytes, offset, seen in
                try receive(bytes, at: offset, seen: seen)
            }
            try? writeGathered(answerValidator)
            outcome = sinkError.map { .failure(.local($0)) } ?? judged(result, asked: request, backend: backend)
        } catch {
            // A body cut short keeps what arrived (a stale attempt's bytes are refused here too).
            if sinkError == nil { try? writeGathered(answerValidator) }
            if let sinkError {
                outcome = .failure(.local(sinkError))
            } else {
                if case .unreachable = error { engine.markUnreachable(transfer.file.key.server, .offline) }
                if case .stalled = error { outcome = .failure(.stall(error.asLabstreamError)) } else { outcome = .failure(.transport(error.asLabstreamError)) }
            }
        }
        // Every checkpoint is in before the body is finished, so nothing of it is planned again meanwhile.
        if let failed = checkpoints.finish() { outcome = .failure(.local(failed)) }
        if case .failure = outcome, body.writtenUpTo > checkpointStart {
            // Cut short (a drop, a stall, the daemon stopping): what arrived is the answer's own,
            // already judged and possibly read, so it is kept. The attempt check refuses stale bytes.
            let arrived = ByteRange(checkpointStart, body.writtenUpTo)
            if (try? transfer.partial.sync()) != nil,
                transfer.commit(arrived, digest: body.takeDigest(), validator: answerValidator, attempt: attempt, engine: engine)
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
        answerValidator = seen
        let skip = Int(min(max(checkpointStart - offset, 0), Int64(bytes.count)))
        if skip < bytes.count {
            if !body.fits(bytes.count - skip) { try writeGathered(seen) }
            body.append(UnsafeRawBufferPointer(rebasing: bytes[skip...]))
        }
        received += Int64(bytes.count)
        let pending = body.pending
        let checkpointDue = pending.upper - checkpointStart >= checkpointBytes && pending.upper < range.upper
        let write = transfer.condition.withLock { () -> Bool in
            let waiting = transfer.waitingFor.filter { $0.overlaps(pending) }
            return BodyCoalescing.mustWrite(
                pending: pending, checkpointDue: checkpointDue,
                readable: waiting.isEmpty ? transfer.row.present : transfer.readable, waiting: waiting)
        }
        if write { try writeGathered(seen) }
    }

    /// Writes gathered bytes unless a newer attempt owns the file.
    func writeUnlessStale(_ bytes: UnsafeRawBufferPointer, at offset: Int64) throws(LabstreamError) {
        transfer.writeGate.lock()
        defer { transfer.writeGate.unlock() }
        guard transfer.writableAttempt == attempt else { throw .remoteChanged("a newer attempt replaced this one") }
        try transfer.partial.write(bytes, at: offset)
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
        guard let piece = try body.flush(writeUnlessStale) else { return }
        transfer.condition.lock()
        if servable == nil {
            guard transfer.row.attempt == attempt else {
                transfer.condition.unlock()
                throw .remoteChanged("a newer attempt replaced this one")
            }
            if transfer.row.validator == nil { transfer.row.validator = seen }
            servable = transfer.row.validator == seen
        }
        if servable == true && transfer.row.attempt == attempt {
            transfer.written.insert(piece)
            if transfer.waitingFor.contains(where: { $0.overlaps(piece) }) { transfer.condition.broadcast() }
        }
        transfer.condition.unlock()
        if piece.upper - writtenBack >= 1 << 20 {
            transfer.partial.startWriteback(ByteRange(max(writtenBack, checkpointStart), piece.upper))
            writtenBack = piece.upper
        }
        if piece.upper - checkpointStart >= checkpointBytes && piece.upper < range.upper {
            try checkpoints.submit(.init(piece: ByteRange(checkpointStart, piece.upper), digest: body.takeDigest(), validator: seen))
            checkpointStart = piece.upper
        }
    }

    /// What a whole answer that reached the end of the transport comes to.
    func judged(_ result: RangeTransferResult, asked request: HTTPRequest, backend: any MediaBackend) -> Result<FileTransfer.Fetched, FetchFailure> {
        if result.verdict.isAccept {
            // The transport reports a finished prefix as `accept`; one cut short is a drop.
            guard case .accept(let seen, _) = result.verdict, result.bytesWritten == range.count else {
                return .failure(.cutShort("the connection ended after \(result.bytesWritten) of \(range.count) bytes"))
            }
            do {
                try transfer.partial.sync()
                return .success(.init(validator: seen, received: range.upper - checkpointStart, digest: body.takeDigest()))
            } catch {
                return .failure(.local(error))
            }
        }
        if case .reject = result.verdict, result.status == 401 { return .failure(transfer.afterUnauthorized(backend: backend, engine: engine)) }
        if case .reject = result.verdict, let registry = backend as? any ManagedDownloadRegistry,
            let why = registry.byteRefusal(of: transfer.file.key, status: result.status)
        {
            return .failure(FetchFailure(error: .refused(why), kind: .validation))
        }
        // The file's address named its old version: a new attempt reads it where it is now.
        if case .reject = result.verdict, let movable = backend as? any MovableSources,
            let why = movable.sourceMoved(transfer.file, asked: request, status: result.status)
        {
            return .failure(FetchFailure(error: .remoteChanged(why), kind: .validation))
        }
        return .failure(FetchFailure.answer(result.verdict, status: result.status, retryAfter: result.retryAfter)!)
    }
}
