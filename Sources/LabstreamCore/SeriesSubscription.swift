/// A server's own record of a monitored series (Silo's download subscription,
/// downloads-api.md § 8): what it registers for this device at each sync. Labstream's monitor
/// of the series is mirrored there; its cap and delete-watched are still enforced here.
public struct SeriesSubscription: Sendable, Hashable {
    public var id: String
    public var seriesId: String
    public var mode: SeriesMonitor.Mode
    public var deleteWatched: Bool
    /// nil: no cap (the server's 0).
    public var maxStorage: Int64?
    public var active: Bool
    /// The validator a change or delete must name (`If-Match`).
    public var etag: String

    public init(id: String, seriesId: String, mode: SeriesMonitor.Mode, deleteWatched: Bool, maxStorage: Int64?, active: Bool = true, etag: String) {
        self.id = id
        self.seriesId = seriesId
        self.mode = mode
        self.deleteWatched = deleteWatched
        self.maxStorage = maxStorage
        self.active = active
        self.etag = etag
    }

    /// Silo's mode names: `all`, `future`, `latest_season`, `specific_seasons` (+ `season_numbers`).
    public static func modeName(_ mode: SeriesMonitor.Mode) -> (name: String, seasons: [Int]?) {
        switch mode {
        case .all: return ("all", nil)
        case .future: return ("future", nil)
        case .latestSeason: return ("latest_season", nil)
        case .seasons(let s): return ("specific_seasons", s)
        }
    }

    public static func mode(named name: String, seasons: [Int]) -> SeriesMonitor.Mode? {
        switch name {
        case "all": return .all
        case "future": return .future
        case "latest_season": return .latestSeason
        case "specific_seasons": return seasons.isEmpty ? nil : .seasons(Array(Set(seasons)).sorted())
        default: return nil
        }
    }

    public func sameSettings(as monitor: SeriesMonitor) -> Bool {
        mode == monitor.mode && deleteWatched == monitor.deleteWatched && maxStorage == monitor.maxStorage
    }
}

public enum SeriesSubscriptionPolicy {
    public enum Step: Sendable, Hashable {
        /// In step: remember its id and validator.
        case keep(SeriesSubscription)
        /// The server has none for this series: make it (a create returns an existing one
        /// unchanged, so it is safe after an uncertain answer once the list was read).
        case create
        /// Changed here since it was last seen: send the monitor's settings (`If-Match` its validator).
        case update(SeriesSubscription)
        /// Changed on the server since it was last seen: its settings become the monitor's
        /// (re-read, never overwritten).
        case adopt(SeriesSubscription)
    }

    /// What to do about `monitor` given the server's subscription for its series (nil: none).
    /// `monitor.remoteEtag` is the validator last seen; nil for a monitor never mirrored.
    public static func step(_ monitor: SeriesMonitor, remote: SeriesSubscription?) -> Step {
        guard let remote else { return .create }
        if remote.sameSettings(as: monitor) { return .keep(remote) }
        // A validator other than the one last seen means someone changed it there.
        if let seen = monitor.remoteEtag, seen != remote.etag { return .adopt(remote) }
        return .update(remote)
    }

    /// The server's monitors `monitors` were kept as that now name another series: a rebuilt
    /// library gave the series a new id and its monitor moved there (`RebuiltSeries`). A
    /// subscription's series cannot be changed (§ 8.3 PATCH takes no `series_id`), so these are
    /// deleted and one is made for the new series.
    public static func leftBehind(_ monitors: [SeriesMonitor], remote: [SeriesSubscription]) -> [SeriesSubscription] {
        let seriesOf = Dictionary(monitors.compactMap { m in m.remoteId.map { ($0, m.seriesId) } }, uniquingKeysWith: { a, _ in a })
        return remote.filter { sub in seriesOf[sub.id].map { $0 != sub.seriesId } ?? false }
    }
}
