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
        /// `labstream verify`: check a whole file again.
        case recheck
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
        // Until the new verdict it is not known to play: it shows as such, never `complete`.
        case (.complete, .recheck), (.unverified, .recheck), (.failed, .recheck): return .unverified
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
