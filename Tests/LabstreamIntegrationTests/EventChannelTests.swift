import Foundation
import LabstreamCore
import LabstreamFixture
import Testing

/// A server's event channel on a real mount (Jellyfin's and Emby's WebSocket, Plex's event
/// source): what the server tells arrives in the mount with no refresh interval elapsing (it is
/// a day here), monitors act on it, and a dropped channel is opened again and says so.
@Suite struct EventChannelTests {
    static let film = "test/Movies/Beta (2002)/Beta (2002).mp4"
    static let gone = "test/Movies/Gamma/Gamma.mkv"
    static let series = "test/Shows/Show (2020)"
    static let episode = series + "/Season 02/Show (2020) - S02E01 - Return.mkv"

    func exists(_ m: MountedLabstream, _ rel: String) -> Bool { FileManager.default.fileExists(atPath: m.path(rel)) }

    @Test(arguments: [ServerFixture.Kind.jellyfin, .emby, .plex])
    func whatTheServerTellsAppearsAtOnceAndALostChannelReconnects(kind: ServerFixture.Kind) throws {
        let m = try MountedLabstream("events-\(kind)", kind: kind, cacheConfig: "refresh_interval = 86400")
        let film = try #require(m.fixture.itemId(forFile: m.mediaDir + "/beta.mp4"))
        let episode = try #require(m.fixture.itemId(forFile: m.mediaDir + "/s2e1.mkv"))
        let gone = try #require(m.fixture.itemId(forFile: m.mediaDir + "/gamma.mkv"))
        m.fixture.hold(itemId: film)
        m.fixture.hold(itemId: episode)
        m.fixture.tellChanges()
        try m.mount()
        #expect(eventually { m.fixture.eventSocketsOpen == 1 }, "\(m.log)")
        #expect(eventually { StatusCommandXattr.get(m.mountpoint, "events.test")?.hasPrefix("open since=") == true }, "\(m.log)")
        // Jellyfin's ForceKeepAlive asked for keep-alives: the first goes out at once (Plex's
        // event source is one-way).
        if kind != .plex { #expect(eventually { m.fixture.eventKeepAlives >= 1 }, "\(m.log)") }
        #expect(!exists(m, Self.film) && exists(m, Self.gone))
        #expect(try m.cli(["monitor", "add", m.path(Self.series), "--mode", "all"]).code == 0)

        // Added, removed: in the mount without a refresh, and the monitor pins the new episode.
        m.fixture.release(itemId: film)
        m.fixture.release(itemId: episode)
        m.fixture.remove(itemId: gone)
        #expect(eventually { exists(m, Self.film) && exists(m, Self.episode) && !exists(m, Self.gone) }, "\(m.log)")
        #expect(eventually { StatusCommandXattr.get(m.path(Self.episode), "pinned") == "1" }, "\(m.log)")
        #expect(m.log.contains("events test: the server told of changes"), "\(m.log)")

        // `server list` says the channel is open and when the periodic refresh comes.
        let list = try m.cli(["server", "list"])
        #expect(list.stdout.contains("events open") && list.stdout.contains("next refresh "), "\(list.stdout)")
        let json = try m.cli(["server", "list", "--json"])
        #expect(json.stdout.contains("\"events\" : \"open\"") && json.stdout.contains("\"next_refresh\""), "\(json.stdout)")

        // Dropped without a close frame: the log says so, and the channel opens again by itself.
        m.fixture.dropEventSockets()
        #expect(eventually { m.log.contains("events test: channel lost") }, "\(m.log)")
        #expect(eventually { m.fixture.eventSocketsOpened == 2 && m.fixture.eventSocketsOpen == 1 }, "\(m.log)")
        // What was told while it was down is fetched once it is back (a sync on reopening).
        #expect(eventually { StatusCommandXattr.get(m.mountpoint, "events.test")?.hasPrefix("open since=") == true }, "\(m.log)")
        m.fixture.touch(itemId: film)
        #expect(eventually { m.log.components(separatedBy: "the server told of changes").count >= 3 }, "\(m.log)")

        try m.unmount()
        #expect(m.log.contains("events test: channel closed"), "\(m.log)")
        #expect(m.fixture.eventSocketsOpen == 0)
        #expect(!m.log.contains(m.fixture.accessToken))
    }

    /// A sync the channel asked for that ends after the mount went away: its reload has no kernel
    /// left to tell, and the daemon still closes the channel and exits whole (the reload once
    /// called into the destroyed FUSE session: SIGSEGV at unmount).
    @Test func aSyncTheChannelAskedForThatEndsAfterTheUnmountLeavesTheDaemonWhole() throws {
        let m = try MountedLabstream("events-late", kind: .jellyfin, cacheConfig: "refresh_interval = 86400")
        defer { m.fixture.holdRequests(withQueryKey: nil) }
        let film = try #require(m.fixture.itemId(forFile: m.mediaDir + "/beta.mp4"))
        m.fixture.hold(itemId: film)
        m.fixture.tellChanges()
        try m.mount()
        defer { stopDaemon(at: m.mountpoint, pid: m.daemonPid, env: m.env) }
        #expect(eventually { StatusCommandXattr.get(m.mountpoint, "events.test")?.hasPrefix("open since=") == true }, "\(m.log)")
        func listingAsked() -> Bool { m.fixture.requestLog.contains { $0.query.keys.contains { $0.lowercased() == "mindatelastsaved" } } }
        #expect(!listingAsked())
        m.fixture.holdRequests(withQueryKey: "minDateLastSaved")
        m.fixture.release(itemId: film)
        #expect(eventually { listingAsked() }, "\(m.log)")  // the channel's sync waits on the wire

        // `unmount` returns once the daemon is gone, which waits for the held sync: the answer is
        // let go only once the FUSE loop has ended.
        let unmounted = DispatchSemaphore(value: 0)
        let code = LockedBox<Int32?>(nil)
        Thread {
            code.set(try? m.cli(["unmount", m.mountpoint]).code)
            unmounted.signal()
        }.start()
        #expect(eventually { m.log.contains("info: unmounted ") }, "\(m.log)")
        m.fixture.holdRequests(withQueryKey: nil)
        unmounted.wait()
        #expect(code.get() == 0)
        #expect(waitForExit(pid: m.daemonPid), "\(m.log)")
        #expect(m.log.contains("items changed since the last sync"), "\(m.log)")
        #expect(m.log.contains("events test: channel closed") && !m.log.contains("crashed"), "\(m.log)")
    }
}
