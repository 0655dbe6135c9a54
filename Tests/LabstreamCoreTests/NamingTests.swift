import LabstreamCore
import Testing

@Suite struct NamingTests {
    @Test(arguments: [
        ("../x", "_x"), ("../../etc/passwd (2001)", "_.._etc_passwd (2001)"), (".hack//Sign", "hack__Sign"), ("...", "_"), ("a/b", "a_b"),
        ("nul\u{0}in\u{1}side", "nul in side"), (".", "_"), ("..", "_"), ("", "_"),
        // A control character is a space, one however many there are around it (it was dropped:
        // `Tabandnewline`); the server's own spaces stay.
        ("Tab\tand\nnewline", "Tab and newline"), ("a \t\r\n b", "a b"), ("\tlead\u{7F}", "lead"), ("C1\u{85}next", "C1 next"),
        ("two  spaces", "two  spaces"),
        ("What? Why: *Now* <or> \"never\" | ever\\", "What_ Why_ _Now_ _or_ _never_ _ ever_"), ("trailing dots...", "trailing dots"),
        ("  spaced  ", "spaced"), ("Amélie", "Amélie")
    ])
    func hostileNamesAreSanitised(raw: String, expected: String) {
        #expect(Naming.sanitize(raw) == expected)
    }

    @Test func longNamesAreCutOnACharacterBoundaryKeepingTheExtension() {
        let long = String(repeating: "é", count: 200) + String(repeating: "x", count: 100)  // 500 bytes
        let name = Naming.sanitize(long, extension: "mkv")
        #expect(name.utf8.count <= 255)
        #expect(name.hasSuffix(".mkv"))
        #expect(name.unicodeScalars.allSatisfy { $0 == "é" || $0 == "." || $0 == "m" || $0 == "k" || $0 == "v" })
        let emoji = String(repeating: "👨‍👩‍👧", count: 40)  // 18 bytes each
        let cut = Naming.sanitize(emoji, extension: "mp4")
        #expect(cut.utf8.count <= 255)
        #expect(cut.hasSuffix(".mp4"))
        #expect(cut.dropLast(4).allSatisfy { $0 == "👨‍👩‍👧" })
    }

    /// A title too long for one component loses its end, not its ` (Year)` or extension.
    @Test func truncationKeepsTheYearAndTheExtension() {
        let name = Naming.sanitize(Naming.titled(String(repeating: "Long ", count: 80), year: 1999), extension: "mkv")
        #expect(name.utf8.count <= 255 && name.hasSuffix("Long (1999).mkv") || name.hasSuffix(" (1999).mkv"), "\(name)")
        #expect(name.hasSuffix(" (1999).mkv") && !name.contains("  "))
        var taken: Set<String> = [name]
        let second = Naming.unique(Naming.titled(String(repeating: "Long ", count: 80), year: 1999), extension: "mkv", taken: &taken)
        #expect(second.hasSuffix(" (1999) (2).mkv") && second.utf8.count <= 255, "\(second)")
    }

    @Test func duplicatesGetDeterministicSuffixes() {
        var taken = Set<String>()
        #expect(Naming.unique("Same", extension: "mkv", taken: &taken) == "Same.mkv")
        #expect(Naming.unique("Same", extension: "mkv", taken: &taken) == "Same (2).mkv")
        #expect(Naming.unique("Same", extension: "mkv", taken: &taken) == "Same (3).mkv")
        let long = String(repeating: "a", count: 300)
        let first = Naming.unique(long, extension: "mkv", taken: &taken)
        let second = Naming.unique(long, extension: "mkv", taken: &taken)
        #expect(first != second && second.utf8.count <= 255 && second.hasSuffix(" (2).mkv"))
    }

    @Test func extensionsComeFromContainerOrPath() {
        #expect(Naming.fileExtension(for: MediaSource(id: "1", container: "mkv")) == "mkv")
        #expect(Naming.fileExtension(for: MediaSource(id: "1", container: "mov,mp4,m4a")) == "mov")
        #expect(Naming.fileExtension(for: MediaSource(id: "1", path: "/media/film.M4V")) == "m4v")
        #expect(Naming.fileExtension(for: MediaSource(id: "1", container: "../../etc")) == "etc")
        #expect(Naming.fileExtension(for: MediaSource(id: "1")) == "bin")
    }
}

@Suite struct TreeBuilderTests {
    func movie(_ id: String, _ title: String, _ year: Int?, sources: [MediaSource]? = nil) -> CatalogItem {
        CatalogItem(
            id: id, kind: .movie, title: title, year: year, modified: 100,
            sources: sources ?? [MediaSource(id: id, container: "mkv", size: 10)])
    }

    func episode(_ id: String, season: Int?, number: Int, title: String, seriesYear: Int? = 2020) -> CatalogItem {
        CatalogItem(
            id: id, kind: .episode, title: title, seriesId: "s1", seriesName: "Show", seriesYear: seriesYear,
            seasonNumber: season, episodeNumber: number, modified: 200, sources: [MediaSource(id: id, container: "mp4", size: 20)])
    }

