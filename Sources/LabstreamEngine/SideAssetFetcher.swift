import Foundation
import LabstreamBackends
import LabstreamCore
import LabstreamStore
import Synchronization

/// Fetches the artwork and subtitles of pinned files and, with `side_assets = all`, of folders
/// listed while their server answers: a few per pass, each checked (`SideAssetCheck`) and stored
/// durably (write, fdatasync, rename, then the index row) before its name appears. A bad payload
/// is retried later and never shown. An asset goes when every media file it belongs with has been
/// evicted or cancelled, never before. Runs on its own thread.
public final class SideAssetFetcher: Sendable {
    let engine: any SideAssetHost
    let mode: LabstreamConfig.SideAssets
    let worker = Worker(name: "side-assets")
    /// Assets fetched per pass before the tree is told; then the next pass.
    static let perPass = 4
    /// Bytes an asset may have (a poster is well below; a bigger answer is not artwork).
    static let largest = 32 << 20

    struct State {
        var planned: [SideAssetKey: PlannedAsset] = [:]
        /// Folder → the assets planned in it (a listing looks here, never through them all).
        var inDirectory: [[String]: [SideAssetKey]] = [:]
        /// Media file → the assets that belong with it (status is asked per file).
        var byOwner: [FileKey: [SideAssetKey]] = [:]
        /// Asked for again by `verify`: fetched anew at the next pass whatever their tag.
        var forced: Set<SideAssetKey> = []
        var rows: [SideAssetKey: OfflineIndex.SideAssetRow] = [:]
        /// Folders listed while `all` is on (by their path's hash: a walk of 100 000 folders
        /// kept every path here): their assets are wanted though nothing is pinned.
        var listed: Set<Int> = []
        /// The tree last planned (planned again when an item's extras arrive).
        var tree: [TreeFile] = []
        /// Items whose server tells more on their own route (`ItemExtrasSource`) and has not been
        /// asked at their current version; and when one that failed may be asked again.
        var extrasDue: [ItemRef: ExtrasCandidate] = [:]
        var extrasRetry: [ItemRef: Date] = [:]
        var extrasIn: Set<[String]> = []
        /// The films and episodes of servers whose extras come with a download entry
        /// (`extrasNeedEntry`): due once the item has one, at the entry's revision.
        var entryItems: [ItemRef: ExtrasCandidate] = [:]
        /// Items whose server has told its extras at some version.
        var extrasKnown: Set<ItemRef> = []
        /// Why the last ask of an item failed (it is asked again later).
        var extrasFailed: [ItemRef: String] = [:]
    }

    struct ItemRef: Hashable {
        var server: String
        var itemId: String
    }

    struct ExtrasCandidate {
        /// The item's download entry, for a server that tells extras through it. Boxed: a
        /// candidate is kept for every film and episode of such a server (Silo), where an absent
        /// entry inline was 140 bytes of each, about 35 MiB at 100 000 items, held at rest.
        var entry: ManagedEntry? {
            get { boxedEntry.first }
            set { boxedEntry = newValue.map { [$0] } ?? [] }
        }
        var boxedEntry: [ManagedEntry] = []
        /// The item's version (`modified`) the answer is kept for.
        var tag: String
        var directory: [String]
        var owners: [FileKey]
    }
    private let state = Mutex(State())
    private let storedHook = Hook<@Sendable () -> Void>()
    /// Worker thread only: a change not yet announced, and when the last announcement was (the
    /// tree is rebuilt at most once a second however fast assets arrive).
    private let announced = Mutex<(pending: Bool, at: Date)>((false, .distantPast))

    public convenience init(engine: TransferEngine, mode: LabstreamConfig.SideAssets) { self.init(host: engine, mode: mode) }

    init(host engine: any SideAssetHost, mode: LabstreamConfig.SideAssets) {
        self.engine = engine
        self.mode = mode
    }

    /// Told when a pass stored or dropped something, so the tree shows it.
    public func onChange(_ body: @escaping @Sendable () -> Void) { storedHook.set(body) }

    public func start() {
        guard mode != .off else { return }
        // A decode check cut short by a stop leaves its scratch copy behind.
        for name in (try? FileManager.default.contentsOfDirectory(atPath: engine.layout.sideAssetsDir)) ?? [] where name.hasPrefix(".decode-") {
            unlink(engine.layout.sideAssetsDir + "/" + name)
        }
        worker.start { [self] _ in pass() }
    }

