import Foundation
import LabstreamCore
import LabstreamFixture
import LabstreamStore
import LabstreamTestSupport
import Testing

/// A Labstream daemon over a Silo server (the fixture written from Silo's /api/v2 docs),
/// driven through the CLI.
final class MountedSilo: @unchecked Sendable {
    let scratch: Scratch
    let fixture: SiloFixture
    let baseURL: String
    let mediaDir: String
    let configDir: String
    let dataDir: String
    let mountpoint: String
    private(set) var daemonPid: Int32 = 0

    var env: [String: String] { ["LABSTREAM_CONFIG_DIR": configDir, "LABSTREAM_DATA_DIR": dataDir] }

    /// `probe`: the playback check runs (the catalog's files must then be real media).
    let probe: Bool

    init(
        _ name: String, catalog: ((String) -> FixtureCatalog)? = nil, probe: Bool = false,
        configure: (inout SiloFixture.Configuration) -> Void = { _ in }
    ) throws {
        scratch = Scratch(name)
        mediaDir = scratch.sub("media")
        configDir = scratch.sub("config")
        dataDir = scratch.sub("data")
        mountpoint = scratch.sub("mnt")
        self.probe = probe
        var configuration = SiloFixture.Configuration()
        configuration.password = "secret-pass"
        configure(&configuration)
        fixture = SiloFixture(catalog: (catalog ?? testCatalog)(mediaDir), configuration: configuration)
        baseURL = try fixture.start()
    }

    func cli(_ args: [String], stdin: String? = nil) throws -> ProcessResult { try runProcess(labstreamBinary, args, environment: env, stdin: stdin) }

    func addWithPassword(_ extra: [String] = []) throws -> ProcessResult {
        try cli(["server", "add", "silo", "test", "--url", baseURL, "--user", "alice", "--password-stdin"] + extra, stdin: "secret-pass\n")
    }

    func mount() throws {
        // Test media is random bytes, which the playback probe rightly rejects.
        let conf = configDir + "/labstream.conf"
        if !probe, let text = try? String(contentsOfFile: conf, encoding: .utf8), !text.contains("playback_probe") {
            try (text + "\n[cache]\nplayback_probe = no\n").write(toFile: conf, atomically: true, encoding: .utf8)
        }
        daemonPid = try mountDaemon(at: mountpoint, dataDir: dataDir, cli: cli)
    }

    func unmount() throws { try unmountDaemon(at: mountpoint, pid: daemonPid, cli: cli) }

    func path(_ relative: String) -> String { mountpoint + "/" + relative }

    var credentials: String { (try? String(contentsOfFile: configDir + "/credentials", encoding: .utf8)) ?? "" }

    var log: String { (try? String(contentsOfFile: dataDir + "/labstream.log", encoding: .utf8)) ?? "" }

    deinit {
        stopDaemon(at: mountpoint, pid: daemonPid, env: env)
        fixture.stop()
    }
}

@Suite(.serialized) struct SiloTests {
    @Test func aPasswordSignInMountsEveryLibraryAndReadsTheServersBytes() throws {
        let m = try MountedSilo("silo-read")
        let add = try m.addWithPassword()
        #expect(add.code == 0 && add.stdout.contains("as profile Owner"), "\(add.stdout) \(add.stderr)")
        // Only a refresh token is kept, 0600: never the password.
        #expect(!m.credentials.isEmpty && !m.credentials.contains("secret-pass"))
        var st = stat()
        #expect(stat(m.configDir + "/credentials", &st) == 0 && st.st_mode & 0o077 == 0)
        try m.mount()
        let expected = expectedTree(m.mediaDir)
        for (rel, source) in expected {
            #expect(FileManager.default.fileExists(atPath: m.path(rel)), "\(rel) is not in the tree")
        }
        // A read far into a file fetches closed ranges from direct-download and returns the server's bytes.
        let alpha = "test/Movies/Alpha (2001)/Alpha (2001).mkv"
        #expect(try pread(path: m.path(alpha), offset: 5 << 20, length: 65536) == pread(path: expected[alpha]!, offset: 5 << 20, length: 65536))
        let bytes = m.fixture.requestLog.filter { $0.path.hasSuffix("/direct-download") }
        #expect(!bytes.isEmpty && bytes.allSatisfy { $0.range != nil && $0.credential == "bearer" }, "\(bytes)")
        // A pinned season completes with the right bytes.
        let season = m.path("test/Shows/Show (2020)/Season 01")
        let wait = try m.cli(["pin", "--wait", season])
        #expect(wait.code == 0, "\(wait.stdout) \(wait.stderr)")
        for rel in ["test/Shows/Show (2020)/Season 01/Show (2020) - S01E01 - Pilot.mkv", "test/Shows/Show (2020)/Season 01/Show (2020) - S01E02 - Second.mp4"] {
            #expect(try sha256(m.path(rel)) == sha256(expected[rel]!), "\(rel)")
        }
        // Its audiobook library is not in the tree, and `server list` says why.
        #expect(!FileManager.default.fileExists(atPath: m.path("test/Audiobooks")))
        let list = try m.cli(["server", "list"])
        #expect(list.stdout.contains("left out: Audiobooks (Silo's /api/v2 downloads carry films and episodes only"), "\(list.stdout)")
        // Silo has no remux preset, and it says so.
        let quality = try m.cli(["pin", "--quality", "remux", m.path(alpha)])
        #expect(quality.code == 64 && quality.stderr.contains("no remux preset"), "\(quality.code) \(quality.stderr)")
        // No token anywhere but the credential store.
        let token =
            m.credentials.split(separator: "\n").first { $0.hasPrefix("token") }.map {
                String($0.split(separator: "=").last ?? "").trimmingCharacters(in: .whitespaces)
            } ?? "?"
        #expect(token.count > 8 && !m.fixtureLog.contains(token))
        try m.unmount()
    }

