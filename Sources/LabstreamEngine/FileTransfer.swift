import Foundation
import LabstreamBackends
import LabstreamCore
import LabstreamStore
import Synchronization

// Why this file is long: one file's state (a `TransferMachine`, LabstreamCore) is guarded by one
// condition, and everything that feeds it events and performs what they return (reads waiting
// for bytes, the fill, commits, user actions, restarts) is here so the locking can be checked in
// one place. A ranged answer's own work is RangeFetch.swift; the threads it runs on, FetchPool.swift.

/// One file's transfers: the shell around its `TransferMachine`. `condition` guards every `var`;
/// `writeGate` orders body writes against attempt changes so that no byte of a stale attempt
/// lands after a new one began.
final class FileTransfer: @unchecked Sendable {
    let file: TreeFile
    let partial: PartialFile
    let condition = NSCondition()
    let writeGate = NSLock()
    /// Held while a 401 checks the sign-in (taken before `condition`, never inside it).
    let authCheck = NSLock()
    let index: OfflineIndex

    // Guarded by `condition`.
    /// The transfer's state (`TransferMachine`): its events say what this object then does, the
    /// network, the disk and the index, with the lock let go where it can (a commit's index
    /// transaction runs outside it, holding the machine's commit token).
    var machine: TransferMachine
    /// The machine's row. Changed only where no commit of it runs (`awaitRow`).
    var row: DownloadRow {
        get { machine.row }
        set { machine.row = newValue }
    }
    var verified: RangeSet { machine.attempt.verified }
    var readable: RangeSet { machine.attempt.readable }
    var inFlight: RangeSet { machine.inFlight }
    /// What this file's failures last said, so that a player reading on does not repeat it.
    var repeats = RepeatedLines()
    var offlineLogged = false
    /// A person's `resume`/`retry` of a file parked for a full disk: its next fill passes the
    /// free-space gate once.
    var dispatchDespiteRoom = false

    // Guarded by `writeGate` (read under the condition too, written under both).
    var writableAttempt: AttemptID

    init(file: TreeFile, partial: PartialFile, row: DownloadRow, index: OfflineIndex) {
        self.file = file
        self.partial = partial
        self.writableAttempt = row.attempt
        self.index = index
        // Checked whole by an earlier run and not written since: its digests would match again.
        let whole = ByteRange(0, row.total)
        let checkedBefore = row.checked != nil && row.total == file.size && row.present.contains(whole) && partial.identity() == row.checked
        machine = TransferMachine(row: row, verified: checkedBefore ? RangeSet([whole]) : RangeSet())
    }

    /// Waits until no commit of the row is being recorded (`TransferMachine.mayChangeRow`): a
    /// change made meanwhile would be overwritten by the commit's row, or overwrite it. Call
    /// with `condition` held; it is let go while waiting.
    func awaitRow() {
        while !machine.mayChangeRow { condition.wait() }
    }

    static func open(file: TreeFile, index: OfflineIndex, layout: DataLayout) throws(LabstreamError) -> FileTransfer {
        var row =
            try index.download(file.key)
            ?? DownloadRow(
                key: file.key, status: .partial, attempt: AttemptID(1), validator: nil, total: file.size,
                present: RangeSet(), partialPath: layout.partialRelativePath(for: file.key), sourceTag: file.etag)
        let stale = row.isStale(for: file)
        if stale {
            // The catalog says the file changed: the old bytes belong to another version.
            row = row.nextAttempt(reason: StatusReason.fileChanged())
            row.total = file.size
            row.sourceTag = file.etag
        }
        row.sourceTag = row.sourceTag ?? file.etag
        try makeDirectories(layout.partialsDir)
        let partial = try PartialFile(path: layout.absolute(row.partialPath), size: file.size)
        // A new attempt starts in a fresh file, never over the bytes of the version before; so does
        // a row with nothing on a name that is another row's file (a share a crash cut short).
        if stale || (row.present.isEmpty && partial.isShared) {
            try index.releasingName(of: row.key) { () throws(LabstreamError) in try partial.discardAll() }
        }
        return FileTransfer(file: file, partial: partial, row: row, index: index)
    }

    /// Frees every byte of this name (`PartialFile.discardAll`); a file another row's name
    /// shares stays whole there, with its check (`OfflineIndex.releasingName`).
    func discardAll() throws(LabstreamError) {
        try index.releasingName(of: row.key) { () throws(LabstreamError) in try partial.discardAll() }
    }

    /// The index carried a check over to this row's file as it is now (another name of it
    /// went): the row held here records it too, so no later save writes the old one back.
    func checkMoved(_ moved: OfflineIndex.MovedCheck, engine: any TransferHost) {
        condition.lock()
        defer { condition.unlock() }
        awaitRow()
        guard row.attempt == moved.attempt, row.checked == moved.from else { return }
        row.checked = moved.to
        _ = try? index.saveDownload(row, now: engine.now())
    }

