import Foundation
import LabstreamCore
import LabstreamFixture
import LabstreamTestSupport
import Testing

/// Issue 41: a server name signed in again as another user or profile keeps only what the new
/// one sees, and `server add` refuses a URL that answers as another product.
@Suite(.serialized) struct IdentityTests {
    let movie = "test/Movies/Beta (2002)/Beta (2002).mp4"
    let episode = "test/Shows/Show (2020)/Season 01/Show (2020) - S01E01 - Pilot.mkv"

    func partialBytes(_ dataDir: String) -> Int64 {
        let dir = dataDir + "/partials"
        return ((try? FileManager.default.contentsOfDirectory(atPath: dir)) ?? []).filter { $0.hasSuffix(".part") }.reduce(0) { sum, name in
            var st = stat()
            return stat(dir + "/" + name, &st) == 0 ? sum + Int64(st.st_blocks) * 512 : sum
        }
    }

    /// Jellyfin: re-added as a user who sees only the movie library, the pinned episode goes at
    /// once (gone from the mount, its bytes freed, the count said); the pinned film it also
    /// sees stays and reads without a byte fetched again.
    @Test func anotherJellyfinUserKeepsOnlyWhatItSees() throws {
        let m = try MountedLabstream("identity-user")
        m.fixture.addUser("guest", password: "guest-pass")
        try m.mount()
        defer { try? m.unmount() }
        let pin = try m.cli(["pin", "--wait", m.path(movie), m.path(episode)])
        try #require(pin.code == 0, "\(pin.stderr)")
        // The old user's monitor (future episodes only: it pins nothing now).
        let monitor = try m.cli(["monitor", "add", m.path("test/Shows/Show (2020)"), "--mode", "future"])
        try #require(monitor.code == 0, "\(monitor.stderr)")
        #expect(try m.cli(["monitor", "list"]).stdout.contains("Show (2020)"))
        let before = partialBytes(m.dataDir)
        #expect(before >= Int64(5 * MiB))
        let fetched = m.fixture.downloadRequests.count
        // The stored identity: the server's public Id and the signed-in user's Id.
        func listed() throws -> [String: Any] {
            let json = try m.cli(["server", "list", "--json"]).stdout
            return (try JSONSerialization.jsonObject(with: Data(json.utf8)) as? [[String: Any]])?.first ?? [:]
        }
        #expect(try listed()["server_id"] as? String == m.fixture.serverId && listed()["user_id"] as? String == m.fixture.userId)

        let add = try m.cli(["server", "add", "jellyfin", "test", "--url", m.fixture.baseURL, "--user", "guest", "--password-stdin"], stdin: "guest-pass\n")
        try #require(add.code == 0, "\(add.stderr)")
        #expect(add.stdout.contains("another user than the one stored"), "\(add.stdout)")
        #expect(add.stdout.contains("1 stored file it also sees stays"), "\(add.stdout)")
        #expect(add.stdout.contains("1 stored file only the old one saw was deleted (2.0 MiB freed)"), "\(add.stdout)")
        #expect(add.stdout.contains("1 monitor of the old one dropped"), "\(add.stdout)")
        #expect(try listed()["user_id"] as? String != m.fixture.userId && listed()["server_id"] as? String == m.fixture.serverId)
        let monitors = try m.cli(["monitor", "list"])
        #expect(!monitors.stdout.contains("Show (2020)"), "\(monitors.stdout)")

        // The daemon (told by SIGHUP) serves the new user's tree: the old user's show is gone.
        #expect(eventually { !FileManager.default.fileExists(atPath: m.path("test/Shows")) })
        #expect(!FileManager.default.fileExists(atPath: m.path(episode)))
        // Its bytes are freed on disk: only the film's remain.
        #expect(partialBytes(m.dataDir) <= before - Int64(2 * MiB))
        // The film stays complete and reads as before, with nothing fetched again.
        #expect(try sha256(m.path(movie)) == sha256(m.mediaDir + "/beta.mp4"))
        #expect(m.fixture.downloadRequests.count == fetched)
        let status = try m.cli(["status", m.path(movie)])
        #expect(status.stdout.contains("100%  3.0 MiB of 3.0 MiB"), "\(status.stdout)")
        // The catalog was read as the new user (its views, its items), not taken from the index.
        #expect(m.fixture.requestLog.contains { $0.path == "/UserViews" && $0.query["userId"] != m.fixture.userId })
        // Signing in again as the same user changes nothing.
        let again = try m.cli(["server", "add", "jellyfin", "test", "--url", m.fixture.baseURL, "--user", "guest", "--password-stdin"], stdin: "guest-pass\n")
        #expect(again.code == 0 && !again.stdout.contains("Signed in as"), "\(again.stdout)")
        #expect(FileManager.default.fileExists(atPath: m.path(movie)))
    }

