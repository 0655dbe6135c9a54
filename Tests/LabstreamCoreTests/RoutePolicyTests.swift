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
        Row(request: .init(backend: .plex, quality: mbps10, sourceBitrate: 30_000_000), route: .serverPreparedCopy(bitsPerSecond: 10_000_000, preparation: .queue)),
        // Plex has no live remux: a container change goes through the download queue at the original's bitrate.
        Row(request: .init(backend: .plex, quality: .remux, sourceBitrate: 8_000_000, sourceContainer: "avi"), route: .serverPreparedCopy(bitsPerSecond: 8_000_000, preparation: .queue)),
        Row(request: .init(backend: .plex, quality: .remux, sourceContainer: "MKV"), route: .original),
        // Jellyfin: original static; compatible remux and capped transcode are live-forward.
        Row(request: .init(backend: .jellyfin), route: .original),
        Row(request: .init(backend: .jellyfin, quality: .remux, sourceContainer: "ts"), route: .liveCopy(remux: true, bitsPerSecond: nil)),
        Row(request: .init(backend: .jellyfin, quality: .remux), route: .liveCopy(remux: true, bitsPerSecond: nil)),
        Row(request: .init(backend: .jellyfin, quality: .remux, sourceContainer: "mkv"), route: .original),
        Row(request: .init(backend: .jellyfin, quality: mbps10, sourceBitrate: 30_000_000), route: .liveCopy(remux: false, bitsPerSecond: 10_000_000)),
        Row(request: .init(backend: .jellyfin, quality: mbps10, sourceBitrate: 30_000_000, preparedOutputReady: true),
            route: .liveCopy(remux: false, bitsPerSecond: 10_000_000)),
        // Unknown bitrate under a cap: do not guess that it fits.
        Row(request: .init(backend: .jellyfin, quality: mbps10), route: .liveCopy(remux: false, bitsPerSecond: 10_000_000)),
        // Emby: original, existing version, completed Convert output static; remux live; transcode via Convert.
        Row(request: .init(backend: .emby), route: .original),
        Row(request: .init(backend: .emby, quality: mbps10, explicitVersion: true), route: .version),
        Row(request: .init(backend: .emby, quality: mbps10, sourceBitrate: 30_000_000, preparedOutputReady: true), route: .preparedOutput),
        Row(request: .init(backend: .emby, quality: .remux, sourceContainer: "wmv"), route: .liveCopy(remux: true, bitsPerSecond: nil)),
        Row(request: .init(backend: .emby, quality: mbps10, sourceBitrate: 30_000_000), route: .serverPreparedCopy(bitsPerSecond: 10_000_000, preparation: .job)),
    ]

    @Test(arguments: table) func routeTable(row: Row) {
        #expect(RoutePolicy.route(for: row.request) == row.route)
    }

    @Test func onlyEmbyConvertPreparesAndOnlyStaticRoutesResume() {
        #expect(Route.serverPreparedCopy(bitsPerSecond: 1, preparation: .job).waitingStatus == .preparing)
        #expect(Route.serverPreparedCopy(bitsPerSecond: 1, preparation: .queue).waitingStatus == .queued)
        #expect(Route.liveCopy(remux: true, bitsPerSecond: nil).waitingStatus == .queued)
        let resumable = [Route.original, .version, .preparedOutput].map { $0.resumesFromCheckpoints }
        let restarting = [Route.liveCopy(remux: true, bitsPerSecond: nil), .serverPreparedCopy(bitsPerSecond: 1, preparation: .queue), .serverPreparedCopy(bitsPerSecond: 1, preparation: .job)]
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
    /// Silo's quality presets come through its managed downloads, which Labstream does not use
    /// yet: every request is the original (the engine refuses an explicit other quality).
    @Test func siloIsAlwaysTheOriginal() {
        for quality in [Quality.original, .remux, Quality("2mbps")!] {
            #expect(RoutePolicy.route(for: .init(backend: .silo, quality: quality, sourceBitrate: 30_000_000, sourceContainer: "avi")) == .original)
        }
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
