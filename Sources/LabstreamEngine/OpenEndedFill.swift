import Foundation
import LabstreamBackends
import LabstreamCore
import LabstreamStore
import Synchronization

/// Pinned files whose size nobody has said (the listing had none, and a ranged request
/// answered no total): the segment train plans one open-ended request, `Range: bytes=N-` from
/// the end of the durable prefix, never two at once. The body is committed in checkpoints as it
/// arrives, so an interruption resumes from the last one; when the body ends, its end is the
/// size, which the catalog learns in the same transaction that completes the row.
final class OpenEndedFill: Sendable {
    /// Files on the wire.
    let running = Mutex<Set<FileKey>>([])
    let retries = StreamRetries()

    /// A pinned row of a catalog file with no known size.
    static func applies(_ row: DownloadRow, _ file: TreeFile) -> Bool {
        row.total == 0 && file.size == 0 && DerivedCopy.parse(row.key) == nil
    }

    func consider(_ row: DownloadRow, file: TreeFile, engine: any OpenEndedHost) -> FileTransfer.FillState {
        if running.withLock({ $0.contains(row.key) }) { return .filling }
        guard row.pinned, ![.failed, .paused].contains(row.status), let backend = engine.backend(for: row.key.server),
            engine.reachability(of: row.key.server) == .online
        else { return .idle }
        if let wait = retries.wait(row.key) { return .backoff(wait) }
        let plan = SegmentTrainPlanner.plan(
            .init(
                durable: row.present, total: nil, fillInBackground: true,
                segmentSize: engine.settings.sizes.segmentSize))
        guard case .openEnded(let from)? = plan.first else { return .idle }
        running.withLock { _ = $0.insert(row.key) }
        let thread = Thread { [self] in
            run(row, file: file, from: from, backend: backend, engine: engine)
            running.withLock { _ = $0.remove(row.key) }
            engine.noteChange()
            engine.wakeFill()
        }
        thread.name = "open-ended"
        thread.start()
        return .filling
    }

