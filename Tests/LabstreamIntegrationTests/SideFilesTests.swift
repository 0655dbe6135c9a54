import CLinux
import Foundation
import LabstreamCore
import LabstreamDemo
import LabstreamFixture
import Testing

@testable import LabstreamStore

/// `.nfo` files through a real mount, from each backend's own metadata: exact sizes before any
/// read, valid XML for any text (parsed by Python's XML parser), readable offline, and gone with
/// `side_assets = off`.
@Suite(.serialized) struct MountedSideFilesTests {
    static let film = "test/Movies/Alpha (2001)/Alpha (2001).nfo"
    static let show = "test/Shows/Show (2020)/tvshow.nfo"
    static let pilot = "test/Shows/Show (2020)/Season 01/Show (2020) - S01E01 - Pilot.nfo"
    /// A plot of over a megabyte, with markup, a CDATA end, NUL and other controls in it.
    static let hostilePlot = "It begins ]]> & <b>ends</b> \u{0}\u{1}\u{8} \"quoted\" — " + String(repeating: "long plot. ", count: 100_000)

    static func catalog(_ dir: String) -> FixtureCatalog {
        var catalog = testCatalog(in: dir)
        catalog.movies[0].details = .init(
            plot: hostilePlot, originalTitle: "Alfa", genres: ["Drama", "War"], studios: ["Ealing"], rating: 7.5,
            premiered: "2001-05-04", runtimeSeconds: 5_430, imdb: "tt0000001", tmdb: "11",
            chapters: [.init(start: 0, name: "Opening"), .init(start: 3_723.45, name: "The Raid")])
        catalog.series[0].details = .init(plot: "A show & its plot.", genres: ["Comedy"], premiered: "2020-01-02", tvdb: "321")
        catalog.series[0].episodes[0].details = .init(plot: "The first one.", premiered: "2020-01-02", runtimeSeconds: 1_500)
        catalog.series[0].episodes[1].details = .init(plot: "A short one.", runtimeSeconds: 20)
        return catalog
    }

    /// The document's root and its children's text (first of each name), by Python's parser.
    func parsed(_ path: String) throws -> (root: String, fields: [String: String], genres: [String], ids: [String: String]) {
        let script = """
            import json, sys, xml.etree.ElementTree as E
            r = E.parse(sys.argv[1]).getroot()
            fields = {}
            for c in r:
                fields.setdefault(c.tag, c.text or "")
            print(json.dumps({"root": r.tag, "fields": fields, "genres": [g.text for g in r.findall("genre")],
                              "ids": {u.get("type"): u.text for u in r.findall("uniqueid")}}))
            """
        let run = try runProcess("/usr/bin/python3", ["-c", script, path])
        try #require(run.code == 0, "not valid XML: \(run.stderr.prefix(500))")
        let j = try #require(try JSONSerialization.jsonObject(with: Data(run.stdout.utf8)) as? [String: Any])
        return (j["root"] as? String ?? "", j["fields"] as? [String: String] ?? [:], j["genres"] as? [String] ?? [], j["ids"] as? [String: String] ?? [:])
    }