    /// A film's versions are labelled by resolution and edition, each said once: an edition
    /// that names the resolution (`360p` of a 360p file) was `Big Buck Test (2008) - 360p
    /// 360p.mp4`, and its `.nfo` likewise.
    @Test func aVersionWhoseEditionNamesItsResolutionIsLabelledOnce() throws {
        let m = try MountedSilo(
            "silo-versions",
            catalog: { dir in
                writeRandomFile(dir + "/big.mp4", size: 200_000, seed: 41)
                writeRandomFile(dir + "/big-360p.mp4", size: 100_000, seed: 42)
                var movie = FixtureCatalog.Movie(title: "Big Buck Test", year: 2008, file: dir + "/big.mp4", container: "mp4")
                movie.versions = [("360p", dir + "/big-360p.mp4")]
                return FixtureCatalog(movies: [movie], series: [])
            }
        ) { $0.resolutions = ["big.mp4": "1080p", "big-360p.mp4": "360p"] }
        #expect(try m.addWithPassword().code == 0)
        try m.mount()
        let folder = m.path("test/Movies/Big Buck Test (2008)")
        let names = Set(try FileManager.default.contentsOfDirectory(atPath: folder))
        #expect(
            names.isSuperset(of: [
                "Big Buck Test (2008) - 1080p.mp4", "Big Buck Test (2008) - 1080p.nfo", "Big Buck Test (2008) - 360p.mp4",
                "Big Buck Test (2008) - 360p.nfo"
            ]), "\(names.sorted())")
        #expect(!names.contains { $0.contains("360p 360p") }, "\(names.sorted())")
        #expect(try sha256(folder + "/Big Buck Test (2008) - 360p.mp4") == sha256(m.mediaDir + "/big-360p.mp4"))
        try m.unmount()
    }

    /// Control characters in a Silo title part its words with a space, as on the other backends
    /// (they were dropped: `Tabandnewline`).
    @Test func aTitleWithControlCharactersKeepsItsWordsApart() throws {
        let m = try MountedSilo("silo-controls", catalog: BackendKindsTests.catalogWithControls)
        #expect(try m.addWithPassword().code == 0)
        try m.mount()
        let film = m.path("test/Movies/Tab and newline (2011)/Tab and newline (2011).mkv")
        #expect(try sha256(film) == sha256(m.mediaDir + "/controls.mkv"), "\(filesBelow(m.path("test/Movies")))")
        try m.unmount()
    }

    /// An access token that expires mid-session is renewed with the refresh token (one try),
    /// and the rotated refresh token is what the credential store holds afterwards.
    @Test func anExpiredAccessTokenIsRenewedAndTheRotatedRefreshTokenIsStored() throws {
        let m = try MountedSilo("silo-refresh")
        #expect(try m.addWithPassword().code == 0)
        let before = m.credentials
        try m.mount()
        let beta = "test/Movies/Beta (2002)/Beta (2002).mp4"
        m.fixture.expireAccessTokens()
        #expect(try sha256(m.path(beta)) == sha256(expectedTree(m.mediaDir)[beta]!))
        #expect(m.fixture.requestLog.contains { $0.path.hasSuffix("/auth/refresh") })
        #expect(m.credentials != before && !m.credentials.isEmpty, "the rotated refresh token was not stored")
        try m.unmount()
        // After a restart the stored (rotated) token still signs in.
        try m.mount()
        let gamma = "test/Movies/Gamma/Gamma.mkv"
        #expect(try sha256(m.path(gamma)) == sha256(expectedTree(m.mediaDir)[gamma]!))
        try m.unmount()
        // Removing the server ends its session on the server too.
        let stored = m.credentials
        let remove = try m.cli(["server", "remove", "test"])
        #expect(remove.code == 0 && remove.stdout.contains("Signed out of the Silo server"), "\(remove.stdout) \(remove.stderr)")
        // It had read files: those stay, listed where they can be freed, and it says so.
        #expect(
            remove.stdout.contains("downloaded files") && remove.stdout.contains("stay on disk, listed by title in `labstream orphans`"), "\(remove.stdout)")
        #expect(m.fixture.requestLog.contains { $0.path.hasSuffix("/auth/logout") && $0.authorized })
        #expect(m.credentials.isEmpty || !m.credentials.contains("[server \"test\"]"), "\(m.credentials) (was \(stored.count) bytes)")
    }

    /// Device sign-in: the code is shown, the server's approval signs in; a denial stores nothing.
    @Test func deviceSignInWaitsForApprovalAndADenialStoresNothing() throws {
        let m = try MountedSilo("silo-device")
        func run(deciding decide: @escaping (SiloFixture) -> Void) throws -> (Int32, String, String) {
            let p = Process()
            p.executableURL = URL(fileURLWithPath: "/usr/bin/timeout")
            p.arguments = ["60", labstreamBinary, "server", "add", "silo", "test", "--url", m.baseURL]
            p.environment = ProcessInfo.processInfo.environment.merging(m.env) { $1 }
            let out = Pipe(), err = Pipe()
            p.standardOutput = out
            p.standardError = err
            try p.run()
            var seen = Data()
            while !String(decoding: seen, as: UTF8.self).contains("Waiting for approval") {
                let chunk = out.fileHandleForReading.availableData
                if chunk.isEmpty { break }
                seen.append(chunk)
            }
            decide(m.fixture)
            seen.append(out.fileHandleForReading.readDataToEndOfFile())
            p.waitUntilExit()
            return (p.terminationStatus, String(decoding: seen, as: UTF8.self), String(decoding: err.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self))
        }
        let denied = try run { _ = $0.denyDevice() }
        #expect(denied.0 == 77 && denied.2.contains("denied") && m.credentials.isEmpty, "\(denied)")
        let approved = try run { _ = $0.approveDevice() }
        #expect(approved.0 == 0, "\(approved)")
        #expect(approved.1.contains("enter the code") && approved.1.contains("/activate"), "\(approved.1)")
        #expect(!m.credentials.isEmpty)
    }

    @Test func anAPIKeySignsInAndAPINLockedProfileIsRefusedSayingWhatToDo() throws {
        let m = try MountedSilo("silo-key")
        let locked = try m.cli(
            ["server", "add", "silo", "test", "--url", m.baseURL, "--token-stdin", "--profile", "Kids"],
            stdin: SiloFixture.Configuration().apiKey + "\n")
        #expect(locked.code != 0 && locked.stderr.contains("locked with a PIN") && locked.stderr.contains("--profile"), "\(locked.stderr)")
        let key = try m.cli(["server", "add", "silo", "test", "--url", m.baseURL, "--token-stdin"], stdin: SiloFixture.Configuration().apiKey + "\n")
        #expect(key.code == 0, "\(key.stderr)")
        try m.mount()
        #expect(FileManager.default.fileExists(atPath: m.path("test/Movies/Alpha (2001)/Alpha (2001).mkv")))
        #expect(!m.fixture.requestLog.contains { $0.path.hasSuffix("/auth/refresh") })  // a key is used as it is
        let notSilo = try m.cli(["server", "add", "silo", "other", "--url", "http://127.0.0.1:9", "--token-stdin"], stdin: "sa_x\n")
        #expect(notSilo.code != 0)
        try m.unmount()
    }
}

