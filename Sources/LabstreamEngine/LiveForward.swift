import Foundation
import LabstreamBackends
import LabstreamCore
import LabstreamStore
import Synchronization

/// Copies on a live-forward route (a server transcode or remux): one forward-only transfer into
/// a fresh file. There is no byte-offset resume: an interruption makes the row retryable and the
/// next try starts from byte 0 under a new attempt. The server's encoding is stopped when the
/// transfer ends, fails or is cancelled; the intent to stop it is journaled first, so a crash
/// cannot lose it (`replayJournal`).
final class LiveForward: Sendable {
    struct Run {
        var session: String
        var cancelled = false
    }

    /// Copies on the wire, by row.
    let runs = Mutex<[FileKey: Run]>([:])
    let retries = StreamRetries()
    /// Bytes each copy parked for a full disk had written when the disk filled (this run only:
    /// after a restart `CopyRoom` goes by the server's estimate, or a first segment's room).
    let writtenWhenFull = Mutex<[FileKey: Int64]>([:])
    /// Copies parked for a full disk that a person resumed or retried: the next start is
    /// dispatched once without the room check, as a file's is (the disk may hold more than the
    /// estimate and `min_free` ask); if it is really full, the stream parks it again.
    let despiteRoom = Mutex<Set<FileKey>>([])

    /// Considers one pinned derived row for the background fill.
    func consider(_ row: DownloadRow, engine: any LiveForwardHost) -> FileTransfer.FillState {
        guard let (baseKey, quality) = DerivedCopy.parse(row.key) else { return .idle }
        if runs.withLock({ $0[row.key] != nil }) { return .filling }
        guard [.queued, .downloading, .preparing].contains(row.status), let backend = engine.backend(for: row.key.server),
            engine.reachability(of: row.key.server) == .online,
            let base = engine.catalogFile(baseKey)
        else { return .idle }
        if let wait = retries.wait(row.key) { return .backoff(wait) }
        let route = RoutePolicy.route(
            for: RouteRequest(
                backend: backend.kind, quality: quality, sourceBitrate: base.bitrate,
                sourceContainer: base.container))
        switch route {
        case .serverPreparedCopy(_, .entry): return engine.fillManagedCopy(row)
        case .serverPreparedCopy: return engine.fillPreparedCopy(row, base: base, route: route, backend: backend)
        case .liveCopy: break
        case .original, .version, .preparedOutput: return .idle  // not a derived copy's route
        }
        if let parked = parkedForRoom(row, original: base, engine: engine) {
            _ = try? engine.index.saveDownload(parked, now: engine.now())
            engine.noteChange()
            return .idle
        }
        let session = UUID().uuidString.replacingOccurrences(of: "-", with: "").lowercased()
        runs.withLock { $0[row.key] = Run(session: session) }
        let thread = Thread { [self] in
            run(row, base: base, route: route, session: session, backend: backend, engine: engine)
            runs.withLock { _ = $0.removeValue(forKey: row.key) }
            engine.noteChange()
            engine.wakeFill()
        }
        thread.name = "live-forward"
        thread.start()
        return .filling
    }

    /// A live copy's size is known only once its stream ends: it starts only with room for what
    /// `CopyRoom` expects it to take, against free space and the budget like any pinned file's
    /// missing bytes; the row parked `storage_full` or `over_budget` (the free-space watch lifts
    /// it) when there is none, nil when it may start.
    func parkedForRoom(_ queued: DownloadRow, original: TreeFile, engine: any LiveForwardHost) -> DownloadRow? {
        let wanted = roomWanted(queued, original: original, engine: engine)
        var row = queued
        switch engine.room(for: wanted, of: row.key) {
        case .fits:
            despiteRoom.withLock { _ = $0.remove(row.key) }
            return nil
        case .diskFull where despiteRoom.withLock({ $0.remove(row.key) != nil }):
            return nil
        case .diskFull:
            guard row.park(.storageFull) else { return nil }
        case .overBudget(let need, let server):
            // A budget a person set holds even against their retry: raising it is theirs to do.
            despiteRoom.withLock { _ = $0.remove(row.key) }
            guard row.apply(.parked(.overBudget)) else { return nil }
            row.reason = .overBudget(need: need, server: server)
        }
        engine.log("live copy of \(original.path.joined(separator: "/")) waits for room (about \(ByteCount.text(wanted))): \(row.reason!.sentence)")
        return row
    }

