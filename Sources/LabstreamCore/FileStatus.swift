/// One file's status, the same whichever way it is asked (`status`, `status PATH`, `--json`,
/// `--watch`, `pin --wait`): its own state, and the copies at other qualities and the new version
/// that belong to it as fields, each with its own state and reason.
public struct FileStatus: Sendable, Hashable {
    /// A copy at another quality, or a new version still arriving.
    public struct Part: Sendable, Hashable {
        /// The quality of a copy (`2mbps`, `remux`); nil for a new version.
        public var quality: String?
        public var state: DisplayState
        public var present: Int64
        public var total: Int64
        public var reason: StatusReason?
        /// A copy kept at a quality is pinned: it is complete only with what belongs beside it.
        public var pinned: Bool

        public init(quality: String?, state: DisplayState, present: Int64, total: Int64, reason: StatusReason?, pinned: Bool = false) {
            self.quality = quality
            self.state = state
            self.present = present
            self.total = total
            self.reason = reason
            self.pinned = pinned
        }

        /// What it is, as `status` names it.
        public var label: String { quality.map { "\($0) copy" } ?? "new version" }
    }

    public var path: String
    public var state: DisplayState
    public var present: Int64
    public var total: Int64
    public var reason: StatusReason?
    /// Why it is paused, when it is.
    public var pauseCause: PauseCause?
    public var pinned: Bool
    public var copies: [Part]
    public var newVersion: Part?
    /// Its artwork and subtitles (none when the server has none or side assets are off).
    public var sideAssets: [SideAssetStatus] = []

    public init(
        path: String, state: DisplayState, present: Int64, total: Int64, reason: StatusReason?, pauseCause: PauseCause? = nil,
        pinned: Bool = false, copies: [Part] = [], newVersion: Part? = nil, sideAssets: [SideAssetStatus] = []
    ) {
        self.path = path
        self.pauseCause = state == .paused ? pauseCause : nil
        self.state = state
        self.present = present
        self.total = total
        self.reason = reason
        self.pinned = pinned
        self.copies = copies
        self.newVersion = newVersion
        self.sideAssets = sideAssets
    }

    /// Paused until the cache has room (a full disk, a budget): the free-space watch lifts it.
    public var waitsForRoom: Bool { state == .paused && pauseCause?.waitsForRoom == true }

    /// Adds what belongs beside the file, and what that makes its state and its pinned copies'
    /// (`shown`): a copy is kept instead of the file, with the same artwork and subtitles.
    public mutating func attach(sideAssets: [SideAssetStatus]) {
        self.sideAssets = sideAssets
        (state, reason) = Self.shown(state: state, reason: reason, pinned: pinned, sideAssets: sideAssets)
        if state != .paused { pauseCause = nil }
        for i in copies.indices {
            (copies[i].state, copies[i].reason) = Self.shown(
                state: copies[i].state, reason: copies[i].reason, pinned: copies[i].pinned, sideAssets: sideAssets)
        }
    }

    /// The status of a file of `size` bytes from its own download row (nil: never read) and the
    /// rows that belong to it (its copies and its next version, in any order). An orphaned
    /// file (gone from its server) says so whatever its row says.
    public init(path: String, size: Int64, row: DownloadRow?, related: [DownloadRow] = [], orphaned: Bool = false) {
        self.init(
            path: path, state: Self.state(of: row), present: row.map { min($0.present.byteCount, size) } ?? 0,
            total: size, reason: orphaned ? StatusReason.orphaned(kept: row.map { !$0.present.isEmpty } ?? false) : row?.reason,
            pauseCause: row?.pauseCause, pinned: row?.pinned ?? false)
        for other in related {
            let part = Part(
                quality: DerivedCopy.parse(other.key).map { "\($0.quality)" }, state: Self.state(of: other),
                present: min(other.present.byteCount, other.total), total: other.total, reason: other.reason, pinned: other.pinned)
            if part.quality == nil { newVersion = part } else { copies.append(part) }
        }
        copies.sort { ($0.quality ?? "") < ($1.quality ?? "") }
    }

    /// The file as it stands with no daemon on the data directory (none was mounted since, or
    /// it was killed): what the index left under way (downloading, preparing, queued with a
    /// next try) moves no more, so it shows as queued for the next mount, saying why. The rest
    /// (paused, failed, partial, complete) is what it is either way.
    public func withoutDaemon() -> FileStatus {
        func stands(_ state: DisplayState, _ reason: StatusReason?) -> (DisplayState, StatusReason?) {
            [.downloading, .preparing, .queued].contains(state) ? (.queued, StatusReason.daemonNotRunning) : (state, reason)
        }
        var out = self
        (out.state, out.reason) = stands(state, reason)
        for i in out.copies.indices { (out.copies[i].state, out.copies[i].reason) = stands(copies[i].state, copies[i].reason) }
        if let v = newVersion { (out.newVersion!.state, out.newVersion!.reason) = stands(v.state, v.reason) }
        return out
    }

    /// Whether `withoutDaemon` changes anything: something was under way.
    public var wasUnderWay: Bool { withoutDaemon() != self }

    /// A row with no bytes left (never read, cancelled, evicted) is simply not local.
    public static func state(of row: DownloadRow?) -> DisplayState {
        guard let row else { return .notLocal }
        return row.present.isEmpty && row.status == .partial ? .notLocal : DisplayState(status: row.status)
    }

    /// The file every row belongs to: itself, or the original of a copy or a next version.
    public static func owner(of key: FileKey) -> FileKey {
        DerivedCopy.parse(key)?.base ?? NextVersion.base(of: key) ?? key
    }

    /// Every file among `rows` that has something to show, with its parts gathered: `path`
    /// names a file by its key (nil: no longer in the catalog) and `size` its catalog size.
    public static func gather(_ rows: [DownloadRow], path: (FileKey) -> String?, size: (FileKey) -> Int64?) -> [FileStatus] {
        var own: [FileKey: DownloadRow] = [:]
        var related: [FileKey: [DownloadRow]] = [:]
        var order: [FileKey] = []
        for row in rows {
            let owner = owner(of: row.key)
            if own[owner] == nil && related[owner] == nil { order.append(owner) }
            if owner == row.key { own[owner] = row } else { related[owner, default: []].append(row) }
        }
        return order.compactMap { key in
            let parts = related[key] ?? []
            let status = FileStatus(
                path: path(key) ?? "(no longer in the catalog) \(key)", size: size(key) ?? own[key]?.total ?? 0,
                row: own[key], related: parts)
            return status.state == .notLocal && parts.isEmpty ? nil : status
        }
    }
}

/// Byte counts as people read them: `0 B`, `812 KiB`, `1.2 GiB`.
public enum ByteCount {
    public static func text(_ bytes: Int64) -> String {
        let units = ["B", "KiB", "MiB", "GiB", "TiB", "PiB"]
        guard bytes >= 1024 else { return "\(max(bytes, 0)) B" }
        var value = Double(bytes)
        var unit = 0
        // One decimal below 10, none above (3.4 GiB, 812 MiB); 1023.96 MiB shows as 1.0 GiB.
        func shown(_ v: Double) -> Double { v < 10 ? (v * 10).rounded() / 10 : v.rounded() }
        while shown(value) >= 1024 && unit < units.count - 1 {
            value /= 1024
            unit += 1
        }
        let rounded = shown(value)
        let tenths = Int64((rounded * 10).rounded())
        return rounded < 10 ? "\(tenths / 10).\(tenths % 10) \(units[unit])" : "\(tenths / 10) \(units[unit])"
    }
}
