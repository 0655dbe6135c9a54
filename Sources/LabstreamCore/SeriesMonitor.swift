/// A monitored series: Labstream keeps the episodes in its scope pinned as the server gains
/// them, and (when asked) lets go of watched ones and stays under a storage cap. The same on
/// every backend; `SeriesMonitorPolicy.plan` decides, the engine carries the plan out.
public struct SeriesMonitor: Sendable, Hashable {
    public enum Mode: Sendable, Hashable, CustomStringConvertible {
        /// Every episode, specials included.
        case all
        /// Only episodes the series did not have when the monitor was made.
        case future
        /// The newest regular season (specials only when there is nothing else).
        case latestSeason
        case seasons([Int])

        /// `all`, `future`, `latest-season` (or `latest_season`), `seasons=2,3`.
        public init?(_ text: String) {
            switch text.lowercased() {
            case "all": self = .all
            case "future": self = .future
            case "latest-season", "latest_season": self = .latestSeason
            case let t where t.hasPrefix("seasons="):
                let numbers = t.dropFirst("seasons=".count).split(separator: ",", omittingEmptySubsequences: false).map { Int(String($0).trimmingSpaces) }
                guard !numbers.isEmpty, numbers.allSatisfy({ ($0 ?? -1) >= 0 }) else { return nil }
                self = .seasons(Array(Set(numbers.compactMap { $0 })).sorted())
            default: return nil
            }
        }

        public var description: String {
            switch self {
            case .all: return "all"
            case .future: return "future"
            case .latestSeason: return "latest-season"
            case .seasons(let s): return "seasons=" + s.map(String.init).joined(separator: ",")
            }
        }

        public static let spellings = "all, future, latest-season or seasons=N[,N…]"
    }

    public var server: String
    public var seriesId: String
    public var mode: Mode
    public var deleteWatched: Bool
    /// At most this many bytes of the series' episodes are kept by the monitor (nil: no cap).
    public var maxStorage: Int64?
    /// The series' episodes when the monitor was made: `future` takes only the others.
    public var baseline: Set<String>
    /// Seconds since the epoch.
    public var created: Int64
    /// The server's own record of it (`SeriesSubscription`), when the server keeps one: its id
    /// and the validator last seen.
    public var remoteId: String?
    public var remoteEtag: String?

    public init(
        server: String, seriesId: String, mode: Mode, deleteWatched: Bool = false, maxStorage: Int64? = nil,
        baseline: Set<String> = [], created: Int64 = 0, remoteId: String? = nil, remoteEtag: String? = nil
    ) {
        self.remoteId = remoteId
        self.remoteEtag = remoteEtag
        self.server = server
        self.seriesId = seriesId
        self.mode = mode
        self.deleteWatched = deleteWatched
        self.maxStorage = maxStorage
        self.baseline = baseline
        self.created = created
    }

    /// The settings as one line: `latest-season,delete-watched,max-storage=2147483648` (what
    /// `user.labstream.monitor` reads and takes).
    public var settings: String {
        var parts = [mode.description]
        if deleteWatched { parts.append("delete-watched") }
        if let maxStorage { parts.append("max-storage=\(maxStorage)") }
        return parts.joined(separator: ",")
    }

    /// Parses `settings` (words separated by commas or spaces; sizes as `labstream.conf` takes
    /// them, `2G`); the mode is required, once.
    public static func parseSettings(_ text: String) throws(LabstreamError) -> (mode: Mode, deleteWatched: Bool, maxStorage: Int64?) {
        var mode: Mode?
        var deleteWatched = false
        var maxStorage: Int64?
        // `seasons=2,3` holds a comma: words are split on spaces, then on commas not inside it.
        var words: [String] = []
        for chunk in text.split(whereSeparator: { $0 == " " || $0 == "\t" }) {
            for piece in chunk.split(separator: ",") {
                if let last = words.last, last.hasPrefix("seasons="), Int(piece) != nil {
                    words[words.count - 1] += "," + piece
                } else {
                    words.append(String(piece))
                }
            }
        }
        for word in words {
            if word == "delete-watched" || word == "delete_watched" {
                deleteWatched = true
            } else if word.hasPrefix("max-storage=") || word.hasPrefix("max_storage=") {
                guard let size = LabstreamConfig.parseSize(String(word.dropFirst("max-storage=".count))), size > 0 else {
                    throw .invalidArgument("max-storage takes a size such as 2G or 500M, not '\(word.dropFirst("max-storage=".count))'")
                }
                maxStorage = size
            } else if let m = Mode(word) {
                guard mode == nil else { throw .invalidArgument("a monitor has one mode; '\(text)' names two") }
                mode = m
            } else {
                throw .invalidArgument("'\(word)' is not a monitor setting: a mode (\(Mode.spellings)), delete-watched or max-storage=SIZE")
            }
        }
        guard let mode else { throw .invalidArgument("a monitor needs a mode: \(Mode.spellings)") }
        return (mode, deleteWatched, maxStorage)
    }
}

