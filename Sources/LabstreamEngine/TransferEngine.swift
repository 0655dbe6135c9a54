import Foundation
import LabstreamBackends
import LabstreamCore
import LabstreamStore
import Synchronization

// Why this file is long (about 500 lines): the engine's public API and the maps it alone owns
// (backends, transfers, catalog files, open handles); one file's work is FileTransfer.swift, what
// a transfer may ask of the engine is TransferHost.swift, and each other kind of work is a file
// of its own.
/// Fetches the byte ranges readers need, and whole pinned files in the background, into durable
/// sparse partials. A body is committed only when the assembly policy accepts it: data first
/// (`fdatasync`), then the range map and the segment's digest in one index transaction.
/// Blocking API for FUSE worker threads; range fetches run on the engine's fetch pool
/// (`FetchPool`, `fetch_threads` threads), never on FUSE's threads or Swift's cooperative pool.
///
/// Lock order: `TransferEngine.opening` → `TransferEngine.files` → `FileTransfer.condition` →
/// `FileTransfer.writeGate` → the index's connection lock. Never take `files` while holding a
/// file's condition. A commit's index transaction runs holding the file's commit token
/// (`TransferMachine.committing`), not its condition; a thread waiting for the token lets the
/// condition go while it waits, and the holder needs nothing but the index to give it back.
/// `FetchPool.condition` and `Lane.condition` are leaves (a fetch is queued with the file's
/// condition held).
public final class TransferEngine: Sendable {
    public struct Settings: Sendable {
        public var sizes: TransferSizes
        /// How long a reader waits for its bytes before failing with EIO.
        public var readTimeout: Double
        /// Segment requests in flight per pinned file: the head plus one look-ahead, so a drop
        /// or a crash costs at most the two segments on the wire.
        public var maxQueuedSegments: Int
        /// Pinned files filled at once.
        public var maxConcurrentFiles: Int
        public var retry: RetryPolicy
        /// A long body is committed every this many bytes as it arrives.
        public var checkpointBytes: Int64
        /// The storage budget (`max_size`, per server too) and free-space floor (`min_free`) that
        /// pinned fills and reads keep; unpinned, closed, idle copies go first to keep them.
        /// The engine keeps what SIGHUP last gave it (`TransferEngine.budget`, `setBudget`).
        public var budget = StorageBudget()
        /// Probe complete files with libmpv; without it they stay `unverified`.
        public var playbackProbe = true
        /// Bytes per second for all transfers together; 0 is unlimited.
        public var rateLimit: Int64 = 0
        /// Range fetches on the wire at once, reads and fills together (`fetch_threads`): the
        /// size of the fetch pool. More wait their turn, a reader's before the fill's.
        public var fetchThreads = LabstreamConfig.defaultFetchThreads
        /// The quality a pin fetches, per `SERVER` and `SERVER/LIBRARY` (absent: the original).
        public var qualities: [String: Quality] = [:]

        public init(
            sizes: TransferSizes = .default, readTimeout: Double = 35, maxQueuedSegments: Int = 2,
            maxConcurrentFiles: Int = 3, retry: RetryPolicy = RetryPolicy(),
            checkpointBytes: Int64 = 4 << 20, budget: StorageBudget = StorageBudget(), playbackProbe: Bool = true,
            rateLimit: Int64 = 0
        ) {
            self.rateLimit = rateLimit
            self.checkpointBytes = checkpointBytes
            self.playbackProbe = playbackProbe
            self.budget = budget
            self.sizes = sizes
            self.readTimeout = readTimeout
            self.maxQueuedSegments = maxQueuedSegments
            self.maxConcurrentFiles = maxConcurrentFiles
            self.retry = retry
        }
    }