    var isIdle: Bool {
        condition.lock()
        defer { condition.unlock() }
        return machine.isIdle
    }

    func snapshot() -> DownloadRow {
        condition.lock()
        defer { condition.unlock() }
        adoptOpenEndedProgress()
        return row
    }

    /// A file of unknown size is filled by `OpenEndedFill`, which commits its row to the index,
    /// not to this object: take the index's row, unless it belongs to an older attempt, for as
    /// long as this object's file is the one of unknown size (the row learns the size first).
    /// Returns whether the row is such a file's. Call with `condition` held.
    @discardableResult
    func adoptOpenEndedProgress() -> Bool {
        guard file.size == 0, DerivedCopy.parse(row.key) == nil else { return false }
        guard machine.mayChangeRow else { return true }
        if let stored = try? index.download(row.key), stored.attempt.rawValue >= row.attempt.rawValue { row = stored }
        return true
    }

    /// Pins or unpins this file's row as the index just did (`DownloadRow.setPinned`), but on the
    /// row this object holds, which may be newer than the one the index had (a commit in
    /// between), and writes it back: neither copy loses the other's change.
    func setPinned(_ pinned: Bool, engine: any TransferHost) {
        condition.lock()
        defer { condition.unlock() }
        awaitRow()
        let openEnded = adoptOpenEndedProgress()
        row.setPinned(pinned)
        machine.startOver(fresh: false)
        // An open-ended fill writes its own row; the index already has the pin.
        if !openEnded { _ = try? index.saveDownload(row, now: engine.now()) }
    }

    func apply(_ action: QueueAction, engine: any TransferHost, reason: StatusReason? = nil) throws(LabstreamError) {
        condition.lock()
        defer {
            condition.broadcast()
            condition.unlock()
            engine.noteChange()
        }
        awaitRow()
        let openEnded = adoptOpenEndedProgress()
        let whole = !openEnded && row.present.contains(ByteRange(0, row.total))
        switch action {
        case .pause:
            guard !whole, row.apply(.interrupted) else { return }
            row.reason = StatusReason.pausedByUser
        case .verify:
            guard whole, row.apply(.recheck) else { return }
            row.awaitingValidation = true
            row.reason = StatusReason.awaitingValidation
            try index.saveDownload(row, now: engine.now())
            engine.wakeValidation()
            return
        case .retry where whole && row.status == .failed:
            // A file the probe rejected: keep it aside for inspection and fetch it again.
            try engine.setAside(partial.path)
            begin(row.nextAttempt(reason: nil))
            try discardAll()
        case .resume, .retry:
            guard !whole else { return }
            // A person's retry is dispatched even when the free-space gate would park it (seed
            // 000): the disk may have more room than the headroom asks for. Once: if the disk
            // is really full, the write fails and the file parks again, as any fill would.
            if row.status == .paused && row.pauseCause == .storageFull { dispatchDespiteRoom = true }
            row.apply(.retry)
            row.reason = nil
            machine.startOver(fresh: true)
        case .cancel:
            var unpinned = row
            unpinned.pinned = false
            begin(unpinned.nextAttempt(reason: reason))
            // The bytes are freed first, so that the row can be recorded even on a full disk. If
            // recording fails, the stored row's digests no longer match and are dropped when read.
            try discardAll()
            try index.saveDownload(row, freeing: true, now: engine.now())
            index.keepReserve()  // taken again once the freed space allows
            engine.dropped(file.key)
            return
        }
        do { try index.saveDownload(row, now: engine.now()) } catch {
            // A retry off a full disk may find no room to record that it was queued: it is
            // dispatched anyway (the index keeps the pause, which is what a restart should find;
            // whatever lands or parks again is recorded as it happens).
            guard dispatchDespiteRoom, case .noSpace = error else { throw error }
        }
    }

    /// A file parked for a full disk or its budget resumes: the free-space watch found room for it
    /// (`FreeSpaceWatch`). Nothing happens if it moved on meanwhile.
    func liftStorageFull(engine: any TransferHost) {
        condition.lock()
        defer {
            condition.broadcast()
            condition.unlock()
            engine.noteChange()
        }
        awaitRow()
        guard row.status == .paused, row.pauseCause?.waitsForRoom == true, row.apply(.retry) else { return }
        row.reason = nil
        machine.startOver(fresh: true)
        _ = try? index.saveDownload(row, now: engine.now())
        engine.log("\(file.path.joined(separator: "/")): the cache has room again; resuming")
    }

