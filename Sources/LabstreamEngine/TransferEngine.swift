import Foundation
import LabstreamBackends
import LabstreamCore
import LabstreamStore
import Synchronization

/// Fetches the byte ranges readers need, and whole pinned files in the background, into durable
/// sparse partials. A body is committed only when the assembly policy accepts it: data first
/// (`fdatasync`), then the range map and the segment's digest in one index transaction.
/// Blocking API for FUSE worker threads; transfers run on their own threads, never on Swift's
/// cooperative pool.
///
/// Lock order: `TransferEngine.files` → `FileTransfer.condition` → `FileTransfer.writeGate` →
/// the index's connection lock. Never take `files` while holding a file's condition.
public final class TransferEngine: Sendable {
    public struct Settings: Sendable {
        public var sizes: TransferSizes
        /// How long a reader waits for its bytes before failing with EIO.
        public var readTimeout: Double
        /// Segment requests in flight per pinned file (the seed's head plus one look-ahead).
        public var maxQueuedSegments: Int
        /// Pinned files filled at once.
        public var maxConcurrentFiles: Int
        public var retry: RetryPolicy
        /// Free space kept beyond a file's remaining bytes before a background fill starts.
        public var freeSpaceHeadroom: Int64
        /// A long body is committed every this many bytes as it arrives.
        public var checkpointBytes: Int64
        /// Cache size cap and free-space floor; unpinned, closed, idle copies go first.
        public var limits: EvictionPolicy.Limits = .init()
        /// Probe complete files with libmpv; without it they stay `unverified`.
        public var playbackProbe = true
        /// Bytes per second for all transfers together; 0 is unlimited.
        public var rateLimit: Int64 = 0
        /// The quality a pin fetches, per `SERVER` and `SERVER/LIBRARY` (absent: the original).
        public var qualities: [String: Quality] = [:]

        public init(sizes: TransferSizes = .default, readTimeout: Double = 35, maxQueuedSegments: Int = 2,
                    maxConcurrentFiles: Int = 3, retry: RetryPolicy = RetryPolicy(), freeSpaceHeadroom: Int64 = 64 << 20,
                    checkpointBytes: Int64 = 4 << 20, limits: EvictionPolicy.Limits = .init(), playbackProbe: Bool = true,
                    rateLimit: Int64 = 0) {
        self.rateLimit = rateLimit
        self.checkpointBytes = checkpointBytes
        self.playbackProbe = playbackProbe
        self.limits = limits
            self.sizes = sizes
            self.readTimeout = readTimeout
            self.maxQueuedSegments = maxQueuedSegments
            self.maxConcurrentFiles = maxConcurrentFiles
            self.retry = retry
            self.freeSpaceHeadroom = freeSpaceHeadroom
        }
    }

    let index: OfflineIndex
    let layout: DataLayout
    let settings: Settings
    let backends = Mutex<[String: any MediaBackend]>([:])
    let files = Mutex<[FileKey: FileTransfer]>([:])
    /// Every file in the catalog, for background fill of pinned rows.
    let catalog = Mutex<[FileKey: TreeFile]>([:])
    public let log: @Sendable (String) -> Void
    let filler = Worker(name: "background-fill")
    let validation = Worker(name: "validation")
    let health = ServerHealth()
    /// Transfers on the wire, to share the rate limit between them.
    let activeFetches = Mutex(0)
    /// Set by `stop`: bodies on the wire end at their next chunk, keeping what arrived.
    let stopping = Atomic<Bool>(false)
    let fetchesEnded = NSCondition()

    /// This transfer's share of the global rate limit, fixed when it starts.
    func rateShare() -> Int64 {
        guard settings.rateLimit > 0 else { return 0 }
        return max(settings.rateLimit / Int64(max(activeFetches.withLock { $0 }, 1)), 1024)
    }
    /// Open handles per file, and when each file was last used (this session).
    let usage = Mutex<(open: [FileKey: Int], lastUse: [FileKey: Int64])>(([:], [:]))

    /// Server cleanup to do (encodings to stop), beside the index.
    let journal: CleanupJournal
    let live = LiveForward()
    let prepared = PreparedCopies()
    let openEnded = OpenEndedFill()
    let treeListener = Mutex<(@Sendable () -> Void)?>(nil)

    public init(index: OfflineIndex, layout: DataLayout, settings: Settings, journal: CleanupJournal? = nil,
                log: @escaping @Sendable (String) -> Void) {
        self.index = index
        self.layout = layout
        self.settings = settings
        self.log = log
        self.journal = journal ?? CleanupJournal.open(path: layout.cleanupJournalPath, warn: log)
        index.keepReserve()
    }

    /// Called when files appear in the tree without a catalog sync (a finished copy at another
    /// quality): the daemon reloads its tree.
    public func onTreeChange(_ listener: @escaping @Sendable () -> Void) { treeListener.withLock { $0 = listener } }

    func treeChanged() { treeListener.withLock { $0 }?() }

    let onlineListener = Mutex<(@Sendable (String) -> Void)?>(nil)

    /// Called (on its own thread) when a server that was not answering answers again.
    public func onServerOnline(_ listener: @escaping @Sendable (String) -> Void) { onlineListener.withLock { $0 = listener } }

    /// The servers this engine has backends for.
    public var serverNames: [String] { backends.withLock { $0.keys.sorted() } }

    public func setBackend(_ backend: any MediaBackend) {
        backends.withLock { $0[backend.serverName] = backend }
        filler.wake()
    }

    public func backend(for server: String) -> (any MediaBackend)? { backends.withLock { $0[server] } }

    public func setCatalog(_ files: [TreeFile]) {
        catalog.withLock { $0 = Dictionary(files.map { ($0.key, $0) }, uniquingKeysWith: { a, _ in a }) }
        filler.wake()
    }

    /// Starts filling pinned files in the background (until `stop`).
    public func startBackgroundFill() {
        filler.start { [self] _ in BackgroundFill.pass(self) }
        health.start(self)
        if settings.playbackProbe { validation.start { [self] _ in Validation.pass(self); return nil } }
    }

    /// Stops the background work; bodies on the wire end and commit what they received (a
    /// stalled one is waited for at most `grace` seconds).
    public func stop(grace: Double = 3) {
        filler.stop()
        health.stop()
        validation.stop()
        stopping.store(true, ordering: .relaxed)
        let deadline = Date().addingTimeInterval(grace)
        fetchesEnded.lock()
        while activeFetches.withLock({ $0 }) > 0 && fetchesEnded.wait(until: deadline) {}
        fetchesEnded.unlock()
    }