    let index: OfflineIndex
    let layout: DataLayout
    let settings: Settings
    // The engine's maps are its own: the transfers, fills and passes in the other files reach
    // them only through the methods below (`catalogFile`, `catalogFiles`, `learnedSize`,
    // `retireTransfers`), so every lock on them is taken in this file.
    private let backends = Mutex<[String: any MediaBackend]>([:])
    private let files = Mutex<[FileKey: FileTransfer]>([:])
    /// Held while a transfer is opened from the index, and while a pin is written to the index
    /// and then to the open transfers: so a transfer opens either before the pin's write (and
    /// the pin reaches it) or after the pin reached every open one. One opened in between read
    /// the pinned row and was then pinned again on top of whatever happened to it meanwhile: a
    /// pause that landed there became `queued` again and the fill went on.
    let opening = NSLock()
    /// Checks carried over to a shared file's other name, for the transfers open on them
    /// (`settleMovedChecks`).
    let movedChecks = Mutex<[OfflineIndex.MovedCheck]>([])
    /// Files whose sharing of another server's copy was looked at this run (`SharedCopies`).
    let sharingLooked = Mutex<Set<FileKey>>([])
    /// Every file in the catalog, for background fill of pinned rows.
    private let catalog = Mutex(TreeFileLookup())
    public let log: @Sendable (String) -> Void
    // Each duty its own thread, so that none waits on another's server: the fill (local work and
    // the bytes), the download-entry registries (Silo's calls), the server-prepared copies'
    // jobs (Emby Convert, Plex download queue: made, adopted, polled), the servers' cleanup (jobs
    // to finish, the cleanup journal), validation; side assets, monitors and server health have
    // theirs in their own types.
    let filler = Worker(name: "background-fill")
    let entries = Worker(name: "download-entries")
    let preparations = Worker(name: "server-preparations")
    let cleanup = Worker(name: "server-cleanup")
    let validation = Worker(name: "validation")
    let health = ServerHealth()
    /// Transfers on the wire, to share the rate limit between them.
    let activeFetches = Mutex(0)
    /// Set by `stop`: bodies on the wire end at their next chunk, keeping what arrived.
    let stopping = Atomic<Bool>(false)
    let fetchesEnded = NSCondition()
    /// The threads every range fetch runs on (`Settings.fetchThreads`).
    let fetchPool: FetchPool

    /// The free-space watch's schedule (`BackgroundFill`, `FreeSpaceWatch`): looks in a row that
    /// resumed nothing, and when the next look is due.
    let freeSpaceLooks = Mutex<(fruitless: Int, next: Date?)>((0, nil))

    /// The budget kept now: `Settings.budget` until a SIGHUP reloads `labstream.conf`.
    private let liveBudget: Mutex<StorageBudget>
    public var budget: StorageBudget { liveBudget.withLock { $0 } }

    /// A reloaded configuration's budget: files parked for room are measured against it at once
    /// (a raised `max_size` resumes them without a remount; a lowered one parks the next fill).
    public func setBudget(_ new: StorageBudget) {
        let old = liveBudget.withLock { b in
            defer { b = new }
            return b
        }
        guard old != new else { return }
        let servers = new.serverMaxSize.sorted { $0.key < $1.key }.map { ", \($0.key) max_size \($0.value)" }
        log("storage budget: max_size \(new.maxSize), min_free \(new.minFree)\(servers.joined())")
        freedSpace()
        filler.wake()
    }

    /// A person freed space (cancel, unpin): the free-space watch starts its backoff over, as
    /// more may follow; the fill, woken next, looks at once.
    func freedSpace() { freeSpaceLooks.withLock { $0 = (0, nil) } }

    /// Each queued file's bytes over the last seconds, for its rate in `labstream queue`
    /// (sampled by every fill pass and every listing).
    let queueRates = Mutex<[FileKey: RateMeter]>([:])

    /// Open handles per file, and when each file was last used (this session).
    private let usage = Mutex<(open: [FileKey: Int], lastUse: [FileKey: Int64])>(([:], [:]))

    /// Server cleanup to do (encodings to stop), beside the index.
    let journal: CleanupJournal
    let live = LiveForward()
    let prepared = PreparedCopies()
    let managed = ManagedEntries()
    let monitors = SeriesMonitors()
    let openEnded = OpenEndedFill()
    let events = Hook<@Sendable (TransferEvent) -> Void>()

    public init(
        index: OfflineIndex, layout: DataLayout, settings: Settings, journal: CleanupJournal? = nil,
        log: @escaping @Sendable (String) -> Void
    ) {
        self.index = index
        self.layout = layout
        self.settings = settings
        liveBudget = Mutex(settings.budget)
        self.log = log
        fetchPool = FetchPool(size: max(settings.fetchThreads, 1))
        self.journal = journal ?? CleanupJournal.open(path: layout.cleanupJournalPath, warn: log)
        index.keepReserve()
        managed.wakeUp.set { [entries] in entries.wake() }
        prepared.wakeUp.set { [preparations] in preparations.wake() }
        // Every status change is recorded through the index: it tells each finish once.
        index.onFinished { [weak self] row, outcome in self?.tell(.finished(row.key, outcome, reason: row.reason)) }
        // A shared file's other name kept its check (`OfflineIndex.releasingName`): a transfer
        // open on it learns so on the fill's thread (no file's lock is held there).
        index.onCheckMoved { [weak self] moved in
            self?.movedChecks.withLock { $0.append(moved) }
            self?.filler.wake()
        }
    }

    /// What the engine tells whoever runs it, one typed event at a time (`TransferEvent`).
    /// The handler must not block, but on `serverOnline`, which comes on a thread of its own.
    public func onEvent(_ handler: @escaping @Sendable (TransferEvent) -> Void) { events.set(handler) }