/// One episode of a monitored series as the policy needs it (one file per episode: the
/// version the monitor keeps).
public struct MonitoredEpisode: Sendable, Hashable {
    public var key: FileKey
    public var season: Int
    public var episode: Int
    public var size: Int64
    public var played: Bool
    /// Pinned by the person, not by this monitor: never unpinned or removed by it.
    public var pinnedByHand: Bool
    /// Pinned by this monitor.
    public var pinnedByMonitor: Bool
    /// Unpinned by the person after the monitor pinned it: the monitor leaves it alone.
    public var declined: Bool
    /// Open right now: never removed.
    public var open: Bool

    public init(
        key: FileKey, season: Int, episode: Int, size: Int64, played: Bool = false, pinnedByHand: Bool = false,
        pinnedByMonitor: Bool = false, declined: Bool = false, open: Bool = false
    ) {
        self.key = key
        self.season = season
        self.episode = episode
        self.size = size
        self.played = played
        self.pinnedByHand = pinnedByHand
        self.pinnedByMonitor = pinnedByMonitor
        self.declined = declined
        self.open = open
    }
}

public enum SeriesMonitorPolicy {
    public struct Plan: Sendable, Hashable {
        /// Newly in scope and within the cap: pinned by the monitor, in episode order.
        public var pin: [FileKey] = []
        /// The monitor's pins that left its scope: unpinned, their bytes kept until eviction.
        public var unpin: [FileKey] = []
        /// The monitor's pins that are watched (with delete-watched) or pushed out by the cap:
        /// unpinned and their copies removed.
        public var remove: [FileKey] = []
        /// In scope but over the cap: not pinned (said in `status`).
        public var heldByCap: [FileKey] = []
        /// What the monitor holds once the plan is carried out: its own pins and the person's
        /// pins in its scope, and their bytes (what counts against the cap).
        public var holds: [FileKey] = []
        public var heldBytes: Int64 = 0
        /// The episodes in its scope, and how many of them it does not hold, by why.
        public var inScope = 0
        public var skipped: [MonitorSkip: Int] = [:]

        public init() {}

        /// What `monitor list` and `status` say of it: counts and codes, kept in the index.
        public var outcome: MonitorOutcome { MonitorOutcome(episodes: holds.count, bytes: heldBytes, inScope: inScope, skipped: skipped) }
    }

    /// The episodes of `episodes` the monitor's mode takes.
    public static func inScope(_ monitor: SeriesMonitor, _ episodes: [MonitoredEpisode]) -> [MonitoredEpisode] {
        let ordered = episodes.sorted { ($0.season, $0.episode, $0.key.itemId) < ($1.season, $1.episode, $1.key.itemId) }
        switch monitor.mode {
        case .all: return ordered
        case .future: return ordered.filter { !monitor.baseline.contains($0.key.itemId) }
        case .latestSeason:
            let latest = ordered.map(\.season).filter { $0 > 0 }.max() ?? ordered.map(\.season).max()
            return ordered.filter { $0.season == latest }
        case .seasons(let seasons): return ordered.filter { seasons.contains($0.season) }
        }
    }

    /// What to pin, unpin and remove now. The person's pins are never touched and always count
    /// against the cap; an open file is never removed. Within the cap, unwatched episodes come
    /// first in episode order, then watched ones (dropped entirely with delete-watched).
    /// Every episode in scope is either held or skipped for one reason. `online` false (its server
    /// is not answering): nothing is pinned, let go or removed on old news; it holds what is
    /// pinned now, and the rest waits for the server.
    public static func plan(_ monitor: SeriesMonitor, episodes: [MonitoredEpisode], online: Bool = true) -> Plan {
        var plan = Plan()
        let scope = inScope(monitor, episodes)
        plan.inScope = scope.count
        if scope.isEmpty { plan.skipped[.nothingInScope] = episodes.count }
        guard online else {
            let held = scope.filter { $0.pinnedByHand || $0.pinnedByMonitor }
            plan.holds = held.map(\.key)
            plan.heldBytes = held.reduce(Int64(0)) { $0 + $1.size }
            let declined = scope.filter { $0.declined && !$0.pinnedByHand }.count
            if declined > 0 { plan.skipped[.declined] = declined }
            if scope.count - held.count - declined > 0 { plan.skipped[.offline] = scope.count - held.count - declined }
            return plan
        }
        let inScope = Set(scope.map(\.key))
        for e in episodes where e.pinnedByMonitor && !inScope.contains(e.key) && !e.pinnedByHand { plan.unpin.append(e.key) }
        let cap = monitor.maxStorage ?? Int64.max
        // What the monitor cannot let go of counts first.
        let fixed = scope.filter { $0.pinnedByHand || ($0.open && $0.pinnedByMonitor) }
        var used = fixed.reduce(Int64(0)) { $0 + $1.size }
        plan.holds = fixed.map(\.key)
        let movable = scope.filter { !($0.pinnedByHand || ($0.open && $0.pinnedByMonitor)) && !$0.declined }
        let wanted = movable.filter { !$0.played } + (monitor.deleteWatched ? [] : movable.filter(\.played))
        let wantedKeys = Set(wanted.map(\.key))
        // Pinning stops at the first episode that does not fit: a later, smaller one does not
        // jump the queue.
        var full = false
        for e in wanted {
            if !full && (cap == Int64.max || used <= cap - e.size) {
                used += e.size
                plan.holds.append(e.key)
                if !e.pinnedByMonitor { plan.pin.append(e.key) }
            } else {
                full = true
                plan.heldByCap.append(e.key)
                if e.pinnedByMonitor { plan.remove.append(e.key) }
            }
        }
        // Watched, with delete-watched: let go and removed (an open one stayed in `fixed`).
        for e in movable where e.pinnedByMonitor && !wantedKeys.contains(e.key) { plan.remove.append(e.key) }
        plan.heldBytes = used
        let counts: [(MonitorSkip, Int)] = [
            (.watched, movable.count - wanted.count), (.overCap, plan.heldByCap.count),
            (.declined, scope.filter { $0.declined && !$0.pinnedByHand && !($0.open && $0.pinnedByMonitor) }.count)
        ]
        for (why, n) in counts where n > 0 { plan.skipped[why] = n }
        return plan
    }

