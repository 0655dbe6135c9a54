import Foundation
import LabstreamCore
import LabstreamFixture
import LabstreamTestSupport
import Testing

/// Monitored series on each backend, through the CLI and a real mount: the server gains
/// episodes and a season, marks episodes watched, and goes away; the monitor keeps the newest
/// season's unwatched episodes local within its cap.
@Suite(.serialized) struct MonitorTests {
    static let series = "test/Shows/Keep (2021)"
    static func episode(_ season: Int, _ number: Int) -> String {
        series + String(format: "/Season %02d/Keep (2021) - S%02dE%02d - Part %d.mkv", season, season, number, number)
    }

    /// The test library plus a series whose later episodes the server does not have yet.
    static func catalog(_ dir: String) -> FixtureCatalog {
        var catalog = testCatalog(in: dir)
        var episodes: [FixtureCatalog.Episode] = []
        for (season, number) in [(1, 1), (1, 2), (2, 1), (2, 2), (3, 1), (3, 2), (3, 3)] {
            let file = dir + "/keep-s\(season)e\(number).mkv"
            writeRandomFile(file, size: 300_000, seed: UInt64(100 + season * 10 + number))
            episodes.append(.init(season: season, number: number, title: "Part \(number)", file: file, container: "mkv"))
        }
        catalog.series.append(.init(name: "Keep", year: 2021, episodes: episodes))
        return catalog
    }

    static let later = [(2, 2), (3, 1), (3, 2), (3, 3)]