    /// Records the completion check's verdict, if the row is still the attempt that was probed.
    func applyVerdict(_ outcome: ProbeOutcome, attempt: AttemptID, engine: any TransferHost) {
        condition.lock()
        defer {
            condition.broadcast()
            condition.unlock()
            engine.noteChange()
        }
        awaitRow()
        guard row.attempt == attempt, row.awaitingValidation, row.present.contains(ByteRange(0, row.total)) else { return }
        let playable: Bool?
        switch outcome {
        case .complete: playable = true; row.reason = nil
        case .unverified(let why): playable = nil; row.reason = .said(why)
        case .probeOff: playable = nil; row.reason = .probeOff
        case .failed(let why): playable = false; row.reason = .said(why)
        }
        row.apply(.validated(playable: playable))
        row.awaitingValidation = false
        _ = try? index.saveDownload(row, now: engine.now())
    }

    func readPresent(_ range: ByteRange, attempt: AttemptID) throws(LabstreamError) -> [UInt8] {
        var out = [UInt8](repeating: 0, count: Int(range.count))
        let read = out.withUnsafeMutableBytes { b in Result { () throws(LabstreamError) in try partial.read(into: b, at: range.lower) } }
        let n = try read.get()
        if n < out.count { out.removeLast(out.count - n) }
        // A new attempt started while we read: these bytes may mix two versions of the file.
        condition.lock()
        let current = row.attempt
        condition.unlock()
        if current != attempt { throw .remoteChanged("the file changed on the server while it was read") }
        return out
    }

    /// A new read-only descriptor of the partial when every byte is durable and was checked
    /// against its digest by this daemon. It names the file, not the path: a new attempt or a
    /// cancel starts a fresh file (`PartialFile.discardAll`), so what it reads stays this version.
    func checkedCopy() -> Int32? {
        condition.lock()
        defer { condition.unlock() }
        guard checkedWhole(row, verified) else { return nil }
        return partial.openReadOnly()
    }

    /// Blocks until `demand` is durable and verified, fetching what is missing. Returns the
    /// version the bytes belong to. Throws the failure of a fetch this reader depended on, or
    /// a timeout. A reader whose handle was served another version (`handle`) fetches nothing:
    /// it would get ESTALE for the bytes, and a player keeps reading.
    func waitUntilPresent(_ demand: ByteRange, engine: any TransferHost, handle: ServedVersion? = nil) throws(LabstreamError) -> ServedVersion {
        let deadline = Date().addingTimeInterval(engine.settings.readTimeout)
        condition.lock()
        defer { condition.unlock() }
        var startSequence = machine.sequence
        var transientFailures = 0
        machine.readerArrived(demand)
        defer { machine.readerLeft(demand) }
        while true {
            if !verified.contains(demand) { verifyCommitted(in: demand, engine: engine) }
            if readable.contains(demand) { return ServedVersion(attempt: row.attempt, validator: row.validator) }
            if let stall = machine.lastStall, stall.range.overlaps(demand), stall.failure.echoesToReaders(age: Date().timeIntervalSince1970 - stall.at) {
                throw stall.failure.error
            }
            if let failure = machine.failure(after: startSequence, overlapping: demand) {
                // The server stopped sending for fetch_timeout: the read fails now, as
                // labstream.conf(5) says (it has waited that long for these bytes).
                if failure.kind == .stall { throw failure.error }
                // A player would rather wait than fail: a transient failure is retried with
                // backoff while the read timeout allows.
                transientFailures += 1
                // A server marked down (it refused the connection) is not waited for: the read
                // fails at once, as every read of a server known to be down does.
                guard engine.reachability(of: file.key.server) == .online,
                    case .retry(let delay) = engine.settings.retry.decide(
                        failure.kind, failures: transientFailures, now: Date().timeIntervalSince1970,
                        random: Double.random(in: 0...1), persistent: true),
                    Date().addingTimeInterval(delay) < deadline
                else { throw failure.error }
                say(
                    "read of \(file.path.last ?? ""): \(failure.error.userMessage); trying again in \(String(format: "%.1f", delay)) s",
                    key: "read: " + failure.error.userMessage, engine: engine)
                let retryAt = Date().addingTimeInterval(delay)
                while Date() < retryAt && condition.wait(until: retryAt) {}  // a schedule; other wake-ups are ignored
                startSequence = machine.sequence
                continue
            }
            if let handle, !ServedVersion(attempt: row.attempt, validator: row.validator).isSameVersion(as: handle) {
                throw .remoteChanged("\(file.path.joined(separator: "/")) changed on the server after it was opened; open it again for the new version")
            }
            let reachability = engine.reachability(of: file.key.server)
            if reachability != .online {
                engine.lookForServerSoon()  // a reader is waiting: look again soon
                if !offlineLogged {
                    offlineLogged = true
                    engine.log(
                        "\(file.path.joined(separator: "/")): server \(file.key.server) is \(reachability.rawValue); reads of bytes not stored locally fail until it returns"
                    )
                }
                throw .serverUnavailable("server \(file.key.server) is \(reachability.rawValue) and these bytes are not stored locally")
            }
            offlineLogged = false
            startFetches(
                ReadPlanner.plan(
                    demand: demand, total: row.total, present: row.present, inFlight: inFlight,
                    sizes: engine.settings.sizes), background: false, engine: engine)
            if !condition.wait(until: deadline) {
                engine.log("read of \(file.path.joined(separator: "/")) bytes \(demand) timed out")
                throw .timedOut("waiting for bytes \(demand.lower)-\(demand.lastByte) of \(file.path.last ?? "")")
            }
        }
    }

