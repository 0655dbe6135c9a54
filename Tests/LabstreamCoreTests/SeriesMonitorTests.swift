import LabstreamBackends
import LabstreamCore
import Testing

/// Which episodes a monitored series keeps: its mode's scope, the person's own pins, watched
/// episodes and the storage cap.
@Suite struct SeriesMonitorTests {
    func ep(
        _ season: Int, _ number: Int, size: Int64 = 100, played: Bool = false, hand: Bool = false, monitor: Bool = false,
        declined: Bool = false, open: Bool = false
    ) -> MonitoredEpisode {
        MonitoredEpisode(
            key: FileKey(server: "s", itemId: "e\(season)x\(number)", sourceId: "f\(season)x\(number)"), season: season, episode: number,
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
        #expect(ids(P.plan(monitor(.latestSeason), episodes: [ep(0, 1), ep(0, 2)]).pin) == ["e0x1", "e0x2"])  // only specials
        #expect(ids(P.plan(monitor(.seasons([1, 3])), episodes: episodes).pin) == ["e1x1", "e1x2", "e3x1"])
        #expect(ids(P.plan(monitor(.future, baseline: ["e0x1", "e1x1", "e1x2", "e2x1"]), episodes: episodes).pin) == ["e3x1"])
    }

    @Test func aNewSeasonMovesLatestSeasonAlongAndKeepsTheOldBytes() {
        let plan = SeriesMonitorPolicy.plan(
            monitor(.latestSeason), episodes: [ep(1, 1, monitor: true), ep(1, 2, monitor: true), ep(2, 1), ep(1, 3, hand: true)])
        #expect(ids(plan.pin) == ["e2x1"])
        #expect(ids(plan.unpin) == ["e1x1", "e1x2"])  // unpinned, not removed
        #expect(plan.remove.isEmpty)  // the person's own pin stays pinned
        #expect(ids(plan.holds) == ["e2x1"])
    }

    @Test func watchedEpisodesGoWithDeleteWatchedUnlessPinnedByHandOrOpen() {
        let episodes = [
            ep(1, 1, played: true, monitor: true), ep(1, 2, played: true, hand: true), ep(1, 3, played: true, monitor: true, open: true),
            ep(1, 4, played: true), ep(1, 5)
        ]
        let plan = SeriesMonitorPolicy.plan(monitor(.all, deleteWatched: true), episodes: episodes)
        #expect(ids(plan.remove) == ["e1x1"])
        #expect(ids(plan.pin) == ["e1x5"])  // a watched episode is not pinned at all
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
        let open = SeriesMonitorPolicy.plan(
            monitor(.all, cap: 100), episodes: [ep(1, 1, size: 100, monitor: true, open: true), ep(1, 2, size: 100, monitor: true)])
        #expect(open.remove.map(\.itemId) == ["e1x2"] && ids(open.holds) == ["e1x1"])
    }

    @Test func anEpisodeThePersonUnpinnedIsLeftAlone() {
        let plan = SeriesMonitorPolicy.plan(monitor(.all), episodes: [ep(1, 1, declined: true), ep(1, 2)])
        #expect(ids(plan.pin) == ["e1x2"] && plan.unpin.isEmpty && plan.remove.isEmpty)
    }

    /// Every episode in scope is held or skipped for one reason, counted by its code.
    @Test func aMonitorThatHoldsNothingSaysWhy() {
        typealias P = SeriesMonitorPolicy
        // Watched (delete-watched), unpinned by the person, and one that does not fit the cap.
        let episodes = [ep(1, 1, played: true), ep(1, 2, played: true, monitor: true), ep(1, 3, declined: true), ep(1, 4, size: 500)]
        let plan = P.plan(monitor(.all, deleteWatched: true, cap: 400), episodes: episodes)
        #expect(plan.holds.isEmpty && plan.heldBytes == 0 && plan.inScope == 4)
        #expect(plan.skipped == [.watched: 2, .overCap: 1, .declined: 1], "\(plan.skipped)")
        #expect(plan.outcome == MonitorOutcome(episodes: 0, bytes: 0, inScope: 4, skipped: [.watched: 2, .overCap: 1, .declined: 1]))
        // Nothing in scope yet: `future` before the server gains an episode; the count is the series'.
        let future = P.plan(monitor(.future, baseline: ["e1x1", "e1x2"]), episodes: [ep(1, 1), ep(1, 2)])
        #expect(future.inScope == 0 && future.skipped == [.nothingInScope: 2])
        #expect(P.plan(monitor(.seasons([4])), episodes: []).skipped == [.nothingInScope: 0])
        // A monitor that holds everything skips nothing.
        #expect(P.plan(monitor(.all), episodes: [ep(1, 1), ep(1, 2, played: true)]).skipped.isEmpty)
    }

    /// Offline, nothing is pinned, let go or removed; what is pinned is held, the rest waits.
    @Test func offlineAMonitorHoldsWhatIsPinnedAndTheRestWaitsForTheServer() {
        let episodes = [ep(1, 1, monitor: true), ep(1, 2, hand: true), ep(1, 3), ep(1, 4, declined: true), ep(1, 5, played: true, monitor: true)]
        let plan = SeriesMonitorPolicy.plan(monitor(.all, deleteWatched: true, cap: 150), episodes: episodes, online: false)
        #expect(plan.pin.isEmpty && plan.unpin.isEmpty && plan.remove.isEmpty)
        #expect(Set(ids(plan.holds)) == ["e1x1", "e1x2", "e1x5"] && plan.heldBytes == 300)
        #expect(plan.skipped == [.offline: 1, .declined: 1], "\(plan.skipped)")
    }

    /// The next look: the daemon's next catalog refresh, counted from the server's last sync.
    @Test func theNextLookIsTheNextRefreshAfterTheLastSync() {
        typealias P = SeriesMonitorPolicy
        #expect(P.nextLook(daemon: true, online: true, lastSync: 1000, refreshInterval: 900, now: 1200) == .atRefresh(1900))
        #expect(P.nextLook(daemon: true, online: true, lastSync: 1000, refreshInterval: 900, now: 5000) == .atRefresh(5000))  // overdue: now
        #expect(P.nextLook(daemon: true, online: true, lastSync: nil, refreshInterval: 900, now: 5000) == .atRefresh(5000))
        #expect(P.nextLook(daemon: true, online: true, lastSync: 1000, refreshInterval: 0, now: 1200) == .atSync)
        // The daemon's own plan stands over the count from the last sync (an event's sync moved it).
        #expect(P.nextLook(daemon: true, online: true, lastSync: 1500, refreshInterval: 900, now: 1600, planned: 1900) == .atRefresh(1900))
        #expect(P.nextLook(daemon: true, online: true, lastSync: 1500, refreshInterval: 900, now: 2000, planned: 1900) == .atRefresh(2000))
        #expect(P.nextLook(daemon: true, online: false, lastSync: 1500, refreshInterval: 900, now: 1600, planned: 1900) == .whenServerAnswers)
        #expect(P.nextLook(daemon: true, online: false, lastSync: 1000, refreshInterval: 900, now: 1200) == .whenServerAnswers)
        #expect(P.nextLook(daemon: false, online: true, lastSync: 1000, refreshInterval: 900, now: 1200) == .atMount)
        #expect([NextLook.atRefresh(1), .whenServerAnswers, .atSync, .atMount].map(\.code) == ["refresh", "server_answers", "sync", "mount"])
    }

    /// `skipped` as the index keeps it: codes, read back; an unknown code is left out.
    @Test func skippedCountsAreKeptAsCodes() {
        let outcome = MonitorOutcome(episodes: 1, bytes: 2, inScope: 9, skipped: [.offline: 3, .watched: 2, .nothingInScope: 0])
        #expect(outcome.skippedCodes == "watched=2 offline=3 nothing_in_scope=0")
        #expect(MonitorOutcome.skipped(codes: outcome.skippedCodes) == outcome.skipped)
        #expect(MonitorOutcome.skipped(codes: "over_cap=4 someday=1 declined=x") == [.overCap: 4])
    }

    /// An episode the watched query lists while its own flag says unwatched counts as unwatched.
    @Test func anEpisodeTheQueryAndItsOwnFlagDisagreeOnIsUnwatched() {
        let answer = WatchedAnswer(listed: ["a", "b", "c", "movie"], ownFlagUnwatched: ["b", "movie"])
        let verdict = WatchedAgreement.resolve(answer, among: ["a", "b", "c", "d"])
        #expect(verdict.watched == ["a", "c"] && verdict.disagreeing == 1)  // the film is no monitored episode
        #expect(WatchedAgreement.resolve(WatchedAnswer(listed: ["a"]), among: ["a"]) == (["a"], 0))
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
        #expect(throws: LabstreamError.self) { try SeriesMonitor.parseSettings("delete-watched") }  // no mode
        #expect(throws: LabstreamError.self) { try SeriesMonitor.parseSettings("all future") }  // two modes
        #expect(throws: LabstreamError.self) { try SeriesMonitor.parseSettings("all max-storage=lots") }
    }
}

/// Mirroring a monitor on a server that keeps its own (Silo's subscriptions): made when
/// missing, changed when changed here, taken when changed there.
@Suite struct SeriesSubscriptionTests {
    let monitor = SeriesMonitor(server: "s", seriesId: "sr_1", mode: .latestSeason, deleteWatched: true, maxStorage: 1 << 30)