    /// The room a copy of unknown size parked for room waits for (`CopyRoom`).
    func roomWanted(_ row: DownloadRow, original: TreeFile, engine: any LiveForwardHost) -> Int64 {
        guard let (_, quality) = DerivedCopy.parse(row.key) else { return 0 }
        let runtime = (try? engine.index.itemDetails(server: original.key.server, item: original.key.itemId))??.runtimeSeconds
        return CopyRoom.needed(
            quality: quality, originalSize: original.size, runtimeSeconds: runtime, writtenWhenFull: writtenWhenFull.withLock { $0[row.key] },
            firstSegment: engine.segmentSize)
    }

    /// A copy of unknown size parked for room resumes (the free-space watch found room for it):
    /// its row goes back in the queue, and the fill's next look starts its stream anew.
    func liftStorageFull(_ key: FileKey, path: [String], engine: any LiveForwardHost) {
        guard runs.withLock({ $0[key] == nil }), var row = (try? engine.index.download(key)) ?? nil, row.status == .paused,
            row.pauseCause?.waitsForRoom == true, row.apply(.retry)
        else { return }
        row.reason = nil
        _ = try? engine.index.saveDownload(row, now: engine.now())
        engine.noteChange()
        engine.log("\(path.joined(separator: "/")): the cache has room again; resuming")
    }

    static func describe(_ route: Route) -> String {
        switch route {
        case .serverPreparedCopy(let bps, .job): return "an Emby Convert job at \(bps / 1_000_000) Mbit/s"
        case .serverPreparedCopy(let bps, .queue): return "a Plex download-queue copy at up to \(bps / 1_000_000) Mbit/s"
        case .serverPreparedCopy(let bps, .entry): return "a Silo download entry at \(bps / 1_000_000)mbps"
        default: return "this route"
        }
    }

    /// Stops copies of `keys` (unpinned or cancelled); their rows were already changed.
    func cancel(_ keys: Set<FileKey>) {
        runs.withLock { for key in keys { $0[key]?.cancelled = true } }
    }