    /// Re-checks, against their stored digests, the committed segments overlapping `range` that
    /// this daemon has not checked yet; a mismatch drops the segment so it is fetched again.
    /// Call with `condition` held: it is let go while the digests are read from the index and the
    /// stored bytes hashed (a segment is megabytes), so that the file's other readers and commits
    /// go on meanwhile; what was found counts only if the attempt is still the same.
    func verifyCommitted(in range: ByteRange, engine: any TransferHost) {
        let unchecked = row.present.intersection(range).ranges.flatMap { verified.missing(in: $0) }
        guard !unchecked.isEmpty else { return }
        let (key, attempt) = (row.key, row.attempt)
        condition.unlock()
        let digests = (try? index.segments(key, attempt: attempt)) ?? []
        let checked = digests.filter { segment in unchecked.contains { segment.range.overlaps($0) } }
            .map { segment in (segment.range, digest(of: segment.range, like: segment.digest) == segment.digest) }
        condition.lock()
        // A drop and the checked identity change the row: not while a commit records it.
        awaitRow()
        guard row.attempt == attempt else { return }
        for segment in machine.checked(checked, attempt: attempt) { drop(segment, why: "digest mismatch", engine: engine) }
        // Durable bytes with no digest at all cannot be trusted either.
        for gap in unchecked {
            for orphan in verified.missing(in: gap) where row.present.contains(orphan) {
                if !digests.contains(where: { $0.range.contains(orphan) }) { drop(orphan, why: "no digest", engine: engine) }
            }
        }
        if row.checked == nil, checkedWhole(row, verified), let identity = partial.identity() {
            var next = row
            next.checked = identity
            if (try? index.saveDownload(next, now: engine.now())) == true { row = next }
        }
    }

    /// Every byte of the file present in `row` and matching its digest.
    func checkedWhole(_ row: DownloadRow, _ checked: RangeSet) -> Bool {
        let whole = ByteRange(0, row.total)
        return row.total == file.size && row.present.contains(whole) && checked.contains(whole)
    }

    func drop(_ range: ByteRange, why: String, engine: any TransferHost) {
        engine.log("\(file.path.joined(separator: "/")): bytes \(range) failed verification (\(why)); fetching them again")
        machine.dropped(range)
        row.awaitingValidation = false
        row.apply(.bytesDropped(pinned: row.pinned))
        row.reason = StatusReason.damagedBytes
        try? index.dropSegment(row, range: range, now: engine.now())
    }

    func digest(of range: ByteRange, like stored: String) -> String {
        let hasher = SegmentDigest.hasher(like: stored)
        var buffer = [UInt8](repeating: 0, count: 1 << 20)
        var offset = range.lower
        while offset < range.upper {
            let want = Int(min(Int64(buffer.count), range.upper - offset))
            let n = buffer.withUnsafeMutableBytes { b in (try? partial.read(into: UnsafeMutableRawBufferPointer(rebasing: b[0..<want]), at: offset)) ?? 0 }
            if n == 0 { break }
            buffer.withUnsafeBytes { hasher.update(UnsafeRawBufferPointer(rebasing: $0[0..<n])) }
            offset += Int64(n)
        }
        return hasher.finish()
    }

    func prefetch(_ range: ByteRange, engine: any TransferHost) {
        condition.lock()
        defer { condition.unlock() }
        let sizes = engine.settings.sizes
        startFetches(
            ReadPlanner.readAhead(
                window: range, total: row.total, present: row.present, inFlight: inFlight,
                segmentSize: sizes.segmentSize, minimumPiece: max(sizes.readChunk, range.count / 2)),
            background: false, engine: engine)
    }

    /// `waitUntil`: the file keeps its slot while it waits (a server preparing its copy);
    /// `backoff`: it waits out a retry's backoff and holds no slot meanwhile.
    enum FillState { case filling, waitUntil(Date), backoff(Date), idle }

