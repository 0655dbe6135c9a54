import Foundation
import LabstreamCore
import LabstreamFixture
import LabstreamTestSupport
import Testing

/// A library re-added gives every item a new id (issue 41 item 3): Jellyfin and Emby item and
/// media source ids, Plex ratingKeys and part ids. A stored copy the server still has, by what it
/// says and by its bytes, is adopted with only a confirming read; one whose bytes differ stays
/// orphaned.
@Suite(.serialized) struct RebuiltLibraryTests {
    static let alpha = "test/Movies/Alpha (2001)/Alpha (2001).mkv"
    static let beta = "test/Movies/Beta (2002)/Beta (2002).mp4"

    static func catalog(_ dir: String) -> FixtureCatalog {
        var catalog = testCatalog(in: dir)
        catalog.movies[0].details = .init(imdb: "tt0000001", tmdb: "11")
        catalog.movies[1].details = .init(imdb: "tt0000002", tmdb: "22")
        return catalog
    }

    func row(_ m: MountedLabstream, _ rel: String) -> [String: Any]? { Self.first((try? m.cli(["status", "--json", m.path(rel)]))?.stdout) }
    func row(_ m: MountedSilo, _ rel: String) -> [String: Any]? { Self.first((try? m.cli(["status", "--json", m.path(rel)]))?.stdout) }

    static func first(_ statusJSON: String?) -> [String: Any]? {
        guard let out = statusJSON, let rows = try? JSONSerialization.jsonObject(with: Data(out.utf8)) as? [[String: Any]] else { return nil }
        return rows.first
    }

    /// The requests that read `file`'s bytes, by the id it was first listed under.
    func reads(_ m: MountedLabstream, _ requests: [LoggedRequest], file: String) -> [LoggedRequest] {
        // A Plex part's route ends with its file's name; the others name the item.
        if m.fixture.kind == .plex { return requests.filter { $0.path.hasSuffix("/" + (file as NSString).lastPathComponent) } }
        guard let id = m.fixture.itemId(forFile: file) else { return [] }
        return requests.filter { $0.path.contains(id) }
    }

    @Test(arguments: [ServerFixture.Kind.jellyfin, .emby, .plex])
    func aCopyTheServerStillHasIsAdoptedAndADoubtfulOneIsNot(kind: ServerFixture.Kind) throws {
        let m = try MountedLabstream("rebuilt-\(kind)", kind: kind, catalog: Self.catalog, cacheConfig: "side_assets = off")
        try m.mount()
        defer { stopDaemon(at: m.mountpoint, pid: m.daemonPid, env: m.env) }
        for rel in [Self.alpha, Self.beta] {
            #expect(try m.cli(["pin", m.path(rel)]).code == 0)
            #expect(eventually { ["complete", "unverified"].contains(row(m, rel)?["state"] as? String ?? "") }, "\(rel): \(String(describing: row(m, rel)))")
        }
        // Beta's file is replaced by other bytes of the same size, with the same metadata.
        writeRandomFile(m.mediaDir + "/beta.mp4", size: 3 * MiB, seed: 99)
        m.fixture.readdLibraries()
        m.fixture.clearLog()
        // A whole read, asked for (an ordinary sync reads everything too: anOrdinarySyncAfterARebuildAdopts).
        let sync = try m.cli(["sync", "--full"])
        #expect(sync.code == 0, "\(sync.stdout) \(sync.stderr)")

        // Alpha: adopted, still pinned and complete, read byte for byte from what was stored.
        let adopted = try #require(row(m, Self.alpha))
        #expect(["complete", "unverified"].contains(adopted["state"] as? String ?? "") && adopted["pinned"] as? Bool == true, "\(adopted)")
        #expect(adopted["reason"] as? String == "matched", "\(adopted)")
        #expect(try m.cli(["status", m.path(Self.alpha)]).stdout.contains("matched"))
        let downloads = m.fixture.downloadRequests
        let alphaId = try #require(m.fixture.itemId(forFile: m.mediaDir + "/alpha.mkv"))
        // The log keeps requests as the fixture answered them: under the file's first id.
        #expect(m.fixture.currentId(of: alphaId) != alphaId)
        let alphaReads = reads(m, downloads, file: m.mediaDir + "/alpha.mkv")
        #expect(!alphaReads.isEmpty && alphaReads.allSatisfy { $0.range != nil }, "\(alphaReads)")
        let bytes = alphaReads.reduce(Int64(0)) { sum, r in
            let parts = (r.range ?? "").dropFirst("bytes=".count).split(separator: "-").compactMap { Int64($0) }
            return sum + (parts.count == 2 ? parts[1] - parts[0] + 1 : 1 << 40)
        }
        #expect(bytes <= AdoptionProbe.budget, "\(bytes) bytes read to confirm alpha")
        let read = try Data(contentsOf: URL(fileURLWithPath: m.path(Self.alpha)))
        #expect(read == (try Data(contentsOf: URL(fileURLWithPath: m.mediaDir + "/alpha.mkv"))))
        #expect(m.fixture.downloadRequests.count == downloads.count)  // the read came from the stored copy

        // Beta: the same size and provider ids, other bytes: not adopted.
        let fresh = row(m, Self.beta)
        #expect(fresh?["reason"] as? String != "matched" && fresh?["pinned"] as? Bool != true, "\(String(describing: fresh))")
        // Its stored copy stays, orphaned, after a confirming read that found other bytes.
        #expect(try m.cli(["status"]).stdout.contains("Beta (2002).mp4 (orphaned)"))
        #expect(!reads(m, downloads, file: m.mediaDir + "/beta.mp4").isEmpty && downloads.count <= 6, "\(downloads)")
        try m.unmount()
    }

    /// What runs the sync after a rebuild.
    enum Asked: CaseIterable, Sendable { case command, eventChannel }