    /// The current download row for `file`: live state if the file is open, else the index.
    public func row(for file: TreeFile) -> DownloadRow? {
        if let live = files.withLock({ $0[file.key] }) { return live.snapshot() }
        return try? index.download(file.key)
    }

    /// Reads `range` of `file`, fetching whatever is missing first, and says which version of
    /// the file the bytes are (`HandleVersion` decides whether a handle may have them).
    /// `readAhead`, when given, is fetched in the background without delaying this read.
    public func read(_ file: TreeFile, range: ByteRange, readAhead: ByteRange? = nil) throws(LabstreamError) -> (bytes: [UInt8], version: ServedVersion?) {
        // A handle opened on a version that has since been replaced reads nothing of the new one.
        if let current = catalog.withLock({ $0[file.key] }), current.size != file.size || current.etag != file.etag {
            throw .remoteChanged("\(file.path.joined(separator: "/")) was replaced by a new version; open it again")
        }
        let stamp = now()
        usage.withLock { $0.lastUse[file.key] = stamp }
        let demand = range.clamped(to: ByteRange(0, file.size))
        if demand.isEmpty { return ([], nil) }
        let transfer = try self.transfer(for: file)
        let version = try transfer.waitUntilPresent(demand, engine: self)
        if let readAhead { transfer.prefetch(readAhead, engine: self) }
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
    public func setPinned(_ pinned: Bool, files targets: [TreeFile], quality: Quality? = nil) throws(LabstreamError) {
        var rowsFor: [TreeFile] = []
        for file in targets {
            if !pinned {
                rowsFor.append(file)
                rowsFor += try index.derivedCopies(of: file.key).map { TreeFile(path: [], key: $0.key, size: 0, modified: file.modified, etag: nil) }
                continue
            }
            let library = file.path.count > 1 ? settings.qualities[file.key.server + "/" + file.path[1]] : nil
            let wanted = quality ?? library ?? settings.qualities[file.key.server] ?? .original
            if wanted != .original, DerivedCopy.parse(file.key) == nil, let backend = backend(for: file.key.server),
               RoutePolicy.route(for: RouteRequest(backend: backend.kind, quality: wanted, sourceBitrate: file.bitrate,
                                                  sourceContainer: file.container)) != .staticOriginal {
                rowsFor.append(TreeFile(path: [], key: DerivedCopy.key(of: file.key, quality: wanted), size: 0, modified: file.modified, etag: nil))
            } else {
                rowsFor.append(file)
            }
        }
        let rows = try index.setPinned(pinned, files: rowsFor, layout: layout, now: now())
        for row in rows {
            if let live = files.withLock({ $0[row.key] }) { live.setPinned(pinned, engine: self) }
        }
        if !pinned { live.cancel(Set(rows.map(\.key))) }
        log("\(pinned ? "pinned" : "unpinned") \(rows.count) files")
        filler.wake()
    }

    /// Bytes stored for `key`, from memory (`OfflineIndex.storedBytes`).
    public func storedBytes(_ key: FileKey) -> Int64 { index.storedBytes(key) }

    /// Told when a file's stored bytes start, end or become whole.
    public func onStoredChange(_ listener: @escaping @Sendable (FileKey) -> Void) { index.onStoredChange(listener) }

    /// Where `key`'s file is in the tree.
    public func catalogPath(of key: FileKey) -> [String]? { catalog.withLock { $0[key]?.path } }

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
            return TreeFile(path: shown.path, key: row.key, size: row.total, modified: shown.modified, etag: row.sourceTag, bitrate: shown.bitrate,
                            remoteItemId: shown.remoteItemId)
        }
        return derivedTreeFile(row)
    }

    /// The tree entry a copy at another quality has (or will have), from its original in the
    /// catalog and its row.
    func derivedTreeFile(_ row: DownloadRow) -> TreeFile? {
        guard let (base, quality) = DerivedCopy.parse(row.key), let original = catalog.withLock({ $0[base] }) else { return nil }
        var file = DerivedCopy.treeFile(of: original, quality: quality, size: row.total)
        file.etag = row.sourceTag
        return file
    }

    public func noteOpened(_ key: FileKey) { usage.withLock { $0.open[key, default: 0] += 1; $0.lastUse[key] = now() } }

    public func noteClosed(_ key: FileKey) {
        usage.withLock { u in
            let n = (u.open[key] ?? 1) - 1
            u.open[key] = n > 0 ? n : nil
        }
        if settings.limits.maxSize > 0 || settings.limits.minFree > 0 { filler.wake() }
    }

    /// Drops least recently used, unpinned, closed, idle copies while the cache is over its cap
    /// or the disk under its free-space floor. Each eviction resets the row before freeing bytes.
    func evictIfNeeded() {
        let limits = settings.limits
        guard limits.maxSize > 0 || limits.minFree > 0, let rows = try? index.downloads() else { return }
        let free = freeBytes() ?? Int64.max
        let (open, lastUse) = usage.withLock { ($0.open, $0.lastUse) }
        let candidates = rows.map { row in
            EvictionPolicy.Candidate(key: row.key, bytes: row.present.byteCount, lastUse: lastUse[row.key] ?? 0, pinned: row.pinned,
                                     open: open[row.key] != nil, inTransfer: !(files.withLock { $0[row.key] }?.isIdle ?? true))
        }
        let used = rows.reduce(Int64(0)) { $0 + $1.present.byteCount }
        let catalog = catalog.withLock { $0 }
        for key in EvictionPolicy.choose(candidates, used: used, free: free, limits: limits) {
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
        if health.mark(server, state) { log("server \(server) is \(state.rawValue); probing it with backoff") }
    }

    /// The ranges of `file` on the wire right now.
    public func inFlight(_ file: TreeFile) -> RangeSet {
        guard let live = files.withLock({ $0[file.key] }) else { return RangeSet() }
        live.condition.lock()
        defer { live.condition.unlock() }
        return live.inFlight
    }

    /// Pause, resume, retry or cancel downloads. Cancel forgets every local byte of the files.
    public func control(_ action: QueueAction, files targets: [TreeFile]) throws(LabstreamError) {
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
            try transfer(for: file).apply(action, engine: self)
        }
        log("\(action.rawValue) \(targets.count) files")
        filler.wake()
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
        // Open outside the map lock: it touches the disk and the index.
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
        if settings.limits.maxSize > 0 || settings.limits.minFree > 0 { filler.wake() }
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

    /// Enough free space for `bytes` more plus headroom?
    func hasRoom(for bytes: Int64) -> Bool {
        guard let free = freeBytes() else { return true }
        return free >= bytes + settings.freeSpaceHeadroom
    }

    /// Free bytes on the data dir's filesystem, or nil when it cannot be measured.
    func freeBytes() -> Int64? {
        var s = statvfs()
        guard statvfs(layout.root, &s) == 0 else { return nil }
        return Int64(s.f_bavail) * Int64(s.f_frsize)
    }
}

