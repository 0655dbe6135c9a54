import Foundation
import LabstreamBackends
import LabstreamCore
import LabstreamFixture
import LabstreamHTTP
import Testing

/// Emby and Plex through real mounts, and all three kinds of server in one mount.
@Suite(.serialized) struct BackendKindsTests {
    @Test(arguments: [ServerFixture.Kind.emby, .plex])
    func eachKindServesTheCatalogByteForByte(kind: ServerFixture.Kind) throws {
        let m = try MountedLabstream("kind-\(kind)", kind: kind)
        try m.mount()
        let expected = expectedTree(m.mediaDir)
        let listed = Set(filesBelow(m.mountpoint))
        #expect(listed == Set(expected.keys).union(["test/Movies/Twin (2010)/Twin (2010).mkv", "test/Movies/Twin (2010) (2)/Twin (2010) (2).mkv"]))
        for (rel, source) in expected {
            #expect(try sha256(m.path(rel)) == sha256(source), "\(kind): \(rel)")
        }
        let downloads = m.fixture.downloadRequests
        #expect(!downloads.isEmpty && downloads.allSatisfy { $0.authorized && $0.range != nil })
        if kind == .plex {
            #expect(downloads.allSatisfy { $0.path.hasPrefix("/library/parts/") })
            // plex.tv was asked for a PIN, polled, then for the account's resources.
            let tv = m.plexTV!.requestLog
            #expect(tv.first == "POST /api/v2/pins" && tv.contains("GET /api/v2/resources"))
        }
        // The config holds the URL the server answers at; no token anywhere but the credential store.
        let config = try String(contentsOfFile: m.configDir + "/labstream.conf", encoding: .utf8)
        #expect(!config.contains(m.fixture.accessToken))
        if kind == .emby { #expect(config.contains(m.fixture.baseURL + "/emby")) }
        let index = try Data(contentsOf: URL(fileURLWithPath: m.dataDir + "/index.sqlite"))
        #expect(index.range(of: Data(m.fixture.accessToken.utf8)) == nil)
        try m.unmount()
    }

    /// A Plex server that ignores `type` and lists episodes in a show section: the tree is the same.
    @Test func aPlexServerListingEpisodesDirectlyGivesTheSameTree() throws {
        let m = try MountedLabstream("plex-flat", kind: .plex)
        m.fixture.listEpisodesInShowSections()
        #expect(try m.cli(["sync"]).code == 0)
        try m.mount()
        let shows = Set(filesBelow(m.mountpoint).filter { $0.hasPrefix("test/Shows/") })
        #expect(shows == Set(expectedTree(m.mediaDir).keys.filter { $0.hasPrefix("test/Shows/") }))
        try m.unmount()
    }

    /// A Plex server that numbers tracks by the spec's MediaType enum (7) and refuses Plex's own
    /// 10: the music section still lists its tracks.
    @Test func aPlexServerNumberingTracksByTheSpecsEnumStillListsThem() throws {
        let m = try MountedLabstream("plex-enum", kind: .plex, catalog: MusicTests.catalog)
        m.fixture.numberMusicByTheSpecsEnum()
        let sync = try m.cli(["sync"])
        #expect(sync.code == 0, "\(sync.stderr)")
        try m.mount()
        #expect(FileManager.default.fileExists(atPath: m.path(MusicTests.closing)), "\(filesBelow(m.path("test/Music")))")
        let asked = m.fixture.requestLog.filter { $0.path == "/library/sections/3/all" }.compactMap { $0.query["type"] }
        #expect(asked.contains("10") && asked.contains("7"), "\(asked)")
        try m.unmount()
    }

    /// A Jellyfin or Emby server that ignores includeItemTypes: seasons and episodes in the
    /// series listing are skipped, the tree is the same.
    @Test(arguments: [ServerFixture.Kind.jellyfin, .emby])
    func aServerIgnoringItemTypesGivesTheSameTree(kind: ServerFixture.Kind) throws {
        let m = try MountedLabstream("types-\(kind)", kind: kind)
        m.fixture.ignoreIncludeItemTypes()
        let sync = try m.cli(["sync"])
        #expect(sync.code == 0, "\(sync.stderr)")
        try m.mount()
        #expect(
            Set(filesBelow(m.mountpoint))
                == Set(expectedTree(m.mediaDir).keys).union(["test/Movies/Twin (2010)/Twin (2010).mkv", "test/Movies/Twin (2010) (2)/Twin (2010) (2).mkv"]))
        try m.unmount()
    }