    public func stop() { worker.stop() }

    /// Something was pinned: its assets are due.
    public func wake() { worker.wake() }

    /// Plans the assets of `tree` from the index and returns the stored ones as tree files.
    /// `catalogs`: each server's `catalog(server:)`, when the caller has read it already (a
    /// library's catalog is the largest thing a reload reads).
    public func replan(tree: [TreeFile], catalogs: [String: [LibraryCatalog]] = [:]) -> [GeneratedFile] {
        guard mode != .off else { return [] }
        var planned: [SideAssetKey: PlannedAsset] = [:]
        var extrasDue: [ItemRef: ExtrasCandidate] = [:], entryItems: [ItemRef: ExtrasCandidate] = [:], extrasKnown: Set<ItemRef> = []
        for (server, files) in TreeFile.byServer(tree) {
            let extras = (try? engine.index.itemExtras(server: server)) ?? [:]
            let libraries = catalogs[server] ?? catalog(server: server, extras: extras)
            for p in SideAssetPlan.plan(tree: files, libraries: libraries) { planned[p.key] = p }
            guard let source = engine.backend(for: server) as? any ItemExtrasSource else { continue }
            extrasKnown.formUnion(extras.keys.map { ItemRef(server: server, itemId: $0) })
            let filesOf = Dictionary(grouping: files.lazy.filter { DerivedCopy.parse($0.key) == nil }, by: \.key.itemId)
            for library in libraries {
                for item in library.items where item.kind == .movie || item.kind == .episode {
                    let tag = String(item.modified)
                    guard let mine = filesOf[item.id], let first = mine.first else { continue }
                    let candidate = ExtrasCandidate(tag: tag, directory: Array(first.path.dropLast()), owners: mine.map(\.key))
                    if source.extrasNeedEntry {
                        entryItems[ItemRef(server: server, itemId: item.id)] = candidate
                    } else if extras[item.id]?.tag != tag {
                        extrasDue[ItemRef(server: server, itemId: item.id)] = candidate
                    }
                }
            }
        }
        let rows = Dictionary(((try? engine.index.sideAssets()) ?? []).map { ($0.key, $0) }, uniquingKeysWith: { a, _ in a })
        var inDirectory: [[String]: [SideAssetKey]] = [:]
        for p in planned.values { for d in p.directories { inDirectory[d, default: []].append(p.key) } }
        var byOwner: [FileKey: [SideAssetKey]] = [:]
        for p in planned.values.sorted(by: { $0.stem < $1.stem }) { for owner in p.owners { byOwner[owner, default: []].append(p.key) } }
        state.withLock { s in
            s.planned = planned
            s.inDirectory = inDirectory
            s.byOwner = byOwner
            s.rows = rows
            s.tree = tree
            s.extrasDue = extrasDue
            s.extrasIn = Set(extrasDue.values.map(\.directory))
            s.entryItems = entryItems
            s.extrasKnown = extrasKnown
        }
        worker.wake()
        // One stored copy behind each of its names (a season poster's two): read from the same bytes.
        // No server dates its artwork or subtitles apart from their item: each carries the newest
        // date of the files it belongs with, so a folder's newest file is its newest date.
        // Found where the tree has them (each key once: a row of the index each), and only when
        // something is stored: a dictionary of every file's date was 21 MiB at 100 000 files, at
        // the peak of the rebuild after a sync.
        guard planned.values.contains(where: { rows[$0.key]?.state == .stored }) else { return [] }
        let files = TreeFileLookup(tree)
        return planned.values.flatMap { p -> [GeneratedFile] in
            guard let row = rows[p.key], row.state == .stored, let file = row.file, let ext = row.fileExtension else { return [] }
            let modified = p.owners.compactMap { files[$0]?.modified }.max() ?? 0
            return p.paths(extension: ext).map { GeneratedFile(path: $0, storedAt: engine.layout.absolute(file), size: row.size, modified: modified) }
        }.sorted { $0.path.lexicographicallyPrecedes($1.path) }
    }