    /// A rebuild is noticed at the next sync of any kind, not only at a whole read: after a re-add
    /// (every item new, listed as changed since the last sync), an ordinary `labstream sync`, or the
    /// sync the server's event channel asks for, adopts the stored copy with only its confirming
    /// ranges read, and the old item leaves the mount (no second Alpha beside the adopted one).
    /// The server's count is what tells it (films only: no new series to give it away): the
    /// library holds as many items as before, not the known ones plus the new, so the sync reads
    /// everything and sees the old items gone.
    @Test(arguments: [ServerFixture.Kind.jellyfin, .emby], Asked.allCases)
    func anOrdinarySyncAfterARebuildAdopts(kind: ServerFixture.Kind, asked: Asked) throws {
        func films(_ dir: String) -> FixtureCatalog {
            var catalog = Self.catalog(dir)
            catalog.series = []
            return catalog
        }
        let m = try MountedLabstream(
            "rebuilt-next-\(kind)-\(asked)", kind: kind, catalog: films, cacheConfig: "side_assets = off\nrefresh_interval = 86400")
        if asked == .eventChannel { m.fixture.tellChanges() }
        try m.mount()
        defer { stopDaemon(at: m.mountpoint, pid: m.daemonPid, env: m.env) }
        if asked == .eventChannel {
            #expect(eventually { StatusCommandXattr.get(m.mountpoint, "events.test")?.hasPrefix("open since=") == true }, "\(m.log)")
        }
        #expect(try m.cli(["pin", m.path(Self.alpha)]).code == 0)
        #expect(eventually { ["complete", "unverified"].contains(row(m, Self.alpha)?["state"] as? String ?? "") }, "\(String(describing: row(m, Self.alpha)))")
        let movies = m.path("test/Movies")
        let before = try FileManager.default.contentsOfDirectory(atPath: movies).sorted()
        let since = m.fixture.requestLog.last?.id ?? 0
        m.fixture.readdLibraries()
        switch asked {
        case .command:
            let sync = try m.cli(["sync"])
            #expect(sync.code == 0, "\(sync.stdout) \(sync.stderr)")
        case .eventChannel:
            #expect(eventually { row(m, Self.alpha)?["reason"] as? String == "matched" }, "\(m.log)")
        }

        let adopted = try #require(row(m, Self.alpha))
        #expect(adopted["reason"] as? String == "matched" && adopted["pinned"] as? Bool == true, "\(adopted) \(m.log)")
        #expect(["complete", "unverified"].contains(adopted["state"] as? String ?? ""), "\(adopted)")
        // Bytes: only the confirming ranges of the new item, at most the probe's budget.
        let downloads = m.fixture.downloadRequests.filter { $0.id > since }
        let bytes = downloads.reduce(Int64(0)) { sum, r in
            let parts = (r.range ?? "").dropFirst("bytes=".count).split(separator: "-").compactMap { Int64($0) }
            return sum + (parts.count == 2 ? parts[1] - parts[0] + 1 : 1 << 40)
        }
        #expect(!downloads.isEmpty && bytes <= AdoptionProbe.budget, "\(bytes) bytes: \(downloads)")
        // The log keeps requests as the fixture answered them: under the file's first id.
        let alphaId = try #require(m.fixture.itemId(forFile: m.mediaDir + "/alpha.mkv"))
        #expect(downloads.allSatisfy { $0.path.contains(alphaId) && $0.range != nil }, "\(downloads)")
        // The old items are gone: the folder lists what it did, and nothing is orphaned.
        #expect(try FileManager.default.contentsOfDirectory(atPath: movies).sorted() == before)
        #expect(!(try m.cli(["status"]).stdout.contains("(orphaned)")))
        let read = try Data(contentsOf: URL(fileURLWithPath: m.path(Self.alpha)))
        #expect(read == (try Data(contentsOf: URL(fileURLWithPath: m.mediaDir + "/alpha.mkv"))))
        #expect(m.fixture.downloadRequests.filter { $0.id > since }.count == downloads.count)  // read from the stored copy
        try m.unmount()
    }