    @Test(arguments: [ServerFixture.Kind.jellyfin, .emby, .plex])
    func nfoFilesSayWhatTheServerKnowsAndReadOffline(kind: ServerFixture.Kind) throws {
        let m = try MountedLabstream("nfo-\(kind)", kind: kind, catalog: Self.catalog)
        try m.mount()
        var st = stat()
        #expect(stat(m.path(Self.film), &st) == 0)
        let film = try Data(contentsOf: URL(fileURLWithPath: m.path(Self.film)))
        #expect(Int(st.st_size) == film.count && film.count > 1_000_000)  // the size said before the read is the bytes' size
        let movie = try parsed(m.path(Self.film))
        #expect(movie.root == "movie" && movie.fields["title"] == "Alpha" && movie.fields["year"] == "2001" && movie.fields["originaltitle"] == "Alfa")
        #expect(movie.fields["plot"]?.hasPrefix("It begins ]]> & <b>ends</b>  \"quoted\" — long plot.") == true, "\(movie.fields["plot"]?.prefix(80) ?? "")")
        #expect(movie.genres == ["Drama", "War"] && movie.fields["studio"] == "Ealing" && movie.fields["premiered"] == "2001-05-04")
        #expect(movie.fields["runtime"] == "91" && movie.ids == ["imdb": "tt0000001", "tmdb": "11"], "\(movie.ids)")
        let show = try parsed(m.path(Self.show))
        #expect(show.root == "tvshow" && show.fields["title"] == "Show" && show.fields["year"] == "2020" && show.fields["plot"] == "A show & its plot.")
        #expect(show.genres == ["Comedy"] && show.ids == ["tvdb": "321"], "\(show)")
        let pilot = try parsed(m.path(Self.pilot))
        #expect(pilot.root == "episodedetails" && pilot.fields["title"] == "Pilot" && pilot.fields["season"] == "1" && pilot.fields["episode"] == "1")
        #expect(pilot.fields["plot"] == "The first one." && pilot.fields["aired"] == "2020-01-02" && pilot.fields["runtime"] == "25")
        // Shorter than half a minute: no runtime rather than `<runtime>0</runtime>`.
        let short = try parsed(m.path("test/Shows/Show (2020)/Season 01/Show (2020) - S01E02 - Second.nfo"))
        #expect(short.fields["plot"] == "A short one." && short.fields["runtime"] == nil, "\(short.fields)")
        // The chapters the server knows: Jellyfin and Emby list them; Plex tells them item by
        // item, asked when the film's folder is listed.
        let media = m.path("test/Movies/Alpha (2001)/Alpha (2001).mkv"), marks = "00:00:00.000 Opening\n01:02:03.450 The Raid"
        _ = try FileManager.default.contentsOfDirectory(atPath: m.path("test/Movies/Alpha (2001)"))
        #expect(eventually { StatusCommandXattr.get(media, "chapters") == marks }, "\(StatusCommandXattr.get(media, "chapters") ?? "none")")
        if kind == .plex {
            #expect(m.fixture.requestLog.contains { $0.path.hasPrefix("/library/metadata/") && $0.query["includeChapters"] == "1" })
        }
        // Made here: nothing to pin or fetch, and whole; pinning one is refused.
        #expect(StatusCommandXattr.get(m.path(Self.film), "state") == "complete")
        let pin = Array("1".utf8)
        #expect(setxattr(m.path(Self.film), "user.labstream.pin", pin, pin.count, 0) != 0 && errno == EPERM)
        // `labstream pin` says what it is, with the exit status labstream(1) gives it.
        for nfo in [Self.film, Self.show] {
            let refused = try m.cli(["pin", m.path(nfo)])
            #expect(refused.code == 65 && refused.stderr.contains("generated from the catalog; always local"), "\(refused.code) \(refused.stderr)")
        }
        // Offline after a restart: the same bytes.
        try m.unmount()
        m.fixture.stop()
        try m.mount()
        // Its size now comes from the index's cache of sizes: still the bytes' size.
        #expect(stat(m.path(Self.film), &st) == 0 && Int(st.st_size) == film.count)
        #expect(try Data(contentsOf: URL(fileURLWithPath: m.path(Self.film))) == film)
        #expect(StatusCommandXattr.get(media, "chapters") == marks)
        try m.unmount()
    }

    @Test func sideAssetsOffShowsOnlyTheMedia() throws {
        let m = try MountedLabstream("nfo-off", catalog: Self.catalog, cacheConfig: "side_assets = off")
        try m.mount()
        let folder = try FileManager.default.contentsOfDirectory(atPath: m.path("test/Movies/Alpha (2001)"))
        #expect(folder == ["Alpha (2001).mkv"], "\(folder)")
        #expect(!FileManager.default.fileExists(atPath: m.path(Self.show)))
        try m.unmount()
    }
}

/// A home-video library appears as the server's own folders, each video under its own name;
/// a music-video library as Artist/Title (Year); both read byte for byte (issue 19).
@Suite(.serialized) struct HomeVideoTests {
    @Test(arguments: [ServerFixture.Kind.jellyfin, .emby])
    func homeVideosAppearInTheServersFolders(kind: ServerFixture.Kind) throws {
        let m = try MountedLabstream("homevideo-\(kind)", kind: kind) { dir in
            var catalog = testCatalog(in: dir)
            for (name, size, seed) in [("beach.mp4", 300_000, 41), ("cake.mkv", 200_000, 42), ("loose.mkv", 100_000, 43)] {
                writeRandomFile(dir + "/" + name, size: size, seed: UInt64(seed))
            }
            catalog.homeVideos = [
                .init(title: "Beach", folders: ["2019", "Trip"], file: dir + "/beach.mp4", container: "mp4"),
                .init(title: "Cake", folders: ["2019"], file: dir + "/cake.mkv", container: "mkv"),
                .init(title: "Loose", folders: [], file: dir + "/loose.mkv", container: "mkv")
            ]
            writeRandomFile(dir + "/song.mp4", size: 150_000, seed: 44)
            writeRandomFile(dir + "/talk.mkv", size: 120_000, seed: 45)
            catalog.mixedVideos = [.init(title: "Talk", folders: ["Lectures"], file: dir + "/talk.mkv", container: "mkv")]
            catalog.musicVideos = [.init(title: "Song", artists: ["Band", "Guest"], year: 1999, file: dir + "/song.mp4", container: "mp4")]
            return catalog
        }
        try m.mount()
        let home = Set(filesBelow(m.path("test/Home Videos")))
        #expect(home == ["2019/Trip/Beach.mp4", "2019/Cake.mkv", "Loose.mkv"], "\(home)")
        #expect(try sha256(m.path("test/Home Videos/2019/Trip/Beach.mp4")) == sha256(m.mediaDir + "/beach.mp4"))
        #expect(try sha256(m.path("test/Home Videos/Loose.mkv")) == sha256(m.mediaDir + "/loose.mkv"))
        // A music video: Artist/Title (Year).ext.
        #expect(filesBelow(m.path("test/Music Videos")) == ["Band/Song (1999).mp4"], "\(filesBelow(m.path("test/Music Videos")))")
        #expect(try sha256(m.path("test/Music Videos/Band/Song (1999).mp4")) == sha256(m.mediaDir + "/song.mp4"))
        // A mixed library (Jellyfin says `folders`, Emby names no kind): its folders too.
        #expect(filesBelow(m.path("test/Mixed")) == ["Lectures/Talk.mkv"], "\(filesBelow(m.path("test/Mixed")))")
        #expect(try sha256(m.path("test/Mixed/Lectures/Talk.mkv")) == sha256(m.mediaDir + "/talk.mkv"))
        // The films and shows are as they were.
        #expect(FileManager.default.fileExists(atPath: m.path("test/Movies/Alpha (2001)/Alpha (2001).mkv")))
        try m.unmount()
    }
}