    func tell(_ event: TransferEvent) {
        guard let handler = events.function else { return }
        if case .serverOnline = event {
            Thread { handler(event) }.start()
        } else {
            handler(event)
        }
    }

    func treeChanged() { tell(.treeChanged) }

    /// The servers this engine has backends for.
    public var serverNames: [String] { backends.withLock { $0.keys.sorted() } }

    /// A server not answering (or refusing the old sign-in) is asked again at once with the new
    /// backend: signing in again resumes its paused files without waiting out the backoff.
    public func setBackend(_ backend: any MediaBackend) {
        backends.withLock { $0[backend.serverName] = backend }
        health.probeSoon(backend.serverName)
        managed.rebind(backend.serverName)
        filler.wake()
    }

    public func backend(for server: String) -> (any MediaBackend)? { backends.withLock { $0[server] } }

    /// Whether something that belongs beside `key` (artwork, a subtitle) is neither stored nor
    /// tried yet; set by the side-asset fetcher. A managed copy is reported completed only after.
    let missingBeside = Hook<@Sendable (FileKey) -> Bool>()
    public func onSideAssetsMissing(_ body: @escaping @Sendable (FileKey) -> Bool) { missingBeside.set(body) }
    func sideAssetsMissing(_ key: FileKey) -> Bool { missingBeside.function?(key) ?? false }

    /// Side assets were stored, failed or dropped, or their server asked: a copy waiting for them
    /// may now be reported completed.
    public func sideAssetsChanged() {
        managed.poke()
        filler.wake()
    }

    /// A generated `.nfo` as the index makes it now (nil: its item is gone).
    public func document(_ doc: NFODocument) throws(LabstreamError) -> [UInt8]? { try index.document(doc) }

    /// A sync of `server` found its catalog unchanged: the tree stays, but its series monitors
    /// are evaluated as after any sync (what was watched, or unpinned by hand, changed).
    public func catalogUnchanged(server: String) { monitors.schedule([server]) }

    public func setCatalog(_ files: [TreeFile]) {
        catalog.withLock { $0 = TreeFileLookup(files) }
        monitors.schedule(Set(files.map(\.key.server)))
        filler.wake()
    }

    /// Starts filling pinned files in the background (until `stop`).
    public func startBackgroundFill() {
        filler.start { [self] _ in BackgroundFill.pass(self) }
        entries.start { [self] _ in
            let (due, ran) = managed.pass(self)
            // What a pass registered or read back lets the fill go on with that server's files.
            if ran { filler.wake() }
            return due
        }
        preparations.start { [self] _ in
            let (due, settled) = prepared.pass(self)
            // A prepared file is ready (or its job ended): the fill goes on with that copy.
            if settled { filler.wake() }
            return due
        }
        cleanup.start { [self] _ in
            live.replayJournal(self)
            prepared.finish(self)
            return nil
        }
        health.start(self)
        // Without the probe the worker still runs the integrity checks of managed copies.
        validation.start { [self] _ in Validation.pass(self) }
        monitors.start(self)
    }

    /// Stops the background work; bodies on the wire end and commit what they received (a
    /// stalled one is waited for at most `grace` seconds).
    public func stop(grace: Double = 3) {
        filler.stop()
        // A check carried over since the fill's last pass reaches its open transfer all the same.
        settleMovedChecks()
        entries.stop()
        preparations.stop()
        cleanup.stop()
        health.stop()
        validation.stop()
        monitors.stop()
        stopping.store(true, ordering: .relaxed)
        let deadline = Date().addingTimeInterval(grace)
        fetchesEnded.lock()
        while activeFetches.withLock({ $0 }) > 0 && fetchesEnded.wait(until: deadline) {}
        fetchesEnded.unlock()
        fetchPool.close()
    }

    /// The current download row for `file`: live state if the file is open, else the index.
    public func row(for file: TreeFile) -> DownloadRow? {
        if let live = files.withLock({ $0[file.key] }) { return live.snapshot() }
        return try? index.download(file.key)
    }