    /// The household's common case: a library removed on the server (its stored copies left
    /// orphaned at the next sync, the one its event channel asks for within seconds) and added back
    /// later, its items under new ids. The sync that sees them back adopts the orphaned copy with
    /// only its confirming ranges read: pinned again, listed once. A copy refused there (other
    /// bytes of the same size) stays orphaned and is not probed again at later syncs.
    @Test(arguments: [ServerFixture.Kind.jellyfin, .emby, .plex], Asked.allCases)
    func aLibraryRemovedAndAddedBackLaterIsAdopted(kind: ServerFixture.Kind, asked: Asked) throws {
        func films(_ dir: String) -> FixtureCatalog {
            var catalog = Self.catalog(dir)
            catalog.series = []
            return catalog
        }
        let m = try MountedLabstream(
            "rebuilt-later-\(kind)-\(asked)", kind: kind, catalog: films, cacheConfig: "side_assets = off\nrefresh_interval = 86400")
        if asked == .eventChannel { m.fixture.tellChanges() }
        try m.mount()
        defer { stopDaemon(at: m.mountpoint, pid: m.daemonPid, env: m.env) }
        if asked == .eventChannel {
            #expect(eventually { StatusCommandXattr.get(m.mountpoint, "events.test")?.hasPrefix("open since=") == true }, "\(m.log)")
        }
        for rel in [Self.alpha, Self.beta] {
            #expect(try m.cli(["pin", m.path(rel)]).code == 0)
            #expect(eventually { ["complete", "unverified"].contains(row(m, rel)?["state"] as? String ?? "") }, "\(rel): \(String(describing: row(m, rel)))")
        }
        let movies = m.path("test/Movies")
        let before = try FileManager.default.contentsOfDirectory(atPath: movies).sorted()

        m.fixture.removeMovieLibrary()
        if asked == .command {
            let gone = try m.cli(["sync"])
            #expect(gone.code == 0, "\(gone.stdout) \(gone.stderr)")
        }
        for rel in [Self.alpha, Self.beta] {
            #expect(eventually { row(m, rel)?["reason"] as? String == "orphaned" }, "\(rel): \(String(describing: row(m, rel))) \(m.log)")
        }

        // Added back later: new ids; Beta's file is now other bytes of the same size.
        writeRandomFile(m.mediaDir + "/beta.mp4", size: 3 * MiB, seed: 99)
        m.fixture.readdLibraries()
        let alphaId = try #require(m.fixture.itemId(forFile: m.mediaDir + "/alpha.mkv"))
        #expect(m.fixture.currentId(of: alphaId) != alphaId)
        let since = m.fixture.requestLog.last?.id ?? 0
        switch asked {
        case .command:
            let back = try m.cli(["sync"])
            #expect(back.code == 0, "\(back.stdout) \(back.stderr)")
        case .eventChannel:
            #expect(eventually { row(m, Self.alpha)?["reason"] as? String == "matched" }, "\(m.log)")
            #expect(eventually { (try? m.cli(["status"]).stdout.contains("Beta (2002).mp4 (orphaned)")) == true }, "\(m.log)")
        }

        let adopted = try #require(row(m, Self.alpha))
        #expect(adopted["reason"] as? String == "matched" && adopted["pinned"] as? Bool == true, "\(adopted) \(m.log)")
        #expect(["complete", "unverified"].contains(adopted["state"] as? String ?? ""), "\(adopted)")
        // Bytes: only confirming ranges (Alpha's, and Beta's that found other bytes).
        let downloads = m.fixture.downloadRequests.filter { $0.id > since }
        let alphaReads = reads(m, downloads, file: m.mediaDir + "/alpha.mkv")
        let bytes = alphaReads.reduce(Int64(0)) { sum, r in
            let parts = (r.range ?? "").dropFirst("bytes=".count).split(separator: "-").compactMap { Int64($0) }
            return sum + (parts.count == 2 ? parts[1] - parts[0] + 1 : 1 << 40)
        }
        #expect(!alphaReads.isEmpty && bytes <= AdoptionProbe.budget, "\(bytes) bytes: \(downloads)")
        #expect(downloads.allSatisfy { $0.range != nil } && downloads.count <= 6, "\(downloads)")
        // Listed once: the folder lists what it did, Beta's refused copy beside it as an orphan.
        #expect(try FileManager.default.contentsOfDirectory(atPath: movies).sorted() == before)
        let status = try m.cli(["status"]).stdout
        #expect(!status.contains("Alpha (2001).mkv (orphaned)") && status.contains("Beta (2002).mp4 (orphaned)"), "\(status)")
        let fresh = row(m, Self.beta)
        #expect(fresh?["reason"] as? String != "matched" && fresh?["pinned"] as? Bool != true, "\(String(describing: fresh))")
        let read = try Data(contentsOf: URL(fileURLWithPath: m.path(Self.alpha)))
        #expect(read == (try Data(contentsOf: URL(fileURLWithPath: m.mediaDir + "/alpha.mkv"))))
        #expect(m.fixture.downloadRequests.filter { $0.id > since }.count == downloads.count)  // read from the stored copy

        // A later whole read weighs Beta's orphan against no file it was weighed against: nothing read.
        let later = m.fixture.requestLog.last?.id ?? 0
        let again = try m.cli(["sync", "--full"])
        #expect(again.code == 0, "\(again.stdout) \(again.stderr)")
        #expect(m.fixture.downloadRequests.filter { $0.id > later }.isEmpty, "\(m.fixture.downloadRequests.filter { $0.id > later })")
        #expect(try m.cli(["status"]).stdout.contains("Beta (2002).mp4 (orphaned)"))
        try m.unmount()
    }

    /// Silo likewise: after a rescan that rebuilt the catalog (every card new, added now), an
    /// ordinary `labstream sync` finds the library's count not the known films plus the new ones,
    /// reads everything, and adopts the pinned film with only its confirming ranges read.
    @Test func anOrdinarySyncAfterASiloRebuildAdopts() throws {
        let m = try MountedSilo("rebuilt-next-silo")
        #expect(try m.addWithPassword().code == 0)
        try m.mount()
        defer { stopDaemon(at: m.mountpoint, pid: m.daemonPid, env: m.env) }
        let pin = try m.cli(["pin", "--wait", m.path(Self.alpha)])
        #expect(pin.code == 0, "\(pin.stdout) \(pin.stderr)")
        let movies = m.path("test/Movies")
        let before = try FileManager.default.contentsOfDirectory(atPath: movies).sorted()
        m.fixture.readdLibraries()
        let newFile = m.fixture.fileIds(forPath: m.mediaDir + "/alpha.mkv")
        let since = m.fixture.requestLog.last?.id ?? 0
        let sync = try m.cli(["sync"])
        #expect(sync.code == 0, "\(sync.stdout) \(sync.stderr)")

        let adopted = try #require(row(m, Self.alpha))
        #expect(adopted["reason"] as? String == "matched" && adopted["pinned"] as? Bool == true, "\(adopted) \(m.log)")
        let bytesRead = m.fixture.requestLog.filter { $0.id > since && ($0.path.hasSuffix("/direct-download") || $0.path.hasSuffix("/file")) }
        let bytes = bytesRead.reduce(Int64(0)) { sum, r in
            let parts = (r.range ?? "").dropFirst("bytes=".count).split(separator: "-").compactMap { Int64($0) }
            return sum + (parts.count == 2 ? parts[1] - parts[0] + 1 : 1 << 40)
        }
        #expect(!bytesRead.isEmpty && bytesRead.allSatisfy { $0.query["file_id"] == newFile.first } && bytes <= AdoptionProbe.budget, "\(bytesRead)")
        #expect(try FileManager.default.contentsOfDirectory(atPath: movies).sorted() == before)
        #expect(!(try m.cli(["status"]).stdout.contains("(orphaned)")))
        try m.unmount()
    }

