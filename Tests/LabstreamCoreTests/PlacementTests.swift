import LabstreamCore
import Testing

/// Items carry their placement into the tree: tracks under their album artist and album,
/// other items in the server's own folders.
@Suite struct PlacementTests {
    func track(_ id: String, _ title: String, album: String?, artist: String?, disc: Int? = nil, number: Int?, year: Int? = 2001) -> CatalogItem {
        CatalogItem(
            id: id, kind: .track, title: title, year: year, album: album, albumArtist: artist, discNumber: disc, trackNumber: number,
            sources: [MediaSource(id: "s" + id, container: "flac", size: 100)])
    }

    func paths(_ items: [CatalogItem]) -> [String: String] {
        let tree = TreeBuilder.build(server: "home", libraries: [LibraryCatalog(id: "L", name: "Music", items: items)])
        return Dictionary(uniqueKeysWithValues: tree.map { ($0.key.itemId, $0.path.joined(separator: "/")) })
    }

    @Test func tracksGoUnderAlbumArtistAndAlbumNumberedByDiscWhenThereAreSeveral() {
        let p = paths([
            track("1", "Intro", album: "First", artist: "Band", number: 1),
            track("2", "Song", album: "First", artist: "Band", number: 2),
            track("3", "Opening", album: "Double", artist: "Band", disc: 1, number: 1),
            track("4", "Closing", album: "Double", artist: "Band", disc: 2, number: 3),
            track("5", "Hit", album: "Hits", artist: nil, number: 7),
            track("6", "Lone", album: nil, artist: "Band", number: nil)
        ])
        #expect(p["1"] == "home/Music/Band/First (2001)/01 - Intro.flac")
        #expect(p["2"] == "home/Music/Band/First (2001)/02 - Song.flac")
        #expect(p["3"] == "home/Music/Band/Double (2001)/1-01 - Opening.flac")
        #expect(p["4"] == "home/Music/Band/Double (2001)/2-03 - Closing.flac")
        #expect(p["5"] == "home/Music/Various Artists/Hits (2001)/07 - Hit.flac")  // a compilation
        #expect(p["6"] == "home/Music/Band/Singles/Lone.flac")
        let tree = TreeBuilder.build(
            server: "home", libraries: [LibraryCatalog(id: "L", name: "Music", items: [track("1", "Intro", album: "A", artist: "B", number: 1)])])
        #expect(tree.first?.kind == .track && tree.first?.kind.media == .audio)
    }

    @Test func otherItemsKeepTheServersFoldersWithHostileNamesMadeSafe() {
        let home = CatalogItem(
            id: "h1", kind: .other, title: "Birthday", folders: ["2019", "Summer/Trip", ".."],
            sources: [MediaSource(id: "v", container: "mp4", size: 10)])
        let p = paths([home])
        let path = p["h1"] ?? ""
        #expect(path.hasPrefix("home/Music/2019/") && path.hasSuffix("/Birthday.mp4"), "\(path)")
        #expect(!path.split(separator: "/").contains("..") && path.split(separator: "/").count == 6, "\(path)")
        #expect(ItemKind.other.media == .video && ItemKind.movie.media == .video)
    }

    @Test func photosSitInTheServersFoldersUnderTheirOwnNames() {
        let photo = CatalogItem(
            id: "p1", kind: .photo, title: "IMG_0001", folders: ["2019", "Trip"],
            sources: [MediaSource(id: "p1", container: "jpg", size: 10)])
        let twin = CatalogItem(
            id: "p2", kind: .photo, title: "IMG_0001", folders: ["2019", "Trip"],
            sources: [MediaSource(id: "p2", path: "/srv/photos/IMG_0001.PNG", size: 10)])
        let tree = TreeBuilder.build(server: "home", libraries: [LibraryCatalog(id: "L", name: "Photos", items: [photo, twin])])
        #expect(Set(tree.map { $0.path.joined(separator: "/") }) == ["home/Photos/2019/Trip/IMG_0001.jpg", "home/Photos/2019/Trip/IMG_0001.png"])
        #expect(tree.allSatisfy { $0.kind == .photo } && ItemKind.photo.media == .image)
    }
}