    @Test func moviesAndEpisodesGetJellyfinStylePaths() {
        let tree = TreeBuilder.build(
            server: "home",
            libraries: [
                LibraryCatalog(id: "L1", name: "Movies", items: [movie("m1", "Heat", 1995), movie("m2", "Unknown Year", nil)]),
                LibraryCatalog(
                    id: "L2", name: "TV",
                    items: [
                        episode("e1", season: 1, number: 1, title: "Pilot"),
                        episode("e2", season: 0, number: 3, title: "Special"),
                        episode("e3", season: 12, number: 10, title: "Late")
                    ])
            ])
        let paths = Set(tree.map { $0.path.joined(separator: "/") })
        #expect(
            paths == [
                "home/Movies/Heat (1995)/Heat (1995).mkv",
                "home/Movies/Unknown Year/Unknown Year.mkv",
                "home/TV/Show (2020)/Season 01/Show (2020) - S01E01 - Pilot.mp4",
                "home/TV/Show (2020)/Season 00/Show (2020) - S00E03 - Special.mp4",
                "home/TV/Show (2020)/Season 12/Show (2020) - S12E10 - Late.mp4"
            ])
        #expect(tree.first { $0.key.itemId == "m1" }?.size == 10)
    }

    @Test func hostileAndDuplicateTitlesStayInsideAndUnique() {
        let items = [
            movie("a", "../x", 2000), movie("b", "a/b", 2000), movie("c", "Twin", 2001), movie("d", "Twin", 2001),
            movie("e", String(repeating: "long ", count: 80), 2002), movie("f", "nul\u{0}byte", 2003)
        ]
        let tree = TreeBuilder.build(server: "s", libraries: [LibraryCatalog(id: "L", name: "Movies", items: items)])
        let reversed = TreeBuilder.build(server: "s", libraries: [LibraryCatalog(id: "L", name: "Movies", items: items.reversed())])
        #expect(Set(tree.map(\.path)) == Set(reversed.map(\.path)))  // order-independent
        #expect(Set(tree.map(\.path)).count == items.count)
        for f in tree {
            for c in f.path {
                #expect(!c.contains("/") && !c.contains("\u{0}") && c != "." && c != ".." && c.utf8.count <= 255)
            }
        }
        let twins = tree.filter { $0.key.itemId == "c" || $0.key.itemId == "d" }.map { $0.path[2] }.sorted()
        #expect(twins == ["Twin (2001)", "Twin (2001) (2)"])
    }

    @Test func itemsWithoutMediaAreSkippedAndVersionsSitSideBySide() {
        let versions = [MediaSource(id: "v1", name: "1080p", container: "mkv", size: 1), MediaSource(id: "v2", name: "4K", container: "mp4", size: 2)]
        let tree = TreeBuilder.build(
            server: "s",
            libraries: [
                LibraryCatalog(
                    id: "L", name: "Movies",
                    items: [
                        movie("m", "Film", 2010, sources: versions), movie("x", "No Media", 2011, sources: [])
                    ])
            ])
        #expect(tree.map { $0.path.last! }.sorted() == ["Film (2010) - 1080p.mkv", "Film (2010) - 4K.mp4"])
    }
}

@Suite struct ContainerSniffTests {
    @Test func aCopyIsNamedByItsBytes() {
        #expect(ContainerSniff.fileExtension(ofHeader: [0x1A, 0x45, 0xDF, 0xA3, 0x9F, 0x42]) == "mkv")
        #expect(ContainerSniff.fileExtension(ofHeader: [0, 0, 0, 0x20] + Array("ftypisom".utf8) + [0, 0, 2, 0]) == "mp4")
        #expect(ContainerSniff.fileExtension(ofHeader: [0, 0, 0, 0x14] + Array("ftypqt  ".utf8)) == "mov")
        #expect(ContainerSniff.fileExtension(ofHeader: Array("RIFF".utf8) + [1, 2, 3, 4] + Array("AVI LIST".utf8)) == "avi")
        #expect(ContainerSniff.fileExtension(ofHeader: [0x47, 0x40, 0x00, 0x10]) == "ts")
        #expect(ContainerSniff.fileExtension(ofHeader: Array("<html>".utf8)) == nil)
        #expect(ContainerSniff.fileExtension(ofHeader: []) == nil)
        #expect(ContainerSniff.imageExtension(ofHeader: [0xFF, 0xD8, 0xFF, 0xE0, 0, 0x10]) == "jpg")
        #expect(ContainerSniff.imageExtension(ofHeader: [0x89] + Array("PNG\r\n".utf8) + [0x1A, 0x0A, 0]) == "png")
        #expect(ContainerSniff.imageExtension(ofHeader: Array("RIFF".utf8) + [1, 2, 3, 4] + Array("WEBPVP8 ".utf8)) == "webp")
        #expect(ContainerSniff.imageExtension(ofHeader: Array("GIF89a".utf8)) == "gif")
        #expect(ContainerSniff.imageExtension(ofHeader: [0, 0, 0, 0x18] + Array("ftypheic".utf8)) == "heic")
        #expect(ContainerSniff.imageExtension(ofHeader: [0, 0, 0, 0x20] + Array("ftypisom".utf8)) == nil)
        #expect(ContainerSniff.imageExtension(ofHeader: [0xFF, 0xD8]) == nil)
        #expect(DerivedCopy.fileName(besides: "Clip (2020).mkv", quality: .capped(megabitsPerSecond: 2), extension: "mp4") == "Clip (2020) - 2mbps.mp4")
    }
}
