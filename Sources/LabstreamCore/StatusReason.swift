/// Why a file is in its state. The index keeps a sentence (what `status` prints); `--json`
/// carries a stable code beside it, derived here from the sentences this file makes, so the two
/// can never disagree.
public enum StatusReason {
    /// An `unverified` row whose completion check has not run yet.
    public static let awaitingValidation = "all bytes present; awaiting validation"
    /// An `unverified` row on a daemon whose playback probe is off.
    public static let probeOff = "all bytes present; the playback probe is off"
    /// A pinned file parked until its server answers again (the fill resumes it by itself).
    public static let serverUnavailable = "server unavailable"
    /// A file parked because the cache's disk cannot hold the rest of it (kept as its code: the
    /// index has it in that spelling since schema 1).
    public static let storageFull = "storage_full"
    /// A file `labstream pause` stopped.
    public static let pausedByUser = "paused by user"
    /// A file the cache limits pushed out.
    public static let evicted = "evicted to stay within the cache limits"
    /// A series monitor let go of the episode (watched, with delete-watched, or over its cap).
    public static let monitorLetGo = "removed by its series monitor (watched, or over the monitor's storage cap)"
    /// In a series monitor's scope, but over its storage cap: not pinned.
    public static let heldByCap = "held back by its series monitor's storage cap"
    /// A file its server no longer lists: what of it is kept here (`kept`: any bytes), and how
    /// it goes.
    public static func orphaned(kept: Bool) -> String {
        kept
            ? "orphaned: removed on the server; the local copy is kept until you remove it with `labstream cancel`"
            : "orphaned: removed on the server, and nothing of it is kept here; it leaves the tree at the next sync (`labstream sync`)"
    }
    public static let localFileVanished = "the local file vanished; fetching it again"
    public static let damagedBytes = "damaged bytes found on disk were dropped and will be fetched again"
    /// A pinned file whose media is whole while its subtitles and artwork are still on their way.
    public static let fetchingSideAssets = "the media is here; fetching its subtitles and artwork"
    /// A file whose server was removed from the configuration while it was on its way.
    public static let serverRemoved = "server removed; after adding it again, resume with labstream resume"
    /// A transfer the index has under way while no daemon runs on the data directory (it was
    /// never mounted since, or was killed): nothing moves until the next mount.
    public static let daemonNotRunning = "the daemon is not running; this goes on when Labstream is mounted again"
    /// Set by the index itself (SQL), matched by its opening words.
    static let serverRemovedOpening = "server removed"
    static let indexUpgradedOpening = "index upgraded"

    /// The file is different on the server from the bytes held.
    public static func fileChanged(_ why: String? = nil, refetching: Bool = true) -> String {
        "file changed on the server" + (why.map { " (\($0))" } ?? "") + (refetching ? "; fetching it again" : "")
    }

    /// The file changed on the server again and again while being fetched.
    public static func keepsChanging(_ why: String) -> String {
        "the file keeps changing on the server (\(why)); run `labstream sync`"
    }

    /// A server-made copy is being prepared (Emby Convert job, Plex download queue).
    public static func preparing(job: String) -> String { "the server is preparing the copy (job \(job))" }

    /// A file that is not here while its server is away (its reads fail until it is back).
    public static func serverAway(_ state: Reachability) -> String { "server \(state.rawValue)" }

    /// A pinned file waiting out a transient failure (`queued`): what happened and when the
    /// next try is, e.g. "server unavailable: HTTP 503, next try in 4 s".
    public static func waitingForServer(_ error: LabstreamError, retryIn seconds: Double) -> String {
        let what: String
        switch error {
        case .serverUnavailable(let why), .fetchFailed(let why): what = why
        case .timedOut(let why): what = "timed out (\(why))"
        default: what = error.userMessage
        }
        return serverUnavailable + ": " + what + ", next try in \(Int(seconds.rounded(.up))) s"
    }

