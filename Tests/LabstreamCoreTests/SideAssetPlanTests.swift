import LabstreamCore
import Testing

/// Where artwork and subtitles go beside the media, what they are called, and which payloads
/// are kept (`SideAssetPlan`, `SideAssetCheck`).
@Suite struct SideAssetPlanTests {
    func source(_ id: String, _ container: String = "mkv") -> [MediaSource] { [MediaSource(id: id, container: container, size: 1)] }

    func plan(_ libraries: [LibraryCatalog]) -> [String: PlannedAsset] {
        let tree = TreeBuilder.build(server: "srv", libraries: libraries)
        return Dictionary(
            SideAssetPlan.plan(tree: tree, libraries: libraries).map { (($0.directory + [$0.stem]).joined(separator: "/"), $0) },
            uniquingKeysWith: { a, _ in a })
    }

    @Test func aFilmsArtworkAndSubtitlesAreNamedAsPlayersLookForThem() {
        let assets = [
            RemoteAsset(kind: .poster, ref: "m/Primary", tag: "p"), RemoteAsset(kind: .fanart, ref: "m/Backdrop/0", tag: "f"),
            RemoteAsset(kind: .logo, ref: "m/Logo", tag: "l"),
            RemoteAsset(kind: .subtitle, ref: "m/ms/2", sourceId: "ms", language: "en", codec: "subrip"),
            RemoteAsset(kind: .subtitle, ref: "m/ms/3", sourceId: "ms", language: "eng", codec: "srt"),
            RemoteAsset(kind: .subtitle, ref: "m/ms/4", sourceId: "ms", language: "fre", forced: true, codec: "ass"),
            RemoteAsset(kind: .subtitle, ref: "m/ms/5", sourceId: "ms", language: nil, hearingImpaired: true, codec: "webvtt"),
            RemoteAsset(kind: .subtitle, ref: "m/ms/6", sourceId: "ms", language: "ger", codec: "pgssub"),
            RemoteAsset(kind: .subtitle, ref: "m/other/1", sourceId: "other", language: "spa", codec: "srt")
        ]
        let film = CatalogItem(id: "m", kind: .movie, title: "Alpha", year: 2001, sources: source("ms"), details: ItemDetails(assets: assets))
        let planned = plan([LibraryCatalog(id: "L", name: "Movies", items: [film])])
        let dir = "srv/Movies/Alpha (2001)/"
        #expect(
            Set(planned.keys)
                == Set(
                    [
                        "poster", "fanart", "logo", "Alpha (2001).eng", "Alpha (2001).eng.2", "Alpha (2001).fre.forced",
                        "Alpha (2001).und.sdh"
                    ].map { dir + $0 }), "\(planned.keys.sorted())")
        #expect(planned[dir + "Alpha (2001).eng"]?.fileExtension == "srt" && planned[dir + "Alpha (2001).und.sdh"]?.fileExtension == "vtt")
        #expect(planned[dir + "poster"]?.fileExtension == nil)  // named by its bytes once fetched
        #expect(planned.values.allSatisfy { $0.owners.map(\.itemId) == ["m"] })
    }

    @Test func aSeriesHasItsArtworkItsSeasonsPostersAndEachEpisodesThumb() {
        let episode = CatalogItem(
            id: "e", kind: .episode, title: "Pilot", seriesId: "s", seriesName: "Show", seriesYear: 2020, seasonNumber: 1,
            episodeNumber: 1, sources: source("es"), details: ItemDetails(assets: [RemoteAsset(kind: .thumb, ref: "e/Primary", tag: "t")]))
        let series = ItemDetails(assets: [
            RemoteAsset(kind: .poster, ref: "s/Primary", tag: "sp"), RemoteAsset(kind: .poster, ref: "s1/Primary", tag: "s1", season: 1),
            RemoteAsset(kind: .poster, ref: "s2/Primary", tag: "s2", season: 2)
        ])
        let planned = plan([LibraryCatalog(id: "T", name: "Shows", items: [episode], seriesDetails: ["s": series])])
        #expect(
            Set(planned.keys) == [
                "srv/Shows/Show (2020)/poster", "srv/Shows/Show (2020)/Season 01/poster",
                "srv/Shows/Show (2020)/Season 01/Show (2020) - S01E01 - Pilot-thumb"
            ], "\(planned.keys.sorted())")
        // Kodi looks for a season's poster in the series folder: the same stored bytes show there too.
        let season = planned["srv/Shows/Show (2020)/Season 01/poster"]
        #expect(season?.alsoAt == [["srv", "Shows", "Show (2020)", "season01-poster"]], "\(season?.alsoAt ?? [])")
        #expect(
            season?.paths(extension: "jpg") == [
                ["srv", "Shows", "Show (2020)", "Season 01", "poster.jpg"], ["srv", "Shows", "Show (2020)", "season01-poster.jpg"]
            ])
        #expect(season?.directories.contains(["srv", "Shows", "Show (2020)"]) == true)
        #expect(planned["srv/Shows/Show (2020)/poster"]?.alsoAt == [])  // the series' own poster has one name
    }

    /// Season 0 is Kodi's `season-specials-poster`; seasons are two digits at least.
    @Test func kodisSeasonPosterNames() {
        #expect(SideAssetPlan.kodiSeasonPoster(0) == "season-specials-poster")
        #expect(SideAssetPlan.kodiSeasonPoster(3) == "season03-poster")
        #expect(SideAssetPlan.kodiSeasonPoster(12) == "season12-poster")
        let special = CatalogItem(
            id: "e0", kind: .episode, title: "Extra", seriesId: "s", seriesName: "Show", seriesYear: 2020, seasonNumber: 0,
            episodeNumber: 1, sources: source("e0s"))
        let series = ItemDetails(assets: [RemoteAsset(kind: .poster, ref: "s0/Primary", tag: "s0", season: 0)])
        let planned = plan([LibraryCatalog(id: "T", name: "Shows", items: [special], seriesDetails: ["s": series])])
        #expect(planned["srv/Shows/Show (2020)/Season 00/poster"]?.alsoAt == [["srv", "Shows", "Show (2020)", "season-specials-poster"]], "\(planned)")
    }

    /// One cover per album folder, whichever track brought it, owned by all its tracks.
    @Test func anAlbumHasOneCoverForAllItsTracks() {
        let cover = RemoteAsset(kind: .poster, ref: "album1/Primary", tag: "c")
        let tracks = (1...3).map { (n: Int) in
            CatalogItem(
                id: "t\(n)", kind: .track, title: "Song \(n)", album: "Album", albumArtist: "Band", trackNumber: n, sources: source("t\(n)s", "flac"),
                details: ItemDetails(assets: [cover]))
        }
        let planned = plan([LibraryCatalog(id: "M", name: "Music", items: tracks)])
        #expect(planned.count == 1)
        let only = try? #require(planned.values.first)
        #expect(only?.stem == "cover")
        #expect(only?.owners.map(\.itemId).sorted() == ["t1", "t2", "t3"], "\(only?.owners ?? [])")
        #expect(only?.directory.last == "Album")
    }

    @Test func onlyPayloadsThatAreWhatTheyClaimAreKept() {
        let poster = PlannedAsset(server: "s", itemId: "m", asset: RemoteAsset(kind: .poster, ref: "r"), directory: ["d"], stem: "poster", owners: [])
        let png: [UInt8] = [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A] + [UInt8](repeating: 0, count: 24)
        #expect(SideAssetCheck.judge(png, as: poster) == .keep(png, extension: "png"))
        #expect(SideAssetCheck.judge(Array("<html>".utf8), as: poster) != .keep(Array("<html>".utf8), extension: "jpg"))
        #expect(SideAssetCheck.judge([], as: poster) == .reject(.noBytes))
        var srt = poster
        srt.asset.kind = .subtitle
        srt.fileExtension = "srt"
        let latin: [UInt8] = Array("1\n00:00:01,000 --> 00:00:02,000\n".utf8) + [0xC9, 0x74, 0xE9, 0x80, 0x0A]
        #expect(SideAssetCheck.judge(latin, as: srt) == .keep(Array("1\n00:00:01,000 --> 00:00:02,000\nÉté€\n".utf8), extension: "srt"))
        #expect(SideAssetCheck.judge(Array("just some words\nand more\n".utf8), as: srt) == .reject(.subtitleUnparsed(format: "srt")))
        let utf16: [UInt8] = [0xFF, 0xFE] + Array("1\n0:0:1,0 --> 0:0:2,0\nA\n".utf16.flatMap { [UInt8($0 & 0xFF), UInt8($0 >> 8)] })
        #expect(SideAssetCheck.utf8(utf16) == "1\n0:0:1,0 --> 0:0:2,0\nA\n")
        #expect(SideAssetCheck.utf8([0x41, 0x00, 0x42]) == nil)
    }
}