    func source(_ m: MountedLabstream, _ season: Int, _ number: Int) -> String { m.mediaDir + "/keep-s\(season)e\(number).mkv" }
    func item(_ m: MountedLabstream, _ season: Int, _ number: Int) throws -> String { try #require(m.fixture.itemId(forFile: source(m, season, number))) }
    func attr(_ m: MountedLabstream, _ rel: String, _ name: String) -> String? { StatusCommandXattr.get(m.path(rel), name) }
    func pinned(_ m: MountedLabstream, _ season: Int, _ number: Int) -> Bool { attr(m, Self.episode(season, number), "pinned") == "1" }
    func stored(_ m: MountedLabstream, _ season: Int, _ number: Int) -> Bool { attr(m, Self.episode(season, number), "state") == "unverified" }
    func sync(_ m: MountedLabstream) throws { #expect(try m.cli(["sync"]).code == 0) }

    @Test(arguments: [ServerFixture.Kind.jellyfin, .emby, .plex])
    func latestSeasonWithDeleteWatchedAndACapKeepsTheNewestUnwatchedEpisodes(kind: ServerFixture.Kind) throws {
        let m = try MountedLabstream("monitor-\(kind)", kind: kind, catalog: Self.catalog)
        for (s, e) in Self.later { m.fixture.hold(itemId: try item(m, s, e)) }
        try m.mount()
        let add = try m.cli(["monitor", "add", m.path(Self.series), "--mode", "latest-season", "--delete-watched", "--max-storage", "700000"])
        #expect(add.code == 0, "\(add.stdout) \(add.stderr)")
        #expect(attr(m, Self.series, "monitor") == "latest-season,delete-watched,max-storage=700000")
        // Season 2 is the newest the server has: its one episode is pinned, season 1 is not.
        #expect(eventually { stored(m, 2, 1) }, "\(m.log)")
        #expect(pinned(m, 2, 1) && !pinned(m, 1, 1) && !pinned(m, 1, 2))
        #expect(try sha256(m.path(Self.episode(2, 1))) == sha256(source(m, 2, 1)))
        // A season folder is not the series: a monitor there is refused, saying where it goes.
        let season = try m.cli(["monitor", "add", m.path(Self.series + "/Season 01"), "--mode", "all"])
        #expect(season.code == 64 && season.stderr.contains("series folder itself"), "\(season.stderr)")
        // An unknown mode is refused as such, though the series is monitored already.
        let weekly = try m.cli(["monitor", "add", m.path(Self.series), "--mode", "weekly"])
        #expect(weekly.code == 64 && weekly.stderr.contains("--mode takes"), "\(weekly.stderr)")

        // The server gains an episode: the next refresh pins it.
        m.fixture.release(itemId: try item(m, 2, 2))
        try sync(m)
        #expect(eventually { stored(m, 2, 2) && pinned(m, 2, 2) }, "\(m.log)")
        #expect(
            eventually { attr(m, Self.series, "monitor_holds") == "episodes=2 bytes=600000 max=700000 held_by_cap=0" },
            "\(attr(m, Self.series, "monitor_holds") ?? "-")")

        // A watched episode is let go and its copy removed; one pinned by hand is not touched.
        #expect(try m.cli(["pin", m.path(Self.episode(1, 1))]).code == 0)
        m.fixture.markPlayed(itemId: try item(m, 2, 1))
        m.fixture.markPlayed(itemId: try item(m, 1, 1))
        try sync(m)
        #expect(eventually { !pinned(m, 2, 1) && attr(m, Self.episode(2, 1), "reason") == StatusReason.monitorLetGo.sentence }, "\(m.log)")
        #expect(attr(m, Self.episode(2, 1), "bytes")?.hasPrefix("0/") == true)
        #expect(pinned(m, 1, 1) && pinned(m, 2, 2))

        // A new season: latest-season follows it within the cap (two of its three fit); the old
        // season's episode is unpinned and keeps its bytes.
        for (s, e) in Self.later where s == 3 { m.fixture.release(itemId: try item(m, s, e)) }
        try sync(m)
        #expect(eventually { stored(m, 3, 1) && stored(m, 3, 2) && !pinned(m, 2, 2) }, "\(m.log)")
        #expect(!pinned(m, 3, 3) && stored(m, 2, 2))
        #expect(
            eventually { attr(m, Self.series, "monitor_holds") == "episodes=2 bytes=600000 max=700000 held_by_cap=1" },
            "\(attr(m, Self.series, "monitor_holds") ?? "-")")
        let status = try m.cli(["status", m.path(Self.series)])
        #expect(
            status.stdout.contains("monitor: latest-season, watched episodes removed, at most") && status.stdout.contains("1 held back by the cap"),
            "\(status.stdout)")
        let held = try m.cli(["status", "--json", m.path(Self.episode(3, 3))])
        #expect(held.stdout.contains("\"reason\" : \"held_by_cap\""), "\(held.stdout)")
        let listed = try m.cli(["monitor", "list"])
        #expect(
            listed.stdout.contains(Self.series) && listed.stdout.contains("holds 2 episodes") && listed.stdout.contains("1 held back by the cap"),
            "\(listed.stdout)")

        // Unpinning a monitored episode by hand: the monitor leaves it alone, and the cap lets the next one in.
        #expect(try m.cli(["unpin", m.path(Self.episode(3, 2))]).code == 0)
        try sync(m)
        #expect(eventually { pinned(m, 3, 3) }, "\(m.log)")
        #expect(!pinned(m, 3, 2))

        // Offline, and after a restart offline: the monitor waits, nothing is unpinned or removed.
        try m.unmount()
        m.fixture.stop()
        try m.mount()
        #expect(try m.cli(["sync"]).code != 0)
        #expect(attr(m, Self.series, "monitor") == "latest-season,delete-watched,max-storage=700000")
        #expect(pinned(m, 3, 1) && pinned(m, 3, 3) && pinned(m, 1, 1) && stored(m, 3, 1))
        let json = try m.cli(["monitor", "list", "--json"])
        #expect(json.stdout.contains("\"path\" : \"\(Self.series)\"") && json.stdout.contains("\"mode\" : \"latest-season\""), "\(json.stdout)")

        // Removing the monitor keeps every pin.
        #expect(try m.cli(["monitor", "remove", m.path(Self.series)]).code == 0)
        #expect(attr(m, Self.series, "monitor") == nil)
        #expect(pinned(m, 3, 1) && pinned(m, 3, 3))
        try m.unmount()
    }

    /// A monitor that holds nothing says what it skipped and why, with counts, and when it looks
    /// next: in `monitor list` and `status` of its folder, text and JSON, with the daemon
    /// running, offline, and with no daemon. A watched query that lists episodes their own
    /// `UserData.Played` calls unwatched is named in the log, and they are kept as unwatched.
    @Test(arguments: [ServerFixture.Kind.jellyfin, .emby])
    func aMonitorThatHoldsNothingSaysWhatItSkippedAndWhenItLooksNext(kind: ServerFixture.Kind) throws {
        let m = try MountedLabstream("monitor-why-\(kind)", kind: kind, catalog: Self.catalog)
        for (s, e) in Self.later { m.fixture.hold(itemId: try item(m, s, e)) }
        m.fixture.markPlayed(itemId: try item(m, 1, 1))
        m.fixture.markPlayed(itemId: try item(m, 1, 2))
        try m.mount()
        #expect(try m.cli(["monitor", "add", m.path(Self.series), "--mode", "seasons=1", "--delete-watched"]).code == 0)
        func list() -> String { (try? m.cli(["monitor", "list"]).stdout) ?? "" }
        #expect(eventually { list().contains("holds 0 episodes, 0 B; skipped: 2 watched (delete-watched lets them go)") }, "\(list())")
        // Its server's event channel is open: a change it tells is looked at at once.
        #expect(eventually { list().contains("next look: as soon as test tells of a change, and at the next catalog refresh, ") }, "\(list())")
        let row = try #require(try JSONSerialization.jsonObject(with: Data(try m.cli(["monitor", "list", "--json"]).stdout.utf8)) as? [[String: Any]]).first
        #expect(row?["episodes"] as? Int == 0 && row?["in_scope"] as? Int == 2, "\(row ?? [:])")
        #expect((row?["skipped"] as? [String: Int]) == ["watched": 2], "\(row ?? [:])")
        // The next look is the daemon's next refresh (refresh_interval, 900 s, after its start-up
        // sync), as the daemon planned it and `server list` shows it.
        let servers = try JSONSerialization.jsonObject(with: Data(try m.cli(["server", "list", "--json"]).stdout.utf8)) as? [[String: Any]]
        let lastSync = try #require(servers?.first?["last_sync"] as? Int)
        let planned = try #require(servers?.first?["next_refresh"] as? Int)
        #expect((lastSync + 900...lastSync + 902).contains(planned), "planned \(planned), last sync \(lastSync)")
        let next = row?["next_look"] as? [String: Any]
        #expect(
            next?["when"] as? String == "refresh" && next?["at"] as? Int == planned && next?["on_server_change"] as? Bool == true,
            "\(row ?? [:]) planned \(planned)")
        // `status` of the series folder says the same, above its files.
        let status = try m.cli(["status", m.path(Self.series)])
        #expect(
            status.stdout.hasPrefix(
                "monitor: seasons=1, watched episodes removed; holds 0 episodes, 0 B; skipped: 2 watched (delete-watched lets them go); "
                    + "next look: as soon as test tells of a change, and at the next catalog refresh, "), "\(status.stdout)")
        let statusJSON = try m.cli(["status", "--json", m.path(Self.series)]).stdout
        let json = try #require(try JSONSerialization.jsonObject(with: Data(statusJSON.utf8)) as? [[String: Any]])
        let monitor = json.first?["monitor"] as? [String: Any]
        #expect(json.first?["path"] as? String == m.path(Self.series) && (monitor?["skipped"] as? [String: Int]) == ["watched": 2], "\(json.first ?? [:])")
        #expect(json.dropFirst().allSatisfy { $0["state"] != nil && $0["monitor"] == nil })

        // The server stops applying the watched query's filter: it lists unwatched episodes too,
        // each with its own UserData.Played false. They are unwatched: season 1's second episode,
        // marked unwatched, is pinned, and the log names how many disagree (it and season 2's).
        m.fixture.ignoreIsPlayedFilter()
        m.fixture.markPlayed(itemId: try item(m, 1, 2), false)
        #expect(try m.cli(["sync"]).code == 0)
        let said = "its watched query listed 2 episodes of monitored series that their own watched state in the same answer calls unwatched"
        #expect(eventually { m.log.contains(said) }, "\(m.log)")
        #expect(eventually { stored(m, 1, 2) && pinned(m, 1, 2) }, "\(m.log)")
        #expect(!pinned(m, 1, 1))
        #expect(eventually { list().contains("holds 1 episode, ") == true && list().contains("skipped: 1 watched") }, "\(list())")

        // Offline: nothing changes, what it lacks waits for the server, and it looks again when the server answers.
        try m.unmount()
        m.fixture.stop()
        try m.mount()
        #expect(try m.cli(["sync"]).code != 0)
        #expect(
            eventually { list().contains("skipped: 1 waiting for the server, which is not answering; next look: when test answers again") },
            "\(list())")
        #expect(pinned(m, 1, 2))
        // With no daemon: the last evaluation, from the index, and the next look once mounted.
        try m.unmount()
        #expect(list().contains("\(Self.series)\tseasons=1, watched episodes removed\tholds 1 episode, "), "\(list())")
        #expect(list().contains("next look: once mounted (no daemon is running)"), "\(list())")
        let offlineStatus = try m.cli(["status", Self.series])
        #expect(
            offlineStatus.stdout.contains("monitor: seasons=1, watched episodes removed; holds 1 episode, "),
            "\(offlineStatus.stdout) \(offlineStatus.stderr)")
    }

    /// Jellyfin saves no item when it is watched (only its user data): the sync finds nothing
    /// changed and leaves the tree alone, and the monitor still lets the watched episode go.
    @Test func aWatchedEpisodeIsLetGoAfterASyncThatFoundNothingChanged() throws {
        let m = try MountedLabstream("monitor-unchanged", catalog: Self.catalog)
        for (s, e) in Self.later { m.fixture.hold(itemId: try item(m, s, e)) }
        try m.mount()
        #expect(try m.cli(["monitor", "add", m.path(Self.series), "--mode", "all", "--delete-watched"]).code == 0)
        #expect(eventually { stored(m, 1, 1) && stored(m, 2, 1) }, "\(m.log)")
        m.fixture.markPlayed(itemId: try item(m, 1, 1))
        let sync = try m.cli(["sync"])
        #expect(sync.code == 0 && m.log.contains("nothing changed since the last sync"), "\(sync.stdout) \(m.log)")
        #expect(eventually { !pinned(m, 1, 1) && attr(m, Self.episode(1, 1), "reason") == StatusReason.monitorLetGo.sentence }, "\(m.log)")
        #expect(pinned(m, 2, 1))
        try m.unmount()
    }

    /// `future` takes only what the server gains after the monitor was made; restarting the
    /// daemon keeps the monitor and what it holds.
    @Test func futureTakesOnlyEpisodesAddedAfterTheMonitorWasMade() throws {
        let m = try MountedLabstream("monitor-future", catalog: Self.catalog)
        m.fixture.hold(itemId: try item(m, 2, 2))
        try m.mount()
        #expect(try m.cli(["monitor", "add", m.path(Self.series), "--mode", "future"]).code == 0)
        m.fixture.release(itemId: try item(m, 2, 2))
        try sync(m)
        #expect(eventually { stored(m, 2, 2) }, "\(m.log)")
        #expect(!pinned(m, 1, 1) && !pinned(m, 1, 2) && !pinned(m, 2, 1))
        try m.unmount()
        try m.mount()
        // The series folder names its monitor once the restarted daemon's first evaluation has
        // read it back (it runs in the background after the mount is up); the pins were kept.
        #expect(eventually { attr(m, Self.series, "monitor") == "future" }, "\(m.log)")
        #expect(pinned(m, 2, 2) && !pinned(m, 2, 1))
        try m.unmount()
    }
}

