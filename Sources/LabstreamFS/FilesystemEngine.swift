import Glibc
import LabstreamCore
import LabstreamEngine
import Synchronization

/// The filesystem in plain Swift: lookup, getattr, readdir, open, read, xattrs. The FUSE adapter
/// decodes kernel requests into these calls and replies with their results; tests call them
/// directly without a mount.
///
/// Lock order: `table` → `handles`; neither is held while calling the transfer engine.
///
/// (About 500 lines: one type behind the one FUSE adapter; its parts share the table and
/// handle locks, which is what keeps the lock order in one place.)
public final class FilesystemEngine: Sendable {
    public struct Attributes: Sendable, Hashable {
        public var ino: UInt64
        public var size: Int64
        public var isDirectory: Bool
        public var mode: UInt32
        public var nlink: UInt32
        public var mtime: Int64
        public var uid: UInt32
        public var gid: UInt32
        /// Bytes on the local disk: a file's stored bytes, so `du` shows what is really here.
        public var storedBytes: Int64
    }

    public struct DirectoryEntry: Sendable, Hashable {
        public var ino: UInt64
        public var name: String
        public var isDirectory: Bool
    }

    public struct Ownership: Sendable {
        public var uid: UInt32
        public var gid: UInt32
        public var umask: UInt32

        public init(uid: UInt32, gid: UInt32, umask: UInt32 = 0o022) {
            self.uid = uid
            self.gid = gid
            self.umask = umask
        }
    }

    struct OpenFile {
        var file: TreeFile
        var readAhead: ReadAheadPolicy
        var version = HandleVersion()
        /// Whether the handle is a player playing; once it is, its prefetch of the next episode.
        var playback = PlaybackWatch()
        var ticket: PlaybackTicket?
    }

    let table = Mutex(InodeTable())
    /// Open handles: of catalog files, and of generated files (their bytes, as opened).
    let handles = Mutex<(next: UInt64, open: [UInt64: OpenFile], generated: [UInt64: [UInt8]])>((1, [:], [:]))
    /// Listings taken at opendir: a directory is read in many chunks, and each chunk must come
    /// from the same listing (and not cost a fresh sort of thousands of names).
    let listings = Mutex<(next: UInt64, open: [UInt64: [DirectoryEntry]])>((1, [:]))
    /// Listings by directory, for reads without an open handle (when the kernel opens
    /// directories itself); dropped whenever the catalog reloads.
    let sharedListings = Mutex<[UInt64: [DirectoryEntry]]>([:])
    public let transfers: TransferEngine
    let ownership: Ownership
    let sizes: TransferSizes
    public let offlineView: MountOptions.OfflineView
    /// Who may change what the mount holds (an attribute write, a command on the socket); a
    /// SIGHUP may name another control group.
    let accessPolicy: Mutex<AccessPolicy>
    public var access: AccessPolicy { accessPolicy.withLock { $0 } }
    public func setAccess(_ policy: AccessPolicy) { accessPolicy.withLock { $0 = policy } }

    /// Lookups, attribute and listing requests served since the daemon last asked (`takeServed`):
    /// it trims its heap only when none came (no walk under way). Reads are not counted: the read path
    /// stays free of shared writes.
    let served = Atomic<Int>(0)

    /// `user.labstream.chapters` by file (`SideFiles.chapters`).
    let chapters = Mutex<[FileKey: String]>([:])

    public init(
        transfers: TransferEngine, files: [TreeFile], generated: [GeneratedFile] = [], chapters: [FileKey: String] = [:],
        ownership: Ownership, sizes: TransferSizes, offlineView: MountOptions.OfflineView = .all,
        access: AccessPolicy = AccessPolicy(daemonUID: geteuid())
    ) {
        self.transfers = transfers
        self.accessPolicy = Mutex(access)
        self.ownership = ownership
        self.sizes = sizes
        self.offlineView = offlineView
        self.chapters.withLock { $0 = chapters }
        table.withLock { $0 = InodeTable(files: files, generated: generated) }
        transfers.setCatalog(files)
    }