final class Changes: @unchecked Sendable {
    let condition = NSCondition()
    var count = 0   // guarded by `condition`

    var current: Int { condition.withLock { count } }

    func bump() {
        condition.lock()
        count += 1
        condition.broadcast()
        condition.unlock()
    }

    func wait(after seen: Int, timeout: Double) -> Int {
        let deadline = Date().addingTimeInterval(timeout)
        condition.lock()
        defer { condition.unlock() }
        while count <= seen && condition.wait(until: deadline) {}
        return count
    }
}

/// A named thread that sleeps until woken, or until the deadline its last pass asked for, and
/// then runs one pass. Off Swift's cooperative pool: a pass may block on the network or on mpv.
final class Worker: @unchecked Sendable {
    let name: String
    let condition = NSCondition()
    // Guarded by `condition`.
    var woken = true          // the first pass runs at start
    var running = false

    init(name: String) { self.name = name }

    func wake() {
        condition.lock()
        woken = true
        condition.broadcast()
        condition.unlock()
    }

    /// `pass(woken)` runs once per wake-up (`woken` is false when a deadline fired) and returns
    /// when it wants to run again without being woken.
    func start(_ pass: @escaping @Sendable (Bool) -> Date?) {
        condition.lock()
        defer { condition.unlock() }
        guard !running else { return }
        running = true
        let thread = Thread { [self] in
            var deadline: Date?
            while true {
                condition.lock()
                while running && !woken {
                    if let d = deadline {
                        if !condition.wait(until: d) { break }
                    } else {
                        condition.wait()
                    }
                }
                let (keepGoing, wasWoken) = (running, woken)
                woken = false
                condition.unlock()
                guard keepGoing else { return }
                deadline = pass(wasWoken)
            }
        }
        thread.name = name
        thread.start()
    }

    func stop() {
        condition.lock()
        running = false
        condition.broadcast()
        condition.unlock()
    }
}

/// Per-server reachability, re-probed with backoff while a server is not online.
final class ServerHealth: Sendable {
    struct Entry {
        var state: Reachability
        var failures: Int
        var nextProbe: Date
    }

    let entries = Mutex<[String: Entry]>([:])
    let worker = Worker(name: "server-health")
    let lastReaderProbe = Mutex(Date.distantPast)
    let policy = ReachabilityPolicy()

    func state(of server: String) -> Reachability { entries.withLock { $0[server]?.state ?? .online } }

    /// Returns true when the state changed.
    @discardableResult
    func mark(_ server: String, _ state: Reachability) -> Bool {
        let old = entries.withLock { e -> Reachability in
            let old = e[server]?.state ?? .online
            if state == .online {
                e[server] = nil
            } else {
                let failures = (e[server]?.failures ?? 0) + 1
                e[server] = Entry(state: state, failures: failures, nextProbe: Date().addingTimeInterval(policy.nextProbe(after: failures)))
            }
            return old
        }
        if state != .online { worker.wake() }
        return old != state
    }

    func wake() { worker.wake() }
    func stop() { worker.stop() }

    func start(_ engine: TransferEngine) {
        worker.start { [self] woken in
            // A waiting reader may ask for a probe, but at most once a second.
            let now = Date()
            let readerAsked = woken && lastReaderProbe.withLock { last in
                guard now.timeIntervalSince(last) >= 1 else { return false }
                last = now
                return true
            }
            let due = entries.withLock { $0.filter { $0.value.nextProbe <= now || readerAsked }.map(\.key) }
            for server in due {
                guard let backend = engine.backend(for: server) else { continue }
                let state = backend.checkReachability()
                if mark(server, state) {
                    engine.log("server \(server) is \(state.rawValue)")
                    if state == .online {
                        engine.filler.wake()
                        if let listener = engine.onlineListener.withLock({ $0 }) { Thread { listener(server) }.start() }
                    }
                    engine.noteChange()
                }
            }
            return entries.withLock { $0.values.map(\.nextProbe).min() }
        }
    }
}

/// Runs the completion check (size, then the libmpv probe) on files whose bytes are all
/// present, one at a time.
enum Validation {
    static func pass(_ engine: TransferEngine) {
        let pending = (try? engine.index.downloadsAwaitingValidation()) ?? []
        let catalog = engine.catalog.withLock { $0 }
        for row in pending {
            guard let file = catalog[row.key] ?? engine.treeFile(for: row), let transfer = try? engine.transfer(for: file) else { continue }
            let path = engine.layout.absolute(row.partialPath)
            var st = stat()
            let outcome: ProbeOutcome
            if stat(path, &st) != 0 || Int64(st.st_size) != row.total {
                outcome = .failed("size check: the local file is not \(row.total) bytes")
            } else {
                let started = Date()
                outcome = ProbeVerdict.judge(PlaybackProbe.observe(path: path))
                engine.log("probe of \(file.path.joined(separator: "/")): \(outcome) in \(Int(Date().timeIntervalSince(started) * 1000)) ms")
            }
            transfer.applyVerdict(outcome, attempt: row.attempt, engine: engine)
        }
    }
}

/// Tops up the segment train of every pinned file that still misses bytes, whenever pins,
/// catalogs, backends or finished transfers change something.
enum BackgroundFill {
    /// One pass over the pinned rows. Returns when it next needs to look again without a
    /// wake-up (a retry's backoff).
    static func pass(_ engine: TransferEngine) -> Date? {
        engine.evictIfNeeded()
        engine.live.replayJournal(engine)
        engine.prepared.finish(engine)
        let versionsDue = NextVersions.pass(engine)
        let pinned: [DownloadRow]
        do { pinned = try engine.index.pinnedIncompleteDownloads() } catch {
            engine.log("background fill: \(error.userMessage)")
            return Date().addingTimeInterval(30)
        }
        // Copies at another quality have no size until they are complete.
        let copies = pinned.filter { DerivedCopy.parse($0.key) != nil }
        let catalog = engine.catalog.withLock { $0 }
        let originals = pinned.filter { DerivedCopy.parse($0.key) == nil }
        var active = 0
        var soonest: Date?
        for row in copies + originals where active < engine.settings.maxConcurrentFiles {
            let state: FileTransfer.FillState
            if DerivedCopy.parse(row.key) != nil {
                state = engine.live.consider(row, engine: engine)
            } else {
                guard let file = catalog[row.key] else { continue }
                if OpenEndedFill.applies(row, file) {
                    state = engine.openEnded.consider(row, file: file, engine: engine)
                } else if row.present.contains(ByteRange(0, row.total)) {
                    continue
                } else {
                    guard let transfer = try? engine.transfer(for: file) else { continue }
                    state = transfer.fill(engine: engine)
                }
            }
            switch state {
            case .filling: active += 1
            case .waitUntil(let date):
                active += 1
                soonest = min(soonest ?? date, date)
            case .idle: continue
            }
        }
        return [soonest, versionsDue].compactMap { $0 }.min()
    }
}