    /// Reads `range` of `file`, fetching whatever is missing first, and says which version of
    /// the file the bytes are (`HandleVersion` decides whether a handle may have them).
    /// `readAhead`, when given, is fetched in the background without delaying this read.
    /// `handle`: the version a handle was served so far; bytes of another are neither fetched
    /// nor fetched ahead for it (the handle gets ESTALE).
    public func read(
        _ file: TreeFile, range: ByteRange, readAhead: ByteRange? = nil, handle: ServedVersion? = nil
    ) throws(LabstreamError) -> (bytes: [UInt8], version: ServedVersion?) {
        // A handle opened on a version that has since been replaced reads nothing of the new one.
        if let current = catalog.withLock({ $0[file.key] }), current.size != file.size || current.etag != file.etag {
            throw .remoteChanged("\(file.path.joined(separator: "/")) was replaced by a new version; open it again")
        }
        let stamp = now()
        usage.withLock { $0.lastUse[file.key] = stamp }
        let demand = range.clamped(to: ByteRange(0, file.size))
        if demand.isEmpty { return ([], nil) }
        if !hasTransfer(file.key) { shareStoredCopy(file) }
        let transfer = try self.transfer(for: file)
        let present = transfer.snapshot().present
        let missing = demand.count - present.intersection(demand).byteCount
        if missing > 0 {
            // A read is widened to a chunk: room for that much is made before it is fetched.
            let wanted = min(max(missing, settings.sizes.readChunk), max(file.size - present.byteCount, missing))
            let room = makeRoom(forRead: wanted, of: file.key)
            if room != .fits {
                let error = noRoom(room, reading: file.path.joined(separator: "/"))
                log("read failed (ENOSPC): \(error.userMessage)")
                throw error
            }
        }
        let version: ServedVersion
        do { version = try transfer.waitUntilPresent(demand, engine: self, handle: handle) } catch {
            if case .noSpace = error { log("read of \(file.path.joined(separator: "/")) failed (ENOSPC): \(error.userMessage)") }
            throw error
        }
        // Read-ahead is fetched only into room there is (nothing is evicted for a guess): it
        // must not take what the next read needs.
        // Measured only when some of it is missing: a read served from what is present (the
        // usual case) costs no statvfs for its read-ahead.
        if let readAhead, handle.map(version.isSameVersion(as:)) ?? true,
            case let aheadMissing = readAhead.count - transfer.snapshot().present.intersection(readAhead).byteCount, aheadMissing > 0,
            budget.room(for: aheadMissing, server: file.key.server, usage: storageUsage()) == .fits
        {
            transfer.prefetch(readAhead, engine: self)
        }
        return (try transfer.readPresent(demand, attempt: version.attempt), version)
    }

    /// A read-only descriptor of `file`'s local copy if all of it is present and checked in this
    /// run and it is the catalog's version (see `FileTransfer.checkedCopy`); else nil.
    public func checkedLocalCopy(_ file: TreeFile) -> Int32? {
        if let current = catalog.withLock({ $0[file.key] }), current.size != file.size || current.etag != file.etag { return nil }
        guard file.size > 0, let transfer = try? transfer(for: file) else { return nil }
        return transfer.checkedCopy()
    }

    /// Pins (downloads completely, never evicts) or unpins files, all in one transaction. A pin
    /// at `quality` (else the server's configured quality) that the original does not meet
    /// queues a copy at that quality instead; unpinning a file unpins its copies too.
    public func setPinned(
        _ pinned: Bool, files targets: [TreeFile], quality: Quality? = nil, priority: QueuePriority? = nil, by origin: PinOrigin = .person
    ) throws(LabstreamError) {
        var rowsFor: [TreeFile] = []
        for file in targets {
            if !pinned {
                rowsFor.append(file)
                rowsFor += try index.derivedCopies(of: file.key).map { TreeFile(path: [], key: $0.key, size: 0, modified: file.modified, etag: nil) }
                continue
            }
            let library = file.path.count > 1 ? settings.qualities[file.key.server + "/" + file.path[1]] : nil
            // A server's or library's configured quality is for video: audio and images are kept as they are.
            let wanted = file.kind.media != .video ? .original : quality ?? library ?? settings.qualities[file.key.server] ?? .original
            if quality != nil && quality != .original && file.kind.media != .video {
                throw .invalidArgument(
                    "copies at another quality are for video; \(file.path.last ?? "this file") is \(file.kind.media == .audio ? "audio" : "an image"): pin it without --quality"
                )
            }
            let copy =
                wanted != .original && DerivedCopy.parse(file.key) == nil
                && backend(for: file.key.server).map {
                    RoutePolicy.route(for: RouteRequest(backend: $0.kind, quality: wanted, sourceBitrate: file.bitrate, sourceContainer: file.container))
                        != .original
                } == true
            if let backend = backend(for: file.key.server), backend is any ManagedDownloadRegistry,
                let why = ManagedEntryPolicy.pinConflict(
                    wanted: wanted == .remux ? .remux : copy ? wanted : nil,
                    originalPinned: try index.download(file.key)?.pinned == true,
                    pinnedCopies: try index.derivedCopies(of: file.key).filter(\.pinned).compactMap { DerivedCopy.parse($0.key)?.quality })
            {
                throw .invalidArgument(why)
            }
            if copy {
                rowsFor.append(TreeFile(path: [], key: DerivedCopy.key(of: file.key, quality: wanted), size: 0, modified: file.modified, etag: nil))
            } else {
                rowsFor.append(file)
            }
        }
        let rows = try recordPin(pinned, rows: rowsFor, priority: priority)
        if pinned { sharingLooked.withLock { $0.subtract(rows.map(\.key)) } }
        if origin == .person { monitors.personPinned(pinned, targets.map(\.key), engine: self) }
        if !pinned { live.cancel(Set(rows.map(\.key))) }
        if pinned { tell(.pinned) }
        managed.pinned(Set(rows.map(\.key.server)))
        log("\(pinned ? "pinned" : "unpinned") \(rows.count) files")
        filler.wake()
    }

