import Foundation
import LabstreamCore
import Testing

/// The `.nfo` files made beside films and episodes and in series folders: where they go, what
/// they say, and that any text makes valid XML.
@Suite struct SideFilesTests {
    let details = ItemDetails(
        originalTitle: "Alfa", plot: "A plot.", runtimeSeconds: 5_430, genres: ["Drama", "War"], studios: ["Ealing"],
        rating: 7.5, premiered: "2001-05-04", ids: ["imdb": "tt0000001", "tmdb": "11"])

    @Test func eachFilmAndEpisodeGetsOneBesideItAndEachSeriesOneInItsFolder() {
        let movie = CatalogItem(
            id: "m", kind: .movie, title: "Alpha", year: 2001, sources: [MediaSource(id: "ms", container: "mkv", size: 1)], details: details)
        let e1 = CatalogItem(
            id: "e1", kind: .episode, title: "Pilot", seriesId: "s", seriesName: "Show", seriesYear: 2020, seasonNumber: 1, episodeNumber: 1,
            sources: [MediaSource(id: "e1s", container: "mkv", size: 1)])
        let e2 = CatalogItem(
            id: "e2", kind: .episode, title: "Two", seriesId: "s", seriesName: "Show", seriesYear: 2020, seasonNumber: 1, episodeNumber: 2,
            sources: [MediaSource(id: "e2s", container: "mp4", size: 1)])
        let libraries = [
            LibraryCatalog(id: "L", name: "Movies", items: [movie]),
            LibraryCatalog(id: "T", name: "Shows", items: [e1, e2], seriesDetails: ["s": ItemDetails(plot: "The show.")])
        ]
        let tree = TreeBuilder.build(server: "srv", libraries: libraries)
        let made = SideFiles.nfos(tree: tree, libraries: libraries)
        let paths = Set(made.map { $0.path.joined(separator: "/") })
        #expect(
            paths == [
                "srv/Movies/Alpha (2001)/Alpha (2001).nfo", "srv/Shows/Show (2020)/Season 01/Show (2020) - S01E01 - Pilot.nfo",
                "srv/Shows/Show (2020)/Season 01/Show (2020) - S01E02 - Two.nfo", "srv/Shows/Show (2020)/tvshow.nfo"
            ], "\(paths)")
        let film = text(made.first { $0.path.last == "Alpha (2001).nfo" }, libraries)
        for part in [
            "<movie>", "<title>Alpha</title>", "<originaltitle>Alfa</originaltitle>", "<year>2001</year>", "<plot>A plot.</plot>",
            "<runtime>91</runtime>", "<genre>Drama</genre>", "<genre>War</genre>", "<studio>Ealing</studio>", "<value>7.5</value>",
            "<premiered>2001-05-04</premiered>", "<uniqueid type=\"tmdb\" default=\"true\">11</uniqueid>", "<uniqueid type=\"imdb\">tt0000001</uniqueid>"
        ] {
            #expect(film.contains(part), "\(part) in \(film)")
        }
        let show = text(made.first { $0.path.last == "tvshow.nfo" }, libraries)
        #expect(
            show.contains("<tvshow>") && show.contains("<title>Show</title>") && show.contains("<year>2020</year>") && show.contains("<plot>The show.</plot>"))
        let episode = text(made.first { $0.path.last?.hasSuffix("Pilot.nfo") == true }, libraries)
        #expect(
            episode.contains("<episodedetails>") && episode.contains("<season>1</season>") && episode.contains("<episode>1</episode>")
                && episode.contains("<showtitle>Show</showtitle>"))
    }

    /// Kodi reads `<runtime>` in minutes: an item shorter than half a minute (or of unknown
    /// length, 0) has none rather than `<runtime>0</runtime>`, so a scanner takes the length
    /// from the file itself; from half a minute it is the nearest minute.
    @Test func aRuntimeUnderHalfAMinuteIsLeftOut() {
        func runtime(_ seconds: Double) -> String? {
            let item = CatalogItem(
                id: "m", kind: .movie, title: "Short", year: 2001, sources: [MediaSource(id: "ms", container: "mkv", size: 1)],
                details: ItemDetails(plot: "Brief.", runtimeSeconds: seconds))
            let text = String(decoding: SideFiles.document(.item(server: "s", itemId: "m"), item: item, series: nil) ?? [], as: UTF8.self)
            #expect(text.contains("<plot>Brief.</plot>"), "\(text)")
            return text.components(separatedBy: "<runtime>").dropFirst().first?.components(separatedBy: "</runtime>").first
        }
        #expect(runtime(0) == nil && runtime(10) == nil && runtime(29) == nil)
        #expect(runtime(30) == "1" && runtime(59) == "1" && runtime(5_430) == "91")
    }

    /// A generated file keeps only its document's size and digest: the document made again
    /// from the same catalog (as the mount does from the index when it is opened) matches both.
    func text(_ generated: GeneratedFile?, _ libraries: [LibraryCatalog]) -> String {
        guard let generated, case .document(let doc, let size, let digest) = generated.content else { return "" }
        let bytes: [UInt8]?
        switch doc {
        case .item(_, let id): bytes = SideFiles.document(doc, item: libraries.flatMap(\.items).first { $0.id == id }, series: nil)
        case .series(_, let series, _, _): bytes = SideFiles.document(doc, item: nil, series: libraries.compactMap { $0.seriesDetails[series] }.first)
        }
        #expect(Int64(bytes?.count ?? -1) == size && FNV1a.hash(bytes ?? []) == digest)
        return String(decoding: bytes ?? [], as: UTF8.self)
    }

    @Test func hostileTextIsEscapedAndCharactersXMLCannotHoldAreLeftOut() {
        #expect(NFO.escape("a & b < c > d \"e\" 'f' ]]>") == "a &amp; b &lt; c &gt; d &quot;e&quot; &apos;f&apos; ]]&gt;")
        #expect(NFO.escape("nul\u{0}bell\u{7}tab\tline\nend\u{FFFE}") == "nulbelltab\tline\nend")
        #expect(NFO.escape("Amélie 🎬") == "Amélie 🎬")
        let item = CatalogItem(id: "m", kind: .movie, title: "</title><x>", sources: [], details: ItemDetails(plot: String(repeating: "&\u{1}", count: 3)))
        let text = String(decoding: NFO.movie(item), as: UTF8.self)
        #expect(text.contains("<title>&lt;/title&gt;&lt;x&gt;</title>") && text.contains("<plot>&amp;&amp;&amp;</plot>"))
    }

    @Test func chaptersAreOneLineEachWithTheirStart() {
        let chapters = [ItemDetails.Chapter(start: 0, name: "Opening"), ItemDetails.Chapter(start: 3_723.45, name: "Two\nlines")]
        let item = CatalogItem(
            id: "m", kind: .movie, title: "Alpha", year: 2001, sources: [MediaSource(id: "ms", container: "mkv", size: 1)],
            details: ItemDetails(chapters: chapters))
        let libraries = [LibraryCatalog(id: "L", name: "Movies", items: [item])]
        let tree = TreeBuilder.build(server: "srv", libraries: libraries)
        #expect(SideFiles.chapters(tree: tree, libraries: libraries) == [tree[0].key: "00:00:00.000 Opening\n01:02:03.450 Two lines"])
        #expect(SideFiles.timestamp(59.9996) == "00:01:00.000" && SideFiles.timestamp(-1) == "00:00:00.000")
    }

    /// Details stored by a release that knew fewer members read back with the rest absent.
    @Test func detailsStoredWithFewerMembersStillRead() throws {
        let older = #"{"plot":"A plot.","genres":["Drama"]}"#
        let read = try JSONDecoder().decode(ItemDetails.self, from: Data(older.utf8))
        #expect(read == ItemDetails(plot: "A plot.", genres: ["Drama"]))
        let again = try JSONDecoder().decode(ItemDetails.self, from: JSONEncoder().encode(details))
        #expect(again == details)
    }
}