    /// `server add jellyfin` at an Emby server (its /emby base or its bare URL) is refused,
    /// naming Emby, and nothing is stored; Emby added as Emby is taken.
    @Test func aJellyfinAddAtAnEmbyServerIsRefused() throws {
        let scratch = Scratch("identity-product")
        let emby = try ServerFixture(kind: .emby, catalog: FixtureCatalog(movies: [], series: []), userName: "demo", password: "pw")
        try emby.start()
        defer { emby.stop() }
        let env = ["LABSTREAM_CONFIG_DIR": scratch.sub("config"), "LABSTREAM_DATA_DIR": scratch.sub("data")]
        for url in [emby.baseURL, emby.baseURL + "/emby"] {
            let add = try runProcess(
                labstreamBinary, ["server", "add", "jellyfin", "jx", "--url", url, "--user", "demo", "--password-stdin"], environment: env, stdin: "pw\n")
            #expect(add.code != 0)
            #expect(add.stderr.contains("answers as an Emby server, not Jellyfin") && add.stderr.contains("server add emby"), "\(add.stderr)")
        }
        let list = try runProcess(labstreamBinary, ["server", "list"], environment: env)
        #expect(!list.stdout.contains("jx"), "\(list.stdout)")
        // Silo and Plex adds at it name it too.
        let silo = try runProcess(labstreamBinary, ["server", "add", "silo", "sx", "--url", emby.baseURL, "--token-stdin"], environment: env, stdin: "sa_x\n")
        #expect(silo.code != 0 && silo.stderr.contains("answers as an Emby server, not Silo"), "\(silo.stderr)")
        let plex = try runProcess(
            labstreamBinary, ["server", "add", "plex", "px", "--url", emby.baseURL, "--token-stdin"], environment: env, stdin: "token\n")
        #expect(plex.code != 0 && plex.stderr.contains("answers as an Emby server, not Plex"), "\(plex.stderr)")
        // And a Jellyfin add at a Plex server names Plex.
        let plexServer = try ServerFixture(kind: .plex, catalog: FixtureCatalog(movies: [], series: []))
        try plexServer.start()
        defer { plexServer.stop() }
        let atPlex = try runProcess(
            labstreamBinary, ["server", "add", "jellyfin", "jp", "--url", plexServer.baseURL, "--user", "demo", "--password-stdin"], environment: env,
            stdin: "pw\n")
        #expect(atPlex.code != 0 && atPlex.stderr.contains("answers as a Plex server, not Jellyfin"), "\(atPlex.stderr)")
        let right = try runProcess(
            labstreamBinary, ["server", "add", "emby", "ex", "--url", emby.baseURL, "--user", "demo", "--password-stdin"], environment: env, stdin: "pw\n")
        #expect(right.code == 0, "\(right.stderr)")
    }
}

extension IdentityTests {
    /// Silo: re-added as the PIN-locked profile after pinning as the primary one. The old
    /// profile's download entries are deleted on the server and its session signed out; the film
    /// the new profile's catalog lists stays without a byte fetched again; the one it does not
    /// list goes from the mount, its bytes freed. (The fixture gives both profiles the same
    /// library access, so the second film is held back from the catalog, server-wide, just
    /// before the new sign-in: it is what the new profile's catalog does not list.)
    @Test func anotherSiloProfileKeepsOnlyWhatItSeesAndCleansUpTheOldOnesEntries() throws {
        let alpha = "test/Movies/Alpha (2001)/Alpha (2001).mkv", beta = "test/Movies/Beta (2002)/Beta (2002).mp4"
        let m = try MountedSilo("identity-profile")
        #expect(try m.addWithPassword().code == 0)
        try m.mount()
        defer { try? m.unmount() }
        let pin = try m.cli(["pin", "--wait", m.path(alpha), m.path(beta)])
        try #require(pin.code == 0, "\(pin.stderr)")
        let owner = m.fixture.primaryProfileId
        #expect(
            eventually { m.fixture.downloadEntries.filter { $0.profileId == owner && $0.status == "completed" }.count == 2 },
            "\(m.fixture.downloadEntries)")
        let fetchedBytes = { m.fixture.requestLog.filter { $0.path.hasSuffix("/file") || $0.path.contains("direct-download") }.count }
        let fetched = fetchedBytes()
        let film = try #require(m.fixture.movieContentId(title: "Beta"))
        #expect(m.fixture.hold(movieContentId: film))

        let add = try m.cli(
            ["server", "add", "silo", "test", "--url", m.baseURL, "--user", "alice", "--password-stdin", "--profile", "Kids", "--pin-stdin"],
            stdin: "secret-pass\n" + SiloFixture.Configuration().lockedProfilePIN + "\n")
        try #require(add.code == 0, "\(add.stderr)")
        #expect(add.stdout.contains("another profile than the one stored"), "\(add.stdout)")
        #expect(
            add.stdout.contains("1 stored file it also sees stays") && add.stdout.contains("1 stored file only the old one saw was deleted (3.0 MiB freed)"),
            "\(add.stdout)")
        #expect(
            add.stdout.contains("2 download entries of the old profile deleted on the server") && add.stdout.contains("the old session was signed out"),
            "\(add.stdout)")
        // On the server: no entry of the old profile is left, and its session was ended.
        #expect(!m.fixture.downloadEntries.contains { $0.profileId == owner }, "\(m.fixture.downloadEntries)")
        #expect(m.fixture.requestLog.contains { $0.method == "POST" && $0.path.hasSuffix("/auth/logout") && (200..<300).contains($0.status) })
        // Through the mount: the film only the old profile saw is gone; the other reads as it was.
        #expect(eventually { !FileManager.default.fileExists(atPath: m.path(beta)) })
        #expect(try sha256(m.path(alpha)) == sha256(m.mediaDir + "/alpha.mkv"))
        #expect(fetchedBytes() == fetched, "the kept copy was fetched again")
    }
}
