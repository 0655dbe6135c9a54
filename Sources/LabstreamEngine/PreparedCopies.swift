import Foundation
import LabstreamBackends
import LabstreamCore
import LabstreamStore
import Synchronization

/// Copies the server prepares first (an Emby Convert job, a Plex download-queue item): the row
/// waits (`preparing` for Emby, `queued` for Plex, as the route says) while the job runs, its
/// job id persisted so that polling resumes after a restart; once the server has the file it is
/// an ordinary static transfer (closed ranges, durable checkpoints) of that file. The job is
/// journaled for cancellation until its file has arrived and the server was told.
///
/// The jobs are made, adopted and polled on a thread of their own (`TransferEngine.preparations`):
/// the fill only starts the transfer of a prepared file that is ready, and otherwise wakes that
/// thread, so a server slow to answer about its jobs holds up no other file.
final class PreparedCopies: Sendable {
    static let pollInterval = 1.0
    let nextPoll = Mutex<[FileKey: Date]>([:])
    /// Transient failures in a row per copy: each retry waits longer (capped).
    let failures = Mutex<[FileKey: Int]>([:])
    /// Held from a job's journal intent to the row that names the job, and by the journal's
    /// replay while it decides which jobs no row uses: without it the replay could read the
    /// intent, miss the row not yet saved, and cancel a job just made. Taken before the index's
    /// connection lock.
    let recordingJob = NSLock()

    /// What the job of a copy the fill would fetch is made from, by row: set by the fill, which
    /// alone decides which copies are fetched now; the preparations' thread works on these.
    struct Wanted: Sendable {
        var base: TreeFile
        var route: Route
        var backend: any MediaBackend
    }
    let wanted = Mutex<[FileKey: Wanted]>([:])
    /// Wakes the preparations' thread (`TransferEngine.preparations`); set before the engine starts it.
    let wakeUp = Hook<@Sendable () -> Void>()

    /// Considers one pinned copy for the background fill: the transfer of its prepared file once
    /// the server has it; until then the preparations' thread is asked to make or poll its job.
    func consider(_ row: DownloadRow, base: TreeFile, route: Route, backend: any MediaBackend, engine: any PreparedCopyHost) -> FileTransfer.FillState {
        guard backend is any PreparedCopySource else { return .idle }  // the route says it prepares; this one cannot
        guard case .made = row.job, row.sourceTag != nil else {
            wanted.withLock { $0[row.key] = Wanted(base: base, route: route, backend: backend) }
            wakeUp.function?()
            // The thread wakes the fill once the file is ready; until then the copy holds its place.
            let due = nextPoll.withLock { $0[row.key] } ?? .distantPast
            return .waitUntil(max(due, Date().addingTimeInterval(Self.pollInterval)))
        }
        // The prepared file: a static transfer like any original.
        guard row.total > 0, let file = engine.derivedTreeFile(row) else { return .idle }
        do throws(LabstreamError) { return try engine.fillTransfer(of: file) } catch {
            var copy = row
            return failed(&copy, base: base, error, engine: engine)
        }
    }

    /// One pass of the preparations' thread over the copies the fill asked for. Returns when it
    /// next needs to look again without a wake-up, and whether a copy's file became ready or its
    /// job ended (the fill looks again).
    func pass(_ engine: any PreparedCopyHost) -> (Date?, Bool) {
        let asked = wanted.withLock { $0 }
        guard !asked.isEmpty else { return (nil, false) }
        var soonest: Date?
        var settled = false
        for (key, want) in asked {
            let row: DownloadRow?
            do { row = try engine.index.download(key) } catch {
                engine.log("preparing copies: \(error.userMessage)")
                let due = Date().addingTimeInterval(Self.pollInterval)
                soonest = min(soonest ?? due, due)
                continue
            }
            // Unpinned, paused, cancelled, finished or its server gone quiet: the fill asks again
            // if it still wants it.
            guard let row, row.pinned, [.queued, .downloading, .preparing].contains(row.status),
                engine.reachability(of: key.server) == .online, let backend = want.backend as? any PreparedCopySource
            else {
                wanted.withLock { _ = $0.removeValue(forKey: key) }
                continue
            }
            switch prepare(row, base: want.base, route: want.route, backend: backend, engine: engine) {
            case .waitUntil(let due), .backoff(let due): soonest = min(soonest ?? due, due)
            case .filling, .idle:
                wanted.withLock { _ = $0.removeValue(forKey: key) }
                settled = true
            }
        }
        return (soonest, settled)
    }