    /// Tops up this pinned file's segment train. Called by the background fill.
    func fill(engine: any TransferHost) -> FillState {
        condition.lock()
        defer { condition.unlock() }
        awaitRow()
        guard row.pinned, !row.present.contains(ByteRange(0, row.total)) else { return .idle }
        if row.status == .failed || (row.status == .paused && !(row.pauseCause?.liftsByItself ?? false)) { return .idle }
        if let retryAt = machine.retryAt, retryAt > Date().timeIntervalSince1970 { return .backoff(Date(timeIntervalSince1970: retryAt)) }
        let reachability = engine.reachability(of: file.key.server)
        guard engine.backend(for: file.key.server) != nil, reachability == .online else {
            // A refused sign-in waits for the user to sign in again; nothing is failed for it.
            if reachability == .authFailed {
                park(.signInRefused, engine: engine)
            } else {
                park(.serverUnavailable, engine: engine)
            }
            return .idle
        }
        // A retry is checked like the first try: it must not fill the disk it was parked for.
        if machine.fillRequests.isEmpty {
            switch engine.room(for: row.total - row.present.byteCount, of: file.key) {
            case .fits: break
            case .diskFull where dispatchDespiteRoom: dispatchDespiteRoom = false
            case .diskFull:
                park(.storageFull, engine: engine)
                return .idle
            case .overBudget(let need, let server):
                // A budget a person set holds even against their retry: raising it is theirs to do.
                dispatchDespiteRoom = false
                let reason = StatusReason.overBudget(need: need, server: server)
                if row.pauseCause != .overBudget { engine.log("\(file.path.joined(separator: "/")) waits: \(reason.sentence)") }
                setStatus(.parked(.overBudget), reason: reason, engine: engine)
                return .idle
            }
        }
        let plan = SegmentTrainPlanner.plan(
            .init(
                durable: row.present, total: row.total, inFlight: machine.requests, fillInBackground: true,
                segmentSize: engine.settings.sizes.segmentSize, maxQueued: engine.settings.maxQueuedSegments))
        let ranges = plan.compactMap { request -> ByteRange? in
            if case .closed(let r) = request { return r }; return nil
        }
        // Given a slot again after yielding it, a file whose segments are all on the wire is
        // downloading too.
        if (!ranges.isEmpty || !machine.fillRequests.isEmpty) && row.status != .downloading {
            setStatus(.transferStarted, reason: nil, engine: engine)
        }
        startFetches(ranges, background: true, engine: engine)
        return .filling
    }

    /// Files ahead of this one in the queue took the fill's slots: it waits its turn, `queued`,
    /// while the segments already on the wire land.
    func yieldSlot(engine: any TransferHost) {
        condition.lock()
        defer { condition.unlock() }
        awaitRow()
        guard !adoptOpenEndedProgress(), row.pinned, row.status == .downloading else { return }
        setStatus(.yielded, reason: .yielding, engine: engine)
    }

    /// The server ended this copy (a revoked entry): nothing more is fetched for it, what is
    /// here stays readable, and `reason` says why.
    func stopFetching(reason: StatusReason, engine: any TransferHost) throws(LabstreamError) {
        condition.lock()
        defer {
            condition.broadcast()
            condition.unlock()
        }
        awaitRow()
        guard row.reason != reason else { return }
        if row.status == .failed {
            // Its fetch already failed (the entry's file route refused it): say the cause.
            row.reason = reason
            try index.saveDownload(row, now: engine.now())
            engine.noteChange()
        } else {
            setStatus(.failedPermanently, reason: reason, engine: engine)
        }
    }

    /// Parks the row for `cause` with its sentence. Call with `condition` held.
    func park(_ cause: PauseCause, engine: any TransferHost) {
        setStatus(.parked(cause), reason: cause.reason(server: file.key.server), engine: engine)
    }

    /// Moves the row by `event` (when the table allows it from here) with `reason`, and
    /// records it. Call with `condition` held.
    func setStatus(_ event: DownloadStatus.Event, reason: StatusReason?, engine: any TransferHost) {
        awaitRow()
        guard let status = row.status.after(event), row.status != status || row.reason != reason else { return }
        row.apply(event)
        row.reason = reason
        _ = try? index.saveDownload(row, now: engine.now())
        engine.noteChange()
        if status == .failed {
            // A server that keeps entries may have ended this one: its registry is read back.
            engine.fileFailed()
        }
    }

    /// Call with `condition` held.
    func startFetches(_ planned: [ByteRange], background: Bool, engine: any TransferHost) {
        guard !planned.isEmpty else { return }
        let backend = engine.backend(for: file.key.server)
        let refusal = backend == nil ? LabstreamError.serverUnavailable("server \(file.key.server) is not connected") : nil
        switch machine.dispatch(planned, background: background, refusal: refusal) {
        case .none: return
        case .refused: condition.broadcast()
        case .fetch(let plan, let attempt, let generation, let validator):
            guard let backend else { return }
            for r in plan {
                engine.runFetch(background: background) { [self] lane in
                    fetch(
                        r, attempt: attempt, generation: generation, validator: validator, background: background, backend: backend,
                        lane: lane, engine: engine)
                }
            }
        }
    }