extension SiloTests {
    /// A PIN-locked profile: the PIN is verified once at sign-in, only the profile token it
    /// gives is stored, and every profile-scoped request carries it.
    @Test func aPINLockedProfileIsUsedWithItsProfileToken() throws {
        let m = try MountedSilo("silo-pin")
        let key = SiloFixture.Configuration().apiKey
        let wrong = try m.cli(
            ["server", "add", "silo", "test", "--url", m.baseURL, "--token-stdin", "--profile", "Kids", "--pin-stdin"], stdin: key + "\n0000\n")
        #expect(wrong.code != 0 && wrong.stderr.contains("did not accept that PIN") && m.credentials.isEmpty, "\(wrong.stderr)")
        let nobody = try m.cli(["server", "add", "silo", "test", "--url", m.baseURL, "--token-stdin", "--profile", "Nobody"], stdin: key + "\n")
        #expect(nobody.code != 0 && nobody.stderr.contains("no profile named 'Nobody'") && nobody.stderr.contains("Owner"), "\(nobody.stderr)")
        let add = try m.cli(
            ["server", "add", "silo", "test", "--url", m.baseURL, "--token-stdin", "--profile", "Kids", "--pin-stdin"],
            stdin: key + "\n" + SiloFixture.Configuration().lockedProfilePIN + "\n")
        #expect(add.code == 0 && add.stdout.contains("as profile Kids"), "\(add.stdout) \(add.stderr)")
        #expect(m.credentials.contains("profile_token = ") && !m.credentials.contains(SiloFixture.Configuration().lockedProfilePIN + "\n"))
        try m.mount()
        #expect(FileManager.default.fileExists(atPath: m.path("test/Movies/Alpha (2001)/Alpha (2001).mkv")))
        let scoped = m.fixture.requestLog.filter { $0.path.hasSuffix("/catalog") || $0.path.hasSuffix("/user/libraries") }
        #expect(!scoped.isEmpty && scoped.allSatisfy { $0.sentProfileToken && $0.status == 200 }, "\(scoped)")
        try m.unmount()
    }
}