/// Photos (issue 19) in the server's own folders on every backend, and Plex's home-video
/// sections: read byte for byte, pinned, and proven by decoding the picture; a damaged photo fails.
@Suite(.serialized) struct PhotoTests {
    static func catalog(_ dir: String) -> FixtureCatalog {
        var c = testCatalog(in: dir)
        func image(_ name: String, _ size: String) -> String { testImage(dir + "/" + name, size: size) }
        let sunset = image("sunset.jpg", "320x240"), map = image("map.png", "160x120"), whole = image("whole.jpg", "320x240")
        // A JPEG cut short: whole on the server's disk as far as sizes go, damaged as a picture.
        if let bytes = FileManager.default.contents(atPath: whole) {
            FileManager.default.createFile(atPath: dir + "/broken.jpg", contents: bytes.prefix(bytes.count * 45 / 100))
        }
        c.photos = [
            .init(title: "Sunset", folders: ["2019", "Trip"], file: sunset, container: "jpg", width: 320, height: 240),
            .init(title: "Map", folders: [], file: map, container: "png", width: 160, height: 120),
            .init(title: "Broken", folders: ["2019"], file: dir + "/broken.jpg", container: "jpg", width: 320, height: 240)
        ]
        writeRandomFile(dir + "/cake.mkv", size: 200_000, seed: 42)
        c.homeVideos = [.init(title: "Cake", folders: ["2019"], file: dir + "/cake.mkv", container: "mkv")]
        return c
    }

    @Test(arguments: [ServerFixture.Kind.jellyfin, .emby, .plex])
    func photosAppearReadAndAreCheckedAsImages(kind: ServerFixture.Kind) throws {
        let m = try MountedLabstream("photos-\(kind)", kind: kind, catalog: Self.catalog, probe: true)
        try m.mount()
        // Jellyfin and Emby keep photos beside the home videos; Plex has a section of each.
        let photos = kind == .plex ? "test/Photos" : "test/Home Videos"
        let expected: Set<String> =
            kind == .plex
            ? ["2019/Trip/Sunset.jpg", "Map.png", "2019/Broken.jpg"]
            : ["2019/Trip/Sunset.jpg", "Map.png", "2019/Broken.jpg", "2019/Cake.mkv"]
        #expect(Set(filesBelow(m.path(photos))) == expected, "\(filesBelow(m.path(photos)))")
        if kind == .plex {
            #expect(filesBelow(m.path("test/Home Videos")) == ["2019/Cake.mkv"], "\(filesBelow(m.path("test/Home Videos")))")
        }
        #expect(try sha256(m.path("test/Home Videos/2019/Cake.mkv")) == sha256(m.mediaDir + "/cake.mkv"))
        // The size is the server's file's before any byte is read (Jellyfin's listing has none).
        let sunset = m.path(photos + "/2019/Trip/Sunset.jpg")
        let onDisk = try FileManager.default.attributesOfItem(atPath: m.mediaDir + "/sunset.jpg")[.size] as? Int
        #expect(try FileManager.default.attributesOfItem(atPath: sunset)[.size] as? Int == onDisk)
        #expect(try sha256(m.path(photos + "/Map.png")) == sha256(m.mediaDir + "/map.png"))
        // Pinned, a whole photo is proven by decoding it, a damaged one fails.
        for (name, state) in [("2019/Trip/Sunset.jpg", "complete"), ("Map.png", "complete"), ("2019/Broken.jpg", "failed")] {
            let path = m.path(photos + "/" + name)
            let wait = try m.cli(["pin", "--wait", path])
            #expect(StatusCommandXattr.get(path, "state") == state, "\(name): \(StatusCommandXattr.get(path, "reason") ?? "") \(wait.stdout) \(wait.stderr)")
        }
        // Copies at another quality are for video.
        let quality = try m.cli(["pin", "--quality", "2mbps", sunset])
        #expect(quality.code == 64 && quality.stderr.contains("is an image"), "\(quality.code) \(quality.stderr)")
        // A pinned photo reads with the server gone.
        m.fixture.stop()
        #expect(try sha256(sunset) == sha256(m.mediaDir + "/sunset.jpg"))
        try m.unmount()
    }

