/// Where a monitored series went when its library was rebuilt (issue 41 item 3): the rebuild
/// gave the series a new id, and the monitor is kept by the old one. The monitor's stored
/// episodes that were adopted (their bytes confirmed as the new items') name the new series; when
/// all of them name the same one, the monitor moves there, its baseline and what it did to each
/// episode carried to the new episodes, so a `future` monitor does not take the old ones as new.
/// A monitor with no adopted episode (a `future` one whose aired episodes were never pinned)
/// follows its series' own provider ids instead: to the one series new since the sync that shares
/// one of them and names none differently.
public enum RebuiltSeries {
    /// One episode listed by the catalog (before or after the rebuild).
    public struct Episode: Sendable, Hashable, Codable {
        public var itemId: String
        public var seriesId: String?
        public var season: Int?
        public var episode: Int?

        public init(itemId: String, seriesId: String?, season: Int?, episode: Int?) {
            self.itemId = itemId
            self.seriesId = seriesId
            self.season = season
            self.episode = episode
        }
    }

    /// Why a monitor of a vanished series stays where it is: a code, put in words where it is said.
    public enum LeftBehind: String, Sendable, Hashable {
        /// None of its episodes' stored copies was adopted, and its series had no provider id
        /// (Silo's series cards name none): nothing says which series it is now.
        case noEpisodeAdopted = "no_episode_adopted"
        /// Nothing of it adopted, and no series new since the sync has one of its provider ids.
        case noSeriesMatched = "no_series_matched"
        /// Nothing of it adopted, and more than one series new since the sync has one of its provider ids.
        case severalSeriesMatched = "several_series_matched"
        /// Nothing of it adopted, and the one series new since the sync that has one of its
        /// provider ids names another of them differently.
        case seriesIdsDiffer = "series_ids_differ"
        /// Its adopted episodes belong to more than one series now (or to none).
        case severalSeries = "several_series"
        /// The series its episodes belong to now has a monitor of its own.
        case newSeriesMonitored = "new_series_monitored"

        public var sentence: String {
            switch self {
            case .noEpisodeAdopted:
                "none of its episodes' stored copies was matched to a new item and the server named no provider id for its series, so its new series is not known"
            case .noSeriesMatched: "none of its episodes' stored copies was matched to a new item and no series listed since has its series' provider ids"
            case .severalSeriesMatched:
                "none of its episodes' stored copies was matched to a new item and more than one series listed since has its series' provider ids"
            case .seriesIdsDiffer:
                "none of its episodes' stored copies was matched to a new item and the series listed since with one of its series' provider ids names another differently"
            case .severalSeries: "its matched episodes now belong to more than one series"
            case .newSeriesMonitored: "the series its matched episodes now belong to has a monitor of its own"
            }
        }
    }

    public struct Move: Sendable, Hashable {
        public var from: String
        public var to: String
        /// The monitor's baseline, as the new series' item ids.
        public var baseline: Set<String>
        /// Old item id → new item id, for what the monitor did to each episode.
        public var items: [String: String]

        public init(from: String, to: String, baseline: Set<String>, items: [String: String]) {
            self.from = from
            self.to = to
            self.baseline = baseline
            self.items = items
        }
    }

    /// What the server says a series is, beyond its id: its provider ids (provider → id:
    /// Jellyfin/Emby `ProviderIds` of the Series item, Plex `Guid` of the show).
    public struct Identities: Sendable, Hashable {
        /// By series id: the monitored series' as stored before the sync, the others' as listed now.
        public var ids: [String: [String: String]]
        /// The series listed now that were not before the sync: the only ones a monitor follows by ids.
        public var new: Set<String>

        public init(ids: [String: [String: String]] = [:], new: Set<String> = []) {
            self.ids = ids
            self.new = new
        }
    }

    /// The one series of `identities.new` that is `series` by its provider ids, or why none is.
    static func follow(_ series: String, _ identities: Identities) -> (to: String?, why: LeftBehind?) {
        guard let mine = identities.ids[series], !mine.isEmpty else { return (nil, .noEpisodeAdopted) }
        let sharing = identities.new.filter { new in (identities.ids[new] ?? [:]).contains { mine[$0.key] == $0.value } }
        guard sharing.count <= 1 else { return (nil, .severalSeriesMatched) }
        guard let only = sharing.first else { return (nil, .noSeriesMatched) }
        let theirs = identities.ids[only] ?? [:]
        guard theirs.allSatisfy({ mine[$0.key] == nil || mine[$0.key] == $0.value }) else { return (nil, .seriesIdsDiffer) }
        return (only, nil)
    }

    public enum Outcome: Sendable, Hashable {
        case move(Move)
        case leave(LeftBehind)
    }

    /// What becomes of `monitor` after a sync. nil: its series is still listed, or was gone
    /// before this sync too (said then, not at every sync).
    /// `before`: the series' episodes as listed before the sync; `after`: every episode listed
    /// now; `adopted`: the item ids of the copies this sync adopted (old → new); `monitored`: the
    /// series that have a monitor; `identities`: what decides when no adopted episode does
    /// (`follow`). An old episode maps to its adopted item, else to the new
    /// series' episode with the same season and episode numbers (every one such, for the
    /// baseline; only a single one for what the monitor did).
    public static func outcome(
        _ monitor: SeriesMonitor, before: [Episode], after: [Episode], adopted: [(from: String, to: String)], monitored: Set<String>,
        identities: Identities = Identities()
    ) -> Outcome? {
        guard !after.contains(where: { $0.seriesId == monitor.seriesId }) else { return nil }
        let old = before.filter { $0.seriesId == monitor.seriesId }
        guard !old.isEmpty else { return nil }
        let oldIds = Set(old.map(\.itemId))
        let mine = adopted.filter { oldIds.contains($0.from) }
        let target: String
        if mine.isEmpty {
            let followed = follow(monitor.seriesId, identities)
            guard let found = followed.to else { return .leave(followed.why ?? .noSeriesMatched) }
            target = found
        } else {
            let seriesOf = Dictionary(after.map { ($0.itemId, $0.seriesId) }, uniquingKeysWith: { a, _ in a })
            let targets = Set(mine.map { seriesOf[$0.to] ?? nil })
            guard targets.count == 1, let only = targets.first, let found = only else { return .leave(.severalSeries) }
            target = found
        }
        guard !monitored.contains(target) else { return .leave(.newSeriesMonitored) }
        let new = after.filter { $0.seriesId == target }
        let adoptedTo = Dictionary(mine.map { ($0.from, $0.to) }, uniquingKeysWith: { a, _ in a })
        func numbered(_ e: Episode) -> [String] {
            guard let season = e.season, let number = e.episode else { return [] }
            return new.filter { $0.season == season && $0.episode == number }.map(\.itemId)
        }
        var baseline: Set<String> = []
        var items: [String: String] = [:]
        for e in old {
            let found = adoptedTo[e.itemId].map { [$0] } ?? numbered(e)
            if monitor.baseline.contains(e.itemId) { baseline.formUnion(found) }
            if found.count == 1 { items[e.itemId] = found[0] }
        }
        return .move(Move(from: monitor.seriesId, to: target, baseline: baseline, items: items))
    }
}