    /// Told about names that appeared or went in a directory, so the kernel forgets what it cached.
    let invalidate = Hook<@Sendable (UInt64, String) -> Void>()

    public func onInvalidate(_ handler: @escaping @Sendable (UInt64, String) -> Void) { invalidate.set(handler) }

    /// Told about a file whose attributes changed (its stored bytes), so the kernel asks again.
    let attributesChanged = Hook<@Sendable (UInt64) -> Void>()
    let listed = Hook<@Sendable ([String]) -> Void>()
    let sideAssetStatus = Hook<@Sendable (FileKey) -> [SideAssetStatus]>()

    /// What is stored, missing or failed beside a media file (its `user.labstream.side_assets`).
    public func onSideAssetStatus(_ body: @escaping @Sendable (FileKey) -> [SideAssetStatus]) {
        sideAssetStatus.set(body)
    }

    func sideAssets(of key: FileKey) -> [SideAssetStatus] { sideAssetStatus.function?(key) ?? [] }

    /// Told the path of each folder listed (its side assets are fetched then). Called without
    /// the table's lock; it must not block.
    public func onListed(_ handler: @escaping @Sendable ([String]) -> Void) { listed.set(handler) }

    /// More of the root's attributes, from the daemon: each server's event channel
    /// (`events.SERVER`) and the next periodic refresh (`next_refresh`), names without the prefix.
    let rootNotes = Hook<@Sendable () -> [(String, String)]>()
    public func onRootNotes(_ notes: @escaping @Sendable () -> [(String, String)]) { rootNotes.set(notes) }

    public func onAttributesChanged(_ handler: @escaping @Sendable (UInt64) -> Void) {
        attributesChanged.set(handler)
        transfers.onStoredChange { [weak self] key in
            guard let self, let path = self.transfers.catalogPath(of: key),
                let ino = self.table.withLock({ $0.resolve(path)?.ino })
            else { return }
            self.attributesChanged.function?(ino)
        }
    }

    /// Swaps in a new catalog, keeping inode numbers of unchanged paths, and has the kernel
    /// forget the names that changed.
    public func reload(files: [TreeFile], generated: [GeneratedFile] = [], chapters: [FileKey: String] = [:]) {
        self.chapters.withLock { $0 = chapters }
        let changed = table.withLock { t -> [(UInt64, String)] in
            let old = t
            t = InodeTable(files: files, generated: generated, previous: old)
            var out: [(UInt64, String)] = []
            for ino in old.directories {
                let before = old.children(of: ino).map(\.name), after = t.children(of: ino).map(\.name)
                if before != after { out += Set(before).symmetricDifference(after).map { (ino, $0) } }
            }
            for ino in t.directories where old.node(ino) == nil {
                out += t.children(of: ino).map { (ino, $0.name) }
            }
            // The same file at a new version: its cached pages and size go ("" names the inode).
            for ino in t.inodes {
                guard let node = t.node(ino), !node.isDirectory, let before = old.node(ino) else { continue }
                if let now = node.generated, let was = before.generated, now != was { out.append((ino, "")) }
                guard let now = node.file, let was = before.file, now.size != was.size || now.etag != was.etag else { continue }
                out.append((ino, ""))
            }
            return out
        }
        transfers.setCatalog(files)
        sharedListings.withLock { $0.removeAll() }
        if let handler = invalidate.function { for (parent, name) in changed { handler(parent, name) } }
    }

    /// Requests served since the last call.
    public func takeServed() -> Int { served.exchange(0, ordering: .relaxed) }

    public var fileCount: Int { table.withLock { $0.fileCount } }