    /// Makes (or adopts) the copy's job, or polls it when due. `.filling`: its file is ready;
    /// `.idle`: the job is over; `.waitUntil`: the next poll or retry.
    func prepare(_ queued: DownloadRow, base: TreeFile, route: Route, backend: any PreparedCopySource, engine: any PreparedCopyHost) -> FileTransfer.FillState {
        var row = queued
        do throws(LabstreamError) {
            guard case .made(let job)? = row.job else {
                if let due = nextPoll.withLock({ $0[row.key] }), due > Date() { return .waitUntil(due) }
                let id: String
                // A create whose answer never came back (a stop, a timeout) may have made the job:
                // adopt it rather than make a second one, and cancel any further ones.
                let found = row.job == .creating ? try backend.existingPreparations(of: base, route: route) : []
                if let adopted = found.first {
                    id = adopted
                    engine.log("\(base.path.joined(separator: "/")): adopted server job \(id), made by an earlier try whose answer was lost")
                    for extra in found.dropFirst() {
                        let intent = CleanupJournal.Intent(kind: .cancelJob, server: row.key.server, session: extra, created: engine.now())
                        try engine.journal.add(intent)
                        Self.cancel(intent, backend: backend, engine: engine)
                    }
                } else {
                    // The intent is recorded before the job is made.
                    row.job = .creating
                    _ = try engine.index.saveDownload(row, now: engine.now())
                    id = try backend.startPreparation(of: base, route: route)
                }
                row.job = .made(id)
                row.apply(.preparationStarted(queued: route.waitingStatus == .queued))
                row.reason = StatusReason.preparing(job: id)
                do {
                    recordingJob.lock()
                    defer { recordingJob.unlock() }
                    try engine.journal.add(.init(kind: .cancelJob, server: row.key.server, session: id, created: engine.now()))
                    _ = try engine.index.saveDownload(row, now: engine.now())
                }
                engine.log("\(base.path.joined(separator: "/")): server job \(id) started for \(LiveForward.describe(route))")
                engine.noteChange()
                return schedule(row.key)
            }
            guard row.sourceTag == nil else { return .filling }  // the prepared file is ready
            if let due = nextPoll.withLock({ $0[row.key] }), due > Date() { return .waitUntil(due) }
            switch try backend.preparation(job: job) {
            case .running(let what):
                if row.reason != .said(what) {
                    row.reason = .said(what)
                    _ = try engine.index.saveDownload(row, now: engine.now())
                    engine.noteChange()
                }
                return schedule(row.key)
            case .ready(let prepared, let size):
                row = row.nextAttempt(reason: nil)
                row.apply(.enqueued)
                row.total = size
                row.sourceTag = prepared.tag
                row.job = .made(job)
                _ = try engine.index.saveDownload(row, now: engine.now())
                engine.log("\(base.path.joined(separator: "/")): server job \(job) is ready (\(size) bytes)")
                return .filling
            case .failed(let why):
                // The job is over: pinning again starts a new one.
                row.apply(.failedPermanently)
                row.reason = .said(why)
                row.job = nil
                _ = try engine.index.saveDownload(row, now: engine.now())
                engine.log("\(base.path.joined(separator: "/")): \(why)")
                Self.cancel(.init(kind: .cancelJob, server: row.key.server, session: job, created: 0), backend: backend, engine: engine)
                engine.noteChange()
                return .idle
            }
        } catch {
            return failed(&row, base: base, error, engine: engine)
        }
    }

