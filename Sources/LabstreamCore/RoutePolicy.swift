/// Which download route serves a requested copy, per backend: the original (or a version or
/// output the server already has) is a static, range-resumable file; Jellyfin's copies and Emby's
/// remux are live forward-only streams; other copies the server prepares first (Emby Convert,
/// Plex's download queue, Silo's entries) and then serves as a file. Pure: the engine and the CLI
/// act on the answer.

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

    public init(
        backend: BackendKind, quality: Quality = .original, sourceBitrate: Int? = nil, sourceContainer: String? = nil,
        explicitVersion: Bool = false, preparedOutputReady: Bool = false
    ) {
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

/// How a copy is fetched, named by what it does (the backend decides how it asks its server).
public enum Route: Sendable, Hashable {
    /// The original file, closed-range segments, resumable from durable checkpoints.
    case original
    /// An existing alternate version, fetched like the original.
    case version
    /// The finished output of a server-side preparation, fetched like the original.
    case preparedOutput
    /// A forward-only server stream (remux, or transcode at `bitsPerSecond`): no byte-offset
    /// resume; an interruption restarts it from byte 0 under a new attempt.
    case liveCopy(remux: Bool, bitsPerSecond: Int?)
    /// A copy the server makes ahead of time (Emby's Convert jobs, Plex's download queue) and
    /// then serves whole, fetched like the original once ready.
    case serverPreparedCopy(bitsPerSecond: Int, preparation: Preparation)

    /// How the server prepares a copy, which decides how its row shows while it waits.
    public enum Preparation: Sendable, Hashable {
        /// A job the server runs (Emby Convert): the row is `preparing`.
        case job
        /// A place in the server's download queue (Plex): the row stays `queued`.
        case queue
        /// A download entry the server prepares at a preset (Silo's managed downloads): the row
        /// is `preparing`; the entry is kept until the copy is unpinned.
        case entry
    }

    public var resumesFromCheckpoints: Bool {
        switch self {
        case .original, .version, .preparedOutput: return true
        case .liveCopy, .serverPreparedCopy: return false
        }
    }

    /// The status a row on this route waits in before bytes flow.
    public var waitingStatus: DownloadStatus {
        switch self {
        case .serverPreparedCopy(_, .job), .serverPreparedCopy(_, .entry): return .preparing
        default: return .queued
        }
    }
}

public enum RoutePolicy {
    public static func route(for r: RouteRequest) -> Route {
        if r.explicitVersion { return .version }
        // The original already fits the cap (or no cap): nothing to convert.
        let cap = r.quality.bitsPerSecond
        let originalFits = cap == nil || (r.sourceBitrate.map { $0 <= cap! } ?? false)
        if originalFits && !r.needsRemuxOnly { return .original }
        if r.preparedOutputReady && r.backend != .jellyfin { return .preparedOutput }
        switch r.backend {
        case .jellyfin:
            return .liveCopy(remux: originalFits, bitsPerSecond: originalFits ? nil : cap)
        case .emby:
            if originalFits { return .liveCopy(remux: true, bitsPerSecond: nil) }
            return .serverPreparedCopy(bitsPerSecond: cap!, preparation: .job)
        case .plex:
            // Plex has no live remux download: a container change is an optimize at the
            // original's bitrate (or the cap).
            return .serverPreparedCopy(bitsPerSecond: cap ?? r.sourceBitrate ?? 20_000_000, preparation: .queue)
        case .silo:
            // A preset of Silo's managed downloads (it has no remux preset: the engine refuses one).
            return originalFits ? .original : .serverPreparedCopy(bitsPerSecond: cap!, preparation: .entry)
        }
    }
}
