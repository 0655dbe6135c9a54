import Foundation
import LabstreamCore
import LabstreamFixture
import Testing

/// Every file and folder of the mount carries the server's dates (issue 40 item 7): a film or
/// episode its added date, what lies beside it (its `.nfo`, artwork, subtitles) its item's, a
/// folder its newest, so a scanner's "recently added" and `ls -lt` work on every backend.
@Suite(.serialized) struct RealTimesTests {
    static let movie = "test/Movies/Alpha (2001)"

    static func mtime(_ path: String) -> Int64? {
        var st = stat()
        guard stat(path, &st) == 0 else { return nil }
        return Int64(st.st_mtim.tv_sec)
    }

    /// Every entry below `root` (folders included) with its mtime.
    static func times(below root: String) -> [String: Int64] {
        var out: [String: Int64] = [:]
        var folders = [root]
        while let folder = folders.popLast() {
            for name in (try? FileManager.default.contentsOfDirectory(atPath: folder)) ?? [] {
                let path = folder + "/" + name
                var isDir: ObjCBool = false
                _ = FileManager.default.fileExists(atPath: path, isDirectory: &isDir)
                if isDir.boolValue { folders.append(path) }
                out[String(path.dropFirst(root.count + 1))] = mtime(path) ?? -1
            }
        }
        return out
    }

    /// Film files, their folders, `.nfo` and artwork all have the film's date; every folder
    /// has at least the newest of what it holds; nothing is dated 1970.
    static func check(_ root: String, filmAdded: Int64) {
        let all = times(below: root)
        #expect(all.count > 20, "\(all.keys.sorted())")
        let undated = all.filter { $0.value < 946_684_800 }  // before 2000: no date given
        #expect(undated.isEmpty, "undated: \(undated.keys.sorted())")
        for name in ["Alpha (2001).mkv", "Alpha (2001).nfo", "poster.jpg", "Alpha (2001).eng.srt"] {
            #expect(all[movie + "/" + name] == filmAdded, "\(name): \(all[movie + "/" + name] ?? -1), expected \(filmAdded)")
        }
        #expect(all[movie] == filmAdded)
        for (path, time) in all {
            let parent = String(path[..<(path.lastIndex(of: "/") ?? path.startIndex)])
            guard !parent.isEmpty, let folderTime = all[parent] else { continue }
            #expect(folderTime >= time, "\(parent) (\(folderTime)) is older than \(path) (\(time))")
        }
    }

    @Test(arguments: [ServerFixture.Kind.jellyfin, .emby, .plex])
    func everyFileAndFolderCarriesTheServersDates(kind: ServerFixture.Kind) throws {
        let m = try MountedLabstream("times-\(kind)", kind: kind, catalog: SideAssetTests.catalog)
        try m.mount()
        let poster = m.path(Self.movie + "/poster.jpg"), srt = m.path(Self.movie + "/Alpha (2001).eng.srt")
        _ = try FileManager.default.contentsOfDirectory(atPath: m.path(Self.movie))
        #expect(eventually { FileManager.default.fileExists(atPath: poster) && FileManager.default.fileExists(atPath: srt) })
        // BaseItemDto.DateCreated of the fixture's films; Plex Metadata.updatedAt (= addedAt there).
        let added = kind == .plex ? 1_700_000_000 : try #require(ISODate.epochSeconds("2024-03-01T12:00:00.0000000Z"))
        Self.check(m.mountpoint, filmAdded: added)
        try m.unmount()
    }

    /// Silo: a card's `added_at` (catalog_types.go CatalogItem); episodes take their series
    /// card's, since a season listing's rows carry none. A pinned film's manifest artwork and
    /// subtitles take the film's.
    @Test func siloFilesAndFoldersCarryTheCardsAddedDate() throws {
        let m = try MountedSilo("times-silo", catalog: SideAssetTests.catalog)
        #expect(try m.addWithPassword().code == 0)
        try m.mount()
        #expect(try m.cli(["pin", "--wait", m.path(Self.movie + "/Alpha (2001).mkv")]).code == 0)
        #expect(eventually { FileManager.default.fileExists(atPath: m.path(Self.movie + "/Alpha (2001).eng.srt")) })
        // The fixture's cards and versions are all added at 2026-01-01T00:00:00.000Z.
        let added = try #require(ISODate.epochSeconds("2026-01-01T00:00:00.000Z"))
        Self.check(m.mountpoint, filmAdded: added)
        #expect(Self.mtime(m.path("test/Shows/Show (2020)/Season 01/Show (2020) - S01E01 - Pilot.mkv")) == added)
        try m.unmount()
    }
}
