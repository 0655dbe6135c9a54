import LabstreamCore
import Testing

/// Which episodes a monitored series keeps: its mode's scope, the person's own pins, watched
/// episodes and the storage cap.
@Suite struct SeriesMonitorTests {
    func ep(_ season: Int, _ number: Int, size: Int64 = 100, played: Bool = false, hand: Bool = false, monitor: Bool = false,
            declined: Bool = false, open: Bool = false) -> MonitoredEpisode {
        MonitoredEpisode(key: FileKey(server: "s", itemId: "e\(season)x\(number)", sourceId: "f\(season)x\(number)"), season: season, episode: number,
                         size: size, played: played, pinnedByHand: hand, pinnedByMonitor: monitor, declined: declined, open: open)
    }

    func monitor(_ mode: SeriesMonitor.Mode, deleteWatched: Bool = false, cap: Int64? = nil, baseline: Set<String> = []) -> SeriesMonitor {
        SeriesMonitor(server: "s", seriesId: "show", mode: mode, deleteWatched: deleteWatched, maxStorage: cap, baseline: baseline)
    }

    func ids(_ keys: [FileKey]) -> [String] { keys.map(\.itemId) }

    @Test func eachModeTakesItsEpisodes() {
        let episodes = [ep(2, 1), ep(0, 1), ep(1, 2), ep(1, 1), ep(3, 1)]
        typealias P = SeriesMonitorPolicy
        #expect(ids(P.plan(monitor(.all), episodes: episodes).pin) == ["e0x1", "e1x1", "e1x2", "e2x1", "e3x1"])
        #expect(ids(P.plan(monitor(.latestSeason), episodes: episodes).pin) == ["e3x1"])
        #expect(ids(P.plan(monitor(.latestSeason), episodes: [ep(0, 1), ep(0, 2)]).pin) == ["e0x1", "e0x2"])   // only specials
        #expect(ids(P.plan(monitor(.seasons([1, 3])), episodes: episodes).pin) == ["e1x1", "e1x2", "e3x1"])
        #expect(ids(P.plan(monitor(.future, baseline: ["e0x1", "e1x1", "e1x2", "e2x1"]), episodes: episodes).pin) == ["e3x1"])
    }

    @Test func aNewSeasonMovesLatestSeasonAlongAndKeepsTheOldBytes() {
        let plan = SeriesMonitorPolicy.plan(monitor(.latestSeason), episodes: [ep(1, 1, monitor: true), ep(1, 2, monitor: true), ep(2, 1), ep(1, 3, hand: true)])
        #expect(ids(plan.pin) == ["e2x1"])
        #expect(ids(plan.unpin) == ["e1x1", "e1x2"])   // unpinned, not removed
        #expect(plan.remove.isEmpty)                  // the person's own pin stays pinned
        #expect(ids(plan.holds) == ["e2x1"])
    }

    @Test func watchedEpisodesGoWithDeleteWatchedUnlessPinnedByHandOrOpen() {
        let episodes = [ep(1, 1, played: true, monitor: true), ep(1, 2, played: true, hand: true), ep(1, 3, played: true, monitor: true, open: true),
                        ep(1, 4, played: true), ep(1, 5)]
        let plan = SeriesMonitorPolicy.plan(monitor(.all, deleteWatched: true), episodes: episodes)
        #expect(ids(plan.remove) == ["e1x1"])
        #expect(ids(plan.pin) == ["e1x5"])   // a watched episode is not pinned at all
        #expect(Set(ids(plan.holds)) == ["e1x2", "e1x3", "e1x5"])
        // Without delete-watched a watched episode is kept like any other.
        #expect(ids(SeriesMonitorPolicy.plan(monitor(.all), episodes: episodes).pin) == ["e1x5", "e1x4"])
    }

    @Test func theCapStopsPinningInEpisodeOrderAndWatchedEpisodesGoFirst() {
        // 250 bytes: the person's pin (100) counts first; then unwatched in order; a later,
        // smaller episode does not jump the queue.
        let episodes = [ep(1, 1, size: 100, hand: true), ep(1, 2, size: 100), ep(1, 3, size: 100), ep(1, 4, size: 10)]
        let plan = SeriesMonitorPolicy.plan(monitor(.all, cap: 250), episodes: episodes)
        #expect(ids(plan.pin) == ["e1x2"] && ids(plan.heldByCap) == ["e1x3", "e1x4"] && plan.heldBytes == 200)
        // A watched pin of the monitor makes room for an unwatched episode.
        let full = [ep(1, 1, size: 100, played: true, monitor: true), ep(1, 2, size: 100, played: true, monitor: true), ep(1, 3, size: 100)]
        let room = SeriesMonitorPolicy.plan(monitor(.all, cap: 200), episodes: full)
        #expect(ids(room.pin) == ["e1x3"] && ids(room.remove) == ["e1x2"] && ids(room.heldByCap) == ["e1x2"])
        #expect(room.heldBytes == 200)
        // An open file is never removed, even over the cap.
        let open = SeriesMonitorPolicy.plan(monitor(.all, cap: 100), episodes: [ep(1, 1, size: 100, monitor: true, open: true), ep(1, 2, size: 100, monitor: true)])
        #expect(open.remove.map(\.itemId) == ["e1x2"] && ids(open.holds) == ["e1x1"])
    }

    @Test func anEpisodeThePersonUnpinnedIsLeftAlone() {
        let plan = SeriesMonitorPolicy.plan(monitor(.all), episodes: [ep(1, 1, declined: true), ep(1, 2)])
        #expect(ids(plan.pin) == ["e1x2"] && plan.unpin.isEmpty && plan.remove.isEmpty)
    }

    @Test func settingsParseAndPrintTheSameWay() throws {
        let parsed = try SeriesMonitor.parseSettings("latest-season delete-watched max-storage=2G")
        #expect(parsed.mode == .latestSeason && parsed.deleteWatched && parsed.maxStorage == 2 << 30)
        let seasons = try SeriesMonitor.parseSettings("seasons=2,3,delete-watched")
        #expect(seasons.mode == .seasons([2, 3]) && seasons.deleteWatched)
        let m = SeriesMonitor(server: "s", seriesId: "x", mode: .seasons([3, 2]), deleteWatched: true, maxStorage: 500)
        #expect(m.settings == "seasons=3,2,delete-watched,max-storage=500")
        let again = try SeriesMonitor.parseSettings(m.settings)
        #expect(again.mode == .seasons([2, 3]) && again.maxStorage == 500)
        #expect(SeriesMonitor.Mode("latest_season") == .latestSeason && SeriesMonitor.Mode("seasons=") == nil && SeriesMonitor.Mode("weekly") == nil)
        #expect(throws: LabstreamError.self) { try SeriesMonitor.parseSettings("delete-watched") }             // no mode
        #expect(throws: LabstreamError.self) { try SeriesMonitor.parseSettings("all future") }                // two modes
        #expect(throws: LabstreamError.self) { try SeriesMonitor.parseSettings("all max-storage=lots") }
    }
}