    func remote(_ mode: SeriesMonitor.Mode = .latestSeason, etag: String = "\"a\"") -> SeriesSubscription {
        SeriesSubscription(id: "sub_1", seriesId: "sr_1", mode: mode, deleteWatched: true, maxStorage: 1 << 30, etag: etag)
    }

    @Test func eachCaseHasItsStep() {
        typealias P = SeriesSubscriptionPolicy
        #expect(P.step(monitor, remote: nil) == .create)
        #expect(P.step(monitor, remote: remote()) == .keep(remote()))
        // Never mirrored, or mirrored at this validator: the monitor's settings are sent.
        #expect(P.step(monitor, remote: remote(.all)) == .update(remote(.all)))
        var seen = monitor
        seen.remoteEtag = "\"a\""
        #expect(P.step(seen, remote: remote(.all)) == .update(remote(.all)))
        // Another validator than the one last seen: changed on the server, taken from there.
        #expect(P.step(seen, remote: remote(.all, etag: "\"b\"")) == .adopt(remote(.all, etag: "\"b\"")))
        #expect(P.step(seen, remote: remote(etag: "\"b\"")) == .keep(remote(etag: "\"b\"")))
    }

    @Test func silosModeNamesMapBothWays() {
        for mode in [SeriesMonitor.Mode.all, .future, .latestSeason, .seasons([0, 2])] {
            let named = SeriesSubscription.modeName(mode)
            #expect(SeriesSubscription.mode(named: named.name, seasons: named.seasons ?? []) == mode)
        }
        #expect(SeriesSubscription.modeName(.latestSeason).name == "latest_season")
        #expect(SeriesSubscription.mode(named: "specific_seasons", seasons: []) == nil && SeriesSubscription.mode(named: "weekly", seasons: []) == nil)
    }