/// One file's transfers. `condition` guards every `var`; `writeGate` orders body writes
/// against attempt changes so that no byte of a stale attempt lands after a new one began.
final class FileTransfer: @unchecked Sendable {
    let file: TreeFile
    let partial: PartialFile
    let condition = NSCondition()
    let writeGate = NSLock()
    let index: OfflineIndex

    // Guarded by `condition`.
    var row: DownloadRow
    /// Durable ranges whose digests were checked since this daemon started.
    var verified = RangeSet()
    /// Bytes of this attempt in the partial, from answers carrying the attempt's validator, that
    /// may not be synced and committed yet: readers are served them at once (the commit follows;
    /// a crash only means they are fetched again).
    var written = RangeSet()
    /// Each request on the wire (the train counts requests; adjacent ones coalesce in `inFlight`).
    var requestsInFlight: [ByteRange] = []
    var inFlight: RangeSet { RangeSet(requestsInFlight) }
    /// What a reader can be served now: committed bytes and those written ahead of their commit.
    var readable: RangeSet {
        guard !written.isEmpty else { return row.present }
        var all = row.present
        all.formUnion(written)
        return all
    }
    /// Ranges fetched for the background fill (a subset of `inFlight`).
    var fillInFlight: [ByteRange] = []
    var failures: [(sequence: Int, range: ByteRange, error: LabstreamError, kind: RetryPolicy.Failure)] = []
    var sequence = 0
    /// What each waiting reader needs (a body writes early for them, and wakes only them).
    var waitingFor: [ByteRange] = []
    var waiters: Int { waitingFor.count }
    var consecutiveFailures = 0
    var retryAt: Date?
    var offlineLogged = false
    /// A 401 made us check the sign-in once already (for this transfer).
    var authRechecked = false
    /// Bumped by a user's resume or retry: failures of fetches started before it do not count.
    var generation = 0
    /// The server answered a ranged request from past byte 0 with the whole file: from then on
    /// one whole-file fetch from byte 0 serves every reader and the fill.
    var ignoresRange = false

    // Guarded by `writeGate` (read under the condition too, written under both).
    var writableAttempt: AttemptID

    init(file: TreeFile, partial: PartialFile, row: DownloadRow, index: OfflineIndex) {
        self.file = file
        self.partial = partial
        self.row = row
        self.writableAttempt = row.attempt
        self.index = index
        // Checked whole by an earlier run and not written since: its digests would match again.
        let whole = RangeSet([ByteRange(0, row.total)])
        if let checked = row.checked, checkedWhole(row, whole), partial.identity() == checked { verified = whole }
    }

    static func open(file: TreeFile, index: OfflineIndex, layout: DataLayout) throws(LabstreamError) -> FileTransfer {
        var row = try index.download(file.key) ?? DownloadRow(
            key: file.key, status: .partial, attempt: AttemptID(1), validator: nil, total: file.size,
            present: RangeSet(), partialPath: layout.partialRelativePath(for: file.key), sourceTag: file.etag)
        let stale = row.isStale(for: file)
        if stale {
            // The catalog says the file changed: the old bytes belong to another version.
            row = DownloadRow(key: file.key, status: row.pinned ? .queued : .partial, attempt: row.attempt.next, validator: nil,
                              total: file.size, present: RangeSet(), partialPath: row.partialPath,
                              reason: StatusReason.fileChanged(), pinned: row.pinned, sourceTag: file.etag, job: row.job)
        }
        row.sourceTag = row.sourceTag ?? file.etag
        try makeDirectories(layout.partialsDir)
        let partial = try PartialFile(path: layout.absolute(row.partialPath), size: file.size)
        // A new attempt starts in a fresh file, never over the bytes of the version before.
        if stale { try partial.discardAll() }
        return FileTransfer(file: file, partial: partial, row: row, index: index)
    }

    var isIdle: Bool {
        condition.lock()
        defer { condition.unlock() }
        return requestsInFlight.isEmpty && waiters == 0
    }

    func snapshot() -> DownloadRow {
        condition.lock()
        defer { condition.unlock() }
        adoptOpenEndedProgress()
        return row
    }

    /// A file of unknown size is filled by `OpenEndedFill`, which commits its row to the index,
    /// not to this object: take the index's row, unless it belongs to an older attempt. Returns
    /// whether the row is such a file's. Call with `condition` held.
    @discardableResult
    func adoptOpenEndedProgress() -> Bool {
        guard OpenEndedFill.applies(row, file) else { return false }
        if let stored = try? index.download(row.key), stored.attempt.rawValue >= row.attempt.rawValue { row = stored }
        return true
    }

    /// Pins or unpins this file's row as the index just did (`DownloadRow.setPinned`), but on the
    /// row this object holds, which may be newer than the one the index had (a commit in
    /// between), and writes it back: neither copy loses the other's change.
    func setPinned(_ pinned: Bool, engine: TransferEngine) {
        condition.lock()
        defer { condition.unlock() }
        let openEnded = adoptOpenEndedProgress()
        row.setPinned(pinned)
        consecutiveFailures = 0
        retryAt = nil
        // An open-ended fill writes its own row; the index already has the pin.
        if !openEnded { _ = try? index.saveDownload(row, now: engine.now()) }
    }