    func run(_ queued: DownloadRow, base: TreeFile, route: Route, session: String, backend: any MediaBackend, engine: any LiveForwardHost) {
        let intent = CleanupJournal.Intent(kind: .stopEncoding, server: queued.key.server, session: session, created: engine.now())
        // A live copy's size is known once it ends; it has no tag or job of its own.
        var row = queued.nextAttempt(reason: nil)
        row.apply(.transferStarted)
        row.total = 0
        row.sourceTag = nil
        row.job = nil
        let path = engine.layout.absolute(row.partialPath)
        let started = Date()
        var outcome: Result<Int64, LabstreamError>
        var answered: FetchFailure?  // the stream's answer, when it was not a 200
        // The body's digest is committed with it, as for any segment: a later read re-checks it.
        let body = GatheredBody(at: 0)
        var received: Int64 = 0
        do throws(LabstreamError) {
            try engine.journal.add(intent)
            guard try engine.index.saveDownload(row, now: engine.now()) else { return }  // a newer attempt owns the row
            engine.noteChange()
            try makeDirectories(engine.layout.partialsDir)
            let partial = try PartialFile.fresh(path: path)  // every try starts from byte 0, in an empty file
            guard let request = (backend as? any LiveCopySource)?.liveStreamRequest(for: base, route: route, playSession: session) else {
                throw LabstreamError.invalidArgument("\(backend.kind.rawValue) has no live streams")
            }
            engine.log("live copy of \(base.path.joined(separator: "/")) at \(DerivedCopy.parse(row.key)!.quality): started")
            var sinkError: LabstreamError?
            let result: (status: Int, written: Int64)
            do {
                result = try backend.transport.fetchStream(request) { bytes, offset in
                    if runs.withLock({ $0[row.key]?.cancelled ?? true }) {
                        sinkError = .fetchFailed("cancelled")
                        throw LabstreamError.fetchFailed("cancelled")
                    }
                    received += Int64(bytes.count)
                    do throws(LabstreamError) { try body.append(bytes, writingWith: partial.write) } catch {
                        sinkError = error
                        throw error
                    }
                }
            } catch {
                throw sinkError ?? error.asLabstreamError
            }
            try body.flush(partial.write)
            guard result.status == 200 else {
                let failure = FetchFailure.stream(status: result.status)
                answered = failure
                throw failure.error
            }
            guard result.written > 0 else { throw LabstreamError.fetchFailed("the live stream ended before any byte") }
            try partial.sync()
            outcome = .success(result.written)
        } catch {
            outcome = .failure(error)
        }
        // Every try starts from byte 0: what a failed one wrote is of no use, and on a full disk
        // it is the room the journal, the row's record and the free-space watch need.
        if case .failure = outcome { unlink(path) }
        stopEncoding(intent, backend: backend, engine: engine)

        switch outcome {
        case .success(let size):
            retries.succeeded(row.key)
            writtenWhenFull.withLock { _ = $0.removeValue(forKey: row.key) }
            row.total = size
            row.present = RangeSet([ByteRange(0, size)])
            let verdict: ProbeOutcome = engine.playbackProbe ? ProbeVerdict.judge(PlaybackProbe.observe(path: path)) : .unverified("probe off")
            switch verdict {
            case .complete: row.apply(.validated(playable: true))
            case .unverified(let why):
                row.apply(.validated(playable: nil))
                row.reason = .said(why)
            case .probeOff:
                row.apply(.validated(playable: nil))
                row.reason = .probeOff
            case .failed(let why):
                row.apply(.validated(playable: false))
                row.reason = .doesNotPlay(why)
                try? engine.setAside(path)
            }
            engine.log(
                "live copy of \(base.path.joined(separator: "/")): \(size) bytes in \(Int(Date().timeIntervalSince(started) * 1000)) ms, \(row.status.rawValue)"
            )
            _ = try? engine.index.saveDownload(row, committing: .init(range: ByteRange(0, size), digest: body.takeDigest()), now: engine.now())
            engine.treeChanged()
        case .failure(let error):
            let cancelled = runs.withLock { $0[row.key]?.cancelled ?? false }
            if cancelled {
                engine.log("live copy of \(base.path.joined(separator: "/")) cancelled")
                return
            }
            // A full disk is not worth a retry by itself; anything else on the way is.
            let failure: FetchFailure
            if let answered { failure = answered } else if case .noSpace = error { failure = .local(error) } else { failure = .transport(error) }
            row.present = RangeSet()
            switch failure.step(retry: { retries.failed(row.key, failure.kind, policy: engine.retry) != .giveUp }) {
            case .retry:
                row.apply(.willRetry)
                row.reason = .liveStreamStopped(error.userMessage)
            case .park(let cause):
                row.park(cause)
                if cause.waitsForRoom { writtenWhenFull.withLock { $0[row.key] = received } }
            case .fail:
                row.apply(.failedPermanently)
                row.reason = .liveStreamFailed(error.userMessage)
            }
            engine.log("live copy of \(base.path.joined(separator: "/")): \(row.reason!.sentence)")
            _ = try? engine.index.saveDownload(row, now: engine.now())
        }
    }