    /// A server that no longer accepts the stored sign-in: its pinned files wait, paused, until
    /// the user signs in again.
    public static func signInRefused(server: String) -> String {
        "\(server) no longer accepts the stored sign-in (HTTP 401); sign in again with `labstream server add`, and this file resumes"
    }

    /// The stable name of a reason, for `--json` and scripts.
    public enum Code: String, Sendable, Hashable, CaseIterable, Codable {
        case storageFull = "storage_full"
        case pausedByUser = "paused_by_user"
        case serverUnavailable = "server_unavailable"
        case serverAway = "server_away"
        case signInRefused = "sign_in_refused"
        case awaitingValidation = "awaiting_validation"
        case probeOff = "probe_off"
        case evicted
        case monitorLetGo = "monitor_removed"
        case heldByCap = "held_by_cap"
        case orphaned
        case fileChanged = "file_changed"
        case localFileVanished = "local_file_vanished"
        case damagedBytes = "damaged_bytes"
        case fetchingSideAssets = "fetching_side_assets"
        case preparingCopy = "preparing_copy"
        case liveStream = "live_stream"
        case sizeUnknown = "size_unknown"
        case serverRemoved = "server_removed"
        case indexUpgraded = "index_upgraded"
        case daemonNotRunning = "daemon_not_running"
        /// A failed try the fill comes back to by itself.
        case retrying
        /// The completion check could not prove the file plays (the file is kept).
        case checkInconclusive = "check_inconclusive"
        /// Anything else on a failed file: the sentence says what.
        case failed
        /// Anything else.
        case other
    }

    /// Sentences by their opening words, most specific first.
    static let openings: [(String, Code)] = [
        (storageFull, .storageFull), (pausedByUser, .pausedByUser), (serverUnavailable, .serverUnavailable),
        (awaitingValidation, .awaitingValidation), (probeOff, .probeOff), (evicted, .evicted), (monitorLetGo, .monitorLetGo), (heldByCap, .heldByCap),
        ("orphaned:", .orphaned),
        ("file changed on the server", .fileChanged), ("the file keeps changing", .fileChanged),
        (localFileVanished, .localFileVanished), (damagedBytes, .damagedBytes), (fetchingSideAssets, .fetchingSideAssets),
        ("the server is preparing the copy", .preparingCopy), ("the live stream", .liveStream), ("size unknown", .sizeUnknown),
        (serverRemovedOpening, .serverRemoved), (indexUpgradedOpening, .indexUpgraded), (daemonNotRunning, .daemonNotRunning),
        ("server offline", .serverAway), ("server auth-failed", .serverAway)
    ]

    /// The code of `reason` on a file in `state` (a paused file's `cause` says it, when known);
    /// nil when there is no reason.
    public static func code(_ reason: String?, state: DisplayState, cause: PauseCause? = nil) -> Code? {
        if state == .paused, let cause { return cause.code }
        guard let reason, !reason.isEmpty else { return nil }
        if let hit = openings.first(where: { reason.hasPrefix($0.0) }) { return hit.1 }
        if reason.contains("no longer accepts the stored sign-in") { return .signInRefused }
        if reason.contains("; resuming from byte ") { return .retrying }
        switch state {
        case .failed: return .failed
        case .unverified: return .checkInconclusive
        default: return .other
        }
    }

    /// The stored reason a `code` and its `sentence` were made from (`sentence`'s inverse): the
    /// reasons kept as codes come back as such, every other is its sentence.
    public static func stored(code: Code?, sentence text: String?) -> String? {
        guard let text else { return nil }
        for kept in [storageFull, awaitingValidation] where code == StatusReason.code(kept, state: .paused) && text == sentence(kept) {
            return kept
        }
        return text
    }

    /// What `status` prints for `reason`: the sentence itself, or one for a reason kept as a code.
    public static func sentence(_ reason: String?) -> String? {
        switch reason {
        case storageFull?: return "the cache's disk is full; free space, then `labstream resume`"
        case awaitingValidation?: return "all bytes present; waiting for the playback check"
        case "", nil: return nil
        default: return reason
        }
    }
}