    /// The test catalog and a film whose title holds a tab and a newline.
    static func catalogWithControls(in dir: String) -> FixtureCatalog {
        var catalog = testCatalog(in: dir)
        writeRandomFile(dir + "/controls.mkv", size: 5000, seed: 12)
        catalog.movies.append(.init(title: "Tab\tand\nnewline", year: 2011, file: dir + "/controls.mkv", container: "mkv"))
        return catalog
    }

    @Test func jellyfinEmbyAndPlexSideBySide() throws {
        let m = try MountedLabstream("three", catalog: Self.catalogWithControls)
        let emby = try ServerFixture(
            kind: .emby, catalog: Self.catalogWithControls(in: m.scratch.sub("emby-media")), userName: "demo", password: "secret-pass")
        try emby.start()
        let plex = try ServerFixture(
            kind: .plex, catalog: Self.catalogWithControls(in: m.scratch.sub("plex-media")), userName: "demo", password: "secret-pass")
        try plex.start()
        let tv = PlexTVFixture(server: plex)
        try tv.start()
        tv.approve(onPoll: 1)
        defer { emby.stop(); plex.stop(); tv.stop() }
        try m.addServer("emby", emby, plexTV: nil)
        try m.addServer("plex", plex, plexTV: tv)
        try m.mount()
        #expect(Set(try FileManager.default.contentsOfDirectory(atPath: m.mountpoint)) == ["test", "emby", "plex"])
        let rel = "Shows/Show (2020)/Season 01/Show (2020) - S01E01 - Pilot.mkv"
        for (server, media) in [("test", m.mediaDir), ("emby", m.scratch.sub("emby-media")), ("plex", m.scratch.sub("plex-media"))] {
            #expect(try sha256(m.path(server + "/" + rel)) == sha256(media + "/s1e1.mkv"), "\(server)")
        }
        #expect(emby.downloadRequests.count > 0 && plex.downloadRequests.count > 0 && m.fixture.downloadRequests.count > 0)
        // Control characters in a title part its words with a space on every backend (they
        // were dropped: `Tabandnewline`).
        for server in ["test", "emby", "plex"] {
            let film = m.path(server + "/Movies/Tab and newline (2011)/Tab and newline (2011).mkv")
            #expect(FileManager.default.fileExists(atPath: film), "\(server): \(filesBelow(m.path(server + "/Movies")))")
        }
        let list = try m.cli(["server", "list"])
        #expect(list.stdout.contains("emby\temby\t") && list.stdout.contains("plex\tplex\t"))
        try m.unmount()
    }