    /// `server`'s catalog from the index as the side files need it (`CatalogRead.sideFiles`) with
    /// what it told item by item added (`extras`, read from the index when not given).
    public func catalog(server: String, extras: [String: (tag: String, details: ItemDetails?)]? = nil) -> [LibraryCatalog] {
        let libraries = (try? engine.index.catalog(server: server, reading: .sideFiles)) ?? []
        let told = (extras ?? (try? engine.index.itemExtras(server: server)) ?? [:]).compactMapValues(\.details)
        return libraries.map { $0.adding(extras: told) }
    }

    /// Asks the server of each wanted item that has more to tell on its own route, a few per
    /// pass: whether something was learnt (the assets are then planned again), whether an ask
    /// failed, and whether more are wanted than one pass asks.
    func askExtras(pinned: Set<FileKey>) -> (learnt: Bool, failed: Bool, more: Bool) {
        let now = Date()
        var (due, listed, retry, entryItems) = state.withLock { ($0.extrasDue, $0.listed, $0.extrasRetry, $0.entryItems) }
        // An item with a download entry is wanted (it is pinned); its extras are due at each new
        // revision, once the entry is ready (a copy the server is still preparing has no manifest yet).
        for server in Set(entryItems.keys.map(\.server)) where engine.reachability(of: server) == .online {
            let told = (try? engine.index.itemExtras(server: server)) ?? [:]
            for (itemId, entry) in (try? engine.index.managedEntries(server: server)) ?? [:] where entry.servable {
                let ref = ItemRef(server: server, itemId: itemId)
                guard let id = entry.id, var candidate = entryItems[ref] else { continue }
                candidate.tag += "/\(id)@\(entry.revision)"
                candidate.entry = entry
                if told[itemId]?.tag != candidate.tag { due[ref] = candidate }
            }
        }
        let wanted = due.filter { ref, c in
            (c.entry != nil || c.owners.contains { pinned.contains($0) } || (mode == .all && listed.contains(c.directory.hashValue)))
                && (retry[ref] ?? .distantPast) <= now && engine.reachability(of: ref.server) == .online
        }.sorted { ($0.key.server, $0.key.itemId) < ($1.key.server, $1.key.itemId) }
        var learnt = false, failed = false
        for (ref, candidate) in wanted.prefix(Self.perPass) {
            guard let backend = engine.backend(for: ref.server) as? any ItemExtrasSource else { continue }
            do {
                let extras = try backend.extras(of: ref.itemId, entry: candidate.entry)
                try engine.index.saveItemExtras(server: ref.server, itemId: ref.itemId, tag: candidate.tag, details: extras)
                state.withLock { s in
                    s.extrasDue[ref] = nil
                    s.extrasRetry[ref] = nil
                    s.extrasFailed[ref] = nil
                    s.extrasKnown.insert(ref)
                }
                learnt = true
            } catch {
                // Asked again in ten minutes; the rest of what belongs beside it is fetched meanwhile.
                state.withLock { s in
                    s.extrasRetry[ref] = now.addingTimeInterval(600)
                    s.extrasFailed[ref] = error.userMessage
                }
                engine.log("asking \(ref.server) for the subtitles and chapters of item \(ref.itemId) failed: \(error.userMessage); asking again later")
                failed = true
            }
        }
        return (learnt, failed, wanted.count > Self.perPass)
    }

    /// A folder was listed: with `all`, its assets are fetched (in the background).
    public func listed(_ directory: [String]) {
        guard mode == .all else { return }
        let new = state.withLock { s in
            guard s.listed.insert(directory.hashValue).inserted else { return false }
            return (s.inDirectory[directory] ?? []).contains { s.rows[$0]?.state != .stored } || s.extrasIn.contains(directory)
        }
        if new { worker.wake() }
    }

    /// What is stored, missing or failed beside `file`: `(name, state, reason)`.
    public func status(of file: FileKey) -> [SideAssetStatus] {
        // A copy at a quality has its original's artwork and subtitles.
        let file = DerivedCopy.parse(file)?.base ?? file
        return state.withLock { s in
            // What the server tells only item by item is not known yet: it may name more.
            let ref = ItemRef(server: file.server, itemId: file.itemId)
            let asking: [SideAssetStatus] =
                s.extrasDue[ref] != nil || (s.entryItems[ref] != nil && !s.extrasKnown.contains(ref))
                ? [SideAssetStatus(name: Self.askingName, state: s.extrasFailed[ref] == nil ? .missing : .failed, reason: s.extrasFailed[ref])] : []
            return asking
                + (s.byOwner[file] ?? []).compactMap { key in
                    guard let p = s.planned[key] else { return nil }
                    let row = s.rows[key]
                    let name = p.stem + "." + (row?.fileExtension ?? p.fileExtension ?? "…")
                    switch row?.state {
                    case .stored?: return SideAssetStatus(name: name, state: .stored)
                    case .failed?: return SideAssetStatus(name: name, state: .failed, reason: row?.reason?.sentence, code: row?.reason?.code)
                    case nil: return SideAssetStatus(name: name, state: .missing)
                    }
                }
        }
    }