@Suite(.serialized) struct SiloRefreshTests {
    /// A refresh asks Silo only what its catalog can tell (catalog-api.md § Rule fields and
    /// operators: `added_at`, `latest_episode_added`), with each library's count for removals.
    /// Nothing added: no film's versions and no season are read again, only a filtered and a
    /// counting browse per library. A film added: its versions alone. An episode added: its
    /// series' seasons alone. Each shows in the tree. A whole read still costs one version read
    /// per film: /api/v2 has no read of many items' versions.
    @Test func aRefreshReadsOnlyWhatWasAdded() throws {
        let m = try MountedSilo("silo-refresh")
        let beta = try #require(m.fixture.movieContentId(title: "Beta"))
        let episode = try #require(m.fixture.episodeContentId(series: "Show", season: 2, episode: 1))
        #expect(m.fixture.hold(movieContentId: beta) && m.fixture.hold(episodeContentId: episode))
        #expect(try m.addWithPassword().code == 0)
        let first = try m.cli(["sync"])
        #expect(first.code == 0, "\(first.stdout) \(first.stderr)")
        let versions = { m.fixture.requestLog.filter { $0.path.hasSuffix("/versions") } }
        let seasons = { m.fixture.requestLog.filter { $0.path.hasSuffix("/seasons") } }
        #expect(versions().count == 5 && seasons().count == 1)
        let index = try OfflineIndex(path: m.dataDir + "/index.sqlite")
        func paths() throws -> Set<String> { Set(try index.treeFiles().map { $0.path.joined(separator: "/") }) }
        let betaPath = "test/Movies/Beta (2002)/Beta (2002).mp4", returnPath = "test/Shows/Show (2020)/Season 02/Show (2020) - S02E01 - Return.mkv"
        #expect(try !paths().contains(betaPath) && !paths().contains(returnPath))

        m.fixture.clearRequestLog()
        let unchanged = try m.cli(["sync"])
        #expect(unchanged.code == 0 && unchanged.stdout.contains("test: 8 files"), "\(unchanged.stdout) \(unchanged.stderr)")
        let browses = m.fixture.requestLog.filter { $0.path.hasSuffix("/catalog") }
        #expect(versions().isEmpty && seasons().isEmpty && !m.fixture.requestLog.contains { $0.path.hasSuffix("/episodes") }, "\(m.fixtureLog)")
        #expect(browses.count == 4 && browses.allSatisfy { $0.query["groups"] != nil || $0.query["limit"] == "1" }, "\(browses)")
        #expect(browses.filter { $0.query["groups"]?.contains("latest_episode_added") == true }.count == 1)

        #expect(m.fixture.release(movieContentId: beta) && m.fixture.release(episodeContentId: episode))
        m.fixture.clearRequestLog()
        let added = try m.cli(["sync"])
        #expect(added.code == 0 && added.stdout.contains("test: 10 files"), "\(added.stdout) \(added.stderr)")
        #expect(versions().map(\.path) == ["/api/v2/catalog/items/\(beta)/versions"], "\(versions())")
        #expect(seasons().count == 1 && seasons().allSatisfy { $0.path.contains(try! #require(m.fixture.seriesContentId(name: "Show"))) })
        #expect(try paths().contains(betaPath) && paths().contains(returnPath))
        #expect(try paths().isSuperset(of: expectedTree(m.mediaDir).keys) && paths().count == 10)
    }
}

extension MountedSilo {
    /// Everything the fixture logged, as text (for "the token appears nowhere" checks).
    var fixtureLog: String { fixture.requestLog.map { "\($0)" }.joined(separator: "\n") }
}