/// On Silo a monitor is also the server's own: a download subscription of this device, synced
/// at each evaluation so the server registers the entries; one changed on the server is taken,
/// not overwritten; removing the monitor deletes it there (its entries stay).
@Suite(.serialized) struct SiloMonitorTests {
    func attr(_ m: MountedSilo, _ rel: String, _ name: String) -> String? { StatusCommandXattr.get(m.path(rel), name) }
    func pinned(_ m: MountedSilo, _ season: Int, _ number: Int) -> Bool { attr(m, MonitorTests.episode(season, number), "pinned") == "1" }
    func stored(_ m: MountedSilo, _ season: Int, _ number: Int) -> Bool { attr(m, MonitorTests.episode(season, number), "state") == "unverified" }
    func episode(_ m: MountedSilo, _ season: Int, _ number: Int) throws -> String {
        try #require(m.fixture.episodeContentId(series: "Keep", season: season, episode: number))
    }
    func entries(_ m: MountedSilo, _ episode: String) -> [SiloDownloadSnapshot] { m.fixture.downloadEntries.filter { $0.episodeId == episode } }

    @Test func aMonitorIsTheDevicesSubscriptionAndTakesChangesMadeOnTheServer() throws {
        let m = try MountedSilo("silo-monitor", catalog: MonitorTests.catalog)
        for (s, e) in MonitorTests.later { #expect(m.fixture.hold(episodeContentId: try episode(m, s, e))) }
        #expect(try m.addWithPassword().code == 0)
        try m.mount()
        let series = MonitorTests.series
        let add = try m.cli(["monitor", "add", m.path(series), "--mode", "latest-season", "--delete-watched", "--max-storage", "700000"])
        #expect(add.code == 0, "\(add.stderr)")
        #expect(eventually { m.fixture.subscriptions.count == 1 }, "\(m.log)")
        let made = try #require(m.fixture.subscriptions.first)
        let device = try String(contentsOfFile: m.dataDir + "/device-id", encoding: .utf8).trimmingCharacters(in: .whitespacesAndNewlines)
        #expect(made.mode == "latest_season" && made.deleteWatched && made.maxStorageBytes == 700_000 && made.deviceId == device, "\(made)")
        #expect(eventually { m.fixture.requestLog.contains { $0.path.hasSuffix("/downloads/subscriptions/sync") && $0.status == 200 } })
        // Season 2's one episode: pinned, fetched, one entry on the server for it.
        #expect(eventually { stored(m, 2, 1) }, "\(m.log)")
        let twoOne = try episode(m, 2, 1)
        #expect(eventually { entries(m, twoOne).count == 1 && entries(m, twoOne).first?.status == "completed" }, "\(entries(m, twoOne))")
        #expect(!pinned(m, 1, 1))

        // Watched on the server: let go here, and its entry deleted there; the monitor does not register it again.
        m.fixture.markWatched(contentId: twoOne)
        #expect(try m.cli(["sync"]).code == 0)
        #expect(eventually { !pinned(m, 2, 1) && attr(m, MonitorTests.episode(2, 1), "reason") == StatusReason.monitorLetGo.sentence }, "\(m.log)")
        #expect(eventually { entries(m, twoOne).isEmpty }, "\(entries(m, twoOne))")

        // Changed on the server (another app of this device): taken here, never overwritten.
        #expect(m.fixture.changeSubscriptionBehindClient(id: made.id, mode: "all"))
        #expect(try m.cli(["sync"]).code == 0)
        #expect(eventually { attr(m, series, "monitor") == "all,delete-watched,max-storage=700000" }, "\(attr(m, series, "monitor") ?? "-") \(m.log)")
        #expect(m.fixture.subscriptions.first?.mode == "all" && m.log.contains("was changed on the server; taking its settings"))
        #expect(eventually { stored(m, 1, 1) && stored(m, 1, 2) }, "\(m.log)")  // 600 000 bytes: within the cap
        #expect(!pinned(m, 2, 1))
        #expect(try entries(m, episode(m, 1, 1)).count == 1 && entries(m, episode(m, 1, 2)).count == 1)

        // Changed here: sent under If-Match.
        #expect(try m.cli(["monitor", "set", m.path(series), "--mode", "seasons=1"]).code == 0)
        #expect(
            eventually { m.fixture.subscriptions.first?.mode == "specific_seasons" && m.fixture.subscriptions.first?.seasonNumbers == [1] },
            "\(m.fixture.subscriptions) \(m.log)")
        // The fixture changes its state before its answer is written and logged (status 0 until then).
        func patches() -> [SiloLoggedRequest] { m.fixture.requestLog.filter { $0.method == "PATCH" && $0.path.contains("/downloads/subscriptions/") } }
        #expect(eventually { !patches().isEmpty && patches().allSatisfy { $0.status != 0 } }, "\(patches())")
        #expect(patches().allSatisfy { $0.status == 200 }, "\(patches())")

        // Removed: gone on the server too; the pins and entries stay.
        #expect(try m.cli(["monitor", "remove", m.path(series)]).code == 0)
        #expect(m.fixture.subscriptions.isEmpty)
        #expect(pinned(m, 1, 1) && pinned(m, 1, 2))
        #expect(try entries(m, episode(m, 1, 1)).count == 1)
        try m.unmount()
    }