    /// Stands for what a server tells item by item (Plex, Silo) until it has been asked.
    public static let askingName = "(subtitles and artwork, asking the server)"

    /// `labstream verify` on media files: their stored assets are checked again on disk (a
    /// damaged or vanished one is dropped), and every one of them is fetched anew at the next
    /// pass while the server answers, so a changed poster or a new subtitle arrives without
    /// touching the media. Bytes already stored stay shown until new ones pass.
    public func verify(_ files: [FileKey]) {
        let owned: [(PlannedAsset, OfflineIndex.SideAssetRow?)] = state.withLock { s in
            files.flatMap { s.byOwner[$0] ?? [] }.compactMap { key in s.planned[key].map { ($0, s.rows[key]) } }
        }
        guard !owned.isEmpty else { return }
        var dropped = false
        for (p, row) in owned {
            guard let row, row.state == .stored, let file = row.file else { continue }
            let bytes = FileManager.default.contents(atPath: engine.layout.absolute(file)).map { [UInt8]($0) }
            if let bytes, bytes.count == row.size, case .keep = SideAssetCheck.judge(bytes, as: p) { continue }
            engine.log(
                "side asset \((p.directory + [p.stem]).joined(separator: "/")): the stored copy is \(bytes == nil ? "gone" : "damaged"); fetching it again")
            drop(row)
            dropped = true
        }
        state.withLock { s in s.forced.formUnion(owned.map(\.0.key)) }
        if dropped { announced.withLock { $0.pending = true } }
        worker.wake()
    }

    /// One pass: drop the assets whose media all went, then fetch what is wanted and missing or
    /// changed on the server, a few at a time.
    func pass() -> Date? {
        // A pinned copy at a quality wants what belongs beside its original.
        let pinned = Set(((try? engine.index.downloads()) ?? []).filter(\.pinned).flatMap { [$0.key] + [DerivedCopy.parse($0.key)?.base].compactMap { $0 } })
        let extras = askExtras(pinned: pinned)
        if extras.learnt {
            _ = replan(tree: state.withLock { $0.tree })
            announced.withLock { $0.pending = true }  // the chapters it told show on the files
        }
        let now = Int64(Date().timeIntervalSince1970)
        let (planned, rows, listed, forced) = state.withLock { ($0.planned, $0.rows, $0.listed, $0.forced) }
        var changed = false
        // An item gone from the catalog takes its assets with it.
        for (key, row) in rows where planned[key] == nil && !planned.isEmpty {
            drop(row)
            changed = true
        }
        var due: [PlannedAsset] = []
        var next: Date?
        for p in planned.values.sorted(by: { $0.key.description < $1.key.description }) {
            let row = rows[p.key]
            // One stored at an older tag is fetched anew (a new poster on the server) whoever wanted it.
            let asked = forced.contains(p.key)
            let inListed = mode == .all && p.directories.contains { listed.contains($0.hashValue) }
            let wanted = asked || p.owners.contains { pinned.contains($0) } || inListed || row?.state == .stored
            guard wanted, engine.reachability(of: p.server) == .online else { continue }
            if !asked, row?.state == .stored && row?.tag == p.asset.tag { continue }
            if !asked, let row, row.state == .failed, row.tag == p.asset.tag, row.retryAt > now {
                next = min(next ?? .distantFuture, Date(timeIntervalSince1970: TimeInterval(row.retryAt)))
                continue
            }
            due.append(p)
        }
        for p in due.prefix(Self.perPass) {
            if fetch(p, previous: rows[p.key]) { changed = true }
            state.withLock { _ = $0.forced.remove(p.key) }
            // A follower (`pin --wait`, `status --watch`) hears of every try, stored or failed.
            engine.noteChange()
        }
        if changed { announced.withLock { $0.pending = true } }
        // What is beside a copy moved (stored, failed, dropped, or its server asked): a managed
        // copy's completion held for it is looked at again now, not when the tree next reloads.
        if changed || !due.isEmpty || extras.learnt || extras.failed { engine.sideAssetsChanged() }
        if let at = announce() { next = min(next ?? at, at) }
        if due.count > Self.perPass || extras.more { return Date() }
        // Entries are made on paths that do not all wake this worker (monitors, adopted entries):
        // a server whose extras come with them is looked at again every few seconds.
        if !state.withLock({ $0.entryItems.isEmpty }) { next = min(next ?? .distantFuture, Date().addingTimeInterval(5)) }
        return next
    }