    /// Silo: a rescan that rebuilt the catalog gives every film a new content id and every file a
    /// new file id, and its catalog names no provider ids (only the file's name, size and
    /// container). A pinned film is a managed download: the adopted copy is registered anew under
    /// the new content id (and reported completed without a byte fetched through it), the entry
    /// naming the old ids is deleted, and the bytes read are only the confirming ranges.
    @Test func aPinnedSiloFilmIsAdoptedUnderItsNewContentIdAndRegisteredAgain() throws {
        let m = try MountedSilo("rebuilt-silo")
        #expect(try m.addWithPassword().code == 0)
        try m.mount()
        defer { stopDaemon(at: m.mountpoint, pid: m.daemonPid, env: m.env) }
        for rel in [Self.alpha, Self.beta] {
            let pin = try m.cli(["pin", "--wait", m.path(rel)])
            #expect(pin.code == 0, "\(pin.stdout) \(pin.stderr)")
        }
        let oldFilm = try #require(m.fixture.movieContentId(title: "Alpha"))
        #expect(eventually { m.fixture.downloadEntries.first { $0.contentId == oldFilm }?.status == "completed" }, "\(m.fixture.downloadEntries)")
        let oldFile = m.fixture.fileIds(forPath: m.mediaDir + "/alpha.mkv")
        writeRandomFile(m.mediaDir + "/beta.mp4", size: 3 * MiB, seed: 99)
        m.fixture.readdLibraries()
        let newFilm = try #require(m.fixture.movieContentId(title: "Alpha"))
        let newFile = m.fixture.fileIds(forPath: m.mediaDir + "/alpha.mkv")
        #expect(newFilm != oldFilm && newFile != oldFile && newFile.count == 1)
        let since = m.fixture.requestLog.last?.id ?? 0
        let sync = try m.cli(["sync", "--full"])
        #expect(sync.code == 0, "\(sync.stdout) \(sync.stderr)")

        let adopted = try #require(row(m, Self.alpha))
        #expect(["complete", "unverified"].contains(adopted["state"] as? String ?? "") && adopted["pinned"] as? Bool == true, "\(adopted)")
        #expect(adopted["reason"] as? String == "matched", "\(adopted)")
        // The registry: a new entry for the new content id, reported completed; the old one deleted.
        #expect(
            eventually {
                m.fixture.downloadEntries.contains { $0.contentId == newFilm && $0.status == "completed" }
                    && !m.fixture.downloadEntries.contains { $0.contentId == oldFilm }
            }, "\(m.fixture.downloadEntries) \(m.log)")
        // Bytes: only the confirming ranges of the new file, through direct download.
        let log = m.fixture.requestLog.filter { $0.id > since }
        let bytesRead = log.filter { $0.path.hasSuffix("/direct-download") || $0.path.hasSuffix("/file") }
        let alphaReads = bytesRead.filter { $0.query["file_id"] == newFile.first }
        #expect(!alphaReads.isEmpty && alphaReads.allSatisfy { $0.range != nil }, "\(bytesRead)")
        let bytes = alphaReads.reduce(Int64(0)) { sum, r in
            let parts = (r.range ?? "").dropFirst("bytes=".count).split(separator: "-").compactMap { Int64($0) }
            return sum + (parts.count == 2 ? parts[1] - parts[0] + 1 : 1 << 40)
        }
        #expect(bytes <= AdoptionProbe.budget, "\(bytes) bytes read to confirm alpha")
        #expect(!bytesRead.contains { $0.path.hasSuffix("/file") }, "\(bytesRead)")
        let read = try Data(contentsOf: URL(fileURLWithPath: m.path(Self.alpha)))
        #expect(read == (try Data(contentsOf: URL(fileURLWithPath: m.mediaDir + "/alpha.mkv"))))