    /// A photo arriving in a Jellyfin home-video library shows at the next incremental refresh
    /// (the library, and only it, is re-read), and the photos already known keep the size
    /// learnt before instead of being asked again.
    @Test func aNewPhotoArrivesIncrementallyAndKnownSizesAreNotAskedAgain() throws {
        let m = try MountedLabstream("photos-incremental", kind: .jellyfin, catalog: Self.catalog, cacheConfig: "refresh_interval = 1")
        let map = try #require(m.fixture.itemId(forFile: m.mediaDir + "/map.png"))
        let sunset = try #require(m.fixture.itemId(forFile: m.mediaDir + "/sunset.jpg"))
        m.fixture.hold(itemId: map)
        try m.mount()
        let mapPath = m.path("test/Home Videos/Map.png")
        #expect(!FileManager.default.fileExists(atPath: mapPath))
        #expect(FileManager.default.fileExists(atPath: m.path("test/Home Videos/2019/Trip/Sunset.jpg")))
        m.fixture.clearLog()
        m.fixture.release(itemId: map)
        #expect(eventually { FileManager.default.fileExists(atPath: mapPath) })
        let onDisk = try FileManager.default.attributesOfItem(atPath: m.mediaDir + "/map.png")[.size] as? Int
        #expect(try FileManager.default.attributesOfItem(atPath: mapPath)[.size] as? Int == onDisk)
        #expect(m.fixture.requestLog.contains { $0.query["minDateLastSaved"] != nil && $0.query["parentId"] == m.fixture.homeVideoLibraryId })
        let asked = m.fixture.requestLog.filter { $0.path.hasSuffix("/Download") }.map(\.path)
        #expect(asked.contains("/Items/\(map)/Download") && !asked.contains("/Items/\(sunset)/Download"), "\(asked)")
        try m.unmount()
    }
}

/// Artwork and subtitles (issue 18): fetched beside the media when a folder is listed (or its
/// file pinned), checked, stored, named the way players look for them, readable offline, and
/// gone with their media.
@Suite(.serialized) struct SideAssetTests {
    static func catalog(_ dir: String) -> FixtureCatalog {
        var c = testCatalog(in: dir)
        func image(_ name: String, _ size: String) -> String { testImage(dir + "/" + name, size: size) }
        func text(_ name: String, _ bytes: [UInt8]) -> String {
            let path = dir + "/" + name
            FileManager.default.createFile(atPath: path, contents: Data(bytes))
            return path
        }
        let alpha = dir + "/alpha.mkv", pilot = dir + "/s1e1.mkv"
        c.movieArtwork[alpha] = [
            .init(.poster, file: image("poster.jpg", "120x180")), .init(.fanart, file: image("fanart.png", "320x180")),
            .init(.logo, file: image("logo.png", "100x40"))
        ]
        c.seriesArtwork["Show"] = [.init(.poster, file: image("show.jpg", "120x180"))]
        c.seasonPosters["Show/1"] = image("season1.jpg", "100x150")  // bytes of its own: stored once, found by them
        c.episodeThumbs[pilot] = image("thumb.jpg", "160x90")
        let srt = Array("1\n00:00:01,000 --> 00:00:02,000\nHello\n".utf8)
        // Windows-1252 (an old French SRT): "Été" with 0xC9 and 0xE9.
        let latin: [UInt8] = Array("1\n00:00:01,000 --> 00:00:02,000\n".utf8) + [0xC9, 0x74, 0xE9, 0x0A]
        let ass = Array("[Script Info]\nTitle: x\n\n[Events]\nFormat: Layer, Start, End, Text\nDialogue: 0,0:00:01.00,0:00:02.00,Hi\n".utf8)
        c.subtitles[alpha] = [
            .init(language: "eng", codec: "srt", external: true, file: text("alpha.eng.srt", srt)),
            .init(language: "fre", forced: true, codec: "srt", external: true, file: text("alpha.fre.srt", latin)),
            .init(language: "eng", hearingImpaired: true, codec: "ass", external: true, file: text("alpha.sdh.ass", ass)),
            .init(language: "eng", codec: "srt", external: true, file: text("alpha.two.srt", srt)),
            .init(language: nil, codec: "pgssub", external: false, file: text("alpha.sup", [0x50, 0x47, 1, 2]))
        ]
        c.subtitles[pilot] = [.init(language: "ger", codec: "srt", external: false, file: text("pilot.srt", srt))]
        return c
    }

    static let movie = "test/Movies/Alpha (2001)"
    static let season = "test/Shows/Show (2020)/Season 01"