    func attributes(_ node: InodeTable.Node) -> Attributes {
        let dirMode: UInt32 = 0o040555 & ~(ownership.umask & 0o777) | 0o040000
        let fileMode: UInt32 = 0o100444 & ~(ownership.umask & 0o777) | 0o100000
        switch node.kind {
        case .directory:
            let subdirs = node.childCount  // upper bound is fine for nlink; find(1) does not rely on it with -noleaf
            return Attributes(
                ino: node.ino, size: 4096, isDirectory: true, mode: dirMode, nlink: UInt32(2 + min(subdirs, 60000)),
                mtime: node.mtime, uid: ownership.uid, gid: ownership.gid, storedBytes: 4096)
        case .file(let f):
            return Attributes(
                ino: node.ino, size: f.size, isDirectory: false, mode: fileMode, nlink: 1,
                mtime: f.modified, uid: ownership.uid, gid: ownership.gid, storedBytes: min(transfers.storedBytes(f.key), f.size))
        case .generated(let g):
            return Attributes(
                ino: node.ino, size: g.size, isDirectory: false, mode: fileMode, nlink: 1,
                mtime: g.modified, uid: ownership.uid, gid: ownership.gid, storedBytes: g.size)
        }
    }

    public func lookup(parent: UInt64, name: String) throws(LabstreamError) -> Attributes {
        served.add(1, ordering: .relaxed)
        let found = table.withLock { t -> Result<(InodeTable.Node, [TreeFile]), LabstreamError> in
            guard let p = t.node(parent) else { return .failure(.notFound("inode \(parent)")) }
            // "." and "..": how the kernel finds a node and its parent by number alone, for an NFS
            // client's file handle after the dentry left its cache (FUSE_CAP_EXPORT_SUPPORT). The
            // kernel asks "." of files too: only ENOENT reads as a stale handle there.
            guard p.isDirectory || name == "." else { return .failure(.notADirectory(t.path(of: parent))) }
            let named: InodeTable.Node?
            switch name {
            case ".": named = p
            case "..": named = t.node(p.parent)
            default: named = t.lookup(parent, name)
            }
            guard let n = named else { return .failure(.notFound(name)) }
            return .success((n, offlineView == .local ? t.files(under: n.ino) : []))
        }
        let (node, files) = try found.get()
        if offlineView == .local && !isVisible(files) { throw .notFound(name) }
        return attributes(node)
    }

    /// With `offline_view=local`, an entry of an unreachable server shows only if some file
    /// below it has local bytes.
    func isVisible(_ files: [TreeFile]) -> Bool {
        guard offlineView == .local, let server = files.first?.key.server, transfers.reachability(of: server) != .online else { return true }
        return files.contains { f in (transfers.row(for: f)?.present.isEmpty == false) }
    }

    public func getattr(_ ino: UInt64) throws(LabstreamError) -> Attributes {
        served.add(1, ordering: .relaxed)
        guard let node = table.withLock({ $0.node(ino) }) else { throw .notFound("inode \(ino)") }
        return attributes(node)
    }

    /// Takes the listing of `ino` for one pass of readdir calls; returns its handle.
    public func openDirectory(_ ino: UInt64) throws(LabstreamError) -> UInt64 {
        let entries = try readdir(ino)
        return listings.withLock { l in
            let id = l.next
            l.next += 1
            l.open[id] = entries
            return id
        }
    }

    public func listing(_ handle: UInt64) -> [DirectoryEntry]? { listings.withLock { $0.open[handle] } }

    public func releaseDirectory(_ handle: UInt64) { listings.withLock { _ = $0.open.removeValue(forKey: handle) } }

    /// The listing of directory `ino` for a read that has no handle: taken once and shared
    /// until the catalog reloads (what is shown with `offline_view=local` depends on which
    /// servers answer, so it is taken afresh each time).
    public func listing(ofDirectory ino: UInt64) throws(LabstreamError) -> [DirectoryEntry] {
        if let shared = sharedListings.withLock({ $0[ino] }) { return shared }
        let entries = try readdir(ino)
        // Bounded: the kernel keeps listings itself (cache_readdir); this spares only a re-sort
        // of folders listed again soon, and a walk of 100 000 folders kept every one.
        if offlineView == .all {
            sharedListings.withLock { shared in
                if shared.count >= Self.sharedListingsKept { shared.removeAll(keepingCapacity: true) }
                shared[ino] = entries
            }
        }
        return entries
    }

