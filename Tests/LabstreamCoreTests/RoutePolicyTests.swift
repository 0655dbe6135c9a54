import LabstreamCore
import Testing

/// The seed's "Backend routes" table, row by row.
@Suite struct RoutePolicyTests {
    struct Row: Sendable, CustomStringConvertible {
        var request: RouteRequest
        var route: Route
        var description: String { "\(request.backend) \(request.quality) → \(route)" }
    }

    static let mbps10 = Quality.capped(megabitsPerSecond: 10)
    static let table: [Row] = [
        // Plex: compatible original, explicit existing version, completed optimizer output: static.
        Row(request: .init(backend: .plex), route: .original),
        Row(request: .init(backend: .plex, quality: mbps10, sourceBitrate: 8_000_000), route: .original),
        Row(request: .init(backend: .plex, quality: mbps10, sourceBitrate: 30_000_000, explicitVersion: true), route: .version),
        Row(request: .init(backend: .plex, quality: mbps10, sourceBitrate: 30_000_000, preparedOutputReady: true), route: .preparedOutput),
        Row(
            request: .init(backend: .plex, quality: mbps10, sourceBitrate: 30_000_000),
            route: .serverPreparedCopy(bitsPerSecond: 10_000_000, preparation: .queue)),
        // Plex has no live remux: a container change goes through the download queue at the original's bitrate.
        Row(
            request: .init(backend: .plex, quality: .remux, sourceBitrate: 8_000_000, sourceContainer: "avi"),
            route: .serverPreparedCopy(bitsPerSecond: 8_000_000, preparation: .queue)),
        Row(request: .init(backend: .plex, quality: .remux, sourceContainer: "MKV"), route: .original),
        // Jellyfin: original static; compatible remux and capped transcode are live-forward.
        Row(request: .init(backend: .jellyfin), route: .original),
        Row(request: .init(backend: .jellyfin, quality: .remux, sourceContainer: "ts"), route: .liveCopy(remux: true, bitsPerSecond: nil)),
        Row(request: .init(backend: .jellyfin, quality: .remux), route: .liveCopy(remux: true, bitsPerSecond: nil)),
        Row(request: .init(backend: .jellyfin, quality: .remux, sourceContainer: "mkv"), route: .original),
        Row(request: .init(backend: .jellyfin, quality: mbps10, sourceBitrate: 30_000_000), route: .liveCopy(remux: false, bitsPerSecond: 10_000_000)),
        Row(
            request: .init(backend: .jellyfin, quality: mbps10, sourceBitrate: 30_000_000, preparedOutputReady: true),
            route: .liveCopy(remux: false, bitsPerSecond: 10_000_000)),
        // Unknown bitrate under a cap: do not guess that it fits.
        Row(request: .init(backend: .jellyfin, quality: mbps10), route: .liveCopy(remux: false, bitsPerSecond: 10_000_000)),
        // Emby: original, existing version, completed Convert output static; remux live; transcode via Convert.
        Row(request: .init(backend: .emby), route: .original),
        Row(request: .init(backend: .emby, quality: mbps10, explicitVersion: true), route: .version),
        Row(request: .init(backend: .emby, quality: mbps10, sourceBitrate: 30_000_000, preparedOutputReady: true), route: .preparedOutput),
        Row(request: .init(backend: .emby, quality: .remux, sourceContainer: "wmv"), route: .liveCopy(remux: true, bitsPerSecond: nil)),
        Row(
            request: .init(backend: .emby, quality: mbps10, sourceBitrate: 30_000_000), route: .serverPreparedCopy(bitsPerSecond: 10_000_000, preparation: .job)
        )
    ]

    @Test(arguments: table) func routeTable(row: Row) {
        #expect(RoutePolicy.route(for: row.request) == row.route)
    }

    @Test func onlyEmbyConvertPreparesAndOnlyStaticRoutesResume() {
        #expect(Route.serverPreparedCopy(bitsPerSecond: 1, preparation: .job).waitingStatus == .preparing)
        #expect(Route.serverPreparedCopy(bitsPerSecond: 1, preparation: .queue).waitingStatus == .queued)
        #expect(Route.liveCopy(remux: true, bitsPerSecond: nil).waitingStatus == .queued)
        let resumable = [Route.original, .version, .preparedOutput].map { $0.resumesFromCheckpoints }
        let restarting = [
            Route.liveCopy(remux: true, bitsPerSecond: nil), .serverPreparedCopy(bitsPerSecond: 1, preparation: .queue),
            .serverPreparedCopy(bitsPerSecond: 1, preparation: .job)
        ]
        .map { $0.resumesFromCheckpoints }
        #expect(resumable == [true, true, true] && restarting == [false, false, false])
    }