    /// Writes a pin to the index, then to the transfers open now, under `opening`.
    private func recordPin(_ pinned: Bool, rows targets: [TreeFile], priority: QueuePriority?) throws(LabstreamError) -> [DownloadRow] {
        opening.lock()
        defer { opening.unlock() }
        let rows = try index.setPinned(pinned, files: targets, layout: layout, now: now(), priority: priority)
        for row in rows {
            if let live = files.withLock({ $0[row.key] }) { live.setPinned(pinned, engine: self) }
        }
        if !pinned {
            index.keepReserve()  // an unpin on a full disk may have used it
            freedSpace()
        }
        return rows
    }

    /// The managed entry whose integrity data judges the finished copy of `key` (Silo), if any.
    func integrityEntry(of key: FileKey) -> ManagedEntry? {
        guard backend(for: key.server) is any ManagedDownloadRegistry,
            let entry = (try? index.managedEntry(server: key.server, item: key.itemId)) ?? nil, entry.checks(key)
        else { return nil }
        return entry
    }

    /// Whether a finished copy is judged before it is done: by the playback probe, or by the
    /// server's integrity data (`entry`, from `integrityEntry`). Otherwise it is done unverified.
    func judges(with entry: ManagedEntry?) -> Bool { settings.playbackProbe || entry != nil }

    /// Bytes stored for `key`, from memory (`OfflineIndex.storedBytes`).
    public func storedBytes(_ key: FileKey) -> Int64 { index.storedBytes(key) }

    /// Told when a file's stored bytes start, end or become whole.
    public func onStoredChange(_ listener: @escaping @Sendable (FileKey) -> Void) { index.onStoredChange(listener) }

    /// Whether a transfer of `key` is open.
    func hasTransfer(_ key: FileKey) -> Bool { files.withLock { $0[key] != nil } }

    /// The catalog's file for `key`.
    func catalogFile(_ key: FileKey) -> TreeFile? { catalog.withLock { $0[key] } }

    /// Every file in the catalog, as it is now.
    func catalogFiles() -> TreeFileLookup { catalog.withLock { $0 } }

    /// A file whose size became known by fetching it to its end (before the tree reloads, so
    /// the completion check does not take it for a changed version).
    func learnedSize(_ size: Int64, of key: FileKey) { catalog.withLock { $0.setSize(size, of: key) } }

    /// Drops the transfers of `keys` if none is in use (a version swap needs them gone); false
    /// when one is, and nothing changed.
    func retireTransfers(_ keys: [FileKey]) -> Bool {
        files.withLock { map -> Bool in
            for key in keys { if let t = map[key], !t.isIdle { return false } }
            for key in keys { map.removeValue(forKey: key) }
            return true
        }
    }

    /// Gives the transfers open on a shared file's other names the checks the index carried
    /// over to them (`OfflineIndex.releasingName`), so their next save does not write the old
    /// one back.
    func settleMovedChecks() {
        let moved = movedChecks.withLock { m in
            defer { m = [] }
            return m
        }
        for m in moved { files.withLock { $0[m.key] }?.checkMoved(m, engine: self) }
    }

    /// Lets go of `keys`' transfers before their copies are deleted (a removed server's, freed
    /// by a person), and has the fill look at free space again at once.
    public func forget(_ keys: [FileKey]) {
        for key in keys { _ = retireTransfers([key]) }
        freedSpace()
        filler.wake()
    }

    /// Where `key`'s file is in the tree.
    public func catalogPath(of key: FileKey) -> [String]? { catalog.withLock { $0[key]?.path } }

    /// Where `key`'s file is in the tree, a copy at another quality or a next version included.
    public func treePath(of key: FileKey) -> [String]? {
        if let path = catalogPath(of: key) { return path }
        guard let row = (try? index.download(key)) ?? nil else { return nil }
        return treeFile(for: row)?.path
    }

    /// The rows of `key`'s copies at other qualities.
    public func copies(of key: FileKey) -> [DownloadRow] { (try? index.derivedCopies(of: key)) ?? [] }