    static let sharedListingsKept = 4096

    public func readdir(_ ino: UInt64) throws(LabstreamError) -> [DirectoryEntry] {
        served.add(1, ordering: .relaxed)
        let hook = listed.function
        var path = ""
        let result = table.withLock { t -> Result<[DirectoryEntry], LabstreamError> in
            guard let node = t.node(ino) else { return .failure(.notFound("inode \(ino)")) }
            guard node.isDirectory else { return .failure(.notADirectory(t.path(of: ino))) }
            if hook != nil { path = t.path(of: ino) }
            var out = [
                DirectoryEntry(ino: ino, name: ".", isDirectory: true),
                DirectoryEntry(ino: node.parent, name: "..", isDirectory: true)
            ]
            for child in t.children(of: ino) {
                out.append(DirectoryEntry(ino: child.ino, name: child.name, isDirectory: child.isDirectory))
            }
            return .success(out)
        }
        let entries = try result.get()
        hook?(path.isEmpty ? [] : path.split(separator: "/").map(String.init))
        guard offlineView == .local else { return entries }
        let (under, generated) = table.withLock { t in
            (
                Dictionary(entries.dropFirst(2).map { ($0.ino, t.files(under: $0.ino)) }, uniquingKeysWith: { a, _ in a }),
                Set(entries.dropFirst(2).filter { t.node($0.ino)?.generated != nil }.map(\.ino))
            )
        }
        // A generated file is always here: it shows wherever its folder does.
        return Array(entries.prefix(2)) + entries.dropFirst(2).filter { generated.contains($0.ino) || isVisible(under[$0.ino] ?? []) }
    }

    /// Opens a file for reading. Any write access is refused: the mount is read-only.
    public func open(_ ino: UInt64, writeRequested: Bool) throws(LabstreamError) -> UInt64 {
        if writeRequested { throw .readOnly }
        guard let node = table.withLock({ $0.node(ino) }) else { throw .notFound("inode \(ino)") }
        if let made = node.generated {
            // A stored side asset is small and whole: read once, it stays readable even if it
            // is evicted while open.
            let bytes: [UInt8]
            switch made.content {
            case .stored(let at, let size):
                guard let read = Self.readWhole(at, size: size) else { throw .notFound(node.name) }
                bytes = read
            case .document(let doc, _, _):
                // Made again from the index; the next reload (due when the index changed) says
                // the new size.
                guard let made = try transfers.document(doc) else { throw .notFound(node.name) }
                bytes = made
            }
            return handles.withLock { h in
                let id = h.next
                h.next += 1
                h.generated[id] = bytes
                return id
            }
        }
        guard let file = node.file else { throw .isADirectory(node.name) }
        transfers.noteOpened(file.key)
        return handles.withLock { h in
            let id = h.next
            h.next += 1
            h.open[id] = OpenFile(file: file, readAhead: ReadAheadPolicy(sizes: sizes))
            return id
        }
    }

    /// Whether a handle's file is entirely local, so the kernel may keep its page cache.
    public func isFullyLocal(handle: UInt64) -> Bool {
        let (generated, file) = handles.withLock { h in (h.generated[handle] != nil, h.open[handle]?.file) }
        if generated { return true }
        guard let file else { return false }
        return transfers.row(for: file).map { $0.present.contains(ByteRange(0, file.size)) } ?? (file.size == 0)
    }

    /// A read-only descriptor of the handle's local copy when the kernel may read it without the
    /// daemon: every byte is present and was checked against its digest by this daemon, and the
    /// handle's version is the catalog's. The caller closes it.
    public func checkedLocalCopy(handle: UInt64) -> Int32? {
        guard let file = handles.withLock({ $0.open[handle]?.file }) else { return nil }
        return transfers.checkedLocalCopy(file)
    }