    /// A step of the copy failed: a permanent refusal ends the copy with the server's own words
    /// (pinning again tries anew); anything else is tried again after a backoff.
    func failed(_ row: inout DownloadRow, base: TreeFile, _ error: LabstreamError, engine: any PreparedCopyHost) -> FileTransfer.FillState {
        if case .refused = error {
            failures.withLock { _ = $0.removeValue(forKey: row.key) }
            row.apply(.failedPermanently)
            row.reason = .said(error.userMessage)
            if row.job == .creating { row.job = nil }
            _ = try? engine.index.saveDownload(row, now: engine.now())
            engine.log("\(base.path.joined(separator: "/")): \(error.userMessage)")
            engine.noteChange()
            return .idle
        }
        let count = failures.withLock {
            $0[row.key, default: 0] += 1; return $0[row.key]!
        }
        let delay: Double
        if case .retry(let d) = engine.retry.decide(
            .transientTransport, failures: count, now: Date().timeIntervalSince1970,
            random: Double.random(in: 0...1), persistent: true)
        {
            delay = d
        } else {
            delay = Self.pollInterval
        }
        engine.log(
            "\(base.path.joined(separator: "/")): preparing the copy failed: \(error.userMessage); trying again in \(String(format: "%.1f", delay)) s")
        return schedule(row.key, after: max(delay, Self.pollInterval), failed: true)
    }

    func schedule(_ key: FileKey, after delay: Double = PreparedCopies.pollInterval, failed: Bool = false) -> FileTransfer.FillState {
        if !failed { failures.withLock { _ = $0.removeValue(forKey: key) } }
        let due = Date().addingTimeInterval(delay)
        nextPoll.withLock { $0[key] = due }
        return .waitUntil(due)
    }

    /// Closes jobs whose files have arrived: the server is told, the journal forgets them.
    func finish(_ engine: any PreparedCopyHost) {
        for var row in (try? engine.index.finishedServerJobs()) ?? [] {
            guard let job = row.job?.id, row.sourceTag != nil, let backend = engine.backend(for: row.key.server),
                engine.reachability(of: row.key.server) == .online
            else { continue }
            do throws(LabstreamError) {
                if let prepared = row.sourceTag.flatMap(PreparedFile.init(tag:)), let preparing = backend as? any PreparedCopySource {
                    try preparing.finishPreparation(job: job, file: prepared)
                }
                for intent in engine.journal.pending where intent.kind == .cancelJob && intent.session == job { try engine.journal.remove(intent) }
                row.job = nil
                _ = try engine.index.saveDownload(row, now: engine.now())
                engine.log("server job \(job) closed: its file arrived")
                engine.treeChanged()
            } catch {
                engine.log("closing server job \(job) failed: \(error.userMessage); trying again later")
            }
        }
    }

    static func cancel(_ intent: CleanupJournal.Intent, backend: any MediaBackend, engine: any CleanupAccess) {
        let request = (backend as? any PreparedCopySource)?.cancelPreparationRequest(job: intent.session)
        let status = request == nil ? 204 : request.flatMap { try? backend.transport.send($0) }?.status
        engine.settle(intent, status: status, doing: "cancelling job \(intent.session)")
    }
}

extension CleanupAccess {
    /// Acts on the server's answer to a journaled cleanup: kept for the next try, or forgotten
    /// (done, or refused for good, said once).
    func settle(_ intent: CleanupJournal.Intent, status: Int?, doing what: String) {
        let answer = CleanupAnswer.of(status: status)
        if answer == .again {
            log("\(what) on \(intent.server) failed (HTTP \(status ?? 0)); it stays in the cleanup journal")
            return
        }
        if answer == .refused { log("\(what) on \(intent.server) was refused (HTTP \(status ?? 0)) and will not be asked again") }
        for pending in journal.pending where pending.kind == intent.kind && pending.session == intent.session {
            do { try journal.remove(pending) } catch { log("cleanup journal: \(error.userMessage)") }
        }
    }
}

/// All server-prepared copies may ask of the transfer engine.
protocol PreparedCopyHost: ServerAccess, RowAccess, CatalogAccess, CleanupAccess, TransferDriving {
    var retry: RetryPolicy { get }
}

extension TransferEngine: PreparedCopyHost {
    var retry: RetryPolicy { settings.retry }
}