    /// The rows that belong to `key`'s file: its copies at other qualities and its next version,
    /// each live if open.
    public func related(to key: FileKey) -> [DownloadRow] {
        let next = (try? index.download(NextVersion.key(of: key))).flatMap { $0 }
        return (copies(of: key) + (next.map { [$0] } ?? [])).map { row in files.withLock { $0[row.key] }?.snapshot() ?? row }
    }

    /// The tree entry of any row: a catalog file, a copy at another quality, a next version.
    func treeFile(for row: DownloadRow) -> TreeFile? {
        if let file = catalog.withLock({ $0[row.key] }) { return file }
        if let base = NextVersion.base(of: row.key), let shown = catalog.withLock({ $0[base] }) {
            return TreeFile(
                path: shown.path, key: row.key, size: row.total, modified: shown.modified, etag: row.sourceTag, bitrate: shown.bitrate,
                remoteItemId: shown.remoteItemId)
        }
        return derivedTreeFile(row)
    }

    /// The tree entry a copy at another quality has (or will have), from its original in the
    /// catalog and its row.
    func derivedTreeFile(_ row: DownloadRow) -> TreeFile? {
        guard let (base, quality) = DerivedCopy.parse(row.key), let original = catalog.withLock({ $0[base] }) else { return nil }
        // Named by what arrived, as the tree names it once complete (a Silo or Plex copy may be
        // an MP4); before its first bytes, by what was asked for.
        let arrived =
            row.present.contains(ByteRange(0, Int64(ContainerSniff.headerLength)))
            ? ContainerSniff.fileExtension(ofHeader: OfflineIndex.header(ofPartial: layout.absolute(row.partialPath))) : nil
        var file = DerivedCopy.treeFile(of: original, quality: quality, size: row.total, extension: arrived ?? DerivedCopy.container)
        file.etag = row.sourceTag
        return file
    }

    /// The monitor of the series whose folder holds `files`, with what it held at its last
    /// evaluation (nil when the series is not monitored).
    public func monitor(of files: [TreeFile]) -> (SeriesMonitor, SeriesMonitorPolicy.Plan?)? { monitors.monitor(of: files) }

    /// Makes, changes or (nil) removes the monitor of a series folder's series; its evaluation
    /// follows at once when the server answers. Removing one never unpins or deletes.
    /// What a person asked of `files` (every door's commands meet the transfers here).
    public func perform(_ command: FileCommand, files: [TreeFile]) throws(LabstreamError) {
        switch command {
        case .pin(let quality, let priority): try setPinned(true, files: files, quality: quality, priority: priority)
        case .unpin: try setPinned(false, files: files)
        case .queue(let action): try control(action, files: files)
        case .monitor(let settings): try setMonitor(settings, folder: files)
        }
    }

    public func setMonitor(_ settings: String?, folder files: [TreeFile]) throws(LabstreamError) {
        try monitors.set(settings, folder: files, engine: self)
    }

    /// Removes the monitor named `SERVER/SERIES-ID` (`MonitorReference`), as `monitor remove`
    /// names one whose series left the catalog; nil when there is none by that name.
    public func removeMonitor(named name: String) throws(LabstreamError) -> SeriesMonitor? {
        try monitors.remove(named: name, engine: self)
    }

    /// Whether a series monitor's cap holds `key` back (as of its last evaluation).
    public func heldByMonitorCap(_ key: FileKey) -> Bool { monitors.heldByCap(key) }

    /// Whether a handle of `key` is open now.
    func isOpen(_ key: FileKey) -> Bool { usage.withLock { ($0.open[key] ?? 0) > 0 } }

    /// Whether a file is open is the queue's first key (`QueueOrder`, read at every pass): its
    /// first open and its last close wake the fill like any other change of what the queue is
    /// made of (a signal; the pass runs on the fill's thread), so a file being read that waits
    /// for a slot takes one at once.
    public func noteOpened(_ key: FileKey) {
        let first = usage.withLock {
            $0.open[key, default: 0] += 1; $0.lastUse[key] = now()
            return $0.open[key] == 1
        }
        if first { filler.wake(for: FillPasses.openedReason) }
    }

    public func noteClosed(_ key: FileKey) {
        let last = usage.withLock { u -> Bool in
            let n = (u.open[key] ?? 1) - 1
            u.open[key] = n > 0 ? n : nil
            return n <= 0
        }
        // A closed copy may also be evicted now.
        if last || budget.hasLimits { filler.wake() }
    }

    /// The fill's passes so far (the mount root's `user.labstream.fill`).
    public var fillPasses: FillPasses {
        let (passes, ranFor) = filler.record()
        return FillPasses(passes: passes, opened: ranFor[FillPasses.openedReason] ?? 0)
    }