    /// The version of the file a handle was opened on (size and source tag).
    public func version(handle: UInt64) -> String? {
        handles.withLock { $0.open[handle] }.map { "\($0.file.size):\($0.file.etag ?? "")" }
    }

    public func read(handle: UInt64, offset: Int64, size: Int) throws(LabstreamError) -> [UInt8] {
        enum Planned { case media(TreeFile, ByteRange?, ServedVersion?, startsPlaying: Bool), generated([UInt8]) }
        var clock = timespec()
        clock_gettime(CLOCK_REALTIME, &clock)
        let now = Double(clock.tv_sec) + Double(clock.tv_nsec) / 1e9
        let planned = handles.withLock { h -> Planned? in
            guard var open = h.open[handle] else { return h.generated[handle].map(Planned.generated) }
            let read = ByteRange(offset: offset, length: Int64(size))
            let ahead = open.readAhead.observe(read: read, total: open.file.size)
            let starts = open.playback.observe(read: read, total: open.file.size, now: now)
            open.ticket?.read(at: now)
            h.open[handle] = open
            return .media(open.file, ahead, open.version.pinned, startsPlaying: starts)
        }
        guard let planned else { throw .invalidArgument("bad file handle") }
        if case .media(let file, _, _, true) = planned, let ticket = transfers.playing(file) {
            // Released meanwhile: the prefetch stops at once.
            let kept = handles.withLock { h -> Bool in
                guard h.open[handle] != nil else { return false }
                h.open[handle]?.ticket = ticket
                return true
            }
            if !kept { transfers.stoppedPlaying(ticket) }
        }
        guard case .media(let file, let ahead, let pinned, _) = planned else {
            guard case .generated(let made) = planned, offset >= 0, size >= 0 else { throw .invalidArgument("bad read range") }
            let start = Int(min(offset, Int64(made.count)))
            return Array(made[start..<min(made.count, start + size)])
        }
        let (bytes, served) = try transfers.read(file, range: ByteRange(offset: offset, length: Int64(size)), readAhead: ahead, handle: pinned)
        guard let served else { return bytes }
        let admitted = handles.withLock { h -> Bool in
            guard var open = h.open[handle] else { return false }
            defer { h.open[handle] = open }
            return open.version.admit(served)
        }
        guard admitted else {
            throw .remoteChanged("\(file.path.joined(separator: "/")) changed on the server after it was opened; open it again for the new version")
        }
        return bytes
    }

    public func release(handle: UInt64) {
        let closed = handles.withLock { h -> OpenFile? in h.generated.removeValue(forKey: handle) == nil ? h.open.removeValue(forKey: handle) : nil }
        if let closed {
            if let ticket = closed.ticket { transfers.stoppedPlaying(ticket) }
            transfers.noteClosed(closed.file.key)
        }
    }

    // MARK: - Extended attributes

    public static let xattrPrefix = "user.labstream."

    /// A stored side asset's bytes; nil when it is gone or not the size it was stored at.
    static func readWhole(_ path: String, size: Int64) -> [UInt8]? {
        let fd = path.withCString { Glibc.open($0, O_RDONLY | O_CLOEXEC) }
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var bytes = [UInt8](repeating: 0, count: Int(size))
        let got = bytes.withUnsafeMutableBytes { try? preadFully(fd, into: $0, at: 0, context: path) }
        return got == Int(size) ? bytes : nil
    }

