import Foundation
import LabstreamCore
import LabstreamStore
import Testing

/// A stored copy moved to the item id a rebuilt library gave its file (issue 41 item 3), in the index.
@Suite struct AdoptionTests {
    let server = OfflineIndex.ServerRow(name: "jf", type: "jellyfin", url: "u", serverId: nil, lastSync: nil)

    func catalog(_ index: OfflineIndex, item: String) throws {
        let file = TreeFile(
            path: ["jf", "Movies", "Alpha (2001)", "Alpha (2001).mkv"], key: FileKey(server: "jf", itemId: item, sourceId: item), size: 100, modified: 0,
            etag: nil)
        try index.replaceCatalog(
            server: server,
            libraries: [
                LibraryCatalog(
                    id: "L", name: "Movies",
                    items: [
                        CatalogItem(
                            id: item, kind: .movie, title: "Alpha", year: 2001, sources: [MediaSource(id: item, path: "/media/alpha.mkv", size: 100)])
                    ])
            ],
            tree: [file], now: 1)
    }

    @Test func aMatchedCopyMovesToTheNewItemWithItsPinSegmentsAndSideAssets() throws {
        let scratch = Scratch("adopt")
        let index = try OfflineIndex(path: scratch.path + "/index.sqlite")
        try FileManager.default.createDirectory(atPath: scratch.path + "/partials", withIntermediateDirectories: true)
        let old = FileKey(server: "jf", itemId: "old", sourceId: "old")
        let new = FileKey(server: "jf", itemId: "new", sourceId: "new")
        try catalog(index, item: "old")
        var row = DownloadRow(
            key: old, status: .partial, attempt: AttemptID(1), validator: nil, total: 100, present: RangeSet([ByteRange(0, 60)]),
            partialPath: "partials/alpha.part")
        row.pinned = true
        try index.saveDownload(row, committing: .init(range: ByteRange(0, 60), digest: "d1"), now: 1)
        row.present = RangeSet([ByteRange(0, 100)])
        row.status = .complete
        try index.saveDownload(row, committing: .init(range: ByteRange(60, 100), digest: "d2"), now: 2)
        try index.db.exec("INSERT INTO side_assets(server, item_id, asset, state, file) VALUES('jf', 'old', 'poster', 'stored', 'side/old/poster.jpg')")
        try index.saveManagedEntry(ManagedEntry(itemId: "old", sourceId: "old", kind: .original, id: "dl_1"), server: "jf")
        // The library re-added: the old item vanishes (its copy orphaned), the new one appears.
        try catalog(index, item: "new")
        #expect(try index.treeFiles().contains { $0.key == old && $0.orphaned })
        // Each source's path on the server is kept, the vanished one's too.
        #expect(try index.sourcePaths(server: "jf") == [old: "/media/alpha.mkv", new: "/media/alpha.mkv"])

        try index.adoptCopy(from: old, to: new, sourceTag: "/library/parts/2/1/alpha.mkv")

        #expect(try index.download(old) == nil)
        let adopted = try #require(try index.download(new))
        #expect(adopted.pinned && adopted.status == .complete && adopted.present == RangeSet([ByteRange(0, 100)]))
        #expect(adopted.partialPath == "partials/alpha.part")  // nothing renamed
        #expect(adopted.reason == .matched(was: "old"))
        // The new listing's tag of the same bytes (a Plex part key names the part's new id).
        #expect(adopted.sourceTag == "/library/parts/2/1/alpha.mkv")
        #expect(try index.segments(new, attempt: adopted.attempt).map(\.digest) == ["d1", "d2"])
        #expect(try index.db.query("SELECT item_id FROM side_assets").map { $0[0].text } == ["new"])
        // A managed entry names the old ids on its server: it stays with the old item, for the
        // registry to delete as an unpinned file's.
        #expect(try index.managedEntry(server: "jf", item: "old")?.id == "dl_1" && index.managedEntry(server: "jf", item: "new") == nil)
        // The orphaned listing is gone: one file in the tree, the new item's.
        #expect(try index.treeFiles().map(\.key) == [new])
        // The sidecar names the new key, so a rebuilt index takes the copy back as the new item's.
        let sidecar = try #require(CopySidecar.read(CopySidecar.path(ofPartial: scratch.path + "/partials/alpha.part")))
        #expect(sidecar.key == new && sidecar.segments.count == 2)
    }