    @Test(arguments: [ServerFixture.Kind.jellyfin, .emby, .plex])
    func artworkAndSubtitlesAppearBesideTheMediaAndReadOffline(kind: ServerFixture.Kind) throws {
        let m = try MountedLabstream("side-\(kind)", kind: kind, catalog: Self.catalog)
        try m.mount()
        // Listing the film's folder fetches what belongs in it; the names show once stored.
        _ = try FileManager.default.contentsOfDirectory(atPath: m.path(Self.movie))
        // Plex lists subtitle streams only on the item's own route: asked for once the folder is listed.
        let expected = [
            "poster.jpg", "fanart.png", "logo.png",
            "Alpha (2001).eng.srt", "Alpha (2001).fre.forced.srt", "Alpha (2001).eng.sdh.ass", "Alpha (2001).eng.2.srt"
        ]
        #expect(
            eventually { Set(expected).isSubset(of: Set((try? FileManager.default.contentsOfDirectory(atPath: m.path(Self.movie))) ?? [])) },
            "\((try? FileManager.default.contentsOfDirectory(atPath: m.path(Self.movie))) ?? [])")
        let names = Set(try FileManager.default.contentsOfDirectory(atPath: m.path(Self.movie)))
        #expect(!names.contains { $0.hasSuffix(".sup") || $0.contains(".und.") }, "bitmap subtitles stay inside the media: \(names)")
        #expect(try sha256(m.path(Self.movie + "/poster.jpg")) == sha256(m.mediaDir + "/poster.jpg"))
        #expect(try sha256(m.path(Self.movie + "/fanart.png")) == sha256(m.mediaDir + "/fanart.png"))
        #expect(try String(contentsOfFile: m.path(Self.movie + "/Alpha (2001).fre.forced.srt"), encoding: .utf8).contains("Été"))
        #expect(try sha256(m.path(Self.movie + "/Alpha (2001).eng.sdh.ass")) == sha256(m.mediaDir + "/alpha.sdh.ass"))
        let film = m.path(Self.movie + "/Alpha (2001).mkv")
        #expect(StatusCommandXattr.get(film, "side_assets")?.contains("poster.jpg=stored") == true, "\(StatusCommandXattr.get(film, "side_assets") ?? "")")
        // A series: its poster, its season's poster, an episode's thumbnail (and, but for Plex, its embedded text subtitle).
        _ = try FileManager.default.contentsOfDirectory(atPath: m.path(Self.season))
        _ = try FileManager.default.contentsOfDirectory(atPath: m.path("test/Shows/Show (2020)"))
        var episodeSide = [Self.season + "/poster.jpg", Self.season + "/Show (2020) - S01E01 - Pilot-thumb.jpg", "test/Shows/Show (2020)/poster.jpg"]
        if kind != .plex { episodeSide.append(Self.season + "/Show (2020) - S01E01 - Pilot.ger.srt") }
        #expect(
            eventually { episodeSide.allSatisfy { FileManager.default.fileExists(atPath: m.path($0)) } },
            "\((try? FileManager.default.contentsOfDirectory(atPath: m.path(Self.season))) ?? [])")
        #expect(try sha256(m.path(Self.season + "/poster.jpg")) == sha256(m.mediaDir + "/season1.jpg"))
        // Kodi's name for the season's poster, in the series folder: the same stored bytes, its
        // size exact before a read, stored once.
        let kodiSeason = m.path("test/Shows/Show (2020)/season01-poster.jpg")
        #expect(
            eventually { FileManager.default.fileExists(atPath: kodiSeason) },
            "\((try? FileManager.default.contentsOfDirectory(atPath: m.path("test/Shows/Show (2020)"))) ?? [])")
        let posterSize = try #require(try FileManager.default.attributesOfItem(atPath: m.mediaDir + "/season1.jpg")[.size] as? Int)
        #expect(try FileManager.default.attributesOfItem(atPath: kodiSeason)[.size] as? Int == posterSize)
        #expect(try sha256(kodiSeason) == sha256(m.mediaDir + "/season1.jpg"))
        let seasonSha = try sha256(m.mediaDir + "/season1.jpg")
        let stored = (FileManager.default.enumerator(atPath: m.dataDir + "/side")?.allObjects as? [String] ?? []).filter { rel in
            var dir: ObjCBool = false
            return FileManager.default.fileExists(atPath: m.dataDir + "/side/" + rel, isDirectory: &dir) && !dir.boolValue
                && (try? sha256(m.dataDir + "/side/" + rel)) == seasonSha
        }
        #expect(stored.count == 1, "\(stored)")
        // Stored, they read with the server gone.
        m.fixture.stop()
        #expect(try sha256(m.path(Self.movie + "/poster.jpg")) == sha256(m.mediaDir + "/poster.jpg"))
        try m.unmount()
    }

    /// With `side_assets = pinned`, a listing fetches nothing; a pin fetches its file's assets,
    /// and cancelling the file takes them away with its bytes.
    @Test func pinnedOnlyFetchesWithThePinAndTheyGoWithTheMedia() throws {
        let m = try MountedLabstream("side-pinned", kind: .jellyfin, catalog: Self.catalog, cacheConfig: "side_assets = pinned")
        try m.mount()
        let poster = m.path(Self.movie + "/poster.jpg")
        _ = try FileManager.default.contentsOfDirectory(atPath: m.path(Self.movie))
        let film = m.path(Self.movie + "/Alpha (2001).mkv")
        #expect(StatusCommandXattr.get(film, "side_assets")?.contains("poster.…=missing") == true, "\(StatusCommandXattr.get(film, "side_assets") ?? "")")
        #expect(!m.fixture.requestLog.contains { $0.path.contains("/Images/") })
        #expect(try m.cli(["pin", "--wait", film]).code == 0)
        #expect(eventually { FileManager.default.fileExists(atPath: poster) })
        #expect(try m.cli(["cancel", film]).code == 0)
        #expect(eventually { !FileManager.default.fileExists(atPath: poster) })
        #expect(try FileManager.default.contentsOfDirectory(atPath: m.dataDir + "/side").isEmpty)
        try m.unmount()
    }

    /// A pinned file is complete only once its side assets are stored: while they are on their
    /// way it shows as downloading (media whole), `pin --wait` waits for them, and `status
    /// --json` names each one with its state.
    @Test func aPinnedFileIsCompleteOnlyWithItsSideAssets() throws {
        let m = try MountedLabstream("side-wait", kind: .jellyfin, catalog: Self.catalog, cacheConfig: "side_assets = pinned")
        try m.mount()
        m.fixture.holdSideAssets(true)
        defer { m.fixture.holdSideAssets(false) }
        let film = m.path(Self.movie + "/Alpha (2001).mkv")
        #expect(try m.cli(["pin", film]).code == 0)
        #expect(
            eventually { StatusCommandXattr.get(film, "reason") == StatusReason.fetchingSideAssets.sentence },
            "\(StatusCommandXattr.get(film, "state") ?? "") \(StatusCommandXattr.get(film, "reason") ?? "")")
        #expect(StatusCommandXattr.get(film, "state") == "downloading")
        let size = try #require(try FileManager.default.attributesOfItem(atPath: film)[.size] as? Int)
        #expect(StatusCommandXattr.get(film, "bytes") == "\(size)/\(size)")
        func status() throws -> [String: Any] {
            let rows = try JSONSerialization.jsonObject(with: Data(try m.cli(["status", "--json", film]).stdout.utf8)) as? [[String: Any]]
            return try #require(rows?.first)
        }
        let waiting = try status()
        #expect(waiting["reason"] as? String == "fetching_side_assets")
        let missing = (waiting["side_assets"] as? [[String: Any]] ?? []).filter { $0["state"] as? String == "missing" }
        #expect(!missing.isEmpty, "\(waiting)")
        m.fixture.holdSideAssets(false)
        #expect(try m.cli(["pin", "--wait", film]).code == 0)
        let done = try status()
        // The test film is not a real video: the playback check leaves it unverified.
        #expect(["complete", "unverified"].contains(done["state"] as? String), "\(done)")
        #expect(done["reason"] as? String != "fetching_side_assets", "\(done)")
        let assets = done["side_assets"] as? [[String: Any]] ?? []
        #expect(Set(assets.compactMap { $0["name"] as? String }).isSuperset(of: ["poster.jpg", "fanart.png", "logo.png", "Alpha (2001).eng.srt"]), "\(assets)")
        #expect(assets.allSatisfy { $0["state"] as? String == "stored" }, "\(assets)")
        try m.unmount()
    }

    /// `labstream verify` checks the stored side assets again: one damaged on disk is fetched
    /// anew (the media untouched), and every one is asked of the server again.
    @Test func verifyRepairsADamagedSideAsset() throws {
        let m = try MountedLabstream("side-verify", kind: .jellyfin, catalog: Self.catalog, cacheConfig: "side_assets = pinned")
        try m.mount()
        let film = m.path(Self.movie + "/Alpha (2001).mkv"), poster = m.path(Self.movie + "/poster.jpg")
        #expect(try m.cli(["pin", "--wait", film]).code == 0)
        #expect(eventually { FileManager.default.fileExists(atPath: poster) })
        let mediaRequests = m.fixture.requestLog.filter { $0.path.hasPrefix("/Items/") && $0.path.hasSuffix("/Download") }.count
        let imageRequests = m.fixture.requestLog.filter { $0.path.contains("/Images/") }.count
        // Damage the stored poster behind the daemon's back.
        let side = m.dataDir + "/side"
        let stored = try #require(try FileManager.default.contentsOfDirectory(atPath: side).first { $0.hasSuffix(".jpg") })
        let damaged = Data(repeating: 0x41, count: 64)
        FileManager.default.createFile(atPath: side + "/" + stored, contents: damaged)
        #expect(try m.cli(["verify", film]).code == 0)
        #expect(eventually { m.fixture.requestLog.filter { $0.path.contains("/Images/") }.count >= imageRequests + 3 })
        #expect(eventually { (try? sha256(poster)) == (try? sha256(m.mediaDir + "/poster.jpg")) })
        #expect(eventually { m.log.contains("the stored copy is damaged; fetching it again") })
        #expect(m.fixture.requestLog.filter { $0.path.hasPrefix("/Items/") && $0.path.hasSuffix("/Download") }.count == mediaRequests)
        try m.unmount()
    }

    /// A payload that is not what it claims is not shown, and is tried again later.
    @Test func aBadPayloadIsNotShown() throws {
        let m = try MountedLabstream("side-bad", kind: .jellyfin) { dir in
            var c = Self.catalog(dir)
            FileManager.default.createFile(atPath: dir + "/html.jpg", contents: Data("<html>not an image</html>".utf8))
            c.movieArtwork[dir + "/alpha.mkv"] = [.init(.poster, file: dir + "/html.jpg")]
            return c
        }
        try m.mount()
        _ = try FileManager.default.contentsOfDirectory(atPath: m.path(Self.movie))
        let film = m.path(Self.movie + "/Alpha (2001).mkv")
        #expect(
            eventually { StatusCommandXattr.get(film, "side_assets")?.contains("poster.…=failed") == true },
            "\(StatusCommandXattr.get(film, "side_assets") ?? "")")
        #expect(!(try FileManager.default.contentsOfDirectory(atPath: m.path(Self.movie))).contains { $0.hasPrefix("poster") })
        #expect(eventually { m.log.contains("not a JPEG, PNG, WebP or GIF image") })
        try m.unmount()
    }

    /// What players do with it: ffprobe reads the stored `.srt` as SubRip, and mpv's
    /// `--sub-auto=fuzzy` loads it beside the film, both through the mount.
    @Test func playersPickUpTheSubtitleBesideTheFilm() throws {
        let m = try MountedLabstream(
            "side-players", kind: .jellyfin,
            catalog: { dir in
                let clip = dir + "/clip.mkv", srt = dir + "/clip.eng.srt"
                try? DemoMedia.generate(path: clip, seconds: 2, size: "160x120")
                FileManager.default.createFile(atPath: srt, contents: Data("1\n00:00:00,000 --> 00:00:01,500\nHello\n".utf8))
                var c = FixtureCatalog(movies: [.init(title: "Clip", year: 2024, file: clip, container: "mkv")], series: [])
                c.subtitles[clip] = [.init(language: "eng", codec: "srt", external: true, file: srt)]
                return c
            })
        try m.mount()
        let folder = m.path("test/Movies/Clip (2024)"), srt = folder + "/Clip (2024).eng.srt"
        _ = try FileManager.default.contentsOfDirectory(atPath: folder)
        #expect(eventually { FileManager.default.fileExists(atPath: srt) })
        let probe = try runProcess("/usr/bin/ffprobe", ["-v", "error", "-show_entries", "stream=codec_name", "-of", "csv=p=0", srt])
        #expect(probe.code == 0 && probe.stdout.trimmingCharacters(in: .whitespacesAndNewlines) == "subrip", "\(probe.stdout) \(probe.stderr)")
        let play = try runProcess("/usr/bin/mpv", ["--no-config", "--vo=null", "--ao=null", "--sub-auto=fuzzy", "--frames=1", folder + "/Clip (2024).mkv"])
        #expect(play.stdout.contains("'Clip (2024).eng.srt' (subrip) (external)"), "\(play.stdout) \(play.stderr)")
        try m.unmount()
    }

    /// A picture whose first bytes are right but which does not decode (cut short) is not shown.
    @Test func aCorruptImageIsNotShown() throws {
        let catalog: (String) -> FixtureCatalog = { dir in
            var c = Self.catalog(dir)
            let whole = try! Data(contentsOf: URL(fileURLWithPath: testImage(dir + "/whole.jpg", size: "640x360")))
            FileManager.default.createFile(atPath: dir + "/cut.jpg", contents: whole.prefix(whole.count * 45 / 100))
            c.movieArtwork[dir + "/alpha.mkv"] = [.init(.poster, file: dir + "/cut.jpg"), .init(.fanart, file: dir + "/whole.jpg")]
            return c
        }
        // The decode is the playback probe's helper's (the test film is never pinned, so never probed).
        let m = try MountedLabstream("side-corrupt", kind: .jellyfin, catalog: catalog, probe: true)
        try m.mount()
        _ = try FileManager.default.contentsOfDirectory(atPath: m.path(Self.movie))
        let film = m.path(Self.movie + "/Alpha (2001).mkv")
        #expect(
            eventually { StatusCommandXattr.get(film, "side_assets")?.contains("poster.…=failed") == true },
            "\(StatusCommandXattr.get(film, "side_assets") ?? "")")
        #expect(eventually { FileManager.default.fileExists(atPath: m.path(Self.movie + "/fanart.jpg")) })
        #expect(!(try FileManager.default.contentsOfDirectory(atPath: m.path(Self.movie))).contains { $0.hasPrefix("poster") })
        #expect(m.log.contains("the image does not decode"))
        #expect(!(try FileManager.default.contentsOfDirectory(atPath: m.dataDir + "/side")).contains { $0.hasPrefix(".decode-") })
        try m.unmount()
    }
}