    /// Tells the tree of changes, unless it was told less than a second ago: then when to.
    func announce() -> Date? {
        let now = Date()
        let due: Date? = announced.withLock { a in
            guard a.pending else { return nil }
            if now.timeIntervalSince(a.at) < 1 { return a.at.addingTimeInterval(1) }
            a = (false, now)
            return .distantPast
        }
        guard let due else { return nil }
        if due == .distantPast {
            storedHook.function?()
            return nil
        }
        return due
    }

    /// Fetches, checks and stores one asset; true when it now shows (or changed).
    func fetch(_ p: PlannedAsset, previous: OfflineIndex.SideAssetRow?) -> Bool {
        let failure: SideAssetFailure
        switch download(p) {
        case .keep(let bytes, let ext):
            guard p.asset.kind != .subtitle, let why = undecodable(bytes, extension: ext) else {
                return store(p, bytes: bytes, extension: ext, previous: previous)
            }
            failure = why
        case .reject(let why): failure = why
        }
        let attempts = (previous?.tag == p.asset.tag ? previous?.attempts ?? 0 : 0) + 1
        // A minute, doubling to a day: a bad payload is tried again later, never shown.
        let wait = Int64(min(60 << min(attempts - 1, 10), 86_400))
        var row =
            previous
            ?? OfflineIndex.SideAssetRow(
                key: p.key, state: .failed, tag: nil, file: nil, fileExtension: nil, size: 0, reason: nil,
                attempts: 0, retryAt: 0)
        // Bytes stored at an older tag stay shown until new ones pass.
        if row.state != .stored { row.state = .failed }
        row.reason = failure
        row.attempts = attempts
        row.retryAt = Int64(Date().timeIntervalSince1970) + wait
        if row.state == .failed { row.tag = p.asset.tag }
        try? engine.index.saveSideAsset(row)
        state.withLock { $0.rows[p.key] = row }
        engine.log("side asset \((p.directory + [p.stem]).joined(separator: "/")): \(failure.sentence); trying again in \(wait) s")
        return false
    }

    /// Why an image whose bytes look right does not decode (the playback probe's helper decodes
    /// it, when the probe is on); nil when it decodes, or cannot be proven either way.
    func undecodable(_ bytes: [UInt8], extension ext: String) -> SideAssetFailure? {
        guard engine.playbackProbe else { return nil }
        let scratch = engine.layout.sideAssetsDir + "/.decode-\(UUID().uuidString).\(ext)"
        do {
            try FileManager.default.createDirectory(atPath: engine.layout.sideAssetsDir, withIntermediateDirectories: true)
            guard FileManager.default.createFile(atPath: scratch, contents: Data(bytes), attributes: [.posixPermissions: 0o600]) else { return nil }
        } catch { return nil }
        defer { unlink(scratch) }
        if case .failed(let why) = ProbeVerdict.judge(PlaybackProbe.observe(path: scratch, expecting: .image), expecting: .image, serverFormat: ext) {
            return .doesNotDecode(why)
        }
        return nil
    }

    /// The asset's bytes from its server, checked; or why not.
    func download(_ p: PlannedAsset) -> SideAssetCheck.Verdict {
        guard let backend = engine.backend(for: p.server) as? any SideAssetSource, var request = backend.assetRequest(p) else {
            return .reject(.noRoute)
        }
        request.bodyLimit = Self.largest
        do {
            let answer = try backend.transport.call(request)
            switch answer.status {
            case 200: return SideAssetCheck.judge(answer.body, as: p)
            case 401, 403: return .reject(.signInRefused(status: answer.status))
            case 404: return .reject(.notOnServer)
            default: return .reject(.httpStatus(answer.status))
            }
        } catch {
            return .reject(.requestFailed(error.userMessage))
        }
    }

