import LabstreamCore
import Testing

/// Where a monitor goes when a rebuilt library gave its series a new id (issue 41 item 3).
@Suite struct RebuiltSeriesTests {
    typealias E = RebuiltSeries.Episode

    /// Series "old" before: four episodes; after: the same four under "new", ids prefixed "n".
    let before = [
        E(itemId: "a", seriesId: "old", season: 1, episode: 1), E(itemId: "b", seriesId: "old", season: 1, episode: 2),
        E(itemId: "c", seriesId: "old", season: 2, episode: 1), E(itemId: "d", seriesId: "old", season: nil, episode: nil)
    ]
    let after = [
        E(itemId: "na", seriesId: "new", season: 1, episode: 1), E(itemId: "nb", seriesId: "new", season: 1, episode: 2),
        E(itemId: "nc", seriesId: "new", season: 2, episode: 1), E(itemId: "nd", seriesId: "new", season: nil, episode: nil),
        E(itemId: "ne", seriesId: "new", season: 2, episode: 2), E(itemId: "x", seriesId: "other", season: 1, episode: 1)
    ]

    func monitor(_ series: String = "old", baseline: Set<String> = ["a", "b", "c", "d"]) -> SeriesMonitor {
        SeriesMonitor(server: "s", seriesId: series, mode: .future, baseline: baseline)
    }