    /// The server makes the monitor but every sync of it fails (503): which server monitor is
    /// this one's is recorded all the same, so removing the monitor deletes it there (it used to
    /// be recorded only after a sync that worked, and was left on the server).
    @Test func aMonitorWhoseSyncFailsIsStillDeletedOnTheServerWhenRemoved() throws {
        let m = try MountedSilo("silo-monitor-sync-fails", catalog: MonitorTests.catalog)
        #expect(try m.addWithPassword().code == 0)
        m.fixture.inject(.status(503), pathPrefix: "/downloads/subscriptions/sync", times: nil)
        try m.mount()
        defer { stopDaemon(at: m.mountpoint, pid: m.daemonPid, env: m.env) }
        #expect(try m.cli(["monitor", "add", m.path(MonitorTests.series), "--mode", "future"]).code == 0)
        let failed = { m.fixture.requestLog.contains { $0.path.hasSuffix("/downloads/subscriptions/sync") && $0.status == 503 } }
        #expect(eventually { m.fixture.subscriptions.count == 1 && failed() && m.log.contains("could not be kept this time") }, "\(m.log)")
        #expect(try m.cli(["monitor", "remove", m.path(MonitorTests.series)]).code == 0)
        #expect(m.fixture.subscriptions.isEmpty, "\(m.fixture.subscriptions) \(m.log)")
        try m.unmount()
    }