    struct Fetched {
        var validator: Validator?
        var received: Int64
        var digest: String
    }

    /// Runs on the fetch pool (`lane`: the pool thread's own, for the checkpoints). `cancelled`:
    /// asked as the body arrives; a fetch it ends is `cancelled`, not failed.
    func fetch(
        _ range: ByteRange, attempt: AttemptID, generation: Int, validator: Validator?, background: Bool,
        backend: any MediaBackend, lane: Lane, engine: any TransferHost, cancelled: (@Sendable () -> Bool)? = nil
    ) {
        // Queued while the daemon stopped: nothing goes on the wire any more.
        if engine.isStopping {
            let stopped = FetchFailure.local(.fetchFailed("the daemon is stopping"))
            finish(range, remainder: range, attempt: attempt, generation: generation, background: background, outcome: .failure(stopped), engine: engine)
            return
        }
        let rate = engine.fetchStarted()
        defer { engine.fetchEnded() }
        let answer = RangeFetch(
            sink: self, range: range, attempt: attempt, background: background, rate: rate, lane: lane, engine: engine, cancelled: cancelled)
        let outcome = answer.run(validator: validator, backend: backend)
        finish(
            range, remainder: ByteRange(answer.checkpointStart, range.upper), attempt: attempt, generation: generation,
            background: background, outcome: outcome, engine: engine, cancelled: cancelled?() == true)
    }

    /// Fetches what is missing of `range` on this thread (a pool thread running a spare job:
    /// the next episode's prefetch), like a read-ahead in every other way; `cancelled` ends it
    /// as it arrives. Returns whether `range` is present now.
    @discardableResult
    func fetchHere(_ range: ByteRange, lane: Lane, engine: any TransferHost, cancelled: @escaping @Sendable () -> Bool) -> Bool {
        condition.lock()
        let planned = ReadPlanner.pieces(of: range, present: row.present, inFlight: inFlight, segmentSize: engine.settings.sizes.segmentSize)
        // A server that ignores Range would send the whole file: no guess is worth that.
        guard !planned.isEmpty, !machine.ignoresRange, let backend = engine.backend(for: file.key.server),
            case .fetch(let plan, let attempt, let generation, let validator) = machine.dispatch(planned, background: false, refusal: nil)
        else {
            let present = row.present.contains(range)
            condition.unlock()
            return present
        }
        condition.unlock()
        for r in plan {
            fetch(
                r, attempt: attempt, generation: generation, validator: validator, background: false, backend: backend, lane: lane,
                engine: engine, cancelled: cancelled)
        }
        return condition.withLock { row.present.contains(range) }
    }

    /// A 401 for bytes: the stored sign-in is checked (a server may drop a session and still
    /// accept the token). If it holds, the first such answer is retried and a second refuses
    /// the file for good; if it does not, the server is marked auth-failed and a pinned file
    /// waits for the user to sign in again.
    var authChecks: Int { condition.withLock { machine.authChecks } }

    func afterUnauthorized(backend: any MediaBackend, engine: any TransferHost, checksWhenSent: Int) -> FetchFailure {
        // One check at a time: a 401 that waited here for another's check is asked again with
        // the token that check renewed.
        authCheck.lock()
        defer { authCheck.unlock() }
        let first: Bool
        switch condition.withLock({ machine.unauthorized(checksWhenSent: checksWhenSent) }) {
        case .askAgain: return FetchFailure(error: .serverUnavailable("HTTP 401"), kind: .transientTransport)
        case .check(let isFirst): first = isFirst
        }
        let server = file.key.server
        switch backend.checkReachability() {
        case .online where first:
            engine.log("\(file.path.joined(separator: "/")): HTTP 401, but the stored sign-in still holds; trying again")
            return FetchFailure(error: .serverUnavailable("HTTP 401"), kind: .transientTransport)
        case .online:
            return FetchFailure(error: .refused("\(server) accepts the stored sign-in but refuses this file's bytes (HTTP 401)"), kind: .validation)
        case .authFailed:
            engine.markUnreachable(server, .authFailed)
            return FetchFailure(
                error: .authenticationFailed("\(server) answered HTTP 401 for the file's bytes and the stored sign-in no longer holds"),
                kind: .validation)
        case let state:
            engine.markUnreachable(server, state)
            return .transport(.serverUnavailable("\(server) stopped answering after HTTP 401"))
        }
    }