    /// The subscription shape of downloads-api.md § 8.3 (with its `etag`, § 15).
    @Test func aSubscriptionDecodesFromTheDocumentsShape() throws {
        let doc = """
            {"id": "sub_7", "series_id": "sr_55", "mode": "latest_season", "target_season": 4, "delete_watched": true,
             "max_storage_bytes": 21474836480, "active": true, "created_at": "2026-06-19T16:00:00Z", "updated_at": "2026-06-19T16:00:00Z",
             "etag": "\\"9f\\""}
            """
        let read = try #require(SiloDecode.subscription(try JSONValue.parse(Array(doc.utf8))))
        #expect(
            read == SeriesSubscription(id: "sub_7", seriesId: "sr_55", mode: .latestSeason, deleteWatched: true, maxStorage: 21_474_836_480, etag: "\"9f\""))
        let unlimited = try #require(
            SiloDecode.subscription(
                try JSONValue.parse(
                    Array(
                        #"{"id":"sub_8","series_id":"sr_1","mode":"specific_seasons","season_numbers":[3,0],"max_storage_bytes":0,"active":false,"etag":"\"x\""}"#
                            .utf8))))
        #expect(unlimited.mode == .seasons([0, 3]) && unlimited.maxStorage == nil && !unlimited.active && !unlimited.deleteWatched)
        #expect(SiloDecode.subscription(try JSONValue.parse(Array(#"{"id":"sub_9","series_id":"sr_1","mode":"weekly","etag":"\"x\""}"#.utf8))) == nil)
    }
}
