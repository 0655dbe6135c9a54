/// Which download route serves a requested copy, per backend, from the seed's "Backend
/// routes" table. Pure: the engine and the CLI act on the answer.
public enum BackendKind: String, Sendable, Hashable, CaseIterable {
    case jellyfin, emby, plex
}

/// The quality a copy is fetched at: the original bytes, the original's streams in Matroska
/// (for containers that seek badly or that players refuse: AVI, MPEG-TS, WMV…), or a bitrate cap.
public enum Quality: Sendable, Hashable, CustomStringConvertible {
    case original
    case remux
    case capped(megabitsPerSecond: Int)

    public static let allowedCaps = [20, 10, 5, 2, 1]
    public static let spellings = "original, remux, 20mbps, 10mbps, 5mbps, 2mbps or 1mbps"

    /// `original`, `remux`, `20mbps`, `10mbps`, `5mbps`, `2mbps` or `1mbps`.
    public init?(_ text: String) {
        let t = text.lowercased()
        if t == "original" { self = .original; return }
        if t == "remux" { self = .remux; return }
        guard t.hasSuffix("mbps"), let n = Int(t.dropLast(4)), Self.allowedCaps.contains(n) else { return nil }
        self = .capped(megabitsPerSecond: n)
    }

    public var description: String {
        switch self {
        case .original: return "original"
        case .remux: return "remux"
        case .capped(let n): return "\(n)mbps"
        }
    }

    public var bitsPerSecond: Int? {
        if case .capped(let n) = self { return n * 1_000_000 }
        return nil
    }
}

/// What is asked for one media source.
public struct RouteRequest: Sendable, Hashable {
    public var backend: BackendKind
    public var quality: Quality
    /// The source's bitrate when the server reports it (bits per second).
    public var sourceBitrate: Int?
    /// The original's container (its file extension), when known.
    public var sourceContainer: String?
    /// The user named an existing version (a file of the tree), not a quality.
    public var explicitVersion: Bool
    /// A server-side preparation (Plex download queue, Emby Convert) for this quality has finished.
    public var preparedOutputReady: Bool

    public init(backend: BackendKind, quality: Quality = .original, sourceBitrate: Int? = nil, sourceContainer: String? = nil,
                explicitVersion: Bool = false, preparedOutputReady: Bool = false) {
        self.backend = backend
        self.quality = quality
        self.sourceBitrate = sourceBitrate
        self.sourceContainer = sourceContainer
        self.explicitVersion = explicitVersion
        self.preparedOutputReady = preparedOutputReady
    }

    /// A remux is asked for and the original is not Matroska already (an unknown container is
    /// remuxed rather than guessed to be one).
    public var needsRemuxOnly: Bool {
        quality == .remux && sourceContainer?.lowercased() != DerivedCopy.container
    }
}

public enum Route: Sendable, Hashable {
    /// The original file, closed-range segments, resumable from durable checkpoints.
    case staticOriginal
    /// An existing alternate version, fetched like the original.
    case staticVersion
    /// The finished output of a server-side preparation, fetched like the original.
    case staticPrepared
    /// A forward-only server stream (remux, or transcode at `bitsPerSecond`): no byte-offset
    /// resume; an interruption restarts it from byte 0 under a new attempt.
    case liveForward(remux: Bool, bitsPerSecond: Int?)
    /// Plex download queue (its optimizer): the row stays `queued` until the output is ready.
    case plexOptimize(bitsPerSecond: Int)
    /// Emby Convert (a Sync job): the row is `preparing` until the output is ready.
    case embyConvert(bitsPerSecond: Int)

    public var resumesFromCheckpoints: Bool {
        switch self {
        case .staticOriginal, .staticVersion, .staticPrepared: return true
        case .liveForward, .plexOptimize, .embyConvert: return false
        }
    }

    /// The status a row on this route waits in before bytes flow. Only Emby Convert prepares.
    public var waitingStatus: DownloadStatus {
        if case .embyConvert = self { return .preparing }
        return .queued
    }
}

public enum RoutePolicy {
    public static func route(for r: RouteRequest) -> Route {
        if r.explicitVersion { return .staticVersion }
        // The original already fits the cap (or no cap): nothing to convert.
        let cap = r.quality.bitsPerSecond
        let originalFits = cap == nil || (r.sourceBitrate.map { $0 <= cap! } ?? false)
        if originalFits && !r.needsRemuxOnly { return .staticOriginal }
        if r.preparedOutputReady && r.backend != .jellyfin { return .staticPrepared }
        switch r.backend {
        case .jellyfin:
            return .liveForward(remux: originalFits, bitsPerSecond: originalFits ? nil : cap)
        case .emby:
            if originalFits { return .liveForward(remux: true, bitsPerSecond: nil) }
            return .embyConvert(bitsPerSecond: cap!)
        case .plex:
            // Plex has no live remux download: a container change is an optimize at the
            // original's bitrate (or the cap).
            return .plexOptimize(bitsPerSecond: cap ?? r.sourceBitrate ?? 20_000_000)
        }
    }
}