    /// Commits `piece` (durable already) if the assembly policy accepts it: range map and digest
    /// in one index transaction, run with the file's lock let go while the machine's commit token
    /// is held (a second commit of the file waits for it, and so does every other change of the
    /// row); readers are woken once it landed. Returns false when the attempt is no longer current.
    func commit(_ piece: ByteRange, digest: String, validator: Validator?, attempt: AttemptID, engine: any TransferHost) -> Bool {
        condition.lock()
        var start = machine.beginCommit(piece, validator: validator, attempt: attempt)
        while case .wait = start {
            condition.wait()
            start = machine.beginCommit(piece, validator: validator, attempt: attempt)
        }
        guard case .record(let commit) = start else {
            defer {
                condition.broadcast()
                condition.unlock()
            }
            switch start {
            case .discard(let why, let current):
                engine.log("discarded bytes \(piece) of \(file.key): \(why)")
                return current
            case .changedValidator(let pinned, let validator):
                // Two responses of one attempt from different versions of the file: never mix them.
                restart(why: "validator changed from \(pinned.headerValue) to \(validator.headerValue)", engine: engine)
                return false
            case .wait, .record: return false
            }
        }
        condition.unlock()
        let landing = record(commit, digest: digest, engine: engine)
        condition.lock()
        defer {
            condition.broadcast()
            condition.unlock()
        }
        switch machine.landed(commit, landing) {
        case .stale:
            return false
        case .recorded(let awaitingValidation):
            engine.noteChange()
            if awaitingValidation {
                engine.wakeValidation()
                if DerivedCopy.parse(row.key) != nil { engine.wakeFill() }  // its server job can be closed
            }
        case .failed(let error):
            // The bytes are on disk but not recorded: they will be fetched again, never trusted.
            engine.log("\(file.key): \(error.userMessage)")
            // Only a pinned file waits for room; a read fails with ENOSPC and leaves no pause.
            if case .noSpace = error, row.pinned { park(.storageFull, engine: engine) }
        }
        return true
    }

    /// The index transaction of `commit`, without the file's lock (the commit token keeps the row
    /// as it was): the row with the piece, then the range map and the digest in one transaction.
    func record(_ commit: TransferMachine.Commit, digest: String, engine: any TransferHost) -> TransferMachine.Landing {
        var next = commit.row
        // Another transfer object for this file (one evicted while a reader still held it)
        // may have committed ranges of the same attempt meanwhile: keep them.
        if let stored = try? index.download(next.key), stored.attempt == next.attempt {
            next.present.formUnion(stored.present)
        }
        if next.present.contains(ByteRange(0, next.total)) {
            next.apply(.allBytesPresent)
            next.awaitingValidation = true
            next.reason = engine.checksFinishedCopy(of: next.key) ? StatusReason.awaitingValidation : StatusReason.probeOff
        } else {
            next.apply(.bytesCommitted)
        }
        // Every byte present and checked: an identity that lets the next run trust the copy.
        next.checked = checkedWhole(next, commit.verified) ? partial.identity() : nil
        do {
            try index.saveDownload(next, committing: .init(range: commit.range, digest: digest), now: engine.now())
            return .recorded(next)
        } catch {
            return .failed(error)
        }
    }

    /// A fetch ended: what arrived of it is committed first (the range stays in flight until
    /// then, so no reader plans it again), then the machine says what its end comes to.
    func finish(
        _ range: ByteRange, remainder: ByteRange, attempt: AttemptID, generation: Int, background: Bool,
        outcome: Result<Fetched, FetchFailure>, engine: any TransferHost, cancelled: Bool = false
    ) {
        if case .success(let fetched) = outcome, fetched.received > 0 || !remainder.isEmpty {
            _ = commit(remainder, digest: fetched.digest, validator: fetched.validator, attempt: attempt, engine: engine)
        }
        condition.lock()
        defer {
            condition.broadcast()
            condition.unlock()
            if background { engine.wakeFill() }
            engine.noteChange()
        }
        let ending: TransferMachine.Ending
        switch outcome {
        case .success: ending = .succeeded
        case .failure where cancelled: ending = .cancelled
        case .failure(let failure): ending = .failed(failure)
        }
        switch machine.finished(range, attempt: attempt, generation: generation, background: background, ending: ending, now: Date().timeIntervalSince1970) {
        case .done:
            break
        case .ignoresRange(let why):
            // Its body was not written. A new attempt fetches the whole file from byte 0, and
            // the readers waiting now wait for that stream instead of failing.
            engine.log("\(file.path.joined(separator: "/")): the server ignores Range; fetching the whole file from its start")
            restart(why: why, engine: engine, counted: false)
        case .failed(let failure, let next):
            let error = failure.error
            say(
                "fetch of bytes \(range) of \(file.path.joined(separator: "/")) failed: \(error.userMessage)", key: "fetch: " + error.userMessage,
                engine: engine)
            switch next {
            case .nothing: break
            case .restart(let why): restart(why: why, engine: engine)
            case .park(let cause): park(cause, engine: engine)
            case .retry: scheduleRetry(after: failure, engine: engine)
            }
        }
    }