/// A one-frame test picture made with ffmpeg (its format by `path`'s extension), once.
func testImage(_ path: String, size: String) -> String {
    if !FileManager.default.fileExists(atPath: path) {
        _ = try? runProcess("/usr/bin/ffmpeg", ["-v", "error", "-y", "-f", "lavfi", "-i", "testsrc=size=\(size)", "-frames:v", "1", path])
    }
    return path
}

/// The index's cache of `.nfo` sizes (schema 14): whatever writes the catalog rows a document is
/// made from drops its cached size, so a size taken from the cache is always the size of the
/// document made now.
@Suite struct DocumentSizeCacheTests {
    @Test func aCachedSizeGoesWhenItsItemOrSeriesChangesAndOnlyTheCurrentFormatIsRead() throws {
        let scratch = Scratch("documents")
        let index = try OfflineIndex(path: scratch.path + "/index.sqlite")
        let server = OfflineIndex.ServerRow(name: "s", type: "jellyfin", url: "u", serverId: nil, lastSync: nil)
        func catalog(plot: String, seriesPlot: String) -> [LibraryCatalog] {
            var film = CatalogItem(id: "a", kind: .movie, title: "Alpha", year: 2001, sources: [MediaSource(id: "a", container: "mkv", size: 10)])
            film.details = ItemDetails(plot: plot)
            let other = CatalogItem(id: "b", kind: .movie, title: "Beta", year: 2002, sources: [MediaSource(id: "b", container: "mkv", size: 10)])
            let pilot = CatalogItem(
                id: "e", kind: .episode, title: "Pilot", seriesId: "s1", seriesName: "Show", seriesYear: 2020, seasonNumber: 1,
                episodeNumber: 1, sources: [MediaSource(id: "e", container: "mkv", size: 10)])
            return [
                LibraryCatalog(id: "M", name: "Movies", items: [film, other]),
                LibraryCatalog(id: "S", name: "Shows", items: [pilot], seriesDetails: ["s1": ItemDetails(plot: seriesPlot)])
            ]
        }
        func write(_ libraries: [LibraryCatalog]) throws {
            try index.replaceCatalog(server: server, libraries: libraries, tree: TreeBuilder.build(server: "s", libraries: libraries), now: 1)
        }
        /// Every document's size and digest as made now from the index.
        func fresh(_ libraries: [LibraryCatalog]) throws -> [String: (size: Int64, digest: UInt64)] {
            let tree = try index.treeFiles()
            let made = SideFiles.nfos(tree: tree, libraries: try index.catalog(server: "s", reading: .sideFiles), known: [:]) { try? index.document($0) }.made
            return Dictionary(made.map { ($0.doc, ($0.size, $0.digest)) }, uniquingKeysWith: { a, _ in a })
        }
        let first = catalog(plot: "One.", seriesPlot: "A show.")
        try write(first)
        // What the side files are planned from leaves out media sources and plots (the tree's
        // files and each document's own row say them); the whole read keeps both.
        let light = try index.catalog(server: "s", reading: .sideFiles).flatMap(\.items)
        #expect(light.count == 3 && light.allSatisfy { $0.sources.isEmpty && $0.details?.plot == nil }, "\(light)")
        let whole = try index.catalog(server: "s").flatMap(\.items)
        #expect(whole.allSatisfy { $0.sources.count == 1 } && whole.first { $0.id == "a" }?.details?.plot == "One.")
        let made = try fresh(first)
        #expect(Set(made.keys) == ["item:a", "item:b", "item:e", "series:s1\n2020\nShow"], "\(made.keys)")
        try index.storeDocumentSizes(server: "s", made.map { ($0.key, $0.value.size, $0.value.digest) })
        #expect(try index.documentSizes(server: "s").mapValues(\.size) == made.mapValues(\.size))
        // A mount with everything cached makes nothing.
        #expect(
            SideFiles.nfos(tree: try index.treeFiles(), libraries: try index.catalog(server: "s"), known: try index.documentSizes(server: "s")) { _ in nil }
                .made.isEmpty)