    /// Asks the server to stop the encoding; the journal forgets the intent once it did (or
    /// the server no longer knows the session).
    func stopEncoding(_ intent: CleanupJournal.Intent, backend: any MediaBackend, engine: any LiveForwardHost) {
        guard let request = (backend as? any LiveCopySource)?.stopEncodingRequest(playSession: intent.session) else {
            try? engine.journal.remove(intent)
            return
        }
        engine.settle(intent, status: (try? backend.transport.send(request))?.status, doing: "stopping the encoding of session \(intent.session)")
    }

    /// Cleans up what an earlier run left behind (a crash mid-stream, a server that was down),
    /// for servers that answer. Intents of copies on the wire now are theirs to clean up.
    func replayJournal(_ engine: any LiveForwardHost) {
        let live = Set(runs.withLock { $0.values.map(\.session) })
        let (pending, jobsInUse) = engine.recordingJob.withLock {
            let pending = engine.journal.pending
            guard !pending.isEmpty else { return (pending, Set<String>()) }
            return (pending, Set(((try? engine.index.downloads()) ?? []).filter { $0.status != .failed }.compactMap(\.job?.id)))
        }
        guard !pending.isEmpty else { return }
        for intent in pending where !live.contains(intent.session) {
            guard let backend = engine.backend(for: intent.server), engine.reachability(of: intent.server) == .online else { continue }
            switch intent.kind {
            case .stopEncoding:
                engine.log("cleanup journal: stopping encoding session \(intent.session) on \(intent.server)")
                stopEncoding(intent, backend: backend, engine: engine)
            case .cancelJob where !jobsInUse.contains(intent.session):
                engine.log("cleanup journal: cancelling job \(intent.session) on \(intent.server)")
                PreparedCopies.cancel(intent, backend: backend, engine: engine)
            case .cancelJob:
                continue
            case .deleteEntry:
                engine.log("cleanup journal: deleting download entry \(intent.session) on \(intent.server)")
                ManagedEntries.delete(intent, backend: backend, engine: engine)
            }
        }
    }
}

/// All live copies (and the cleanup journal's replay) may ask of the transfer engine.
protocol LiveForwardHost: ServerAccess, RowAccess, CatalogAccess, CleanupAccess {
    /// Whether a finished copy is probed with libmpv.
    var playbackProbe: Bool { get }
    var retry: RetryPolicy { get }
    /// Held while a server job's intent and its row are recorded (`PreparedCopies.recordingJob`).
    var recordingJob: NSLock { get }
    /// Keeps a rejected copy aside for inspection.
    func setAside(_ path: String) throws(LabstreamError)
    /// Whether `bytes` more of `key` may be stored now (`TransferEngine.room(for:of:)`).
    func room(for bytes: Int64, of key: FileKey) -> StorageBudget.Room
    /// Bytes in one segment of a pinned fill.
    var segmentSize: Int64 { get }
    /// A copy ended: the background fill looks again.
    func wakeFill()
    /// A derived copy on a server's download entry (`ManagedEntries.fillCopy`).
    func fillManagedCopy(_ row: DownloadRow) -> FileTransfer.FillState
    /// A derived copy the server prepares first (`PreparedCopies.consider`).
    func fillPreparedCopy(_ row: DownloadRow, base: TreeFile, route: Route, backend: any MediaBackend) -> FileTransfer.FillState
}

extension TransferEngine: LiveForwardHost {
    var recordingJob: NSLock { prepared.recordingJob }
    var segmentSize: Int64 { settings.sizes.segmentSize }
    func fillManagedCopy(_ row: DownloadRow) -> FileTransfer.FillState { managed.fillCopy(row, engine: self) }

    func fillPreparedCopy(_ row: DownloadRow, base: TreeFile, route: Route, backend: any MediaBackend) -> FileTransfer.FillState {
        prepared.consider(row, base: base, route: route, backend: backend, engine: self)
    }
}