    func run(_ start: DownloadRow, file: TreeFile, from: Int64, backend: any MediaBackend, engine: any OpenEndedHost) {
        let name = file.path.joined(separator: "/")
        var row = start
        row.apply(.transferStarted)
        row.reason = .sizeUnknown
        row.present = RangeSet(row.present.ranges.filter { $0.upper <= from })  // only the prefix is resumed
        do { guard try engine.index.saveDownload(row, now: engine.now()) else { return } } catch {
            engine.log("\(name): \(error.userMessage)")
            return
        }
        engine.noteChange()
        let range = ByteRange.openEnded(from: from)
        let partial: PartialFile
        do {
            try makeDirectories(engine.layout.partialsDir)
            // Nothing resumed: an empty file, so nothing of an earlier, longer version stays past the end.
            let path = engine.layout.absolute(row.partialPath)
            partial = try from == 0 ? PartialFile.fresh(path: path) : PartialFile(path: path, size: from)
        } catch {
            finish(row, name: name, failure: .local(error), engine: engine)
            return
        }
        let body = GatheredBody(at: from)
        var checkpoint = from
        var sinkError: LabstreamError?
        /// Writes what was gathered, makes `[checkpoint, end)` durable and commits it; false when
        /// the fill must stop.
        func commit(_ validator: Validator?) throws(LabstreamError) -> Bool {
            try body.flush(partial.write)
            let end = body.writtenUpTo
            guard end > checkpoint else { return true }
            try partial.sync()
            // An unpin or a pause keeps the bytes and stops the fetch; a new attempt owns the row.
            guard let stored = try engine.index.download(row.key), stored.attempt == row.attempt else { return false }
            row.pinned = stored.pinned
            if stored.status == .paused {  // the user paused it meanwhile
                row.apply(.parked(stored.pauseCause ?? .user))
                row.reason = stored.reason
            }
            row.present.insert(ByteRange(checkpoint, end))
            if row.validator == nil { row.validator = validator }
            guard try engine.index.saveDownload(row, committing: .init(range: ByteRange(checkpoint, end), digest: body.takeDigest()), now: engine.now()) else {
                return false
            }
            checkpoint = end
            engine.noteChange()
            return row.pinned && row.status != .paused
        }
        let result: RangeTransferResult
        do {
            result = try backend.transport.fetchRange(
                backend.rangeRequest(for: file, range: range, validator: row.validator),
                expectation: RangeExpectation(range: range, total: nil, validator: row.validator)
            ) { bytes, offset, seen in
                do throws(LabstreamError) {
                    try body.append(bytes, writingWith: partial.write)
                    if body.pending.upper - checkpoint >= engine.settings.checkpointBytes, try !commit(seen) {
                        throw LabstreamError.remoteChanged("the row moved on (unpinned, cancelled or a new attempt)")
                    }
                } catch {
                    sinkError = error
                    throw error
                }
            }
        } catch {
            let failure: LabstreamError = sinkError ?? error.asLabstreamError
            // Bytes that arrived are the response's own, already judged: keep them.
            if sinkError == nil { _ = try? commit(row.validator) }
            if row.status == .paused {
                engine.log("\(name): paused by user at byte \(checkpoint)")
                return
            }
            finish(row, name: name, failure: sinkError == nil ? .transport(failure) : .local(failure), engine: engine)
            return
        }
        switch result.verdict {
        case .accept(let validator, let total):
            do throws(LabstreamError) {
                guard try commit(validator) else { return }
                if let total, total != checkpoint {
                    throw LabstreamError.fetchFailed("the body ended at byte \(checkpoint) of \(total)")
                }
            } catch {
                finish(row, name: name, failure: .transport(error), engine: engine)
                return
            }
            let size = checkpoint  // everything that arrived is committed
            retries.succeeded(row.key)
            // The size first, still downloading; the tree reloads with it; only then is the file
            // done: a reader told it is done must not find the tree still saying 0 bytes.
            row.total = size
            do { try engine.index.saveDownload(row, learnedSize: true, now: engine.now()) } catch {
                engine.log("\(name): \(error.userMessage)")
                return
            }
            engine.log("\(name): all \(size) bytes present; its size is now known")
            // The engine's own catalog first: the completion check must not take the file for
            // a changed version (size 0 against the row's) before the tree reloads.
            engine.learnedSize(size, of: row.key)
            engine.treeChanged()
            row.apply(.allBytesPresent)
            row.awaitingValidation = true
            row.reason = engine.settings.playbackProbe ? StatusReason.awaitingValidation : StatusReason.probeOff
            do { try engine.index.saveDownload(row, now: engine.now()) } catch {
                engine.log("\(name): \(error.userMessage)")
                return
            }
            engine.noteChange()
            engine.wakeValidation()
        case .remoteChanged(let why), .restart(let why):
            // Another version of the file: its bytes must not meet the old prefix.
            row = row.nextAttempt(reason: StatusReason.fileChanged(why))
            row.apply(.enqueued)
            row.total = 0
            row.job = nil
            _ = try? engine.index.saveDownload(row, now: engine.now())
            _ = try? partial.discardAll()
            // A new version starts over at once, like a dropped connection (not a permanent failure).
            finish(row, name: name, failure: .transport(.remoteChanged(why)), engine: engine)
        case .acceptPrefix:
            // The transport reports a whole answer as `accept`; a prefix here was cut short.
            _ = try? commit(row.validator)
            finish(row, name: name, failure: .cutShort("the connection ended at byte \(body.writtenUpTo)"), engine: engine)
        case .reject:
            finish(row, name: name, failure: FetchFailure.answer(result.verdict, status: result.status, retryAfter: result.retryAfter)!, engine: engine)
        }
    }

    /// A failed try: back off and let the fill come back, or fail the row with the reason.
    func finish(_ failed: DownloadRow, name: String, failure: FetchFailure, engine: any OpenEndedHost) {
        var row = failed
        switch failure.step(retry: { retries.failed(row.key, failure.kind, policy: engine.settings.retry) != .giveUp }) {
        case .retry:
            row.apply(.willRetry)
            row.reason = .retrying(failure.error.userMessage, fromByte: row.present.contiguousLength(from: 0))
        case .park(let cause):
            row.park(cause)
        case .fail:
            row.apply(.failedPermanently)
            row.reason = .said(failure.error.userMessage)
        }
        engine.log("\(name): \(row.reason?.sentence ?? "")")
        _ = try? engine.index.saveDownload(row, now: engine.now())
        engine.noteChange()
    }
}

/// All open-ended fills may ask of the transfer engine.
protocol OpenEndedHost: ServerAccess, RowAccess {
    /// Segment size, checkpoint size, retries, whether the probe is on.
    var settings: TransferEngine.Settings { get }
    /// The catalog learns a size found by fetching to the end (before the tree reloads).
    func learnedSize(_ size: Int64, of key: FileKey)
    /// A fill ended: the background fill looks again.
    func wakeFill()
    /// A whole file is waiting for its check.
    func wakeValidation()
}

extension TransferEngine: OpenEndedHost {}