    /// Another app changes the monitor between this device's read of it and its sync (the sync
    /// answers 409): the next evaluation takes the server's settings and never sends its own.
    @Test func aMonitorChangedOnTheServerDuringASyncIsTakenNotOverwritten() throws {
        let m = try MountedSilo("silo-monitor-race", catalog: MonitorTests.catalog)
        #expect(try m.addWithPassword().code == 0)
        try m.mount()
        let series = MonitorTests.series
        #expect(try m.cli(["monitor", "add", m.path(series), "--mode", "latest-season"]).code == 0)
        func syncs(_ status: Int) -> Int { m.fixture.requestLog.filter { $0.path.hasSuffix("/downloads/subscriptions/sync") && $0.status == status }.count }
        #expect(eventually { syncs(200) >= 1 }, "\(m.log)")
        let made = try #require(m.fixture.subscriptions.first)
        m.fixture.changeSubscriptionAtNextSync(id: made.id, mode: "all")
        #expect(try m.cli(["sync"]).code == 0)
        #expect(eventually { syncs(409) == 1 }, "\(m.fixture.requestLog.filter { $0.path.contains("subscriptions") }) \(m.log)")
        #expect(try m.cli(["sync"]).code == 0)
        #expect(eventually { attr(m, series, "monitor") == "all" }, "\(attr(m, series, "monitor") ?? "-") \(m.log)")
        #expect(m.fixture.subscriptions.first?.mode == "all", "\(m.fixture.subscriptions)")
        #expect(
            !m.fixture.requestLog.contains { $0.method == "PATCH" && $0.path.contains("/downloads/subscriptions/") },
            "\(m.fixture.requestLog.filter { $0.path.contains("subscriptions") })")
        try m.unmount()
    }

    /// A server whose capability does not offer monitors: the monitor is evaluated here all the
    /// same, its episodes registered one by one, and no subscription route is asked.
    @Test func withoutTheServersMonitorsTheMonitorIsKeptHere() throws {
        let m = try MountedSilo("silo-monitor-off", catalog: MonitorTests.catalog)
        m.fixture.setSeriesMonitoring(false)
        #expect(try m.addWithPassword().code == 0)
        try m.mount()
        #expect(try m.cli(["monitor", "add", m.path(MonitorTests.series), "--mode", "seasons=1"]).code == 0)
        #expect(eventually { stored(m, 1, 1) && stored(m, 1, 2) }, "\(m.log)")
        #expect(!pinned(m, 2, 1))
        #expect(try entries(m, episode(m, 1, 1)).count == 1 && entries(m, episode(m, 1, 2)).count == 1)
        #expect(
            !m.fixture.requestLog.contains { $0.path.contains("/downloads/subscriptions") },
            "\(m.fixture.requestLog.filter { $0.path.contains("subscriptions") })")
        #expect(m.log.contains("keeps no series monitors of its own"))
        try m.unmount()
    }
}