    /// Logs `line` unless the same (`key`) was said of this file moments ago. Call with
    /// `condition` held.
    func say(_ line: String, key: String, engine: any TransferHost) {
        if let line = repeats.admit(line, key: key, now: Date().timeIntervalSince1970) { engine.log(line) }
    }

    /// Makes `next` (a `nextAttempt`) the row: from here no body of the old attempt can write,
    /// and nothing of it counts as checked or written. Call with `condition` held.
    func begin(_ next: DownloadRow) {
        writeGate.lock()
        writableAttempt = next.attempt
        writeGate.unlock()
        machine.begin(next)
    }

    /// The file changed on the server: its old bytes belong to another version. A new attempt
    /// starts from nothing; in-flight bodies of the old one can no longer write. Call with
    /// `condition` held.
    func restart(why: String, engine: any TransferHost, counted: Bool = true) {
        if counted { machine.failedAgain() }
        var next = row.nextAttempt(reason: counted ? StatusReason.fileChanged(why, refetching: false) : .said(why))
        // Only a new version starts without a validator: after a server that ignores Range the
        // whole-file stream must still be the version the bytes so far were (If-Range).
        if !counted { next.validator = row.validator }
        // The server's bytes changed under the catalog's version: the new attempt's are of no
        // catalog version yet (their validator guards them), and the next catalog's adopts them
        // (`open`) instead of taking them for an older version and fetching them again. (A copy
        // the server prepared keeps its tag: it names the prepared file, not a catalog version.)
        next.sourceTag = counted && DerivedCopy.parse(row.key) == nil ? nil : file.etag
        begin(next)
        // The old version's bytes go; a descriptor still reading them directly keeps them whole.
        if (try? discardAll()) == nil { engine.log("\(file.path.last ?? ""): could not free the old version's bytes") }
        if machine.consecutiveFailures >= engine.settings.retry.maxAttempts {
            if row.pinned { row.apply(.failedPermanently) }
            row.reason = StatusReason.keepsChanging(why)
        }
        _ = try? index.saveDownload(row, now: engine.now())
    }

    /// A pinned file never ends `failed` on a transient failure: it waits, `queued` with the
    /// reason and the next try, with capped backoff. Call with `condition` held.
    func scheduleRetry(after failure: FetchFailure, engine: any TransferHost) {
        let consecutiveFailures = machine.failedAgain()
        switch engine.settings.retry.decide(
            failure.kind, failures: consecutiveFailures, now: Date().timeIntervalSince1970, random: Double.random(in: 0...1),
            persistent: row.pinned)
        {
        case .retry(let delay):
            machine.retry(at: Date().timeIntervalSince1970 + delay)
            engine.log("\(file.path.last ?? ""): retrying in \(String(format: "%.1f", delay)) s (failure \(consecutiveFailures))")
            if row.pinned { setStatus(.willRetry, reason: StatusReason.waitingForServer(failure.error, retryIn: delay), engine: engine) }
        case .giveUp:
            setStatus(.failedPermanently, reason: .said(failure.error.userMessage), engine: engine)
        }
    }
}

extension FileTransfer: RangeSink {
    func durablePrefix(of attempt: AttemptID) -> Int64 {
        condition.withLock { row.attempt == attempt ? row.present.contiguousLength(from: 0) : 0 }
    }

    func mustWrite(_ pending: ByteRange, checkpointDue: Bool) -> Bool {
        condition.withLock {
            let waiting = machine.waiting.filter { $0.overlaps(pending) }
            return BodyCoalescing.mustWrite(
                pending: pending, checkpointDue: checkpointDue, readable: waiting.isEmpty ? row.present : readable, waiting: waiting)
        }
    }

    func write(_ bytes: UnsafeRawBufferPointer, at offset: Int64, attempt: AttemptID) throws(LabstreamError) {
        writeGate.lock()
        defer { writeGate.unlock() }
        guard writableAttempt == attempt else { throw .remoteChanged("a newer attempt replaced this one") }
        try partial.write(bytes, at: offset)
    }

    func wrote(_ piece: ByteRange, attempt: AttemptID, validator: Validator?, servable decided: Bool?) throws(LabstreamError) -> Bool {
        condition.lock()
        defer { condition.unlock() }
        switch machine.wrote(piece, attempt: attempt, validator: validator, servable: decided) {
        case .stale:
            throw .remoteChanged("a newer attempt replaced this one")
        case .written(let servable, let wake):
            if wake { condition.broadcast() }
            return servable
        }
    }

    func sync() throws(LabstreamError) { try partial.sync() }

    func startWriteback(_ range: ByteRange) { partial.startWriteback(range) }
}
