/// Persisted per-file download status: the seed's serialized states plus `partial` for a file
/// that holds on-demand bytes but was never queued for a full copy.
public enum DownloadStatus: String, Sendable, Hashable, Codable, CaseIterable {
    case partial, queued, preparing, downloading, paused, failed, complete, unverified

    public enum Event: Sendable, Hashable {
        case bytesCommitted
        case enqueued
        case transferStarted
        case interrupted
        case failedPermanently
        case allBytesPresent
        case validated(playable: Bool?)
        case retry
    }

    /// The status after `event`, or nil when the event is not allowed from here.
    public func after(_ event: Event) -> DownloadStatus? {
        switch (self, event) {
        case (.partial, .bytesCommitted): return .partial
        case (.partial, .enqueued): return .queued
        case (.partial, .allBytesPresent), (.queued, .allBytesPresent), (.downloading, .allBytesPresent),
             (.paused, .allBytesPresent), (.failed, .allBytesPresent):
            // Retained but not yet proven playable: validation picks it up from here.
            return .unverified
        case (.queued, .transferStarted), (.preparing, .transferStarted): return .downloading
        case (.queued, .bytesCommitted), (.downloading, .bytesCommitted), (.paused, .bytesCommitted),
             (.failed, .bytesCommitted): return self
        case (.downloading, .interrupted), (.preparing, .interrupted), (.queued, .interrupted): return .paused
        case (.downloading, .failedPermanently), (.preparing, .failedPermanently): return .failed
        case (.paused, .retry), (.failed, .retry): return .queued
        case (.unverified, .validated(let playable)), (.downloading, .validated(let playable)):
            switch playable {
            case true?: return .complete
            case false?: return .failed
            case nil: return .unverified
            }
        case (.complete, .bytesCommitted), (.unverified, .bytesCommitted): return self
        default: return nil
        }
    }
}

/// What a user can ask of a file's download.
public enum QueueAction: String, Sendable, Hashable, CaseIterable {
    case pause, resume, retry, cancel, verify
}

/// What `ls`, xattrs and `labstream status` show for a file.
public enum DisplayState: String, Sendable, Hashable, Codable {
    case notLocal = "not-local"
    case partial, queued, preparing, downloading, paused, failed, complete, unverified

    public init(status: DownloadStatus?) {
        guard let status else { self = .notLocal; return }
        self = DisplayState(rawValue: status.rawValue) ?? .partial
    }
}

public enum StatusReason {
    /// An `unverified` row whose completion check has not run yet.
    public static let awaitingValidation = "all bytes present; awaiting validation"
    /// An `unverified` row on a daemon whose playback probe is off.
    public static let probeOff = "all bytes present; the playback probe is off"
    /// A pinned file parked until its server answers again (the fill resumes it by itself).
    public static let serverUnavailable = "server unavailable"
    /// A file parked because the cache's disk cannot hold the rest of it.
    public static let storageFull = "storage_full"
    /// A file `labstream pause` stopped.
    public static let pausedByUser = "paused by user"

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

    /// A server that no longer accepts the stored sign-in (its files fail until it is added again).
    public static func signInRefused(server: String) -> String {
        "\(server) no longer accepts the stored sign-in (HTTP 401); add the server again with `labstream server add`"
    }

    /// Whether a pause for `reason` lifts by itself (the background fill resumes such a file once
    /// its server answers); every other pause waits for the user.
    public static func liftsByItself(_ reason: String?) -> Bool { reason == serverUnavailable }
}