    @Test func aMonitorMovesToTheSeriesItsAdoptedEpisodesNameWithItsBaselineCarried() {
        let outcome = RebuiltSeries.outcome(monitor(), before: before, after: after, adopted: [("a", "na"), ("d", "nd")], monitored: ["old"])
        // The numbered episodes go by season and episode; "d" has none but was adopted. "ne" is
        // new since the rebuild: not in the baseline, so `future` takes it.
        #expect(
            outcome
                == .move(
                    .init(from: "old", to: "new", baseline: ["na", "nb", "nc", "nd"], items: ["a": "na", "b": "nb", "c": "nc", "d": "nd"])))
        // An unnumbered, unadopted episode maps to nothing (and is not carried in the baseline).
        guard case .move(let move)? = RebuiltSeries.outcome(monitor(), before: before, after: after, adopted: [("a", "na")], monitored: []) else {
            Issue.record("not moved")
            return
        }
        #expect(move.baseline == ["na", "nb", "nc"] && move.items["d"] == nil)
    }

    @Test func aSeriesStillListedOrGoneBeforeIsLeftAlone() {
        let still = after + [E(itemId: "a", seriesId: "old", season: 1, episode: 1)]
        #expect(RebuiltSeries.outcome(monitor(), before: before, after: still, adopted: [("b", "nb")], monitored: ["old"]) == nil)
        // Gone before this sync too: said then, not again.
        #expect(RebuiltSeries.outcome(monitor(), before: [], after: after, adopted: [("b", "nb")], monitored: ["old"]) == nil)
    }

    @Test func aDoubtfulTargetLeavesTheMonitorWhereItIs() {
        // Nothing of it adopted: its new series is not known.
        #expect(RebuiltSeries.outcome(monitor(), before: before, after: after, adopted: [("z", "x")], monitored: ["old"]) == .leave(.noEpisodeAdopted))
        // Its adopted episodes name two series, or one names none.
        #expect(
            RebuiltSeries.outcome(monitor(), before: before, after: after, adopted: [("a", "na"), ("b", "x")], monitored: ["old"])
                == .leave(.severalSeries))
        let unnamed = after + [E(itemId: "nz", seriesId: nil, season: 1, episode: 3)]
        #expect(
            RebuiltSeries.outcome(monitor(), before: before, after: unnamed, adopted: [("a", "na"), ("b", "nz")], monitored: ["old"])
                == .leave(.severalSeries))
        // The new series has its own monitor.
        #expect(
            RebuiltSeries.outcome(monitor(), before: before, after: after, adopted: [("a", "na")], monitored: ["old", "new"])
                == .leave(.newSeriesMonitored))
    }

    /// A monitor with nothing adopted (none of its episodes stored) follows its series' provider
    /// ids to the one series new since the sync that shares one and names none differently.
    @Test func aMonitorWithNothingAdoptedFollowsItsSeriesProviderIds() {
        let ids = ["old": ["tvdb": "77", "imdb": "tt7"], "new": ["tvdb": "77"], "other": ["tvdb": "88"]]
        let identities = RebuiltSeries.Identities(ids: ids, new: ["new", "other"])
        #expect(
            RebuiltSeries.outcome(monitor(), before: before, after: after, adopted: [], monitored: ["old"], identities: identities)
                == .move(.init(from: "old", to: "new", baseline: ["na", "nb", "nc"], items: ["a": "na", "b": "nb", "c": "nc"])))
        // A series listed before the sync too is another series, whatever its ids.
        #expect(
            RebuiltSeries.outcome(
                monitor(), before: before, after: after, adopted: [], monitored: ["old"], identities: .init(ids: ids, new: ["other"]))
                == .leave(.noSeriesMatched))
        // Its series named no provider id (Silo's cards): nothing to follow.
        #expect(
            RebuiltSeries.outcome(
                monitor(), before: before, after: after, adopted: [], monitored: ["old"],
                identities: .init(ids: ["new": ["tvdb": "77"]], new: ["new"])) == .leave(.noEpisodeAdopted))
        // The new series has a monitor of its own.
        #expect(
            RebuiltSeries.outcome(monitor(), before: before, after: after, adopted: [], monitored: ["old", "new"], identities: identities)
                == .leave(.newSeriesMonitored))
        // An adopted episode decides before the ids do.
        let adopted = RebuiltSeries.outcome(monitor(), before: before, after: after, adopted: [("a", "x")], monitored: [], identities: identities)
        guard case .move(let move)? = adopted else {
            Issue.record("not moved")
            return
        }
        #expect(move.to == "other")
    }

    @Test func aDoubtfulMatchByProviderIdsLeavesTheMonitor() {
        func outcome(_ ids: [String: [String: String]], new: Set<String>) -> RebuiltSeries.Outcome? {
            RebuiltSeries.outcome(monitor(), before: before, after: after, adopted: [], monitored: ["old"], identities: .init(ids: ids, new: new))
        }
        let old = ["tvdb": "77", "imdb": "tt7"]
        // Two new series share one of its ids.
        #expect(outcome(["old": old, "new": ["tvdb": "77"], "other": ["imdb": "tt7"]], new: ["new", "other"]) == .leave(.severalSeriesMatched))
        // The one that shares an id names another differently.
        #expect(outcome(["old": old, "new": ["tvdb": "77", "imdb": "tt8"]], new: ["new"]) == .leave(.seriesIdsDiffer))
        // None shares one (a provider it does not name decides nothing).
        #expect(outcome(["old": old, "new": ["tvdb": "78", "tmdb": "5"]], new: ["new"]) == .leave(.noSeriesMatched))
        #expect(outcome(["old": old], new: ["new"]) == .leave(.noSeriesMatched))
        // A provider only one side names does not differ.
        #expect(outcome(["old": old, "new": ["tvdb": "77", "tmdb": "5"]], new: ["new"])?.isMove == true)
    }

    @Test func twoEpisodesUnderOneNumberAreBothInTheBaselineButCarryNoState() {
        let doubled = after + [E(itemId: "nb2", seriesId: "new", season: 1, episode: 2)]
        guard case .move(let move)? = RebuiltSeries.outcome(monitor(), before: before, after: doubled, adopted: [("a", "na")], monitored: []) else {
            Issue.record("not moved")
            return
        }
        #expect(move.baseline.isSuperset(of: ["nb", "nb2"]) && move.items["b"] == nil)
    }

    @Test func theServersMonitorOfTheOldIdIsLeftBehind() {
        var moved = monitor("new")
        moved.remoteId = "sub_1"
        let old = SeriesSubscription(id: "sub_1", seriesId: "old", mode: .future, deleteWatched: false, maxStorage: nil, etag: "\"a\"")
        let other = SeriesSubscription(id: "sub_2", seriesId: "other", mode: .all, deleteWatched: false, maxStorage: nil, etag: "\"b\"")
        #expect(SeriesSubscriptionPolicy.leftBehind([moved], remote: [old, other]) == [old])
        var kept = moved
        kept.seriesId = "old"
        #expect(SeriesSubscriptionPolicy.leftBehind([kept], remote: [old, other]).isEmpty)
        #expect(SeriesSubscriptionPolicy.leftBehind([monitor("other")], remote: [old, other]).isEmpty)  // never mirrored
    }
}

extension RebuiltSeries.Outcome {
    fileprivate var isMove: Bool {
        if case .move = self { return true }
        return false
    }
}