    func store(_ p: PlannedAsset, bytes: [UInt8], extension ext: String, previous: OfflineIndex.SideAssetRow?) -> Bool {
        let relative = engine.layout.sideAssetRelativePath(for: p.key, extension: ext)
        let path = engine.layout.absolute(relative)
        do {
            try FileManager.default.createDirectory(atPath: engine.layout.sideAssetsDir, withIntermediateDirectories: true)
            try Self.writeDurably(bytes, to: path)
        } catch {
            engine.log("storing side asset \((p.directory + [p.stem]).joined(separator: "/")) failed: \(error); trying again later")
            return false
        }
        let row = OfflineIndex.SideAssetRow(
            key: p.key, state: .stored, tag: p.asset.tag, file: relative, fileExtension: ext, size: Int64(bytes.count),
            reason: nil, attempts: 0, retryAt: 0)
        do { try engine.index.saveSideAsset(row) } catch {
            engine.log(error.userMessage)
            return false
        }
        // The same asset named by other bytes (a poster now PNG): the old file goes.
        if let old = previous?.file, old != relative { unlink(engine.layout.absolute(old)) }
        state.withLock { $0.rows[p.key] = row }
        return true
    }

    /// `key`'s media was evicted or cancelled: the assets that belong with it and with no other
    /// media still here go too.
    public func mediaDropped(_ key: FileKey) {
        let owned = state.withLock { s in s.planned.values.filter { $0.owners.contains(key) } }
        guard !owned.isEmpty else { return }
        // Only the few other owners' rows are read: an eviction pass drops many files in a row.
        func kept(_ owner: FileKey) -> Bool { ((try? engine.index.download(owner)) ?? nil).map { $0.pinned || $0.present.byteCount > 0 } ?? false }
        var dropped = false
        for p in owned {
            guard !p.owners.contains(where: { $0 != key && kept($0) }),
                let row = state.withLock({ $0.rows[p.key] })
            else { continue }
            drop(row)
            dropped = true
        }
        state.withLock { s in for p in owned { for d in p.directories { s.listed.remove(d.hashValue) } } }
        if dropped {
            announced.withLock { $0.pending = true }
            worker.wake()
        }
    }

    func drop(_ row: OfflineIndex.SideAssetRow) {
        do { try engine.index.removeSideAsset(row.key) } catch {
            engine.log(error.userMessage)
            return
        }
        if let file = row.file { unlink(engine.layout.absolute(file)) }
        state.withLock { _ = $0.rows.removeValue(forKey: row.key) }
    }

    /// Write to a temporary name, fdatasync, rename over, fsync the directory: a crash leaves
    /// the old file or the new one, never a torn one.
    static func writeDurably(_ bytes: [UInt8], to path: String) throws {
        let temporary = path + ".tmp"
        let fd = open(temporary, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600)
        guard fd >= 0 else { throw SyscallError(function: "open", context: temporary, code: errno) }
        do {
            try bytes.withUnsafeBytes { try pwriteAll(fd, $0, at: 0, context: temporary) }
            _ = try syscall("fdatasync", temporary) { fdatasync(fd) }
            close(fd)
        } catch {
            close(fd)
            unlink(temporary)
            throw error
        }
        _ = try syscall("rename", path) { rename(temporary, path) }
        let dir = open((path as NSString).deletingLastPathComponent, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        if dir >= 0 {
            fsync(dir)
            close(dir)
        }
    }

}

/// All the side-asset fetcher may ask of the transfer engine.
protocol SideAssetHost: ServerAccess {
    var index: OfflineIndex { get }
    var layout: DataLayout { get }
    /// Whether images are decoded by the playback probe's helper before they show.
    var playbackProbe: Bool { get }
    /// Stored, failed or dropped side assets: a copy waiting for them may now be reported completed.
    func sideAssetsChanged()
    /// Something `status` shows changed.
    func noteChange()
}

extension TransferEngine: SideAssetHost {
    var playbackProbe: Bool { settings.playbackProbe }
}