    /// Attribute name → value for `ino`. Never a token or a URL.
    public func xattrs(_ ino: UInt64) throws(LabstreamError) -> [(String, String)] {
        let (node, files) = table.withLock { t in (t.node(ino), t.files(under: ino)) }
        guard let node else { throw .notFound("inode \(ino)") }
        if let made = node.generated {
            // Made here from the catalog: whole, and nothing to fetch or pin.
            return [
                (Self.xattrPrefix + "state", DisplayState.complete.rawValue), (Self.xattrPrefix + "bytes", "\(made.size)/\(made.size)"),
                made.storedAt == nil ? (Self.xattrPrefix + "generated", "1") : (Self.xattrPrefix + "side_asset", "stored")
            ]
        }
        var present: Int64 = 0, total: Int64 = 0
        var states: [DisplayState] = []
        var reason: StatusReason?
        var cause: PauseCause?
        var pinned = !files.isEmpty
        for f in files {
            let row = transfers.row(for: f)
            pinned = pinned && row?.pinned == true
            present += row.map { min($0.present.byteCount, f.size) } ?? 0
            total += f.size
            var state = FileStatus.state(of: row), why = row?.reason
            if row?.pinned == true, state == .complete || state == .unverified {
                (state, why) = FileStatus.shown(state: state, reason: why, pinned: true, sideAssets: sideAssets(of: f.key))
            }
            states.append(state)
            if reason == nil { reason = why }
            if cause == nil, state == .paused { cause = row?.pauseCause }
        }
        var out: [(String, String)] = [
            (Self.xattrPrefix + "state", Self.aggregate(states).rawValue),
            (Self.xattrPrefix + "bytes", "\(present)/\(total)"),
            (Self.xattrPrefix + "pinned", pinned ? "1" : "0")
        ]
        if let f = node.file {
            // A reader of a file that is not here only sees EIO while its server is away: say why.
            let away = transfers.reachability(of: f.key.server)
            if reason == nil, states == [.notLocal], away != .online { reason = StatusReason.serverAway(away) }
            out.append((Self.xattrPrefix + "server", f.key.server))
            out.append((Self.xattrPrefix + "item_id", f.key.itemId))
            if f.orphaned { reason = StatusReason.orphaned(kept: present > 0) }
            if let reason { out.append((Self.xattrPrefix + "reason", reason.sentence)) }
            if let cause { out.append((Self.xattrPrefix + "pause_cause", cause.rawValue)) }
            if let marks = chapters.withLock({ $0[f.key] }) { out.append((Self.xattrPrefix + "chapters", marks)) }
            // Copies at other qualities: `10mbps=downloading;2mbps=complete`.
            let copies = transfers.copies(of: f.key).compactMap { row in
                DerivedCopy.parse(row.key).map { "\($0.quality)=\(row.status.rawValue)" }
            }
            if !copies.isEmpty { out.append((Self.xattrPrefix + "copies", copies.joined(separator: ";"))) }
            // Artwork and subtitles beside it: `poster.jpg=stored;Film.eng.srt=failed`.
            let beside = sideAssets(of: f.key)
            if !beside.isEmpty { out.append((Self.xattrPrefix + "side_assets", SideAssetStatus.attribute(beside))) }
        } else if let server = files.first?.key.server, files.allSatisfy({ $0.key.server == server }) {
            out.append((Self.xattrPrefix + "server", server))
            out.append((Self.xattrPrefix + "reachability", transfers.reachability(of: server).rawValue))
            if let (monitor, plan) = transfers.monitor(of: files) {
                out.append((Self.xattrPrefix + "monitor", monitor.settings))
                if let plan { out.append((Self.xattrPrefix + "monitor_holds", Self.holds(plan, cap: monitor.maxStorage))) }
            }
        }
        if ino == InodeTable.rootIno {
            out.append((Self.xattrPrefix + "access", access.attribute))
            // Every server, also one whose folder is not there yet (no catalog so far).
            for server in transfers.serverNames {
                out.append((Self.xattrPrefix + "reachability." + server, transfers.reachability(of: server).rawValue))
            }
            for (name, value) in rootNotes.function?() ?? [] { out.append((Self.xattrPrefix + name, value)) }
        }
        return out
    }

    public func getxattr(_ ino: UInt64, name: String) throws(LabstreamError) -> String {
        // ls -l asks every file for security.* and system.* attributes: answer those without
        // touching the index.
        guard name.hasPrefix(Self.xattrPrefix) else {
            guard table.withLock({ $0.node(ino) }) != nil else { throw .notFound("inode \(ino)") }
            throw .noAttribute
        }
        guard let value = try xattrs(ino).first(where: { $0.0 == name })?.1 else { throw .noAttribute }
        return value
    }