    @Test func qualitiesParse() {
        #expect(Quality("original") == .original && Quality("10MBPS") == .capped(megabitsPerSecond: 10) && Quality("Remux") == .remux)
        #expect(Quality.remux.description == "remux" && Quality.remux.bitsPerSecond == nil)
        #expect(Quality("3mbps") == nil && Quality("fast") == nil && Quality("") == nil)
        #expect(Quality.capped(megabitsPerSecond: 20).description == "20mbps")
    }
}

@Suite struct SiloRouteTests {
    /// Silo's presets come through its managed downloads: a cap the original does not meet (or
    /// whose bitrate is unknown) is a download entry the server prepares; one it meets keeps the
    /// original; remux is no preset (the engine refuses it), so it is never a copy.
    @Test func siloCopiesAreEntriesItPreparesAtAPreset() {
        let two = Quality("2mbps")!
        #expect(
            RoutePolicy.route(for: .init(backend: .silo, quality: two, sourceBitrate: 30_000_000))
                == .serverPreparedCopy(bitsPerSecond: 2_000_000, preparation: .entry))
        #expect(
            RoutePolicy.route(for: .init(backend: .silo, quality: two, sourceBitrate: nil))
                == .serverPreparedCopy(bitsPerSecond: 2_000_000, preparation: .entry))
        #expect(RoutePolicy.route(for: .init(backend: .silo, quality: two, sourceBitrate: 1_000_000)) == .original)
        #expect(RoutePolicy.route(for: .init(backend: .silo, quality: .original, sourceBitrate: 30_000_000)) == .original)
        #expect(RoutePolicy.route(for: .init(backend: .silo, quality: .remux, sourceContainer: "avi")) == .original)
        #expect(Route.serverPreparedCopy(bitsPerSecond: 1, preparation: .entry).waitingStatus == .preparing)
        #expect(!Route.serverPreparedCopy(bitsPerSecond: 1, preparation: .entry).resumesFromCheckpoints)
    }

    /// One entry per item and device: a pin at one quality refuses while another of the item is pinned.
    @Test func aSecondQualityOfOneItemIsRefusedNamingTheFirst() {
        let ten = Quality("10mbps")!, two = Quality("2mbps")!
        #expect(ManagedEntryPolicy.pinConflict(wanted: nil, originalPinned: false, pinnedCopies: []) == nil)
        #expect(ManagedEntryPolicy.pinConflict(wanted: nil, originalPinned: true, pinnedCopies: []) == nil)
        #expect(ManagedEntryPolicy.pinConflict(wanted: ten, originalPinned: false, pinnedCopies: [ten]) == nil)
        #expect(ManagedEntryPolicy.pinConflict(wanted: ten, originalPinned: true, pinnedCopies: [])?.contains("the original") == true)
        #expect(ManagedEntryPolicy.pinConflict(wanted: nil, originalPinned: false, pinnedCopies: [ten])?.contains("10mbps") == true)
        #expect(ManagedEntryPolicy.pinConflict(wanted: two, originalPinned: false, pinnedCopies: [ten])?.contains("10mbps copy") == true)
        #expect(ManagedEntryPolicy.pinConflict(wanted: .remux, originalPinned: false, pinnedCopies: [])?.contains("no remux preset") == true)
    }
}

/// A prepared copy's source is a typed value; the index's tag spelling is parsed in one place.
@Suite struct PreparedFileTests {
    @Test func tagsRoundTripAndOtherTagsAreNotPreparedFiles() {
        for file in [PreparedFile.syncJobItem("42"), .queueItem(queue: 3, item: 500)] {
            #expect(PreparedFile(tag: file.tag) == file)
        }
        #expect(PreparedFile(tag: "syncjobitem:42")?.tag == "syncjobitem:42" && PreparedFile(tag: "downloadqueue:3/500") == .queueItem(queue: 3, item: 500))
        for other in ["\"etag-v1\"", "/library/parts/12/file.mkv", "syncjobitem:", "downloadqueue:3", "downloadqueue:a/b"] {
            #expect(PreparedFile(tag: other) == nil, "\(other)")
        }
        let copy = TreeFile(path: ["s"], key: FileKey(server: "s", itemId: "i", sourceId: "m@2mbps"), size: 1, modified: 0, etag: "downloadqueue:1/2")
        #expect(copy.prepared == .queueItem(queue: 1, item: 2))
    }
}