    func apply(_ action: QueueAction, engine: TransferEngine, reason: String? = nil) throws(LabstreamError) {
        condition.lock()
        defer {
            condition.broadcast()
            condition.unlock()
            engine.noteChange()
        }
        let openEnded = adoptOpenEndedProgress()
        let whole = !openEnded && row.present.contains(ByteRange(0, row.total))
        switch action {
        case .pause:
            guard !whole, let next = row.status.after(.interrupted) else { return }
            row.status = next
            row.reason = StatusReason.pausedByUser
        case .verify:
            guard whole, let next = row.status.after(.recheck) else { return }
            row.status = next
            row.awaitingValidation = true
            row.reason = StatusReason.awaitingValidation
            try index.saveDownload(row, now: engine.now())
            engine.validation.wake()
            return
        case .retry where whole && row.status == .failed:
            // A file the probe rejected: keep it aside for inspection and fetch it again.
            try engine.setAside(partial.path)
            writeGate.lock()
            writableAttempt = row.attempt.next
            writeGate.unlock()
            row = DownloadRow(key: row.key, status: row.pinned ? .queued : .partial, attempt: row.attempt.next, validator: nil,
                              total: row.total, present: RangeSet(), partialPath: row.partialPath, reason: nil, pinned: row.pinned,
                              sourceTag: row.sourceTag, job: row.job)
            verified = RangeSet()
            written = RangeSet()
            try partial.discardAll()
        case .resume, .retry:
            guard !whole else { return }
            // Parked for a full disk and it still does not fit: it stays parked, as the first
            // try would (nothing to write on a disk that has no room).
            if row.status == .paused && row.reason == StatusReason.storageFull && !engine.hasRoom(for: row.total - row.present.byteCount) {
                engine.log("\(file.path.last ?? ""): still not enough free space; it stays paused (free space with labstream cancel)")
                return
            }
            if let next = row.status.after(.retry) { row.status = next }
            row.reason = nil
            consecutiveFailures = 0
            retryAt = nil
            generation += 1
            authRechecked = false
        case .cancel:
            writeGate.lock()
            writableAttempt = row.attempt.next
            writeGate.unlock()
            row = DownloadRow(key: row.key, status: .partial, attempt: row.attempt.next, validator: nil, total: row.total,
                              present: RangeSet(), partialPath: row.partialPath, reason: reason, pinned: false, sourceTag: row.sourceTag, job: row.job)
            verified = RangeSet()
            written = RangeSet()
            // The bytes are freed first, so that the row can be recorded even on a full disk. If
            // recording fails, the stored row's digests no longer match and are dropped when read.
            try partial.discardAll()
            try index.saveDownload(row, freeing: true, now: engine.now())
            index.keepReserve()   // taken again once the freed space allows
            return
        }
        try index.saveDownload(row, now: engine.now())
    }