        // Beta: the same name, size and container, other bytes: not adopted.
        let fresh = row(m, Self.beta)
        #expect(fresh?["reason"] as? String != "matched" && fresh?["pinned"] as? Bool != true, "\(String(describing: fresh))")
        #expect(try m.cli(["status"]).stdout.contains("Beta (2002).mp4 (orphaned)"))
        try m.unmount()
    }

    /// The series test of `MonitorTests`, each episode with a TVDb id (the fixture's episodes
    /// name no server path, so a provider id is what matches them).
    static func series(_ dir: String) -> FixtureCatalog {
        var catalog = MonitorTests.catalog(dir)
        let keep = catalog.series.count - 1
        for e in catalog.series[keep].episodes.indices {
            let ep = catalog.series[keep].episodes[e]
            catalog.series[keep].episodes[e].details = .init(tvdb: "9\(ep.season)0\(ep.number)")
        }
        return catalog
    }

    func attr(_ m: MountedLabstream, _ rel: String, _ name: String) -> String? { StatusCommandXattr.get(m.path(rel), name) }
    func attr(_ m: MountedSilo, _ rel: String, _ name: String) -> String? { StatusCommandXattr.get(m.path(rel), name) }

    /// A `future` monitor survives a rebuild that gave its series and episodes new ids: it moves to
    /// the series' new id (its adopted episode names it), `monitor list` shows it at its folder,
    /// its baseline follows the episodes (no episode the series had when it was made is pinned or
    /// fetched), and an episode the server gains after the rebuild is pinned. Emby gives items
    /// and media sources new ids; Plex gives the show, its seasons and episodes new ratingKeys
    /// and each Media and Part a new id.
    @Test(arguments: [ServerFixture.Kind.jellyfin, .emby, .plex])
    func aMonitoredSeriesFollowsItsNewIdWithItsBaseline(kind: ServerFixture.Kind) throws {
        let m = try MountedLabstream("rebuilt-monitor-\(kind)", kind: kind, catalog: Self.series, cacheConfig: "side_assets = off")
        func item(_ s: Int, _ e: Int) throws -> String { try #require(m.fixture.itemId(forFile: m.mediaDir + "/keep-s\(s)e\(e).mkv")) }
        let (rel, pinned, stored) = KeepEpisodes.of(m.path)
        m.fixture.hold(itemId: try item(2, 2))
        m.fixture.hold(itemId: try item(3, 3))
        try m.mount()
        defer { stopDaemon(at: m.mountpoint, pid: m.daemonPid, env: m.env) }
        #expect(try m.cli(["monitor", "add", m.path(MonitorTests.series), "--mode", "future"]).code == 0)
        m.fixture.release(itemId: try item(2, 2))
        #expect(try m.cli(["sync"]).code == 0)
        #expect(eventually { stored(2, 2) && pinned(2, 2) }, "\(m.log)")
        let old = [(1, 1), (1, 2), (2, 1), (3, 1), (3, 2)]

        m.fixture.readdLibraries()
        m.fixture.clearLog()
        let sync = try m.cli(["sync", "--full"])
        #expect(sync.code == 0, "\(sync.stdout) \(sync.stderr)")
        #expect(m.fixture.currentId(of: try item(2, 2)) != (try item(2, 2)))
        #expect(row(m, rel(2, 2))?["reason"] as? String == "matched", "\(String(describing: row(m, rel(2, 2))))")
        #expect(eventually { attr(m, MonitorTests.series, "monitor") == "future" }, "\(m.log)")
        let listed = try m.cli(["monitor", "list"]).stdout
        #expect(listed.contains(MonitorTests.series + "\t") && listed.contains("future") && !listed.contains("not in the catalog"), "\(listed)")

        // The server gains an episode after the rebuild: the monitor pins it, and nothing else.
        m.fixture.release(itemId: try item(3, 3))
        #expect(try m.cli(["sync"]).code == 0)
        #expect(eventually { stored(3, 3) && pinned(3, 3) }, "\(m.log)")
        #expect(pinned(2, 2) && old.allSatisfy { !pinned($0.0, $0.1) }, "\(old.map { pinned($0.0, $0.1) }) \(m.log)")
        #expect(try sha256(m.path(rel(3, 3))) == sha256(m.mediaDir + "/keep-s3e3.mkv"))
        // Only the new episode's bytes and the adopted one's confirming ranges were read.
        let fetched = old.flatMap { reads(m, m.fixture.downloadRequests, file: m.mediaDir + "/keep-s\($0.0)e\($0.1).mkv") }
        #expect(fetched.isEmpty, "\(fetched)")
        try m.unmount()
    }

    /// `MonitorTests`' series, the show itself with provider ids (Jellyfin/Emby `ProviderIds` of
    /// the Series item, Plex `Guid` of the show: both stay through a re-add), and `twin` more
    /// series with one of them (a show listed twice, in two libraries or under two names).
    static func identified(twin: Int) -> (String) -> FixtureCatalog {
        { dir in
            var catalog = MonitorTests.catalog(dir)
            catalog.series[catalog.series.count - 1].details = .init(imdb: "tt0000077", tvdb: "77")
            for n in 0..<twin {
                let file = dir + "/twin\(n)-s1e1.mkv"
                writeRandomFile(file, size: 300_000, seed: UInt64(900 + n))
                let episode = FixtureCatalog.Episode(season: 1, number: 1, title: "Pilot", file: file, container: "mkv")
                catalog.series.append(.init(name: "Twin \(n)", year: 2021, episodes: [episode], details: .init(tvdb: "77")))
            }
            return catalog
        }
    }

    /// The series id `monitor list --json` shows the one monitor under.
    func monitoredSeries(_ m: MountedLabstream) throws -> String? {
        let listed = try m.cli(["monitor", "list", "--json"]).stdout
        let monitors = try JSONSerialization.jsonObject(with: Data(listed.utf8)) as? [[String: Any]] ?? []
        return monitors.count == 1 ? monitors[0]["series_id"] as? String : nil
    }

    /// The common case: a `future` monitor whose series has no episode stored here (nothing pinned
    /// since it was made) has no adopted copy to say where its series went after a rebuild. It
    /// follows the series' own provider ids to the one series new since the rebuild that has them:
    /// `monitor list` shows it at its folder, an episode the server gains after the rebuild is
    /// pinned, and none the series had (its baseline followed by season and episode number) is
    /// pinned or read.
    @Test(arguments: [ServerFixture.Kind.jellyfin, .emby, .plex])
    func aFutureMonitorWithNothingStoredFollowsItsSeriesProviderIds(kind: ServerFixture.Kind) throws {
        let m = try MountedLabstream("rebuilt-monitor-ids-\(kind)", kind: kind, catalog: Self.identified(twin: 0), cacheConfig: "side_assets = off")
        func item(_ s: Int, _ e: Int) throws -> String { try #require(m.fixture.itemId(forFile: m.mediaDir + "/keep-s\(s)e\(e).mkv")) }
        let (_, pinned, stored) = KeepEpisodes.of(m.path)
        m.fixture.hold(itemId: try item(3, 3))
        try m.mount()
        defer { stopDaemon(at: m.mountpoint, pid: m.daemonPid, env: m.env) }
        #expect(try m.cli(["monitor", "add", m.path(MonitorTests.series), "--mode", "future"]).code == 0)
        let oldSeries = try #require(try monitoredSeries(m))
        let old = [(1, 1), (1, 2), (2, 1), (2, 2), (3, 1), (3, 2)]

        m.fixture.readdLibraries()
        m.fixture.clearLog()
        let sync = try m.cli(["sync", "--full"])
        #expect(sync.code == 0, "\(sync.stdout) \(sync.stderr)")
        #expect(m.fixture.currentId(of: try item(1, 1)) != (try item(1, 1)))
        #expect(eventually { attr(m, MonitorTests.series, "monitor") == "future" }, "\(m.log)")
        let newSeries = try #require(try monitoredSeries(m))
        #expect(newSeries != oldSeries)
        #expect(m.log.contains("the monitor of \(oldSeries) is now of \(newSeries)"), "\(m.log)")
        let listed = try m.cli(["monitor", "list"]).stdout
        #expect(listed.contains(MonitorTests.series + "\t") && listed.contains("future") && !listed.contains("not in the catalog"), "\(listed)")

        // The server gains an episode after the rebuild: the monitor pins it, and nothing else.
        m.fixture.release(itemId: try item(3, 3))
        #expect(try m.cli(["sync"]).code == 0)
        #expect(eventually { stored(3, 3) && pinned(3, 3) }, "\(m.log)")
        #expect(old.allSatisfy { !pinned($0.0, $0.1) }, "\(old.map { pinned($0.0, $0.1) }) \(m.log)")
        #expect(try sha256(m.path(MonitorTests.episode(3, 3))) == sha256(m.mediaDir + "/keep-s3e3.mkv"))
        let fetched = old.flatMap { reads(m, m.fixture.downloadRequests, file: m.mediaDir + "/keep-s\($0.0)e\($0.1).mkv") }
        #expect(fetched.isEmpty, "\(fetched)")
        try m.unmount()
    }

    /// A series removed from the server (its library taken away), synced, and added back later
    /// under new ids (the household's "remove the library and add it again", which the event
    /// channel syncs in between): at the sync that sees it gone the monitor stays and says why,
    /// once; at the sync that sees it back it follows the series' provider ids with its baseline
    /// kept from before, so an episode the server gains afterwards is pinned and none it had is.
    @Test(arguments: [ServerFixture.Kind.jellyfin, .plex])
    func aMonitorFollowsASeriesRemovedAndAddedBackLater(kind: ServerFixture.Kind) throws {
        let m = try MountedLabstream("rebuilt-monitor-later-\(kind)", kind: kind, catalog: Self.identified(twin: 0), cacheConfig: "side_assets = off")
        func item(_ s: Int, _ e: Int) throws -> String { try #require(m.fixture.itemId(forFile: m.mediaDir + "/keep-s\(s)e\(e).mkv")) }
        let (_, pinned, stored) = KeepEpisodes.of(m.path)
        m.fixture.hold(itemId: try item(3, 3))
        try m.mount()
        defer { stopDaemon(at: m.mountpoint, pid: m.daemonPid, env: m.env) }
        #expect(try m.cli(["monitor", "add", m.path(MonitorTests.series), "--mode", "future"]).code == 0)
        let oldSeries = try #require(try monitoredSeries(m))
        let old = [(1, 1), (1, 2), (2, 1), (2, 2), (3, 1), (3, 2)]

        m.fixture.hold(itemId: oldSeries)
        let gone = try m.cli(["sync", "--full"])
        #expect(gone.code == 0, "\(gone.stdout) \(gone.stderr)")
        let why = "the monitor of \(oldSeries) stays under that id, which the server no longer lists"
        #expect(eventually { m.log.contains(why) }, "\(m.log)")
        #expect(try m.cli(["monitor", "list"]).stdout.contains("(not in the catalog)"))
        // Said once: a sync while it is away says nothing more.
        #expect(try m.cli(["sync", "--full"]).code == 0)
        #expect(m.log.components(separatedBy: why).count == 2, "\(m.log)")

        m.fixture.readdLibraries()
        m.fixture.release(itemId: oldSeries)
        let back = try m.cli(["sync", "--full"])
        #expect(back.code == 0, "\(back.stdout) \(back.stderr)")
        #expect(eventually { attr(m, MonitorTests.series, "monitor") == "future" }, "\(m.log)")
        let newSeries = try #require(try monitoredSeries(m))
        #expect(newSeries != oldSeries && m.log.contains("the monitor of \(oldSeries) is now of \(newSeries)"), "\(m.log)")

        m.fixture.release(itemId: try item(3, 3))
        #expect(try m.cli(["sync"]).code == 0)
        #expect(eventually { stored(3, 3) && pinned(3, 3) }, "\(m.log)")
        #expect(old.allSatisfy { !pinned($0.0, $0.1) }, "\(old.map { pinned($0.0, $0.1) }) \(m.log)")
        try m.unmount()
    }

    /// A doubtful match by provider ids never moves a monitor: here two series new since the
    /// rebuild have its series' TVDb id. It stays under the old id, `monitor list` says it is not
    /// in the catalog, and the log says why.
    @Test(arguments: [ServerFixture.Kind.jellyfin, .plex])
    func aMonitorWhoseSeriesIdsTwoNewSeriesHaveStaysAndSaysWhy(kind: ServerFixture.Kind) throws {
        let m = try MountedLabstream("rebuilt-monitor-twin-\(kind)", kind: kind, catalog: Self.identified(twin: 1), cacheConfig: "side_assets = off")
        try m.mount()
        defer { stopDaemon(at: m.mountpoint, pid: m.daemonPid, env: m.env) }
        #expect(try m.cli(["monitor", "add", m.path(MonitorTests.series), "--mode", "future"]).code == 0)
        let oldSeries = try #require(try monitoredSeries(m))

        m.fixture.readdLibraries()
        let sync = try m.cli(["sync", "--full"])
        #expect(sync.code == 0, "\(sync.stdout) \(sync.stderr)")
        let why =
            "the monitor of \(oldSeries) stays under that id, which the server no longer lists: \(RebuiltSeries.LeftBehind.severalSeriesMatched.sentence)"
        #expect(eventually { m.log.contains(why) }, "\(m.log)")
        #expect(try m.cli(["monitor", "list"]).stdout.contains("test/\(oldSeries) (not in the catalog)"))
        #expect(attr(m, MonitorTests.series, "monitor") == nil)
        try m.unmount()
    }

    /// A monitor left under its series' old id (here with no stored episode, so nothing can say
    /// which series is its now) is removed by the name `monitor list` shows for it, through the
    /// daemon: it leaves `monitor list` and the index, and Silo's own monitor of it (the
    /// device's subscription) is deleted too. A name no monitor has is refused, saying where
    /// the names are, and removes nothing.
    @Test func aMonitorLeftUnderAnOldIdIsRemovedByTheNameMonitorListShows() throws {
        let m = try MountedSilo("rebuilt-silo-monitor-remove", catalog: MonitorTests.catalog)
        #expect(try m.addWithPassword().code == 0)
        try m.mount()
        defer { stopDaemon(at: m.mountpoint, pid: m.daemonPid, env: m.env) }
        #expect(try m.cli(["monitor", "add", m.path(MonitorTests.series), "--mode", "future"]).code == 0)
        let oldSeries = try #require(m.fixture.seriesContentId(name: "Keep"))
        #expect(eventually { m.fixture.subscriptions.map(\.seriesId) == [oldSeries] }, "\(m.log)")
        m.fixture.readdLibraries()
        let sync = try m.cli(["sync", "--full"])
        #expect(sync.code == 0, "\(sync.stdout) \(sync.stderr)")
        #expect(attr(m, MonitorTests.series, "monitor") == nil)
        let name = "test/\(oldSeries)"
        let listed = try m.cli(["monitor", "list"]).stdout
        let line = listed.split(separator: "\n").first { $0.hasPrefix("\(name) (not in the catalog)\t") } ?? ""
        #expect(line.hasSuffix("; `labstream monitor remove \(name)` removes it"), "\(listed)")

        let typo = try m.cli(["monitor", "remove", name + "x"])
        #expect(typo.code == 66 && typo.stderr.contains("`labstream monitor list` shows"), "\(typo.stderr)")
        #expect(try m.cli(["monitor", "list"]).stdout.contains(name) && m.fixture.subscriptions.count == 1)
        // With no daemon the name is known (from the index) but only the daemon removes it.
        try m.unmount()
        let offline = try m.cli(["monitor", "remove", name])
        #expect(offline.code == 69 && offline.stderr.contains("mount it"), "\(offline.stderr)")
        #expect(try m.cli(["monitor", "list"]).stdout.contains("\(name) (not in the catalog)") && m.fixture.subscriptions.count == 1)
        try m.mount()

        let remove = try m.cli(["monitor", "remove", name])
        #expect(remove.code == 0 && remove.stdout.contains("Stopped monitoring \(name)"), "\(remove.stdout) \(remove.stderr)")
        #expect(try m.cli(["monitor", "list"]).stdout.contains("No monitored series."))
        // `monitor list --json` reads the index itself.
        #expect(try m.cli(["monitor", "list", "--json"]).stdout.filter { !$0.isWhitespace } == "[]")
        #expect(m.fixture.subscriptions.isEmpty, "\(m.fixture.subscriptions) \(m.log)")
        try m.unmount()
    }

    /// Silo: a season listing names each episode's provider ids (catalog_items.go Episode
    /// `tvdb_id`…), so a stored episode is known again after a rebuild gave it new content and file
    /// ids, and its bytes confirm it with a few ranges. A `future` monitor then follows its series:
    /// it moves to the new series id with its settings and baseline, and the server's own monitor,
    /// whose series cannot be changed (downloads-api.md § 8.3: PATCH takes no `series_id`), is
    /// deleted (§ 8.3 DELETE) and made again for the new id (§ 8.1 POST). An episode whose file
    /// became other bytes of the same size, with the same ids, is not adopted.
    @Test func aMonitoredSiloSeriesFollowsItsSeriesThroughARebuild() throws {
        let m = try MountedSilo("rebuilt-silo-monitor", catalog: Self.series)
        let (rel, pinned, stored) = KeepEpisodes.of(m.path)
        func episode(_ s: Int, _ e: Int) throws -> String { try #require(m.fixture.episodeContentId(series: "Keep", season: s, episode: e)) }
        #expect(m.fixture.hold(episodeContentId: try episode(2, 2)))
        #expect(m.fixture.hold(episodeContentId: try episode(3, 3)))
        #expect(try m.addWithPassword().code == 0)
        try m.mount()
        defer { stopDaemon(at: m.mountpoint, pid: m.daemonPid, env: m.env) }
        // 1x1 pinned by hand; its file becomes other bytes of the same size below.
        let pin = try m.cli(["pin", "--wait", m.path(rel(1, 1))])
        #expect(pin.code == 0, "\(pin.stdout) \(pin.stderr)")
        let add = try m.cli(["monitor", "add", m.path(MonitorTests.series), "--mode", "future", "--max-storage", "5000000"])
        #expect(add.code == 0, "\(add.stderr)")
        let oldSeries = try #require(m.fixture.seriesContentId(name: "Keep"))
        #expect(eventually { m.fixture.subscriptions.first?.seriesId == oldSeries }, "\(m.fixture.subscriptions) \(m.log)")
        let oldSubscription = try #require(m.fixture.subscriptions.first)
        let oldTwoTwo = try episode(2, 2)
        #expect(m.fixture.release(episodeContentId: oldTwoTwo))
        #expect(try m.cli(["sync"]).code == 0)
        #expect(eventually { stored(2, 2) && pinned(2, 2) }, "\(m.log)")
        #expect(eventually { m.fixture.downloadEntries.first { $0.episodeId == oldTwoTwo }?.status == "completed" }, "\(m.fixture.downloadEntries)")

        writeRandomFile(m.mediaDir + "/keep-s1e1.mkv", size: 300_000, seed: 99)
        m.fixture.readdLibraries()
        let newSeries = try #require(m.fixture.seriesContentId(name: "Keep"))
        let newTwoTwoFile = try #require(m.fixture.fileIds(forPath: m.mediaDir + "/keep-s2e2.mkv").first)
        let newTwoTwo = try episode(2, 2)
        #expect(newSeries != oldSeries && newTwoTwo != oldTwoTwo)
        let since = m.fixture.requestLog.last?.id ?? 0
        let sync = try m.cli(["sync", "--full"])
        #expect(sync.code == 0, "\(sync.stdout) \(sync.stderr)")

        // 2x2: adopted, still pinned and stored, registered anew; read only in confirming ranges.
        let adopted = try #require(row(m, rel(2, 2)))
        #expect(adopted["reason"] as? String == "matched" && adopted["pinned"] as? Bool == true, "\(adopted)")
        #expect(
            eventually {
                m.fixture.downloadEntries.contains { $0.episodeId == newTwoTwo && $0.status == "completed" }
                    && !m.fixture.downloadEntries.contains { $0.episodeId == oldTwoTwo }
            }, "\(m.fixture.downloadEntries) \(m.log)")
        let bytesRead = m.fixture.requestLog.filter { $0.id > since && ($0.path.hasSuffix("/direct-download") || $0.path.hasSuffix("/file")) }
        let twoTwoReads = bytesRead.filter { $0.query["file_id"] == newTwoTwoFile }
        #expect(!twoTwoReads.isEmpty && twoTwoReads.allSatisfy { $0.range != nil }, "\(bytesRead)")
        let bytes = twoTwoReads.reduce(Int64(0)) { sum, r in
            let parts = (r.range ?? "").dropFirst("bytes=".count).split(separator: "-").compactMap { Int64($0) }
            return sum + (parts.count == 2 ? parts[1] - parts[0] + 1 : 1 << 40)
        }
        #expect(bytes <= AdoptionProbe.budget, "\(bytes) bytes read to confirm 2x2")
        #expect(!bytesRead.contains { $0.path.hasSuffix("/file") }, "\(bytesRead)")
        #expect(try sha256(m.path(rel(2, 2))) == sha256(m.mediaDir + "/keep-s2e2.mkv"))

        // 1x1: the same ids, size and container, other bytes: not adopted, its copy orphaned.
        let fresh = row(m, rel(1, 1))
        #expect(fresh?["reason"] as? String != "matched" && fresh?["pinned"] as? Bool != true, "\(String(describing: fresh))")
        #expect(try m.cli(["status"]).stdout.contains("Keep (2021) - S01E01 - Part 1.mkv (orphaned)"))

        // The monitor moved, with its settings; the server's monitor of the old id went, one of the new id came.
        // (Read from `monitor list`: the series folder also shows 1x1's orphaned copy, and a folder
        // holding a file of no listed series shows no monitor attribute.)
        let listed = try m.cli(["monitor", "list", "--json"]).stdout
        let monitors = try JSONSerialization.jsonObject(with: Data(listed.utf8)) as? [[String: Any]] ?? []
        #expect(monitors.count == 1, "\(listed)")
        #expect(monitors.first?["series_id"] as? String == newSeries && monitors.first?["path"] as? String == MonitorTests.series, "\(listed)")
        #expect(monitors.first?["settings"] as? String == "future,max-storage=5000000", "\(listed)")
        #expect(
            eventually {
                m.fixture.subscriptions.count == 1 && m.fixture.subscriptions.first?.seriesId == newSeries
                    && m.fixture.subscriptions.first?.id != oldSubscription.id
            }, "\(m.fixture.subscriptions) \(m.log)")
        let made = try #require(m.fixture.subscriptions.first)
        #expect(made.mode == "future" && made.maxStorageBytes == 5_000_000 && made.deviceId == oldSubscription.deviceId, "\(made)")
        let monitorRequests = m.fixture.requestLog.filter { $0.id > since && $0.path.contains("/downloads/subscriptions") }
        #expect(
            monitorRequests.contains { $0.method == "DELETE" && $0.path.hasSuffix("/downloads/subscriptions/" + oldSubscription.id) && $0.status == 204 },
            "\(monitorRequests)")
        #expect(
            monitorRequests.contains { $0.method == "POST" && $0.path.hasSuffix("/downloads/subscriptions") && [200, 201].contains($0.status) },
            "\(monitorRequests)")

        // Its baseline followed: an episode the server gains now is pinned, none the series had.
        #expect(m.fixture.release(episodeContentId: try episode(3, 3)))
        #expect(try m.cli(["sync"]).code == 0)
        #expect(eventually { stored(3, 3) && pinned(3, 3) }, "\(m.log)")
        let old = [(1, 1), (1, 2), (2, 1), (3, 1), (3, 2)]
        #expect(pinned(2, 2) && old.allSatisfy { !pinned($0.0, $0.1) }, "\(old.map { pinned($0.0, $0.1) }) \(m.log)")
        try m.unmount()
    }

    /// Silo, where the season listing names no provider id for the episodes (an episode's file rows
    /// name no file name either): a stored episode is not matched after a rebuild, and nothing
    /// says which series the monitor's is now: the monitor stays under the old id, `monitor list`
    /// says it is not in the catalog, the log says why, and no episode is pinned by it meanwhile.
    @Test func aMonitoredSiloSeriesWhoseEpisodesNameNoProviderIdStaysAndSaysWhy() throws {
        let m = try MountedSilo("rebuilt-silo-unmatched", catalog: MonitorTests.catalog)
        let (rel, pinned, stored) = KeepEpisodes.of(m.path)
        func episode(_ s: Int, _ e: Int) throws -> String { try #require(m.fixture.episodeContentId(series: "Keep", season: s, episode: e)) }
        #expect(m.fixture.hold(episodeContentId: try episode(2, 2)))
        #expect(try m.addWithPassword().code == 0)
        try m.mount()
        defer { stopDaemon(at: m.mountpoint, pid: m.daemonPid, env: m.env) }
        #expect(try m.cli(["monitor", "add", m.path(MonitorTests.series), "--mode", "future"]).code == 0)
        let oldSeries = try #require(m.fixture.seriesContentId(name: "Keep"))
        #expect(m.fixture.release(episodeContentId: try episode(2, 2)))
        #expect(try m.cli(["sync"]).code == 0)
        #expect(eventually { stored(2, 2) && pinned(2, 2) }, "\(m.log)")

        m.fixture.readdLibraries()
        let sync = try m.cli(["sync", "--full"])
        #expect(sync.code == 0, "\(sync.stdout) \(sync.stderr)")
        let why = "the monitor of \(oldSeries) stays under that id, which the server no longer lists: \(RebuiltSeries.LeftBehind.noEpisodeAdopted.sentence)"
        #expect(eventually { m.log.contains(why) }, "\(m.log)")
        #expect(try m.cli(["monitor", "list"]).stdout.contains("test/\(oldSeries) (not in the catalog)"))
        #expect(attr(m, MonitorTests.series, "monitor") == nil)
        #expect([(1, 1), (1, 2), (2, 1), (2, 2), (3, 1), (3, 2), (3, 3)].allSatisfy { !pinned($0.0, $0.1) })
        try m.unmount()
    }
}

/// The episodes of the monitor tests' series as the mount shows them: each one's path under the
/// mount, and whether it is pinned and stored (its attributes).
enum KeepEpisodes {
    static func of(
        _ path: @escaping (String) -> String
    ) -> (rel: (Int, Int) -> String, pinned: (Int, Int) -> Bool, stored: (Int, Int) -> Bool) {
        func rel(_ s: Int, _ e: Int) -> String { MonitorTests.episode(s, e) }
        return (
            rel, { s, e in StatusCommandXattr.get(path(rel(s, e)), "pinned") == "1" },
            { s, e in StatusCommandXattr.get(path(rel(s, e)), "state") == "unverified" }
        )
    }
}