    /// An orphaned copy keeps what its item said of it across later syncs (its item's row goes),
    /// so a library added back later is still known; listed again, or its bytes gone and its
    /// listing with them, nothing of it is kept.
    @Test func anOrphanKeepsItsIdentityUntilItIsListedAgainOrGoes() throws {
        let scratch = Scratch("adopt-orphan-identity")
        let index = try OfflineIndex(path: scratch.path + "/index.sqlite")
        let old = FileKey(server: "jf", itemId: "old", sourceId: "old")
        func sync(_ items: [String]) throws {
            try index.replaceCatalog(
                server: server,
                libraries: [
                    LibraryCatalog(
                        id: "L", name: "Movies",
                        items: items.map {
                            CatalogItem(
                                id: $0, kind: .episode, title: "Pilot", seriesId: "S", seriesName: "Show", seasonNumber: 1, episodeNumber: 2,
                                sources: [MediaSource(id: $0, container: "mkv", path: "/media/pilot.mkv", size: 100)],
                                details: ItemDetails(ids: ["tvdb": "901"]))
                        })
                ],
                tree: items.map {
                    TreeFile(
                        path: ["jf", "Shows", "Show", "Pilot-\($0).mkv"], key: FileKey(server: "jf", itemId: $0, sourceId: $0), size: 100, modified: 0,
                        etag: nil)
                }, now: 1)
        }
        try sync(["old"])
        let row = DownloadRow(
            key: old, status: .partial, attempt: AttemptID(1), validator: nil, total: 100, present: RangeSet([ByteRange(0, 60)]),
            partialPath: "partials/pilot.part")
        try index.saveDownload(row, committing: .init(range: ByteRange(0, 60), digest: "d1"), now: 1)
        #expect(try index.orphanIdentities(server: "jf").isEmpty)
        try sync([])
        try sync(["other"])  // a later sync: the item's row is long gone
        let expected = FileIdentity(
            key: old, kind: .episode, providerIds: ["tvdb": "901"], size: 100, container: "mkv", path: "/media/pilot.mkv", season: 1, episode: 2)
        #expect(try index.orphanIdentities(server: "jf") == [expected])
        #expect(try index.db.query("SELECT count(*) FROM items WHERE id='old'").first?[0].int == 0)
        #expect(try index.treeFiles().contains { $0.key == old && $0.orphaned })
        // Listed again under its own id: an ordinary file, nothing kept of it as an orphan.
        try sync(["old"])
        #expect(try index.orphanIdentities(server: "jf").isEmpty)
        #expect(try index.db.query("SELECT orphan_identity FROM media_sources WHERE id='old'").first?[0].text == nil)
        // Orphaned again, then its bytes cancelled: the next sync drops its listing and identity.
        try sync([])
        #expect(try index.orphanIdentities(server: "jf").count == 1)
        try index.db.exec("DELETE FROM downloads WHERE item_id = 'old'")
        #expect(try index.orphanIdentities(server: "jf").isEmpty)
        try sync([])
        #expect(try index.db.query("SELECT count(*) FROM media_sources WHERE orphan_identity IS NOT NULL").first?[0].int == 0)

        // An orphan of an index before schema 26 opens as it was, with nothing to be known by.
        try sync(["old"])
        try index.saveDownload(row, committing: .init(range: ByteRange(0, 60), digest: "d1"), now: 3)
        try sync([])
        try undoSchema26(index.db)
        let upgraded = try OfflineIndex(path: scratch.path + "/index.sqlite")
        #expect(try upgraded.treeFiles().contains { $0.key == old && $0.orphaned })
        #expect(try upgraded.orphanIdentities(server: "jf").isEmpty)
    }

    @Test func aCopyIsNotAdoptedOverBytesTheNewItemHolds() throws {
        let scratch = Scratch("adopt-refused")
        let index = try OfflineIndex(path: scratch.path + "/index.sqlite")
        let old = FileKey(server: "jf", itemId: "old", sourceId: "old")
        let new = FileKey(server: "jf", itemId: "new", sourceId: "new")
        try catalog(index, item: "old")
        for (key, part) in [(old, "a"), (new, "b")] {
            let row = DownloadRow(
                key: key, status: .partial, attempt: AttemptID(1), validator: nil, total: 100, present: RangeSet([ByteRange(0, 10)]),
                partialPath: "partials/\(part).part")
            try index.saveDownload(row, committing: .init(range: ByteRange(0, 10), digest: part), now: 1)
        }
        #expect(throws: LabstreamError.self) { try index.adoptCopy(from: old, to: new) }
        #expect(try index.download(old)?.partialPath == "partials/a.part")
        #expect(try index.download(new)?.partialPath == "partials/b.part")
    }

    /// A monitor moved to its series' new id keeps its settings and server record, takes the
    /// baseline it is given, and what it did to each episode follows to the new item.
    @Test func aMonitorMovesWithWhatItDidToEachEpisode() throws {
        let scratch = Scratch("move-monitor")
        let index = try OfflineIndex(path: scratch.path + "/index.sqlite")
        try index.saveMonitor(SeriesMonitor(server: "jf", seriesId: "old", mode: .future, baseline: ["a", "b"], created: 1, remoteId: "sub_1"))
        try index.setMonitoredEpisode(server: "jf", item: "a", .init(seriesId: "old", sourceId: "a", state: .declined))
        // Moved with its adopted copy already (`adoptCopy`).
        try index.setMonitoredEpisode(server: "jf", item: "nb", .init(seriesId: "old", sourceId: "nb", state: .pinned))
        try index.moveMonitor(server: "jf", .init(from: "old", to: "new", baseline: ["na", "nb"], items: ["a": "na", "b": "nb"]))
        let moved = try #require(try index.monitors(server: "jf").first)
        #expect(moved.seriesId == "new" && moved.baseline == ["na", "nb"] && moved.remoteId == "sub_1" && moved.mode == .future, "\(moved)")
        let rows = try index.monitoredEpisodes(server: "jf")
        #expect(rows["na"] == .init(seriesId: "new", sourceId: "a", state: .declined) && rows["a"] == nil, "\(rows)")
        #expect(rows["nb"] == .init(seriesId: "new", sourceId: "nb", state: .pinned), "\(rows)")
        // Not onto a series with a monitor of its own.
        try index.saveMonitor(SeriesMonitor(server: "jf", seriesId: "other", mode: .all))
        #expect(throws: LabstreamError.self) { try index.moveMonitor(server: "jf", .init(from: "other", to: "new", baseline: [], items: [:])) }
        #expect(try index.monitors(server: "jf").map(\.seriesId) == ["new", "other"])
    }
}