        // The film's plot and the series' details change: their sizes go; whatever is left
        // matches the documents as made now.
        let second = catalog(plot: "A much longer plot than before.", seriesPlot: "A show, told at more length.")
        try write(second)
        let cached = try index.documentSizes(server: "s")
        #expect(cached["item:a"] == nil && cached["series:s1\n2020\nShow"] == nil, "\(cached.keys)")
        // What did not change is not rewritten, so its size stays known.
        #expect(cached["item:b"] != nil && cached["item:e"] != nil, "\(cached.keys)")
        let now = try fresh(second)
        for (doc, kept) in cached { #expect(now[doc]?.size == kept.size && now[doc]?.digest == kept.digest, "\(doc)") }
        #expect(now["item:a"]!.size > made["item:a"]!.size)

        // A film gone from the server takes its size with it.
        var third = second
        third[0].items.removeAll { $0.id == "b" }
        try write(third)
        #expect(try index.documentSizes(server: "s")["item:b"] == nil)
        #expect(try index.catalog(server: "s").flatMap(\.items).map(\.id).sorted() == ["a", "e"])

        // Sizes recorded by another format of the documents are not read.
        try index.db.exec("UPDATE documents SET format = format + 1")
        #expect(try index.documentSizes(server: "s").isEmpty)
    }
}

extension DocumentSizeCacheTests {
    /// The same details are stored as the same text in every process (a dictionary's order is
    /// seeded per process), so a sync that changed nothing writes no row and keeps the cache.
    @Test func detailsAreStoredWithTheirKeysInOrder() throws {
        let providers = (0..<20).map { String(UnicodeScalar(UInt8(97 + $0))) + "db" }
        let details = ItemDetails(plot: "p", ids: Dictionary(uniqueKeysWithValues: providers.shuffled().map { ($0, "id-" + $0) }))
        guard case .text(let json) = OfflineIndex.encodeDetails(details) else { Issue.record("nothing stored"); return }
        let positions = providers.map { json.range(of: "\"\($0)\"")!.lowerBound }
        #expect(positions == positions.sorted(), "\(json)")
        #expect(OfflineIndex.decodeDetails(json) == details)
    }
}