    /// The copies eviction may take now (unpinned, closed, idle), but `except`'s: every row
    /// with its candidacy, read from the index (only asked near a limit).
    func evictionCandidates(except: FileKey? = nil, locking: Bool = true) -> [EvictionPolicy.Candidate] {
        guard let rows = try? index.downloads() else { return [] }
        let (open, lastUse) = usage.withLock { ($0.open, $0.lastUse) }
        return rows.map { row in
            EvictionPolicy.Candidate(
                key: row.key, bytes: row.present.byteCount, lastUse: lastUse[row.key] ?? 0, pinned: row.pinned,
                open: open[row.key] != nil || row.key == except, inTransfer: locking && !(files.withLock { $0[row.key] }?.isIdle ?? true))
        }
    }

    /// Drops least recently used, unpinned, closed, idle copies while the cache is over its
    /// budget (all together, or a server's) or the disk under its free-space floor, with
    /// `wanted` more bytes of a file of `server` (a read about to fetch them) counted as stored.
    /// Each eviction resets the row before freeing bytes.
    func evictIfNeeded() { evict(wanted: 0, server: nil, except: nil) }

    func evict(wanted: Int64, server: String?, except: FileKey?) {
        let budget = self.budget
        guard budget.hasLimits else { return }
        let measured = storageUsage()
        var wantedBy = measured.storedByServer
        if let server { wantedBy[server, default: 0] += wanted }
        let overServer = budget.serverMaxSize.filter { (wantedBy[$0.key] ?? 0) > $0.value }
        guard measured.stored + wanted > (budget.maxSize > 0 ? budget.maxSize : .max) || measured.free - wanted < budget.minFree || !overServer.isEmpty
        else { return }
        let (candidates, companions) = SharedCopy.evictable(evictionCandidates(except: except), groups: index.sharedGroups())
        // Artwork and subtitles count too; they go with their media, never before it.
        let limits = EvictionPolicy.Limits(maxSize: budget.maxSize, minFree: budget.minFree)
        var chosen = EvictionPolicy.choose(candidates, used: measured.stored + wanted, free: measured.free - wanted, limits: limits)
        for (name, cap) in overServer {
            let theirs = candidates.filter { $0.key.server == name && !chosen.contains($0.key) }
            chosen += EvictionPolicy.choose(theirs, used: wantedBy[name] ?? 0, free: .max, limits: .init(maxSize: cap))
        }
        let catalog = catalog.withLock { $0 }
        // A shared file is freed only with every name it has.
        for key in chosen + chosen.flatMap({ companions[$0] ?? [] }) {
            guard let file = catalog[key], let transfer = try? transfer(for: file) else { continue }
            do {
                try transfer.apply(.cancel, engine: self, reason: StatusReason.evicted)
                log("evicted \(file.path.joined(separator: "/")) to stay within the cache limits")
            } catch {
                log("evicting \(file.path.joined(separator: "/")) failed: \(error.userMessage)")
            }
        }
    }

    /// Online unless a failed request or probe said otherwise.
    public func reachability(of server: String) -> Reachability { health.state(of: server) }

    /// A request could not reach `server` (or was refused its token): reads of missing bytes
    /// fail fast from now on, and the server is probed with backoff until it answers.
    public func markUnreachable(_ server: String, _ state: Reachability = .offline) {
        guard health.mark(server, state) else { return }
        log("server \(server) is \(state.rawValue); probing it with backoff")
        // Its monitors change nothing now, but say that what they lack waits for the server.
        monitors.schedule([server])
    }

    /// The ranges of `file` on the wire right now.
    public func inFlight(_ file: TreeFile) -> RangeSet {
        guard let live = files.withLock({ $0[file.key] }) else { return RangeSet() }
        live.condition.lock()
        defer { live.condition.unlock() }
        return live.inFlight
    }

    /// Pause, resume, retry or cancel downloads. Cancel forgets every local byte of the files
    /// (`reason`, when given, says why in their status).
    public func control(_ action: QueueAction, files targets: [TreeFile], reason: StatusReason? = nil) throws(LabstreamError) {
        if action == .retry || action == .resume {
            // The user says try again: ask a server that failed whether it answers now, before
            // the files are dispatched (a blocking check; this is a FUSE or control thread).
            for server in Set(targets.map(\.key.server)) where reachability(of: server) != .online {
                guard let backend = backend(for: server) else { continue }
                let state = backend.checkReachability()
                if health.mark(server, state) { log("server \(server) is \(state.rawValue)") }
            }
        }
        for file in targets {
            try transfer(for: file).apply(action, engine: self, reason: reason)
            guard [.pause, .resume, .retry].contains(action) else { continue }
            // A copy at another quality has no path of its own until it is whole, and a new
            // version arriving beside the shown copy none at all: pausing, resuming or retrying
            // the file acts on them too (their failures are the file's to retry).
            if DerivedCopy.parse(file.key) == nil {
                for copy in copies(of: file.key) where copy.pinned { try control(action, copy: copy) }
            }
            guard let row = (try? index.download(NextVersion.key(of: file.key))) ?? nil, let next = treeFile(for: row) else { continue }
            try transfer(for: next).apply(action, engine: self, reason: reason)
        }
        if action == .verify { tell(.verify(targets.map(\.key))) }
        if action == .cancel { freedSpace() }
        log("\(action.rawValue) \(targets.count) files")
        if action == .retry || action == .resume { managed.pinned(Set(targets.map(\.key.server))) } else { managed.poke() }
        filler.wake()
    }