    /// A Plex part key embeds the file's changestamp: a new key is a new file, even at the
    /// same size, and the bytes kept for the old one are not served as the new one's.
    @Test func aChangedPlexPartKeyInvalidatesThePartial() throws {
        let m = try MountedLabstream("plex-key", kind: .plex)
        try m.mount()
        let rel = "test/Movies/Alpha (2001)/Alpha (2001).mkv"
        let source = expectedTree(m.mediaDir)[rel]!
        #expect(try pread(path: m.path(rel), offset: 0, length: MiB) == pread(path: source, offset: 0, length: MiB))
        let first = try #require(m.fixture.downloadRequests.first { $0.requestedRange?.lower == 0 })
        // The same range again is served from the partial: no new request for it (read-ahead
        // of the first read may still be arriving further on).
        let fromZero = { m.fixture.downloadRequests.filter { $0.requestedRange?.lower == 0 }.count }
        let before = fromZero()
        _ = try pread(path: m.path(rel), offset: 0, length: MiB)
        #expect(fromZero() == before)
        try m.unmount()

        m.fixture.touch(itemId: try #require(m.fixture.itemId(forFile: source)))
        m.fixture.clearLog()
        let sync = try m.cli(["sync", "test"])
        #expect(sync.code == 0, "\(sync.stderr)")
        try m.mount()
        #expect(try pread(path: m.path(rel), offset: 0, length: MiB) == pread(path: source, offset: 0, length: MiB))
        let again = m.fixture.downloadRequests.filter { $0.requestedRange?.lower == 0 }
        #expect(!again.isEmpty && again.allSatisfy { $0.path != first.path && $0.path.hasPrefix("/library/parts/") }, "\(again.map(\.path)) vs \(first.path)")
        try m.unmount()
    }

    /// A part that is gone for good (its item too: no new key to read it at) fails each read,
    /// and the log says so once, not once per read.
    @Test func aGonePlexPartIsSaidOnceNotOncePerRead() throws {
        let m = try MountedLabstream("plex-gone", kind: .plex)
        try m.mount()
        let rel = "test/Movies/Alpha (2001)/Alpha (2001).mkv"
        m.fixture.remove(itemId: try #require(m.fixture.itemId(forFile: expectedTree(m.mediaDir)[rel]!)))
        for i in 0..<6 {
            #expect(throws: SyscallError.self) { _ = try pread(path: m.path(rel), offset: i * 2 * MiB, length: 4096) }
        }
        let said = m.log.split(separator: "\n").filter { $0.contains("Alpha (2001)") && $0.contains("failed") }
        #expect(said.count == 1 && said.first?.contains("404") == true, "\(m.log)")
        #expect(m.fixture.downloadRequests.count >= 6)  // each read asked again; only the words were spared
        try m.unmount()
    }

    /// `--token-stdin`: an account token goes through plex.tv's resources (the server's own token
    /// is stored); with `--url`, a server token is checked against the server and plex.tv is not asked.
    @Test func plexTokensFromStandardInput() throws {
        let rig = try EmptyPlex("plex-token")
        defer { rig.stop() }
        let (scratch, server, tv, env) = (rig.scratch, rig.server, rig.tv, rig.env)
        let account = try runProcess(
            labstreamBinary, ["server", "add", "plex", "home", "--token-stdin", "--plex-tv-url", tv.baseURL],
            environment: env, stdin: tv.userToken)
        #expect(account.code == 0, "\(account.stderr)")
        #expect(tv.requestLog.contains("GET /api/v2/resources"))
        var credentials = try String(contentsOfFile: scratch.path + "/config/credentials", encoding: .utf8)
        #expect(credentials.contains(server.accessToken) && !credentials.contains(tv.userToken))

        let before = tv.requestLog.count
        let direct = try runProcess(
            labstreamBinary, ["server", "add", "plex", "den", "--token-stdin", "--url", server.baseURL, "--plex-tv-url", tv.baseURL],
            environment: env, stdin: server.accessToken)
        #expect(direct.code == 0, "\(direct.stderr)")
        #expect(tv.requestLog.count == before)  // plex.tv was not asked
        let refused = try runProcess(
            labstreamBinary, ["server", "add", "plex", "bad", "--token-stdin", "--url", server.baseURL],
            environment: env, stdin: "not-a-token")
        #expect(refused.code == 77, "\(refused.stderr)")
        credentials = try String(contentsOfFile: scratch.path + "/config/credentials", encoding: .utf8)
        #expect(!credentials.contains("not-a-token"))
    }

    @Test func aPlexPinThatExpiresSaysSoAndStoresNothing() throws {
        let rig = try EmptyPlex("pin-expire")
        defer { rig.stop() }
        let (scratch, tv, env) = (rig.scratch, rig.tv, rig.env)
        tv.approve(onPoll: nil)
        // Expire the PIN once it has been shown and polled once.
        let expirer = Thread {
            while !tv.requestLog.contains(where: { $0.hasPrefix("GET /api/v2/pins/") }) { usleep(10_000) }
            tv.expireAll()
        }
        expirer.start()
        let r = try runProcess(labstreamBinary, ["server", "add", "plex", "home", "--pin", "--plex-tv-url", tv.baseURL], environment: env)
        #expect(r.code != 0)
        #expect(r.stdout.contains("plex.tv/link") && r.stdout.contains("enter the code"))
        #expect(r.stderr.contains("expired before it was approved"), "stderr: \(r.stderr)")
        #expect(!FileManager.default.fileExists(atPath: scratch.path + "/config/credentials"))
    }

    /// Emby: a media source id is not an item id. Each version of a multi-version item is read
    /// through `/Items/{Id}/Download` with the item its source names (`MediaSourceInfo.ItemId`).
    @Test func embyVersionsAreFetchedByTheirOwnItemIds() throws {
        let m = try MountedLabstream("emby-versions", kind: .emby) { dir in
            writeRandomFile(dir + "/cut.mkv", size: 2 * MiB, seed: 21)
            writeRandomFile(dir + "/dc.mkv", size: 3 * MiB + 3, seed: 22)
            var movie = FixtureCatalog.Movie(title: "Cut", year: 2003, file: dir + "/cut.mkv", container: "mkv")
            movie.versions = [("Director's Cut", dir + "/dc.mkv")]
            return FixtureCatalog(movies: [movie], series: [])
        }
        try m.mount()
        let folder = m.path("test/Movies/Cut (2003)")
        let names = try FileManager.default.contentsOfDirectory(atPath: folder).filter { !isGenerated($0) }
        #expect(names.count == 2, "\(names)")
        var read: Set<String> = []
        for name in names {
            let size = try #require(try FileManager.default.attributesOfItem(atPath: folder + "/" + name)[.size] as? Int)
            let source = m.mediaDir + (size == 2 * MiB ? "/cut.mkv" : "/dc.mkv")
            #expect(try sha256(folder + "/" + name) == sha256(source), "\(name)")
            read.insert(try #require(m.fixture.itemId(forFile: source)))
        }
        let asked = Set(m.fixture.downloadRequests.map { $0.path })
        #expect(asked == Set(read.map { "/Items/\($0)/Download" }), "\(asked)")
        try m.unmount()
    }

    @Test func embyLoginFindsTheBasePathAndRejectsJellyfin() throws {
        let scratch = Scratch("emby-base")
        let emby = try ServerFixture(kind: .emby, catalog: testCatalog(in: scratch.sub("m")), userName: "demo", password: "pw")
        try emby.start()
        let jellyfin = try ServerFixture(kind: .jellyfin, catalog: FixtureCatalog(movies: [], series: []), userName: "demo", password: "pw")
        try jellyfin.start()
        defer { emby.stop(); jellyfin.stop() }
        let identity = ClientIdentity(device: "t", deviceId: "t")
        for given in [emby.baseURL, emby.baseURL + "/emby", emby.baseURL + "/emby/"] {
            let (url, info, login) = try MediaBrowserClient.login(
                flavor: .emby, url: given, user: "demo", password: "pw", identity: identity, transport: CurlTransport())
            #expect(url == emby.baseURL + "/emby" && info.serverId == emby.serverId && login.userId == emby.userId)
        }
        let e = #expect(throws: LabstreamError.self) {
            _ = try MediaBrowserClient.login(flavor: .emby, url: jellyfin.baseURL, user: "demo", password: "pw", identity: identity, transport: CurlTransport())
        }
        #expect(e?.userMessage.contains("Jellyfin") == true, "\(String(describing: e))")
        // An Emby token names no user: adopting one needs --user.
        let (_, _, userId) = try MediaBrowserClient.adoptToken(
            flavor: .emby, url: emby.baseURL, user: "demo", token: emby.accessToken, identity: identity, transport: CurlTransport())
        #expect(userId == emby.userId)
        #expect(throws: LabstreamError.self) {
            _ = try MediaBrowserClient.adoptToken(
                flavor: .emby, url: emby.baseURL, user: nil, token: emby.accessToken, identity: identity, transport: CurlTransport())
        }
    }
}

/// An empty Plex server and its plex.tv on loopback, with a profile of their own.
final class EmptyPlex {
    let scratch: Scratch
    let server: ServerFixture
    let tv: PlexTVFixture
    var env: [String: String] { ["LABSTREAM_CONFIG_DIR": scratch.sub("config"), "LABSTREAM_DATA_DIR": scratch.sub("data")] }

    init(_ name: String) throws {
        scratch = Scratch(name)
        server = try ServerFixture(kind: .plex, catalog: FixtureCatalog(movies: [], series: []))
        try server.start()
        tv = PlexTVFixture(server: server)
        try tv.start()
    }

    func stop() {
        server.stop()
        tv.stop()
    }
}