    /// When a monitor is evaluated next. `daemon`: whether a daemon serves the data directory;
    /// `online`: whether the server answered it last; `lastSync`: when the server's catalog was
    /// last synced (seconds since the epoch); `refreshInterval`: `labstream.conf`'s (0: never);
    /// `planned`: the refresh the running daemon says it has planned, which stands over one
    /// counted from the last sync (a sync an event channel ran moves the last sync, not the refresh).
    public static func nextLook(daemon: Bool, online: Bool, lastSync: Int64?, refreshInterval: Double, now: Int64, planned: Int64? = nil) -> NextLook {
        guard daemon else { return .atMount }
        guard online else { return .whenServerAnswers }
        guard refreshInterval > 0 else { return .atSync }
        if let planned { return .atRefresh(max(now, planned)) }
        // Never synced: the daemon's first sync is under way. An overdue refresh comes now.
        guard let lastSync else { return .atRefresh(now) }
        return .atRefresh(max(now, lastSync + Int64(refreshInterval.rounded(.up))))
    }
}

/// Why a monitor does not hold an episode of its series (or holds none): a code, rendered to
/// words where it is shown.
public enum MonitorSkip: String, Sendable, Hashable, CaseIterable, Comparable {
    /// Watched, with delete-watched: not kept.
    case watched
    /// In scope but past the storage cap.
    case overCap = "over_cap"
    /// Unpinned by the person after the monitor pinned it: left alone.
    case declined
    /// Its server is not answering: pinned once it does.
    case offline
    /// No episode is in the monitor's scope yet (counted: the series' episodes, all outside it).
    case nothingInScope = "nothing_in_scope"

    public static func < (a: MonitorSkip, b: MonitorSkip) -> Bool { allCases.firstIndex(of: a)! < allCases.firstIndex(of: b)! }
}

/// What a monitor held and skipped at its last evaluation (kept in the index, so it is told with
/// no daemon running).
public struct MonitorOutcome: Sendable, Hashable {
    public var episodes: Int
    public var bytes: Int64
    public var inScope: Int
    public var skipped: [MonitorSkip: Int]

    public init(episodes: Int, bytes: Int64, inScope: Int, skipped: [MonitorSkip: Int]) {
        self.episodes = episodes
        self.bytes = bytes
        self.inScope = inScope
        self.skipped = skipped
    }

    /// `watched=2 over_cap=1`, in `MonitorSkip` order: how the index keeps `skipped`.
    public var skippedCodes: String { skipped.keys.sorted().map { "\($0.rawValue)=\(skipped[$0]!)" }.joined(separator: " ") }

    /// `skippedCodes` read back; a code this build does not know is left out.
    public static func skipped(codes: String) -> [MonitorSkip: Int] {
        var out: [MonitorSkip: Int] = [:]
        for pair in codes.split(separator: " ") {
            let kv = pair.split(separator: "=", maxSplits: 1)
            if kv.count == 2, let why = MonitorSkip(rawValue: String(kv[0])), let n = Int(kv[1]) { out[why] = n }
        }
        return out
    }
}

/// When a monitor is looked at next: a code, and for `atRefresh` the time.
public enum NextLook: Sendable, Hashable {
    /// At the daemon's next catalog refresh (seconds since the epoch).
    case atRefresh(Int64)
    /// Its server is not answering: when it answers again.
    case whenServerAnswers
    /// `refresh_interval = 0`: at `labstream sync` (or when the monitor is changed).
    case atSync
    /// No daemon serves the data directory: once it is mounted.
    case atMount

    public var code: String {
        switch self {
        case .atRefresh: "refresh"
        case .whenServerAnswers: "server_answers"
        case .atSync: "sync"
        case .atMount: "mount"
        }
    }
}