    /// Pause, resume or retry of a copy at another quality: one whose size is known is a
    /// transfer like any file; one whose size is not (a live copy's, a prepared copy's before
    /// its file is ready) is its row, which the fill starts from byte 0 when it is queued again.
    private func control(_ action: QueueAction, copy stored: DownloadRow) throws(LabstreamError) {
        if stored.total > 0, let file = treeFile(for: stored) {
            try transfer(for: file).apply(action, engine: self, reason: nil)
            return
        }
        var row = stored
        switch action {
        case .pause:
            live.cancel([row.key])  // a stream on the wire stops; the next try starts from byte 0
            guard row.apply(.interrupted) else { return }
            row.reason = StatusReason.pausedByUser
        case .resume, .retry:
            // As a file's: a person's word is tried once even on a disk the estimate says is full.
            let despiteRoom = row.status == .paused && row.pauseCause == .storageFull
            guard row.apply(.retry) else { return }
            row.reason = nil
            live.retries.succeeded(row.key)
            if despiteRoom { live.despiteRoom.withLock { _ = $0.insert(row.key) } }
        default:
            return
        }
        _ = try index.saveDownload(row, now: now())
        noteChange()
    }

    func transfer(for file: TreeFile) throws(LabstreamError) -> FileTransfer {
        let current = files.withLock { map -> FileTransfer? in
            guard let existing = map[file.key] else { return nil }
            // A new catalog version of the file: an idle transfer of the old one reopens.
            if (existing.file.size != file.size || existing.file.etag != file.etag) && existing.isIdle {
                map.removeValue(forKey: file.key)
                return nil
            }
            return existing
        }
        if let current { return current }
        // Open outside the map lock (it touches the disk and the index), and never between a
        // pin's index write and its reaching the open transfers (`opening`).
        opening.lock()
        defer { opening.unlock() }
        let created = try FileTransfer.open(file: file, index: index, layout: layout)
        return files.withLock { map in
            if let raced = map[file.key] { return raced }
            if map.count >= Self.maxOpenTransfers {
                // Each transfer holds a descriptor: a scanner touching every file must not run
                // the daemon out of them. Idle ones reopen from the index when needed again.
                for (key, transfer) in map where transfer.isIdle { map.removeValue(forKey: key) }
            }
            map[file.key] = created
            return created
        }
    }

    static let maxOpenTransfers = 256

    func now() -> Int64 { Int64(Date().timeIntervalSince1970) }

    /// Bumped whenever a row changes; `waitForChange` lets a watcher (status, tests) follow along
    /// without polling.
    let changes = Changes()

    func noteChange() {
        changes.bump()
        if budget.hasLimits { filler.wake() }
    }

    /// Blocks until the change counter passes `seen` or `timeout` elapses; returns the counter.
    public func waitForChange(after seen: Int, timeout: Double) -> Int { changes.wait(after: seen, timeout: timeout) }

    /// The change counter now.
    public var changeCount: Int { changes.current }

    /// Moves a rejected file to `inspect/` under the data dir (a copy stays for the user).
    func setAside(_ path: String) throws(LabstreamError) {
        let dir = layout.root + "/inspect"
        try makeDirectories(dir)
        let target = dir + "/" + (path.split(separator: "/").last.map(String.init) ?? "file") + ".\(now())"
        do { try FileManager.default.copyItem(atPath: path, toPath: target) } catch {
            throw .storage("cannot keep \(path) aside for inspection: \(error.localizedDescription)")
        }
        log("kept the rejected file aside as \(target)")
    }

    /// Free bytes on the data dir's filesystem, or nil when it cannot be measured.
    public var freeSpace: Int64? { freeBytes() }

    /// How long a reader waits for its bytes before failing.
    public var readTimeout: Double { settings.readTimeout }

    /// Free bytes on the data dir's filesystem, or nil when it cannot be measured.
    func freeBytes() -> Int64? {
        var s = statvfs()
        guard statvfs(layout.root, &s) == 0 else { return nil }
        return Int64(s.f_bavail) * Int64(s.f_frsize)
    }
}
