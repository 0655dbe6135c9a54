import Foundation
import LabstreamBackends
import LabstreamCore
import LabstreamDemo
import LabstreamFixture
import LabstreamHTTP
import LabstreamTestSupport
import Testing

/// Pins on Silo are managed downloads (downloads-api.md § 4): the server's registry holds one
/// entry per pinned file of this device, its bytes come through the entry, its completion is
/// checked against the manifest's integrity data and reported, and unpinning deletes it.
@Suite(.serialized) struct SiloManagedTests {
    static let alpha = "test/Movies/Alpha (2001)/Alpha (2001).mkv"
    static let beta = "test/Movies/Beta (2002)/Beta (2002).mp4"
    static let gamma = "test/Movies/Gamma/Gamma.mkv"
    static let season = "test/Shows/Show (2020)/Season 01"

    func mounted(_ name: String) throws -> MountedSilo {
        let m = try MountedSilo(name)
        #expect(try m.addWithPassword().code == 0)
        try m.mount()
        return m
    }

    func entries(_ m: MountedSilo, content: String?) -> [SiloDownloadSnapshot] {
        m.fixture.downloadEntries.filter { $0.contentId == content }
    }

    @Test func aPinnedFilmIsRegisteredFetchedThroughItsEntryCheckedAndReported() throws {
        let m = try mounted("silo-managed")
        let expected = expectedTree(m.mediaDir)
        let wait = try m.cli(["pin", "--wait", m.path(Self.alpha)])
        #expect(wait.code == 0, "\(wait.stdout) \(wait.stderr)")
        #expect(try sha256(m.path(Self.alpha)) == sha256(expected[Self.alpha]!))
        let film = m.fixture.movieContentId(title: "Alpha")
        let made = entries(m, content: film)
        let device = try String(contentsOfFile: m.dataDir + "/device-id", encoding: .utf8).trimmingCharacters(in: .whitespacesAndNewlines)
        #expect(
            made.count == 1 && made.first?.deviceId == device && made.first?.profileId == m.fixture.primaryProfileId
                && made.first?.episodeId == nil && made.first?.quality == "original", "\(made)")
        #expect(m.fixture.fileIds(forPath: expected[Self.alpha]!).contains(made.first?.mediaFileId ?? "?"))
        let id = try #require(made.first?.id)
        // The bytes came through the entry, in closed ranges; the manifest was read; the copy was
        // reported downloading, then completed.
        let log = m.fixture.requestLog
        let file = log.filter { $0.path.hasSuffix("/downloads/\(id)/file") }
        #expect(!file.isEmpty && file.allSatisfy { $0.range != nil && $0.deviceId == device }, "\(file)")
        #expect(log.contains { $0.path.hasSuffix("/downloads/\(id)/manifest") && $0.status == 200 })
        #expect(eventually { entries(m, content: film).first?.status == "completed" }, "\(entries(m, content: film)) \(m.log)")
        #expect(log.filter { $0.method == "POST" && $0.path.hasSuffix("/downloads") }.count == 1)
        // A pinned season: one entry per episode, each naming its series and episode.
        #expect(try m.cli(["pin", "--wait", m.path(Self.season)]).code == 0)
        let show = try #require(m.fixture.seriesContentId(name: "Show"))
        let episodes = [m.fixture.episodeContentId(series: "Show", season: 1, episode: 1), m.fixture.episodeContentId(series: "Show", season: 1, episode: 2)]
        #expect(
            eventually { entries(m, content: show).count == 2 && entries(m, content: show).allSatisfy { $0.status == "completed" } },
            "\(entries(m, content: show))")
        #expect(Set(entries(m, content: show).map(\.episodeId)) == Set(episodes))
        // Every episode of the season was pinned: one batch, one create.
        let batches = Set(entries(m, content: show).map(\.batchId))
        #expect(batches.count == 1 && batches.first??.hasPrefix("labstream-") == true, "\(batches)")
        #expect(m.fixture.requestLog.filter { $0.method == "POST" && $0.path.hasSuffix("/downloads") }.count == 2)
        // Unpinning deletes the film's entry on the server; the season's stay.
        #expect(try m.cli(["unpin", m.path(Self.alpha)]).code == 0)
        #expect(eventually { entries(m, content: film).isEmpty })
        #expect(m.fixture.requestLog.contains { $0.method == "DELETE" && $0.path.hasSuffix("/downloads/\(id)") && $0.status == 204 })
        #expect(entries(m, content: show).count == 2)
        // The index and the journal hold ids, never a token.
        let token =
            m.credentials.split(separator: "\n").first { $0.hasPrefix("token") }.map {
                String($0.split(separator: "=").last ?? "").trimmingCharacters(in: .whitespaces)
            } ?? "?"
        let index = try Data(contentsOf: URL(fileURLWithPath: m.dataDir + "/index.sqlite"))
        #expect(token.count > 8 && index.range(of: Data(token.utf8)) == nil)
        try m.unmount()
    }

    /// A create whose answer is lost did make the entry: it is found and adopted, never made twice.
    /// A pinned film's manifest names its artwork, subtitles and chapters (§ 6): fetched through
    /// the proxy routes (§ 4.8–4.9) with the device's headers, stored beside it, its chapters on
    /// the file, all of it read offline; the pin is complete only with them.
    @Test func aPinnedFilmsManifestBringsItsArtworkSubtitlesAndChapters() throws {
        let m = try MountedSilo(
            "silo-side",
            catalog: { dir in
                var c = SideAssetTests.catalog(dir)
                c.movies[0].details = .init(chapters: [.init(start: 0, name: "Opening"), .init(start: 61.5, name: "The Raid")])
                return c
            })
        #expect(try m.addWithPassword().code == 0)
        try m.mount()
        let film = m.path(Self.alpha), folder = m.path("test/Movies/Alpha (2001)")
        let wait = try m.cli(["pin", "--wait", film])
        #expect(wait.code == 0, "\(wait.stdout) \(wait.stderr)")
        // The pin waited for them: each is stored by the time it returned.
        let status = try JSONSerialization.jsonObject(with: Data(try m.cli(["status", "--json", film]).stdout.utf8)) as? [[String: Any]]
        let assets = status?.first?["side_assets"] as? [[String: Any]] ?? []
        #expect(
            Set(assets.compactMap { $0["name"] as? String }).isSuperset(of: [
                "poster.jpg", "fanart.png", "logo.png", "Alpha (2001).eng.srt",
                "Alpha (2001).fre.forced.srt", "Alpha (2001).eng.sdh.ass"
            ]), "\(assets)")
        #expect(assets.allSatisfy { $0["state"] as? String == "stored" }, "\(assets)")
        let names = ["poster.jpg", "fanart.png", "Alpha (2001).eng.srt", "Alpha (2001).eng.sdh.ass"]
        #expect(
            eventually { names.allSatisfy { FileManager.default.fileExists(atPath: folder + "/" + $0) } },
            "\((try? FileManager.default.contentsOfDirectory(atPath: folder)) ?? [])")
        #expect(StatusCommandXattr.get(film, "chapters") == "00:00:00.000 Opening\n00:01:01.500 The Raid")
        // An episode's manifest poster is its still: its thumbnail beside it.
        #expect(try m.cli(["pin", "--wait", m.path(Self.season)]).code == 0)
        let thumb = m.path(Self.season + "/Show (2020) - S01E01 - Pilot-thumb.jpg")
        #expect(
            eventually { FileManager.default.fileExists(atPath: thumb) }, "\((try? FileManager.default.contentsOfDirectory(atPath: m.path(Self.season))) ?? [])"
        )
        let asked = m.fixture.requestLog.filter { $0.path.contains("/artwork/") || $0.path.contains("/subtitles/") }
        #expect(!asked.isEmpty && asked.allSatisfy { $0.deviceId != nil && $0.credential == "bearer" && $0.status == 200 }, "\(asked)")
        // The film was reported completed only after its assets were stored (downloads-api.md § 11.4):
        // its entry's last PATCH comes after every asset it was fetched through.
        let filmEntry = try #require(m.fixture.downloadEntries.first { $0.episodeId == nil }?.id)
        #expect(eventually { m.fixture.downloadEntries.first { $0.id == filmEntry }?.status == "completed" })
        let lastPatch = m.fixture.requestLog.last { $0.method == "PATCH" && $0.path.hasSuffix("/downloads/" + filmEntry) }?.id ?? -1
        let filmAssets = asked.filter { $0.path.contains("/downloads/" + filmEntry + "/") }
        #expect(!filmAssets.isEmpty && filmAssets.allSatisfy { $0.id < lastPatch }, "PATCH \(lastPatch) after \(filmAssets.map(\.id))")
        // Offline, after a restart: the same bytes and chapters.
        try m.unmount()
        m.fixture.stop()
        try m.mount()
        #expect(try sha256(folder + "/poster.jpg") == sha256(m.mediaDir + "/poster.jpg"))
        #expect(try sha256(folder + "/Alpha (2001).eng.sdh.ass") == sha256(m.mediaDir + "/alpha.sdh.ass"))
        #expect(StatusCommandXattr.get(film, "chapters") == "00:00:00.000 Opening\n00:01:01.500 The Raid")
        #expect(try sha256(thumb) == sha256(m.mediaDir + "/thumb.jpg"))
        try m.unmount()
    }

    @Test func aCreateWhoseAnswerWasLostIsAdoptedNotMadeAgain() throws {
        let m = try mounted("silo-lost-create")
        m.fixture.loseNextCreateAnswer()
        try expectOneCompletedEntry(m, film: "Beta", at: Self.beta)
        try m.unmount()
    }

    /// `pin --wait` of `rel` ends well, its bytes are the server's, and the server holds exactly
    /// one entry for the film, completed, made by exactly one create.
    func expectOneCompletedEntry(_ m: MountedSilo, film title: String, at rel: String) throws {
        let wait = try m.cli(["pin", "--wait", m.path(rel)])
        #expect(wait.code == 0, "\(wait.stdout) \(wait.stderr)")
        let film = m.fixture.movieContentId(title: title)
        #expect(eventually { entries(m, content: film).first?.status == "completed" }, "\(entries(m, content: film)) \(m.log)")
        #expect(entries(m, content: film).count == 1)
        #expect(m.fixture.requestLog.filter { $0.method == "POST" && $0.path.hasSuffix("/downloads") }.count == 1)
        #expect(try sha256(m.path(rel)) == sha256(expectedTree(m.mediaDir)[rel]!))
    }

    /// A Silo server slow to answer its download registry holds up no other server's files: a
    /// Jellyfin pin beside it downloads and completes while Silo's create has no answer yet (the
    /// registry's calls have a thread of their own; the fill only wakes it). The Silo film then
    /// comes through its entry once the answer arrives, never through the direct route.
    @Test func aSlowRegistryHoldsUpNoOtherServersFiles() throws {
        let m = try MountedSilo("silo-slow-registry")
        #expect(try m.addWithPassword().code == 0)
        let jellyfin = try ServerFixture(catalog: testCatalog(in: m.scratch.sub("jf-media")), userName: "demo", password: "pw")
        _ = try jellyfin.start()
        defer { jellyfin.stop() }
        let add = try m.cli(["server", "add", "jellyfin", "jf", "--url", jellyfin.baseURL, "--user", "demo", "--password-stdin"], stdin: "pw\n")
        #expect(add.code == 0, "\(add.stderr)")
        // Patient enough that a fill stuck behind the held create could not give up on it first.
        let conf = m.configDir + "/labstream.conf"
        try (try String(contentsOfFile: conf, encoding: .utf8) + "\n[cache]\nplayback_probe = no\nfetch_timeout = 120\n")
            .write(toFile: conf, atomically: true, encoding: .utf8)
        try m.mount()
        m.fixture.holdNextCreateAnswer()
        #expect(try m.cli(["pin", m.path(Self.gamma)]).code == 0)
        #expect(eventually { m.fixture.holdsCreateAnswer })
        let other = "jf/Movies/Beta (2002)/Beta (2002).mp4"
        let wait = try m.cli(["pin", "--wait", m.path(other)])
        #expect(wait.code == 0, "\(wait.stdout) \(wait.stderr)")
        #expect(m.fixture.holdsCreateAnswer, "the Jellyfin pin finished only once Silo answered")
        #expect(try sha256(m.path(other)) == sha256(expectedTree(m.scratch.path + "/jf-media")["test/Movies/Beta (2002)/Beta (2002).mp4"]!))
        // Nothing of the Silo film was fetched while its entry was unanswered.
        #expect(!m.fixture.requestLog.contains { $0.path.hasSuffix("/direct-download") || $0.path.hasSuffix("/file") }, "\(m.fixture.requestLog)")
        m.fixture.releaseCreateAnswer()
        try expectOneCompletedEntry(m, film: "Gamma", at: Self.gamma)
        #expect(!m.fixture.requestLog.contains { $0.path.hasSuffix("/direct-download") })
        try m.unmount()
    }

    /// A daemon killed between a create and its answer: after the restart the entry is adopted,
    /// so the server holds exactly one for the file, and the copy completes.
    @Test func aKillBetweenACreateAndItsAnswerLeavesExactlyOneEntry() throws {
        let m = try mounted("silo-kill-create")
        m.fixture.holdNextCreateAnswer()
        #expect(try m.cli(["pin", m.path(Self.gamma)]).code == 0)
        let film = m.fixture.movieContentId(title: "Gamma")
        #expect(eventually { entries(m, content: film).count == 1 })
        kill(m.daemonPid, SIGKILL)
        #expect(waitForExit(pid: m.daemonPid))
        m.fixture.releaseCreateAnswer()
        try m.mount()
        try expectOneCompletedEntry(m, film: "Gamma", at: Self.gamma)
        try m.unmount()
    }

    /// A copy whose bytes do not match the manifest's SHA-256 fails, naming both hashes; its
    /// bytes are kept, and the server is not told it completed.
    @Test func aCopyThatDoesNotMatchTheManifestsHashFailsNamingBoth() throws {
        let m = try mounted("silo-integrity")
        let source = expectedTree(m.mediaDir)[Self.beta]!
        let wrong = String(repeating: "ab", count: 32)
        for id in m.fixture.fileIds(forPath: source) { m.fixture.overrideManifestHash(fileId: id, hash: wrong) }
        let wait = try m.cli(["pin", "--wait", m.path(Self.beta)])
        #expect(wait.code != 0)
        let status = try m.cli(["status", "--json", m.path(Self.beta)])
        let actual = try sha256(source)
        #expect(status.stdout.contains("\"failed\"") && status.stdout.contains(wrong) && status.stdout.contains(actual), "\(status.stdout)")
        // Kept for inspection: the bytes still read, and match what the server served.
        #expect(try sha256(m.path(Self.beta)) == actual)
        let film = m.fixture.movieContentId(title: "Beta")
        #expect(entries(m, content: film).count == 1 && entries(m, content: film).first?.status != "completed")
        // Silo's scanner hash is the OpenSubtitles hash of the source (computed here by Python): it is checked too.
        let alpha = expectedTree(m.mediaDir)[Self.alpha]!
        let script =
            "import struct,os,sys\np=sys.argv[1];n=os.path.getsize(p);f=open(p,'rb');h=n\nfor o in (0,n-65536):\n f.seek(o);h+=sum(struct.unpack('<8192Q',f.read(65536)))\nprint('%016x'%(h&0xFFFFFFFFFFFFFFFF))"
        let osHash = try runProcess("/usr/bin/python3", ["-c", script, alpha]).stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        #expect(osHash.count == 16)
        for id in m.fixture.fileIds(forPath: alpha) { m.fixture.overrideManifestHash(fileId: id, hash: osHash) }
        #expect(try m.cli(["pin", "--wait", m.path(Self.alpha)]).code == 0)
        #expect(m.log.contains("integrity of \(Self.alpha): matches"), "\(m.log)")
        try m.unmount()
    }

    /// Unpinned while the server failed the delete, then pinned again: the entry is adopted
    /// again, and the journaled delete does not take it away.
    @Test func aFilePinnedAgainBeforeItsEntryWasDeletedKeepsIt() throws {
        let m = try mounted("silo-repin")
        #expect(try m.cli(["pin", "--wait", m.path(Self.beta)]).code == 0)
        let film = m.fixture.movieContentId(title: "Beta")
        #expect(eventually { entries(m, content: film).first?.status == "completed" })
        let id = try #require(entries(m, content: film).first?.id)
        m.fixture.inject(.status(503), pathPrefix: "/downloads/\(id)", times: nil)  // every delete fails, until after the pin
        #expect(try m.cli(["unpin", m.path(Self.beta)]).code == 0)
        #expect(eventually { m.fixture.requestLog.contains { $0.method == "DELETE" && $0.status == 503 } })
        #expect(try m.cli(["pin", "--wait", m.path(Self.beta)]).code == 0)
        #expect(eventually { m.log.contains("download entry \(id) on test is in use again") }, "\(m.log)")
        m.fixture.clearFaults()
        #expect(entries(m, content: film).map(\.id) == [id])
        #expect(!m.fixture.requestLog.contains { $0.method == "DELETE" && $0.status == 204 })
        try m.unmount()
    }

    /// `pin --quality` on Silo asks for the preset the server offers (its download capability):
    /// the entry is prepared, then its file is fetched through it and shown as the copy.
    @Test func aPinAtAPresetIsPreparedByTheServerThenFetchedThroughItsEntry() throws {
        let m = try mounted("silo-preset")
        let source = expectedTree(m.mediaDir)[Self.alpha]!
        let wait = try m.cli(["pin", "--quality", "10mbps", "--wait", m.path(Self.alpha)])
        #expect(wait.code == 0, "\(wait.stdout) \(wait.stderr) \(m.log)")
        let film = m.fixture.movieContentId(title: "Alpha")
        let made = entries(m, content: film)
        #expect(made.count == 1 && made.first?.quality == "10mbps" && made.first?.deliveryFormat == "transcode", "\(made)")
        let id = try #require(made.first?.id)
        #expect(m.fixture.requestLog.contains { $0.path.hasSuffix("/capabilities/downloads") && $0.status == 200 })
        #expect(m.log.contains("the server's 10mbps copy is ready"), "\(m.log)")
        // The fixture's artifact is the source's bytes: the copy holds what the entry served.
        let copy = "test/Movies/Alpha (2001)/Alpha (2001) - 10mbps.mkv"
        #expect(try sha256(m.path(copy)) == sha256(source))
        #expect(m.fixture.requestLog.filter { $0.path.hasSuffix("/downloads/\(id)/file") && $0.status == 206 }.count >= 1)
        #expect(eventually { entries(m, content: film).first?.status == "completed" }, "\(entries(m, content: film))")
        // One entry per film and device: the original cannot be pinned beside the copy, nor a remux at all.
        let original = try m.cli(["pin", m.path(Self.alpha)])
        #expect(original.code == 64 && original.stderr.contains("one download of each film") && original.stderr.contains("10mbps"), "\(original.stderr)")
        let remux = try m.cli(["pin", "--quality", "remux", m.path(Self.beta)])
        #expect(remux.code == 64 && remux.stderr.contains("no remux preset"), "\(remux.stderr)")
        // Unpinning the film unpins its copy, and the entry goes.
        #expect(try m.cli(["unpin", m.path(Self.alpha)]).code == 0)
        #expect(eventually { entries(m, content: film).isEmpty })
        // The capability is asked again conditionally: unchanged, the server answers 304 and the
        // presets held are used.
        #expect(try m.cli(["pin", "--quality", "5mbps", "--wait", m.path(Self.gamma)]).code == 0)
        let gamma = entries(m, content: m.fixture.movieContentId(title: "Gamma"))
        #expect(gamma.count == 1 && gamma.first?.quality == "5mbps", "\(gamma)")
        func capabilityAnswers() -> [Int] { m.fixture.requestLog.filter { $0.path.hasSuffix("/capabilities/downloads") }.map(\.status) }
        #expect(capabilityAnswers() == [200, 304], "\(capabilityAnswers())")
        // A preset the profile may not have is refused, saying so: the changed capability is read anew.
        m.fixture.setDownloadAllowed(false)
        let refused = try m.cli(["pin", "--quality", "5mbps", "--wait", m.path(Self.beta)])
        #expect(refused.code != 0)
        let status = try m.cli(["status", "--json", m.path(Self.beta)])
        #expect(status.stdout.contains("does not let this profile download"), "\(status.stdout) \(m.log)")
        #expect(capabilityAnswers() == [200, 304, 200], "\(capabilityAnswers())")
        try m.unmount()
    }

    /// A copy is named by what arrived, in the tree and in the log alike: an MP4 copy is
    /// `- 5mbps.mp4` in both (the log said `- 5mbps.mkv`).
    @Test func aCopyIsLoggedByTheNameItHasInTheTree() throws {
        let m = try MountedSilo(
            "silo-copy-name",
            catalog: { dir in
                try? DemoMedia.generate(path: dir + "/clip.mp4", seconds: 4, size: "320x180")
                return FixtureCatalog(movies: [.init(title: "Clip", year: 2020, file: dir + "/clip.mp4", container: "mp4")], series: [])
            }, probe: true)
        #expect(try m.addWithPassword().code == 0)
        try m.mount()
        let wait = try m.cli(["pin", "--quality", "5mbps", "--wait", m.path("test/Movies/Clip (2020)/Clip (2020).mp4")])
        #expect(wait.code == 0, "\(wait.stdout) \(wait.stderr) \(m.log)")
        // The fixture's artifact is the source's bytes: an MP4.
        let copy = "test/Movies/Clip (2020)/Clip (2020) - 5mbps.mp4"
        #expect(FileManager.default.fileExists(atPath: m.path(copy)))
        #expect(eventually { m.log.contains("probe of \(copy): complete") }, "\(m.log)")
        #expect(!m.log.contains("5mbps.mkv"), "\(m.log)")
        try m.unmount()
    }

    /// A copy at a preset waits `preparing` while the server makes it; its manifest is asked for
    /// only once the entry is `ready` (downloads-api.md § 4.6: "Fetch when the entry reaches
    /// ready"; a preparing entry answers 409), and the pin waits for the artwork and subtitles
    /// it names (with `side_assets = pinned` too: the pinned copy wants its original's). One that
    /// failed does not fail the pin, but is named on standard error.
    @Test(arguments: ["all", "pinned"])
    func aCopyAtAPresetAsksForItsManifestOnceReadyAndNamesAFailedSideAsset(sideAssets: String) throws {
        let m = try MountedSilo("silo-preset-side", catalog: SideAssetTests.catalog)
        #expect(try m.addWithPassword().code == 0)
        let conf = m.configDir + "/labstream.conf"
        try (String(contentsOfFile: conf, encoding: .utf8) + "\n[cache]\nplayback_probe = no\nside_assets = \(sideAssets)\n")
            .write(toFile: conf, atomically: true, encoding: .utf8)
        try m.mount()
        m.fixture.failArtwork(times: 1, status: 404)
        // Bounded: a copy whose side assets nobody fetches would be waited for forever.
        let wait = try runProcess(
            "/usr/bin/timeout", ["60", labstreamBinary, "pin", "--quality", "10mbps", "--wait", m.path(Self.alpha)], environment: m.env)
        #expect(wait.code == 0 && wait.stdout.contains("copies ready: 1 of 1"), "\(wait.code) \(wait.stdout) \(wait.stderr)")
        let manifests = m.fixture.requestLog.filter { $0.path.hasSuffix("/manifest") }
        #expect(!manifests.isEmpty && manifests.allSatisfy { $0.status == 200 }, "\(manifests.map(\.status)) \(m.log)")
        let artwork = m.fixture.requestLog.filter { $0.path.contains("/artwork/") }
        #expect(artwork.first?.status == 404, "\(artwork.map(\.status))")
        let status = try JSONSerialization.jsonObject(with: Data(try m.cli(["status", "--json", m.path(Self.alpha)]).stdout.utf8)) as? [[String: Any]]
        let assets = status?.first?["side_assets"] as? [[String: Any]] ?? []
        let failed = assets.filter { $0["state"] as? String == "failed" }.compactMap { $0["name"] as? String }
        #expect(failed.count == 1 && assets.filter { $0["state"] as? String == "missing" }.isEmpty, "\(assets)")
        #expect(wait.stderr.contains("\(failed.first ?? "?") could not be fetched") && wait.stderr.contains("tried again later"), "\(wait.stderr)")
        try m.unmount()
    }

    /// Real media with the playback check on: a pinned film's copy at a preset is proven
    /// playable, and the original's pin is checked by hash and probe before it is complete.
    @Test func aCopyAtAPresetOfRealMediaIsProvenPlayable() throws {
        let m = try MountedSilo("silo-preset-probe", catalog: LiveForwardTests.clipCatalog, probe: true)
        #expect(try m.addWithPassword().code == 0)
        try m.mount()
        let wait = try m.cli(["pin", "--quality", "2mbps", "--wait", m.path(LiveForwardTests.original)])
        #expect(wait.code == 0, "\(wait.stdout) \(wait.stderr) \(m.log)")
        let copy = m.path(LiveForwardTests.copy)
        #expect(StatusCommandXattr.get(copy, "state") == "complete", "\(StatusCommandXattr.get(copy, "reason") ?? "") \(m.log)")
        let played = try runProcess("/usr/bin/mpv", ["--vo=null", "--ao=null", "--frames=10", copy])
        #expect(played.code == 0, "\(played.stderr)")
        #expect(try m.cli(["unpin", m.path(LiveForwardTests.original)]).code == 0)
        #expect(try m.cli(["pin", "--wait", m.path(LiveForwardTests.original)]).code == 0)
        #expect(StatusCommandXattr.get(m.path(LiveForwardTests.original), "state") == "complete")
        #expect(m.log.contains("integrity of \(LiveForwardTests.original): matches"), "\(m.log)")
        try m.unmount()
    }

    /// A revoked entry stops the fetch: what is here stays, and status says why.
    @Test func aRevokedEntryStopsFetchingAndSaysWhy() throws {
        let m = try mounted("silo-revoked")
        // The entry's file route is busy until the entry is revoked.
        m.fixture.inject(.status(503), pathPrefix: "/downloads/dl_", times: nil)
        #expect(try m.cli(["pin", m.path(Self.gamma)]).code == 0)
        let film = m.fixture.movieContentId(title: "Gamma")
        #expect(eventually { m.fixture.requestLog.contains { $0.path.hasSuffix("/file") && $0.status == 503 } })
        let id = try #require(entries(m, content: film).first?.id)
        #expect(m.fixture.revokeEntry(id: id))
        m.fixture.clearFaults()
        #expect(try m.cli(["retry", m.path(Self.gamma)]).code == 0)
        #expect(
            eventually { ((try? m.cli(["status", "--json", m.path(Self.gamma)]))?.stdout ?? "").contains("revoked this download") },
            "\((try? m.cli(["status", "--json", m.path(Self.gamma)]))?.stdout ?? "") \(m.log)")
        // Nothing more is fetched, through it or around it, and the entry is the server's to end: not deleted.
        #expect(try m.cli(["retry", m.path(Self.gamma)]).code == 0)
        #expect(eventually { ((try? m.cli(["status", "--json", m.path(Self.gamma)]))?.stdout ?? "").contains("revoked this download") })
        #expect(entries(m, content: film).count == 1)
        #expect(!m.fixture.requestLog.contains { ($0.path.hasSuffix("/file") && $0.status == 206) || $0.path.hasSuffix("/direct-download") })
        try m.unmount()
    }

    /// A session the server ended (signed out elsewhere, expired) pauses a pinned file instead
    /// of failing it: its entry stays, `server list` and `status` say to sign in again, and
    /// signing in resumes it through the same entry.
    @Test func anEndedSessionPausesPinnedFilesUntilTheUserSignsInAgain() throws {
        let m = try mounted("silo-session-ended")
        m.fixture.inject(.status(503), pathPrefix: "/downloads/dl_", times: nil)
        #expect(try m.cli(["pin", m.path(Self.gamma)]).code == 0)
        let film = m.fixture.movieContentId(title: "Gamma")
        #expect(eventually { m.fixture.requestLog.contains { $0.path.hasSuffix("/file") && $0.status == 503 } })
        let id = try #require(entries(m, content: film).first?.id)
        m.fixture.revokeAllSessions()
        m.fixture.clearFaults()
        #expect(try m.cli(["retry", m.path(Self.gamma)]).code == 0)
        let status = { (try? m.cli(["status", "--json", m.path(Self.gamma)]))?.stdout ?? "" }
        #expect(eventually { status().contains("\"sign_in_refused\"") }, "\(status()) \(m.log)")
        #expect(status().contains("\"state\" : \"paused\""), "\(status())")
        let list = try m.cli(["server", "list"])
        #expect(list.stdout.contains("sign in again: labstream server add silo test --url \(m.baseURL)"), "\(list.stdout)")
        // One state on its line: the sign-in is refused, not "signed in" beside "auth-failed".
        let line = list.stdout.split(separator: "\n").first { $0.hasPrefix("test\t") } ?? ""
        #expect(line.contains("sign-in refused") && line.contains("auth-failed") && !line.contains("signed in"), "\(line)")
        #expect(try m.cli(["status"]).stdout.contains("server test: auth-failed (the stored sign-in was refused"))
        // A sync says what to do once.
        let sync = try m.cli(["sync"])
        #expect(sync.code == 77 && sync.stderr.components(separatedBy: "labstream server add").count == 2, "\(sync.stderr)")
        #expect(sync.stderr.contains("labstream server add silo test --url \(m.baseURL)"), "\(sync.stderr)")
        #expect(entries(m, content: film).map(\.id) == [id])
        // Signing in again resumes it, through the entry it had.
        m.fixture.clearRequestLog()
        #expect(try m.addWithPassword().code == 0)
        // All its bytes, hash matched (the playback probe is off in this suite).
        #expect(eventually { StatusCommandXattr.get(m.path(Self.gamma), "state") == "unverified" }, "\(status()) \(m.log)")
        #expect(eventually { m.log.contains("integrity of \(Self.gamma): matches") })
        #expect(try sha256(m.path(Self.gamma)) == sha256(expectedTree(m.mediaDir)[Self.gamma]!))
        #expect(eventually { entries(m, content: film).map(\.status) == ["completed"] }, "\(entries(m, content: film))")
        #expect(entries(m, content: film).map(\.id) == [id])
        let log = m.fixture.requestLog
        #expect(log.contains { $0.path.hasSuffix("/downloads/\(id)/file") && $0.status == 206 })
        #expect(!log.contains { $0.path.hasSuffix("/direct-download") }, "\(log)")
        try m.unmount()
    }

    /// An entry's file route that answers 409 (downloads-api.md § 4.5: not servable) fails the
    /// copy saying so, in the server's terms; the entry is the server's and stays, and a retry
    /// once it is servable again completes through it.
    @Test func anEntryTheServerWillNotServeFailsSayingSoAndKeepsTheEntry() throws {
        let m = try mounted("silo-409")
        m.fixture.inject(.status(409), pathPrefix: "/downloads/dl_", times: nil)
        #expect(try m.cli(["pin", m.path(Self.beta)]).code == 0)
        let status = { (try? m.cli(["status", "--json", m.path(Self.beta)]))?.stdout ?? "" }
        #expect(
            eventually { status().contains("will not serve download entry") && status().contains("\"state\" : \"failed\"") },
            "\(status()) \(m.log)")
        let film = m.fixture.movieContentId(title: "Beta")
        let id = try #require(entries(m, content: film).first?.id)
        #expect(status().contains("HTTP 409: revoked or no longer servable"))
        m.fixture.clearFaults()
        #expect(try m.cli(["retry", m.path(Self.beta)]).code == 0)
        #expect(eventually { StatusCommandXattr.get(m.path(Self.beta), "state") == "unverified" }, "\(status()) \(m.log)")
        #expect(try sha256(m.path(Self.beta)) == sha256(expectedTree(m.mediaDir)[Self.beta]!))
        #expect(entries(m, content: film).map(\.id) == [id])
        try m.unmount()
    }

    /// An entry replaced on the server while its copy is fetched (its revision moves on): the
    /// manifest's revision check notices before the copy is judged, the entry is read back, and
    /// the completion is reported at the new revision; nothing is made again. Every managed call
    /// names this device, its name and its platform (downloads-api.md § 2).
    @Test func anEntryReplacedDuringItsCopyIsReadBackAndReportedAtItsNewRevision() throws {
        let m = try mounted("silo-stale-revision")
        // The entry's file route is busy while its progress is reported; then the entry moves on.
        m.fixture.holdNextCreateAnswer()
        #expect(try m.cli(["pin", m.path(Self.beta)]).code == 0)
        let film = m.fixture.movieContentId(title: "Beta")
        #expect(eventually { entries(m, content: film).count == 1 })
        let id = try #require(entries(m, content: film).first?.id)
        m.fixture.inject(.status(503), pathPrefix: "/downloads/\(id)/file", times: nil)
        m.fixture.releaseCreateAnswer()
        func reports() -> [SiloLoggedRequest] { m.fixture.requestLog.filter { $0.method == "PATCH" && $0.path.hasSuffix("/downloads/\(id)") } }
        #expect(eventually { reports().contains { $0.status == 200 } }, "\(reports()) \(m.log)")
        #expect(entries(m, content: film).map(\.revision) == [1] && entries(m, content: film).map(\.status) == ["downloading"])
        #expect(m.fixture.replaceEntry(id: id))
        m.fixture.clearFaults()
        #expect(try m.cli(["retry", m.path(Self.beta)]).code == 0)
        #expect(eventually { entries(m, content: film).first?.status == "completed" }, "\(entries(m, content: film)) \(m.log)")
        #expect(entries(m, content: film).map(\.revision) == [2] && entries(m, content: film).map(\.id) == [id])
        #expect(eventually { reports().last?.status == 200 }, "\(reports())")
        #expect(m.log.contains("the download entry moved from revision 1 to 2"), "\(m.log)")
        let log = m.fixture.requestLog
        #expect(log.contains { $0.path.hasSuffix("/downloads/\(id)/file") && $0.status == 206 } && !log.contains { $0.path.hasSuffix("/direct-download") })
        #expect(log.filter { $0.method == "POST" && $0.path.hasSuffix("/downloads") }.count == 1)
        let device = try String(contentsOfFile: m.dataDir + "/device-id", encoding: .utf8).trimmingCharacters(in: .whitespacesAndNewlines)
        let managed = log.filter { $0.path.contains("/downloads") && !$0.path.hasSuffix("/file") }
        #expect(
            !managed.isEmpty
                && managed.allSatisfy { $0.deviceId == device && $0.devicePlatform == "linux" && $0.deviceName?.hasPrefix("Labstream on ") == true },
            "\(managed)")
        try m.unmount()
    }

    /// A report naming a revision the entry has moved past is refused (409, downloads-api.md
    /// § 4.3): the client says so (nil) instead of retrying it or rewriting the entry, and a
    /// report at the revision read back is taken.
    @Test func aReportOnAStaleRevisionIsRefusedAndOneAtTheCurrentRevisionTaken() throws {
        let m = try mounted("silo-report-409")
        #expect(try m.cli(["pin", "--wait", m.path(Self.gamma)]).code == 0)
        let film = m.fixture.movieContentId(title: "Gamma")
        #expect(eventually { entries(m, content: film).first?.status == "completed" })
        try m.unmount()
        let device = try String(contentsOfFile: m.dataDir + "/device-id", encoding: .utf8).trimmingCharacters(in: .whitespacesAndNewlines)
        let client = SiloClient(
            session: ServerSession(name: "test", url: m.baseURL, userId: m.fixture.primaryProfileId, token: m.fixture.configuration.apiKey),
            identity: ClientIdentity(device: "test", deviceId: device), transport: CurlTransport())
        let held = try #require(try client.entries().first { $0.id == entries(m, content: film).first?.id })
        #expect(m.fixture.replaceEntry(id: held.id!))
        let now = Int64(Date().timeIntervalSince1970 * 1000)
        #expect(try client.report(held, .completed, at: now) == nil)
        #expect(m.fixture.requestLog.last { $0.method == "PATCH" }?.status == 409)
        let current = try #require(try client.entries().first { $0.id == held.id })
        #expect(current.revision == held.revision + 1)
        let taken = try #require(try client.report(current, .completed, at: now + 1))
        #expect(taken.revision == current.revision && entries(m, content: film).map(\.status) == ["completed"])
    }

    /// A season with an episode the server has no file for: the tree does not list it, the
    /// season's pin is one batch of the episodes that have files, and the episode the server
    /// skipped is said with its reason (downloads-api.md § 4.1, `no_file`).
    @Test func aSeasonBatchSaysWhichEpisodesTheServerSkipped() throws {
        let m = try MountedSilo(
            "silo-batch-skipped",
            catalog: { dir in
                var catalog = testCatalog(in: dir)
                catalog.series[0].episodes.append(.init(season: 1, number: 3, title: "Unaired", file: "", container: "mkv"))
                return catalog
            })
        #expect(try m.addWithPassword().code == 0)
        try m.mount()
        let listed = try FileManager.default.contentsOfDirectory(atPath: m.path(Self.season)).filter { !isGenerated($0) }.sorted()
        #expect(listed == ["Show (2020) - S01E01 - Pilot.mkv", "Show (2020) - S01E02 - Second.mp4"], "\(listed)")
        #expect(try m.cli(["pin", "--wait", m.path(Self.season)]).code == 0)
        let show = try #require(m.fixture.seriesContentId(name: "Show"))
        #expect(
            eventually { entries(m, content: show).count == 2 && entries(m, content: show).allSatisfy { $0.status == "completed" } },
            "\(entries(m, content: show))")
        #expect(Set(entries(m, content: show).map(\.batchId)).count == 1)
        let unaired = try #require(m.fixture.episodeContentId(series: "Show", season: 1, episode: 3))
        #expect(m.log.contains("the server skipped episode \(unaired) of batch labstream-") && m.log.contains(": no_file"), "\(m.log)")
        try m.unmount()
    }

    /// The server's file changes while its pinned copy is part-fetched through its entry: the
    /// next range asks `If-Range` with the old date, the server's whole-file answer shows the
    /// change, the copy starts over as the new version (no old bytes mixed in), and it is
    /// checked against the manifest of the new file.
    @Test func aFileChangedDuringItsCopyThroughTheEntryStartsOverAsTheNewVersion() throws {
        let m = try mounted("silo-changed-entry")
        m.fixture.holdNextCreateAnswer()
        #expect(try m.cli(["pin", m.path(Self.alpha)]).code == 0)
        let film = m.fixture.movieContentId(title: "Alpha")
        #expect(eventually { entries(m, content: film).count == 1 })
        let id = try #require(entries(m, content: film).first?.id)
        // Part of the file arrives (a checkpoint is committed), then the route is busy.
        m.fixture.inject(.dropAfter(6 * Int64(MiB)), pathPrefix: "/downloads/\(id)/file", times: 1)
        m.fixture.inject(.status(503), pathPrefix: "/downloads/\(id)/file", times: nil)
        m.fixture.releaseCreateAnswer()
        func present() -> Int64 { (StatusCommandXattr.get(m.path(Self.alpha), "bytes")?.split(separator: "/").first).flatMap { Int64($0) } ?? 0 }
        #expect(
            eventually { present() >= 4 * Int64(MiB) },
            "\(StatusCommandXattr.get(m.path(Self.alpha), "bytes") ?? "-") \(m.log)")
        let source = expectedTree(m.mediaDir)[Self.alpha]!
        var rng = SeededRandom(seed: 99)
        let changed = rng.bytes(12 * MiB + 37)
        m.fixture.changeFile(forFile: source, contents: changed)
        m.fixture.clearFaults()
        #expect(try m.cli(["retry", m.path(Self.alpha)]).code == 0)
        #expect(eventually { StatusCommandXattr.get(m.path(Self.alpha), "state") == "unverified" }, "\(m.log)")
        #expect(try sha256(m.path(Self.alpha)) == sha256(source))
        #expect(m.log.contains("file changed on the server"), "\(m.log)")
        #expect(eventually { m.log.contains("integrity of \(Self.alpha): matches") }, "\(m.log)")
        let file = m.fixture.requestLog.filter { $0.path.hasSuffix("/downloads/\(id)/file") }
        #expect(file.contains { $0.ifRange != nil && $0.status == 200 }, "\(file)")
        #expect(entries(m, content: film).map(\.id) == [id])
        try m.unmount()
    }
}