    /// `user.labstream.pin` = `1` pins the file or every file below the folder, `0` unpins, a
    /// quality (`10mbps`, `original`…) pins at that quality;
    /// `user.labstream.monitor` = `MODE[,delete-watched][,max-storage=SIZE]` on a series folder
    /// monitors the series (`off` stops it);
    /// `user.labstream.action` = `pause|resume|retry|cancel` acts on their downloads.
    /// Any other write is refused with no side effect, and so is every write by a `caller` the
    /// access policy refuses (EACCES): the kernel lets anyone write a user attribute on an
    /// `allow_other` mount without `default_permissions`.
    public func setxattr(_ ino: UInt64, name: String, value: [UInt8], caller: Caller = .thisProcess) throws(LabstreamError) {
        guard name.hasPrefix(Self.xattrPrefix) else { throw .unsupportedAttributeWrite(name) }
        if let refused = access.refusal(caller) {
            transfers.log("refused \(name) on inode \(ino) from uid \(caller.uid): \(refused.code.rawValue)")
            throw .accessRefused(refused)
        }
        let command = try FileCommand(attribute: String(name.dropFirst(Self.xattrPrefix.count)), value: String(decoding: value, as: UTF8.self))
        // A resume or retry of files parked for room answers once they landed bytes or parked
        // again (as the control socket's does): the attributes read after it say which.
        let parked = command == .queue(.resume) || command == .queue(.retry) ? pausedForRoom([("", ino)]) : [:]
        try perform(command, at: ino)
        if !parked.isEmpty { _ = parkedAgain(parked, [("", ino)]) }
    }

    /// `command` on the file at `ino`, or every file below a folder: the attribute writes' and
    /// the control socket's way in alike.
    public func perform(_ command: FileCommand, at ino: UInt64) throws(LabstreamError) {
        try transfers.perform(command, files: try treeFiles(under: ino))
    }

    /// The catalog's files at or below `ino`: what a command on its path acts on.
    public func treeFiles(under ino: UInt64) throws(LabstreamError) -> [TreeFile] {
        let (node, files) = table.withLock { ($0.node(ino), $0.files(under: ino)) }
        guard let node else { throw .notFound("inode \(ino)") }
        // A generated file has nothing to pin, fetch, order or monitor.
        if let made = node.generated { throw .localSideFile(made.path.joined(separator: "/"), stored: made.storedAt != nil) }
        return files
    }

    /// `user.labstream.monitor_holds`: `episodes=3 bytes=1234 max=2147483648 held_by_cap=2`.
    static func holds(_ plan: SeriesMonitorPolicy.Plan, cap: Int64?) -> String {
        "episodes=\(plan.holds.count) bytes=\(plan.heldBytes)" + (cap.map { " max=\($0)" } ?? "") + " held_by_cap=\(plan.heldByCap.count)"
    }

    /// A folder's state: the least advanced of its files, except that any local bytes make it
    /// at least partial.
    static func aggregate(_ states: [DisplayState]) -> DisplayState {
        guard let first = states.first else { return .notLocal }
        if states.allSatisfy({ $0 == first }) { return first }
        if states.allSatisfy({ $0 == .complete || $0 == .unverified }) { return .unverified }
        if states.contains(.failed) { return .failed }
        if states.contains(.downloading) { return .downloading }
        if states.allSatisfy({ $0 == .notLocal }) { return .notLocal }
        return .partial
    }

    public static let rootInode = InodeTable.rootIno
}

extension Caller {
    /// The process itself: what an in-process caller (a test, the daemon's own work) is.
    public static var thisProcess: Caller {
        var groups = [gid_t](repeating: 0, count: Int(max(getgroups(0, nil), 0)))
        let count = getgroups(Int32(groups.count), &groups)
        return Caller(uid: geteuid(), gid: getegid(), groups: Array(groups.prefix(Int(max(count, 0)))))
    }
}