    /// Records the completion check's verdict, if the row is still the attempt that was probed.
    func applyVerdict(_ outcome: ProbeOutcome, attempt: AttemptID, engine: TransferEngine) {
        condition.lock()
        defer {
            condition.broadcast()
            condition.unlock()
            engine.noteChange()
        }
        guard row.attempt == attempt, row.awaitingValidation, row.present.contains(ByteRange(0, row.total)) else { return }
        let playable: Bool?
        switch outcome {
        case .complete: playable = true; row.reason = nil
        case .unverified(let why): playable = nil; row.reason = why
        case .failed(let why): playable = false; row.reason = why
        }
        row.status = row.status.after(.validated(playable: playable)) ?? row.status
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
    /// a timeout.
    func waitUntilPresent(_ demand: ByteRange, engine: TransferEngine) throws(LabstreamError) -> ServedVersion {
        let deadline = Date().addingTimeInterval(engine.settings.readTimeout)
        condition.lock()
        defer { condition.unlock() }
        var startSequence = sequence
        var transientFailures = 0
        waitingFor.append(demand)
        defer { waitingFor.remove(at: waitingFor.firstIndex(of: demand)!) }
        while true {
            if !verified.contains(demand) { verifyCommitted(in: demand, engine: engine) }
            if readable.contains(demand) { return ServedVersion(attempt: row.attempt, validator: row.validator) }
            if let failure = failures.first(where: { $0.sequence > startSequence && $0.range.overlaps(demand) }) {
                // A player would rather wait than fail: a transient failure is retried with
                // backoff while the read timeout allows.
                transientFailures += 1
                // A server marked down (it refused the connection) is not waited for: the read
                // fails at once, as every read of a server known to be down does.
                guard engine.reachability(of: file.key.server) == .online,
                      case .retry(let delay) = engine.settings.retry.decide(failure.kind, failures: transientFailures, now: Date().timeIntervalSince1970,
                                                                             random: Double.random(in: 0...1), persistent: true),
                      Date().addingTimeInterval(delay) < deadline else { throw failure.error }
                engine.log("read of \(file.path.last ?? ""): \(failure.error.userMessage); trying again in \(String(format: "%.1f", delay)) s")
                let retryAt = Date().addingTimeInterval(delay)
                while Date() < retryAt && condition.wait(until: retryAt) {}   // a schedule; other wake-ups are ignored
                startSequence = sequence
                continue
            }
            let reachability = engine.reachability(of: file.key.server)
            if reachability != .online {
                engine.health.wake()   // a reader is waiting: look again soon
                if !offlineLogged {
                    offlineLogged = true
                    engine.log("\(file.path.joined(separator: "/")): server \(file.key.server) is \(reachability.rawValue); reads of bytes not stored locally fail until it returns")
                }
                throw .serverUnavailable("server \(file.key.server) is \(reachability.rawValue) and these bytes are not stored locally")
            }
            offlineLogged = false
            startFetches(ReadPlanner.plan(demand: demand, total: row.total, present: row.present, inFlight: inFlight,
                                          sizes: engine.settings.sizes), background: false, engine: engine)
            if !condition.wait(until: deadline) {
                engine.log("read of \(file.path.joined(separator: "/")) bytes \(demand) timed out")
                throw .timedOut("waiting for bytes \(demand.lower)-\(demand.lastByte) of \(file.path.last ?? "")")
            }
        }
    }

    /// Re-checks, against their stored digests, the committed segments overlapping `range` that
    /// this daemon has not checked yet; a mismatch drops the segment so it is fetched again.
    /// Call with `condition` held.
    func verifyCommitted(in range: ByteRange, engine: TransferEngine) {
        let unchecked = row.present.intersection(range).ranges.flatMap { verified.missing(in: $0) }
        guard !unchecked.isEmpty else { return }
        let digests = (try? index.segments(row.key, attempt: row.attempt)) ?? []
        for gap in unchecked {
            for segment in digests where segment.range.overlaps(gap) && !verified.contains(segment.range) {
                if digest(of: segment.range, like: segment.digest) == segment.digest {
                    verified.insert(segment.range)
                } else {
                    drop(segment.range, why: "digest mismatch", engine: engine)
                }
            }
            // Durable bytes with no digest at all cannot be trusted either.
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

    func drop(_ range: ByteRange, why: String, engine: TransferEngine) {
        engine.log("\(file.path.joined(separator: "/")): bytes \(range) failed verification (\(why)); fetching them again")
        row.present.remove(range)
        written.remove(range)
        row.awaitingValidation = false
        if row.status == .unverified || row.status == .complete { row.status = row.pinned ? .queued : .partial }
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

    func prefetch(_ range: ByteRange, engine: TransferEngine) {
        condition.lock()
        defer { condition.unlock() }
        let sizes = engine.settings.sizes
        startFetches(ReadPlanner.readAhead(window: range, total: row.total, present: row.present, inFlight: inFlight,
                                           segmentSize: sizes.segmentSize, minimumPiece: max(sizes.readChunk, range.count / 2)),
                     background: false, engine: engine)
    }

    enum FillState { case filling, waitUntil(Date), idle }

    /// Tops up this pinned file's segment train. Called by the background fill.
    func fill(engine: TransferEngine) -> FillState {
        condition.lock()
        defer { condition.unlock() }
        guard row.pinned, !row.present.contains(ByteRange(0, row.total)) else { return .idle }
        if row.status == .failed || (row.status == .paused && !StatusReason.liftsByItself(row.reason)) { return .idle }
        if let retryAt, retryAt > Date() { return .waitUntil(retryAt) }
        let reachability = engine.reachability(of: file.key.server)
        guard engine.backend(for: file.key.server) != nil, reachability == .online else {
            // A refused sign-in does not pass by itself: the file fails saying what to do.
            if reachability == .authFailed {
                setStatus(.failed, reason: StatusReason.signInRefused(server: file.key.server), engine: engine)
            } else {
                setStatus(.paused, reason: StatusReason.serverUnavailable, engine: engine)
            }
            return .idle
        }
        // A retry is checked like the first try: it must not fill the disk it was parked for.
        if fillInFlight.isEmpty && !engine.hasRoom(for: row.total - row.present.byteCount) {
            setStatus(.paused, reason: StatusReason.storageFull, engine: engine)
            return .idle
        }
        let plan = SegmentTrainPlanner.plan(.init(
            durable: row.present, total: row.total, inFlight: requestsInFlight, fillInBackground: true,
            segmentSize: engine.settings.sizes.segmentSize, maxQueued: engine.settings.maxQueuedSegments))
        let ranges = plan.compactMap { request -> ByteRange? in if case .closed(let r) = request { return r }; return nil }
        if !ranges.isEmpty && row.status != .downloading { setStatus(.downloading, reason: nil, engine: engine) }
        startFetches(ranges, background: true, engine: engine)
        return .filling
    }

    /// Call with `condition` held.
    func setStatus(_ status: DownloadStatus, reason: String?, engine: TransferEngine) {
        guard row.status != status || row.reason != reason else { return }
        row.status = status
        row.reason = reason
        _ = try? index.saveDownload(row, now: engine.now())
        engine.noteChange()
    }

    /// Call with `condition` held.
    func startFetches(_ planned: [ByteRange], background: Bool, engine: TransferEngine) {
        var plan = planned
        if ignoresRange && !plan.isEmpty {
            // One stream of the whole file; readers wait for it to pass their bytes.
            guard requestsInFlight.isEmpty else { return }
            plan = [ByteRange(0, row.total)]
        }
        guard !plan.isEmpty else { return }
        guard let backend = engine.backend(for: file.key.server) else {
            sequence += 1
            for r in plan {
                failures.append((sequence, r, .serverUnavailable("server \(file.key.server) is not connected"), .validation))
            }
            condition.broadcast()
            return
        }
        requestsInFlight += plan
        if background { fillInFlight += plan }
        let attempt = row.attempt
        let validator = row.validator
        let generation = generation
        for r in plan {
            let thread = Thread { [self] in
                fetch(r, attempt: attempt, generation: generation, validator: validator, background: background, backend: backend, engine: engine)
            }
            thread.name = "fetch"
            thread.start()
        }
    }

    struct Fetched {
        var validator: Validator?
        var received: Int64
        var digest: String
    }

    /// A failed fetch: what the reader sees, and what kind of failure the retry policy judges.
    struct FetchFailure: Error {
        var error: LabstreamError
        var kind: RetryPolicy.Failure
        /// A 200 to a ranged request from past byte 0: not a failure of the bytes asked for,
        /// a sign the server ignores `Range`.
        var rangeIgnored = false
    }

    func fetch(_ range: ByteRange, attempt: AttemptID, generation: Int, validator: Validator?, background: Bool,
               backend: any MediaBackend, engine: TransferEngine) {
        let request = backend.rangeRequest(for: file, range: range, validator: validator)
        let expectation = RangeExpectation(range: range, total: file.size, validator: validator)
        var sinkError: LabstreamError?
        var outcome: Result<Fetched, FetchFailure>
        // Long bodies are committed in checkpoints as they arrive, so a crash or a dropped
        // connection loses a checkpoint or two (`CheckpointCommitter`), not the whole segment.
        let checkpointBytes = engine.settings.checkpointBytes
        // A whole-file stream passes over the durable prefix again: those bytes are not written.
        let prefix = condition.withLock { row.attempt == attempt ? row.present.contiguousLength(from: 0) : 0 }
        var checkpointStart = range.lower == 0 && range.upper == file.size ? min(prefix, range.upper) : range.lower
        var received: Int64 = 0
        var writtenBack = checkpointStart
        // Whether readers may have this answer's bytes before they are committed: only when it
        // carries the attempt's validator (pinned here by the first answer), so no reader can
        // be served two versions of the file.
        var servable: Bool?
        var answerValidator: Validator?
        let checkpoints = CheckpointCommitter(queueBehindSync: !background) { [self] c throws(LabstreamError) in
            try partial.sync()
            // The response's validator is pinned with its first committed bytes.
            guard commit(c.piece, digest: c.digest, validator: c.validator, attempt: attempt, engine: engine) else {
                throw .remoteChanged("a newer attempt replaced this one")
            }
        }
        engine.activeFetches.withLock { $0 += 1 }
        defer {
            engine.activeFetches.withLock { $0 -= 1 }
            engine.fetchesEnded.withLock { engine.fetchesEnded.broadcast() }
        }
        let rate = engine.rateShare()
        let started = Date()
        // The body's pieces are gathered and written together, when `BodyCoalescing` says.
        let body = GatheredBody(at: checkpointStart)
        /// Writes gathered bytes unless a newer attempt owns the file.
        func writeUnlessStale(_ bytes: UnsafeRawBufferPointer, at offset: Int64) throws(LabstreamError) {
            writeGate.lock()
            defer { writeGate.unlock() }
            guard writableAttempt == attempt else { throw .remoteChanged("a newer attempt replaced this one") }
            try partial.write(bytes, at: offset)
        }
        /// Writes what was gathered, then lets readers have it, starts its writeback and submits
        /// a checkpoint when one is due. A failure is the body's (`sinkError`).
        func writeGathered(_ seen: Validator?) throws(LabstreamError) {
            do throws(LabstreamError) { try writeGatheredBytes(seen) } catch {
                sinkError = error
                throw error
            }
        }
        func writeGatheredBytes(_ seen: Validator?) throws(LabstreamError) {
            guard let piece = try body.flush(writeUnlessStale) else { return }
            condition.lock()
            if servable == nil {
                guard row.attempt == attempt else {
                    condition.unlock()
                    throw .remoteChanged("a newer attempt replaced this one")
                }
                if row.validator == nil { row.validator = seen }
                servable = row.validator == seen
            }
            if servable == true && row.attempt == attempt {
                written.insert(piece)
                if waitingFor.contains(where: { $0.overlaps(piece) }) { condition.broadcast() }
            }
            condition.unlock()
            if piece.upper - writtenBack >= 1 << 20 {
                partial.startWriteback(ByteRange(max(writtenBack, checkpointStart), piece.upper))
                writtenBack = piece.upper
            }
            if piece.upper - checkpointStart >= checkpointBytes && piece.upper < range.upper {
                try checkpoints.submit(.init(piece: ByteRange(checkpointStart, piece.upper), digest: body.takeDigest(), validator: seen))
                checkpointStart = piece.upper
            }
        }
        /// What a whole answer that reached the end of the transport comes to.
        func judged(_ result: RangeTransferResult) -> Result<Fetched, FetchFailure> {
            switch result.verdict {
            case .accept(let seen, _) where result.bytesWritten == range.count:
                do {
                    try partial.sync()
                    return .success(Fetched(validator: seen, received: range.upper - checkpointStart, digest: body.takeDigest()))
                } catch {
                    return .failure(FetchFailure(error: error, kind: .localFile))
                }
            case .accept:
                return .failure(FetchFailure(error: .fetchFailed("the connection ended after \(result.bytesWritten) of \(range.count) bytes"),
                                             kind: .transientTransport))
            case .remoteChanged(let why):
                return .failure(FetchFailure(error: .remoteChanged(why), kind: .validation))
            case .restart(let why):
                return .failure(FetchFailure(error: .remoteChanged(why), kind: .validation, rangeIgnored: true))
            case .acceptPrefix:
                // The transport reports a finished prefix as `accept`; one cut short is a drop.
                return .failure(FetchFailure(error: .fetchFailed("the connection ended after \(result.bytesWritten) of \(range.count) bytes"),
                                             kind: .transientTransport))
            case .reject(_) where result.status == 401:
                return .failure(afterUnauthorized(backend: backend, engine: engine))
            case .reject(let why):
                let retried = RetryPolicy.retriedStatuses.contains(result.status)
                return .failure(FetchFailure(
                    error: retried ? .serverUnavailable("HTTP \(result.status)") : .fetchFailed(why),
                    kind: retried ? .status(result.status, retryAfter: result.retryAfter) : .validation))
            }
        }
        do {
            let result = try backend.transport.fetchRange(request, expectation: expectation) { bytes, offset, seen in
                if rate > 0 {
                    // Pace the body to this transfer's share of the rate limit.
                    let due = Double(received) / Double(rate) - Date().timeIntervalSince(started)
                    if due > 0 { usleep(useconds_t(min(due, 1) * 1_000_000)) }
                }
                if engine.stopping.load(ordering: .relaxed) {
                    try? writeGathered(seen)   // what arrived before the stop is kept
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
                let write = condition.withLock { () -> Bool in
                    let waiting = waitingFor.filter { $0.overlaps(pending) }
                    return BodyCoalescing.mustWrite(pending: pending, checkpointDue: checkpointDue,
                                                    readable: waiting.isEmpty ? row.present : readable, waiting: waiting)
                }
                if write { try writeGathered(seen) }
            }
            try? writeGathered(answerValidator)
            outcome = sinkError.map { .failure(FetchFailure(error: $0, kind: .localFile)) } ?? judged(result)
        } catch {
            // A body cut short keeps what arrived (a stale attempt's bytes are refused here too).
            if sinkError == nil { try? writeGathered(answerValidator) }
            if let sinkError {
                outcome = .failure(FetchFailure(error: sinkError, kind: .localFile))
            } else {
                if case .unreachable = error { engine.markUnreachable(file.key.server) }
                let transport = error.asLabstreamError
                outcome = .failure(FetchFailure(error: transport, kind: .transientTransport))
            }
        }
        // Every checkpoint is in before the body is finished, so nothing of it is planned again meanwhile.
        if let failed = checkpoints.finish() { outcome = .failure(FetchFailure(error: failed, kind: .localFile)) }
        if case .failure = outcome, body.writtenUpTo > checkpointStart {
            // Cut short (a drop, a stall, the daemon stopping): what arrived is the answer's own,
            // already judged and possibly read, so it is kept. The attempt check refuses stale bytes.
            let arrived = ByteRange(checkpointStart, body.writtenUpTo)
            if (try? partial.sync()) != nil,
               commit(arrived, digest: body.takeDigest(), validator: answerValidator, attempt: attempt, engine: engine) {
                checkpointStart = arrived.upper
            }
        }
        let remainder = ByteRange(checkpointStart, range.upper)
        finish(range, remainder: remainder, attempt: attempt, generation: generation, background: background, outcome: outcome, engine: engine)
    }

    /// A 401 for bytes: the stored sign-in is checked again once (a server may drop a session and
    /// still accept the token); if it holds, the fetch is retried, else the file fails with what
    /// to do and the server is marked auth-failed.
    func afterUnauthorized(backend: any MediaBackend, engine: TransferEngine) -> FetchFailure {
        let first = condition.withLock { () -> Bool in
            defer { authRechecked = true }
            return !authRechecked
        }
        if first && backend.checkReachability() == .online {
            engine.log("\(file.path.joined(separator: "/")): HTTP 401, but the stored sign-in still holds; trying again")
            return FetchFailure(error: .serverUnavailable("HTTP 401"), kind: .transientTransport)
        }
        engine.markUnreachable(file.key.server, .authFailed)
        return FetchFailure(error: .authenticationFailed(StatusReason.signInRefused(server: file.key.server)),
                            kind: .validation)
    }

    /// Commits `piece` (durable already) if the assembly policy accepts it: range map and digest
    /// in one index transaction. Returns false when the attempt is no longer current.
    func commit(_ piece: ByteRange, digest: String, validator: Validator?, attempt: AttemptID, engine: TransferEngine) -> Bool {
        condition.lock()
        defer {
            condition.broadcast()
            condition.unlock()
        }
        return commitLocked(piece, digest: digest, validator: validator, attempt: attempt, engine: engine)
    }

    /// Call with `condition` held.
    @discardableResult
    func commitLocked(_ piece: ByteRange, digest: String, validator: Validator?, attempt: AttemptID, engine: TransferEngine) -> Bool {
        let decision = AssemblyPolicy.decide(.init(planned: piece, received: piece.count, attempt: attempt),
                                             durable: row.present, currentAttempt: row.attempt, total: row.total)
        guard case .commit(let committed) = decision else {
            if case .discard(let why) = decision { engine.log("discarded bytes \(piece) of \(file.key): \(why)") }
            return attempt == row.attempt
        }
        if let pinned = row.validator, let validator, pinned != validator {
            // Two responses of one attempt from different versions of the file: never mix them.
            restart(why: "validator changed from \(pinned.headerValue) to \(validator.headerValue)", engine: engine)
            return false
        }
        var next = row
        next.present.insert(committed)
        // Another transfer object for this file (one evicted while a reader still held it)
        // may have committed ranges of the same attempt meanwhile: keep them.
        if let stored = try? index.download(row.key), stored.attempt == row.attempt {
            next.present.formUnion(stored.present)
        }
        if next.validator == nil { next.validator = validator }
        if next.present.contains(ByteRange(0, next.total)) {
            next.status = next.status.after(.allBytesPresent) ?? next.status
            next.awaitingValidation = true
            next.reason = engine.settings.playbackProbe ? StatusReason.awaitingValidation : StatusReason.probeOff
        } else {
            next.status = next.status.after(.bytesCommitted) ?? next.status
        }
        // Every byte present and checked: an identity that lets the next run trust the copy.
        var checkedNow = verified
        checkedNow.insert(committed)
        next.checked = checkedWhole(next, checkedNow) ? partial.identity() : nil
        do {
            try index.saveDownload(next, committing: .init(range: committed, digest: digest), now: engine.now())
            row = next
            verified.insert(committed)
            written.remove(committed)   // durable now: kept in `present`
            consecutiveFailures = 0
            engine.noteChange()
            if next.awaitingValidation {
                engine.validation.wake()
                if DerivedCopy.parse(row.key) != nil { engine.filler.wake() }   // its server job can be closed
            }
        } catch {
            // The bytes are on disk but not recorded: they will be fetched again, never trusted.
            sequence += 1
            failures.append((sequence, piece, error, .localFile))
            engine.log("\(file.key): \(error.userMessage)")
            if case .noSpace = error { setStatus(.paused, reason: StatusReason.storageFull, engine: engine) }
        }
        return true
    }

    func finish(_ range: ByteRange, remainder: ByteRange, attempt: AttemptID, generation: Int, background: Bool,
                outcome: Result<Fetched, FetchFailure>, engine: TransferEngine) {
        condition.lock()
        defer {
            condition.broadcast()
            condition.unlock()
            if background { engine.filler.wake() }
            engine.noteChange()
        }
        if let i = requestsInFlight.firstIndex(of: range) { requestsInFlight.remove(at: i) }
        if let i = fillInFlight.firstIndex(of: range) { fillInFlight.remove(at: i) }
        sequence += 1
        switch outcome {
        case .failure(let failure) where failure.rangeIgnored:
            guard attempt == row.attempt, !ignoresRange else { return }
            // Its body was not written. A new attempt fetches the whole file from byte 0, and
            // the readers waiting now wait for that stream instead of failing.
            engine.log("\(file.path.joined(separator: "/")): the server ignores Range; fetching the whole file from its start")
            ignoresRange = true
            restart(why: failure.error.userMessage, engine: engine, counted: false)
        case .success(let fetched):
            if fetched.received > 0 || !remainder.isEmpty {
                commitLocked(remainder, digest: fetched.digest, validator: fetched.validator, attempt: attempt, engine: engine)
            }
            if attempt == row.attempt && !row.present.contains(range) {
                failures.append((sequence, range, .fetchFailed("the response could not be used"), .validation))
            }
        case .failure(let failure):
            let error = failure.error
            guard attempt == row.attempt else { return }
            failures.append((sequence, range, error, failure.kind))
            if failures.count > 64 { failures.removeFirst(failures.count - 64) }
            engine.log("fetch of bytes \(range) of \(file.path.joined(separator: "/")) failed: \(error.userMessage)")
            // Started before the user's last resume or retry: it cannot fail the fresh dispatch.
            guard generation == self.generation else { return }
            switch error {
            case .remoteChanged(let why):
                restart(why: why, engine: engine)
            case .noSpace:
                setStatus(.paused, reason: StatusReason.storageFull, engine: engine)
            default:
                if background || row.pinned { scheduleRetry(after: failure, engine: engine) }
            }
        }
    }

    /// The file changed on the server: its old bytes belong to another version. A new attempt
    /// starts from nothing; in-flight bodies of the old one can no longer write. Call with
    /// `condition` held.
    func restart(why: String, engine: TransferEngine, counted: Bool = true) {
        writeGate.lock()
        writableAttempt = row.attempt.next
        writeGate.unlock()
        if counted { consecutiveFailures += 1 }
        // Only a new version starts without a validator: after a server that ignores Range the
        // whole-file stream must still be the version the bytes so far were (If-Range).
        row = DownloadRow(key: row.key, status: row.pinned ? .queued : .partial, attempt: row.attempt.next, validator: counted ? nil : row.validator,
                          total: row.total, present: RangeSet(), partialPath: row.partialPath,
                          reason: counted ? StatusReason.fileChanged(why, refetching: false) : why, pinned: row.pinned, sourceTag: file.etag, job: row.job)
        verified = RangeSet()
        written = RangeSet()
        // The old version's bytes go; a descriptor still reading them directly keeps them whole.
        if (try? partial.discardAll()) == nil { engine.log("\(file.path.last ?? ""): could not free the old version's bytes") }
        if consecutiveFailures >= engine.settings.retry.maxAttempts {
            row.status = row.pinned ? .failed : .partial
            row.reason = StatusReason.keepsChanging(why)
        }
        _ = try? index.saveDownload(row, now: engine.now())
    }

    /// A pinned file never ends `failed` on a transient failure: it waits, `queued` with the
    /// reason and the next try, with capped backoff. Call with `condition` held.
    func scheduleRetry(after failure: FetchFailure, engine: TransferEngine) {
        consecutiveFailures += 1
        switch engine.settings.retry.decide(failure.kind, failures: consecutiveFailures, now: Date().timeIntervalSince1970, random: Double.random(in: 0...1),
                                            persistent: row.pinned) {
        case .retry(let delay):
            retryAt = Date().addingTimeInterval(delay)
            engine.log("\(file.path.last ?? ""): retrying in \(String(format: "%.1f", delay)) s (failure \(consecutiveFailures))")
            if row.pinned { setStatus(.queued, reason: StatusReason.waitingForServer(failure.error, retryIn: delay), engine: engine) }
        case .giveUp:
            setStatus(.failed, reason: failure.error.userMessage, engine: engine)
        }
    }
}
