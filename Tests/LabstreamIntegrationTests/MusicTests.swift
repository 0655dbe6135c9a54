import Foundation
import LabstreamCore
import LabstreamFixture
import Testing

/// Music libraries (issue 19; Plex's artist sections too): tracks are placed under their album artist and
/// album, read like any file, and the completion check judges them as audio.
@Suite(.serialized) struct MusicTests {
    static func catalog(_ dir: String) -> FixtureCatalog {
        var c = testCatalog(in: dir)
        func audio(_ name: String, _ frequency: Int) -> String {
            let path = dir + "/" + name
            if !FileManager.default.fileExists(atPath: path) {
                _ = try? runProcess("/usr/bin/ffmpeg", ["-v", "error", "-y", "-f", "lavfi", "-i", "sine=frequency=\(frequency):duration=5", path])
            }
            return path
        }
        c.tracks = [
            .init(
                title: "Intro", album: "First", albumArtist: "Band", artists: ["Band"], disc: 1, number: 1, year: 2001,
                file: audio("intro.flac", 330), container: "flac"),
            .init(
                title: "Opening", album: "Double", albumArtist: "Band", artists: ["Band"], disc: 1, number: 1, year: 2003,
                file: audio("opening.flac", 440), container: "flac"),
            .init(
                title: "Closing", album: "Double", albumArtist: "Band", artists: ["Band"], disc: 2, number: 3, year: 2003,
                file: audio("closing.flac", 550), container: "flac"),
            .init(
                title: "Hit", album: "Hits", albumArtist: "Various Artists", artists: ["Someone"], disc: nil, number: 7, year: 2010,
                file: audio("hit.flac", 660), container: "flac")
        ]
        c.albumCovers["Double"] = testImage(dir + "/double.jpg", size: "120x120")
        c.albumCovers["First"] = testImage(dir + "/first.png", size: "100x100")
        return c
    }

    static let first = "test/Music/Band/First (2001)/01 - Intro.flac"
    static let opening = "test/Music/Band/Double (2003)/1-01 - Opening.flac"
    static let closing = "test/Music/Band/Double (2003)/2-03 - Closing.flac"
    static let hit = "test/Music/Various Artists/Hits (2010)/07 - Hit.flac"

    @Test(arguments: [ServerFixture.Kind.jellyfin, .emby, .plex])
    func tracksArePlacedReadAndCheckedAsAudio(kind: ServerFixture.Kind) throws {
        let m = try MountedLabstream("music-\(kind)", kind: kind, catalog: Self.catalog, probe: true)
        try m.mount()
        for rel in [Self.first, Self.opening, Self.closing, Self.hit] {
            #expect(FileManager.default.fileExists(atPath: m.path(rel)), "\(rel) is not in the tree")
        }
        #expect(try sha256(m.path(Self.first)) == sha256(m.mediaDir + "/intro.flac"))
        // An album pins as one batch, and its tracks are proven playable as audio.
        let album = m.path("test/Music/Band/Double (2003)")
        let wait = try m.cli(["pin", "--wait", album])
        #expect(wait.code == 0, "\(wait.stdout) \(wait.stderr)")
        for rel in [Self.opening, Self.closing] {
            #expect(StatusCommandXattr.get(m.path(rel), "state") == "complete", "\(rel): \(StatusCommandXattr.get(m.path(rel), "reason") ?? "")")
        }
        // Copies at another quality are for video.
        let quality = try m.cli(["pin", "--quality", "2mbps", m.path(Self.hit)])
        #expect(quality.code == 64 && quality.stderr.contains("is audio"), "\(quality.code) \(quality.stderr)")
        try m.unmount()
    }

    /// An album's cover (Jellyfin/Emby `AlbumId` + `AlbumPrimaryImageTag`, Plex `parentThumb`) is
    /// one `cover.<ext>` in the album's folder: a pinned album has it, a listed one fetches it, an
    /// album without one has none, and it reads with the server gone.
    @Test(arguments: [ServerFixture.Kind.jellyfin, .emby, .plex])
    func anAlbumFolderHoldsItsCover(kind: ServerFixture.Kind) throws {
        let m = try MountedLabstream("cover-\(kind)", kind: kind, catalog: Self.catalog)
        try m.mount()
        let double = m.path("test/Music/Band/Double (2003)"), first = m.path("test/Music/Band/First (2001)")
        let wait = try m.cli(["pin", "--wait", double])
        #expect(wait.code == 0, "\(wait.stdout) \(wait.stderr)")
        #expect(
            try sha256(double + "/cover.jpg") == sha256(m.mediaDir + "/double.jpg"), "\((try? FileManager.default.contentsOfDirectory(atPath: double)) ?? [])")
        #expect(
            StatusCommandXattr.get(m.path(Self.closing), "side_assets")?.contains("cover.jpg=stored") == true,
            "\(StatusCommandXattr.get(m.path(Self.closing), "side_assets") ?? "")")
        // Named by its bytes: the First album's cover is a PNG.
        _ = try FileManager.default.contentsOfDirectory(atPath: first)
        #expect(
            eventually { FileManager.default.fileExists(atPath: first + "/cover.png") },
            "\((try? FileManager.default.contentsOfDirectory(atPath: first)) ?? [])")
        #expect(try sha256(first + "/cover.png") == sha256(m.mediaDir + "/first.png"))
        let hits = m.path("test/Music/Various Artists/Hits (2010)")
        #expect(try FileManager.default.contentsOfDirectory(atPath: hits) == ["07 - Hit.flac"])
        m.fixture.stop()
        #expect(try sha256(double + "/cover.jpg") == sha256(m.mediaDir + "/double.jpg"))
        try m.unmount()
    }
}