extension FilesystemEngine {

    /// The status of every file below `ino` (named `name`), each with its copies and new
    /// version as its fields. A copy shown in the tree beside its original is part of the
    /// original's status, unless it is what was asked for.
    public func statuses(below ino: UInt64, named name: String) -> [FileStatus] {
        let asked = files(below: ino, named: name)
        return asked.compactMap { path, fileIno in
            guard let file = table.withLock({ $0.node(fileIno)?.file }) else { return nil }
            if asked.count > 1, DerivedCopy.parse(file.key) != nil { return nil }
            var status = FileStatus(
                path: path, size: file.size, row: transfers.row(for: file), related: transfers.related(to: file.key),
                orphaned: file.orphaned)
            if status.reason == nil, status.state == .notLocal, case let away = transfers.reachability(of: file.key.server), away != .online {
                status.reason = StatusReason.serverAway(away)
            }
            if status.reason == nil, transfers.heldByMonitorCap(file.key) { status.reason = StatusReason.heldByCap }
            status.attach(sideAssets: sideAssets(of: file.key))
            return status
        }
    }

    /// The files below `inodes` (each a path and its inode) paused for a full disk or their
    /// budget, with the bytes each had.
    public func pausedForRoom(_ inodes: [(String, UInt64)]) -> [String: Int64] {
        var out: [String: Int64] = [:]
        for (path, ino) in inodes {
            for s in statuses(below: ino, named: path) where s.waitsForRoom { out[s.path] = s.present }
        }
        return out
    }

    /// The statuses of those of `parked` (just resumed: `pausedForRoom` before) that parked
    /// again. A person's retry is dispatched once even on a full disk, so whether it parks again
    /// is known only when its first bytes land or fail to: this waits for that, on the change
    /// counter (never a sleep), at most as long as a read waits for its bytes; a file still on
    /// its way then did not park.
    public func parkedAgain(_ parked: [String: Int64], _ inodes: [(String, UInt64)]) -> [FileStatus] {
        let deadline = ContinuousClock.now + .seconds(transfers.readTimeout)
        var seen = transfers.changeCount
        while true {
            var open = false
            var again: [FileStatus] = []
            for (path, ino) in inodes {
                for s in statuses(below: ino, named: path) {
                    guard let before = parked[s.path] else { continue }
                    switch s.state {
                    case .paused where s.waitsForRoom: again.append(s)
                    case .queued, .preparing, .downloading, .partial:
                        if s.present <= before { open = true }
                    default: continue
                    }
                }
            }
            let (whole, atto) = (deadline - ContinuousClock.now).components
            let left = Double(whole) + Double(atto) / 1e18
            if !open || left <= 0 { return again.sorted { $0.path < $1.path } }
            seen = transfers.waitForChange(after: seen, timeout: min(left, 1))
        }
    }

    /// Every file below `ino` (itself, if a file), with its path under `name` and its inode.
    public func files(below ino: UInt64, named name: String) -> [(String, UInt64)] {
        table.withLock { t -> [(String, UInt64)] in
            guard let node = t.node(ino) else { return [] }
            if node.file != nil { return [(name, ino)] }
            var out: [(String, UInt64)] = []
            var stack: [(String, UInt64)] = [(name, ino)]
            while let (path, current) = stack.popLast() {
                for (child, childIno, _) in t.children(of: current) {
                    let childPath = path.isEmpty ? child : path + "/" + child
                    if t.node(childIno)?.file != nil { out.append((childPath, childIno)) } else { stack.append((childPath, childIno)) }
                }
            }
            return out.sorted { $0.0 < $1.0 }
        }
    }

    /// The inode of a path below the root, for `labstream status` on paths.
    public func resolve(_ components: [String]) -> UInt64? { table.withLock { $0.resolve(components)?.ino } }
}
