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
        Row(request: .init(backend: .plex), route: .staticOriginal),
        Row(request: .init(backend: .plex, quality: mbps10, sourceBitrate: 8_000_000), route: .staticOriginal),
        Row(request: .init(backend: .plex, quality: mbps10, sourceBitrate: 30_000_000, explicitVersion: true), route: .staticVersion),
        Row(request: .init(backend: .plex, quality: mbps10, sourceBitrate: 30_000_000, preparedOutputReady: true), route: .staticPrepared),
        Row(request: .init(backend: .plex, quality: mbps10, sourceBitrate: 30_000_000), route: .plexOptimize(bitsPerSecond: 10_000_000)),
        // Plex has no live remux: a container change goes through the download queue at the original's bitrate.
        Row(request: .init(backend: .plex, quality: .remux, sourceBitrate: 8_000_000, sourceContainer: "avi"), route: .plexOptimize(bitsPerSecond: 8_000_000)),
        Row(request: .init(backend: .plex, quality: .remux, sourceContainer: "MKV"), route: .staticOriginal),
        // Jellyfin: original static; compatible remux and capped transcode are live-forward.
        Row(request: .init(backend: .jellyfin), route: .staticOriginal),
        Row(request: .init(backend: .jellyfin, quality: .remux, sourceContainer: "ts"), route: .liveForward(remux: true, bitsPerSecond: nil)),
        Row(request: .init(backend: .jellyfin, quality: .remux), route: .liveForward(remux: true, bitsPerSecond: nil)),
        Row(request: .init(backend: .jellyfin, quality: .remux, sourceContainer: "mkv"), route: .staticOriginal),
        Row(request: .init(backend: .jellyfin, quality: mbps10, sourceBitrate: 30_000_000), route: .liveForward(remux: false, bitsPerSecond: 10_000_000)),
        Row(request: .init(backend: .jellyfin, quality: mbps10, sourceBitrate: 30_000_000, preparedOutputReady: true),
            route: .liveForward(remux: false, bitsPerSecond: 10_000_000)),
        // Unknown bitrate under a cap: do not guess that it fits.
        Row(request: .init(backend: .jellyfin, quality: mbps10), route: .liveForward(remux: false, bitsPerSecond: 10_000_000)),
        // Emby: original, existing version, completed Convert output static; remux live; transcode via Convert.
        Row(request: .init(backend: .emby), route: .staticOriginal),
        Row(request: .init(backend: .emby, quality: mbps10, explicitVersion: true), route: .staticVersion),
        Row(request: .init(backend: .emby, quality: mbps10, sourceBitrate: 30_000_000, preparedOutputReady: true), route: .staticPrepared),
        Row(request: .init(backend: .emby, quality: .remux, sourceContainer: "wmv"), route: .liveForward(remux: true, bitsPerSecond: nil)),
        Row(request: .init(backend: .emby, quality: mbps10, sourceBitrate: 30_000_000), route: .embyConvert(bitsPerSecond: 10_000_000)),
    ]

    @Test(arguments: table) func routeTable(row: Row) {
        #expect(RoutePolicy.route(for: row.request) == row.route)
    }

    @Test func onlyEmbyConvertPreparesAndOnlyStaticRoutesResume() {
        #expect(Route.embyConvert(bitsPerSecond: 1).waitingStatus == .preparing)
        #expect(Route.plexOptimize(bitsPerSecond: 1).waitingStatus == .queued)
        #expect(Route.liveForward(remux: true, bitsPerSecond: nil).waitingStatus == .queued)
        let resumable = [Route.staticOriginal, .staticVersion, .staticPrepared].map { $0.resumesFromCheckpoints }
        let restarting = [Route.liveForward(remux: true, bitsPerSecond: nil), .plexOptimize(bitsPerSecond: 1), .embyConvert(bitsPerSecond: 1)]
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