/// The engine side of a monitor, without a mount: a stop between recording a monitor's pin and
/// making it, and an open file.
@Suite(.serialized) struct MonitorEngineTests {
    static let show = "test/Shows/Show (2020)"
    static let pilot = show + "/Season 01/Show (2020) - S01E01 - Pilot.mkv"
    static let second = show + "/Season 01/Show (2020) - S01E02 - Second.mp4"

    func pinned(_ rig: EngineRig, _ rel: String) throws -> Bool { rig.transfers.row(for: try rig.file(rel).tree)?.pinned == true }
    func evaluate(_ rig: EngineRig) { rig.transfers.setCatalog(rig.tree) }  // a catalog reload

    /// A pin the monitor recorded but did not make (the daemon stopped between the two) is made
    /// by the next evaluation as the monitor's own: it is let go once watched, unlike a hand pin.
    /// An open episode is not removed while it is open.
    @Test func aRecordedPinIsCompletedAsTheMonitorsAndAnOpenEpisodeStays() throws {
        let rig = try EngineRig("monitor-intent")
        let pilot = try rig.file(Self.pilot).tree.key
        let series = try #require(try rig.index.catalog(server: "test").flatMap(\.items).first { $0.id == pilot.itemId }?.seriesId)
        try rig.index.saveMonitor(SeriesMonitor(server: "test", seriesId: series, mode: .seasons([1]), deleteWatched: true, created: 1))
        try rig.index.setMonitoredEpisode(server: "test", item: pilot.itemId, .init(seriesId: series, sourceId: pilot.sourceId, state: .pinned))
        evaluate(rig)
        #expect(eventually { (try? pinned(rig, Self.pilot)) == true && (try? pinned(rig, Self.second)) == true })
        #expect(try rig.index.monitoredEpisodes(server: "test")[pilot.itemId]?.state == .pinned)
        // Both watched; the second is open: only the pilot goes.
        let open = try rig.fs.open(try rig.file(Self.second).ino, writeRequested: false)
        for rel in [Self.pilot, Self.second] { rig.fixture.markPlayed(itemId: try #require(rig.fixture.itemId(forFile: try rig.file(rel).source))) }
        evaluate(rig)
        let pilotFile = try rig.file(Self.pilot).tree
        // A monitor lets go in two steps, an unpin then a cancel: unpinned alone, a finished
        // copy still says what its completion said (`probe_off`). Settled is the cancel's row.
        func letGo(_ file: TreeFile) -> Bool {
            guard let row = rig.transfers.row(for: file) else { return false }
            return !row.pinned && row.reason == StatusReason.monitorLetGo && row.present.isEmpty
        }
        #expect(eventually { letGo(pilotFile) }, "\(String(describing: rig.transfers.row(for: pilotFile)))")
        #expect(try pinned(rig, Self.second))
        // Closed, it goes at the next evaluation.
        rig.fs.release(handle: open)
        evaluate(rig)
        let secondFile = try rig.file(Self.second).tree
        #expect(eventually { letGo(secondFile) }, "\(String(describing: rig.transfers.row(for: secondFile)))")
        #expect(letGo(pilotFile), "\(String(describing: rig.transfers.row(for: pilotFile)))")
    }
}
