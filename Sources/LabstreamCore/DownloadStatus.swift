/// Persisted per-file download status. The raw values are what the index stores, not display
/// phases: renaming one changes how an old index reads. `partial` is a file that holds on-demand
/// bytes but was never queued for a full copy.
public enum DownloadStatus: String, Sendable, Hashable, Codable, CaseIterable {
    case partial, queued, preparing, downloading, paused, failed, complete, unverified

    public enum Event: Sendable, Hashable {
        case bytesCommitted
        /// Pinned: the background fill is to copy the rest.
        case enqueued
        /// Unpinned while still waiting for the fill: back to what readers left.
        case unpinned
        /// A new attempt (`DownloadRow.nextAttempt`): the old bytes are gone; a pinned file waits
        /// for the fill, any other for its next reader. Allowed from every status.
        case restarted(pinned: Bool)
        /// Bytes of a pinned file are on their way (a fill or a prepared copy's stream).
        case transferStarted
        /// Files ahead of it in the queue took the fill's slots: it plans no more segments until
        /// its turn comes again (those on the wire still land).
        case yielded
        /// The user's pause (its cause: `.user`).
        case interrupted
        /// Parked by what happened to it: a full disk, its server gone away.
        case parked(PauseCause)
        case failedPermanently
        /// A transient failure: the next try is scheduled.
        case willRetry
        /// The server makes a copy ahead of time; bytes flow once it is ready. `queued`: the
        /// copy waits its turn in the server's queue (shown `queued`), else the server works on
        /// it (`preparing`).
        case preparationStarted(queued: Bool)
        case allBytesPresent
        case validated(playable: Bool?)
        /// The user's `retry` or `resume`.
        case retry
        /// `labstream verify`: check a whole file again.
        case recheck
        /// Bytes of a whole file failed their digest: they are fetched again (`pinned` says
        /// whether by the fill or by the next reader).
        case bytesDropped(pinned: Bool)
    }

    /// The status after `event`, or nil when the event is not allowed from here. Every status
    /// change of a row goes through this table (`DownloadRow.apply`).
    public func after(_ event: Event) -> DownloadStatus? {
        switch (self, event) {
        case (_, .restarted(let pinned)): return pinned ? .queued : .partial
        case (.partial, .bytesCommitted): return .partial
        case (.partial, .enqueued), (.paused, .enqueued), (.failed, .enqueued): return .queued
        case (.queued, .unpinned), (.downloading, .unpinned), (.paused, .unpinned), (.failed, .unpinned),
            (.preparing, .unpinned):
            return .partial
        case (.partial, .allBytesPresent), (.queued, .allBytesPresent), (.downloading, .allBytesPresent),
            (.paused, .allBytesPresent), (.failed, .allBytesPresent):
            // Retained but not yet proven playable: validation picks it up from here.
            return .unverified
        // Paused for a server that was away: the fill takes it up again once it answers.
        case (.queued, .transferStarted), (.preparing, .transferStarted), (.downloading, .transferStarted),
            (.paused, .transferStarted), (.partial, .transferStarted):
            return .downloading
        case (.queued, .bytesCommitted), (.downloading, .bytesCommitted), (.paused, .bytesCommitted),
            (.failed, .bytesCommitted):
            return self
        case (.downloading, .yielded): return .queued
        case (.downloading, .interrupted), (.preparing, .interrupted), (.queued, .interrupted): return .paused
        // A paused file may be parked again for another cause; a reader's partial file meets a full disk.
        case (.downloading, .parked), (.preparing, .parked), (.queued, .parked), (.paused, .parked), (.partial, .parked): return .paused
        case (.downloading, .failedPermanently), (.preparing, .failedPermanently), (.queued, .failedPermanently),
            (.paused, .failedPermanently), (.partial, .failedPermanently):
            return .failed
        case (.downloading, .willRetry), (.preparing, .willRetry), (.queued, .willRetry), (.paused, .willRetry),
            (.partial, .willRetry):
            return .queued
        case (.queued, .preparationStarted(let queued)), (.preparing, .preparationStarted(let queued)),
            (.downloading, .preparationStarted(let queued)):
            return queued ? .queued : .preparing
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
        case (.complete, .bytesDropped(let pinned)), (.unverified, .bytesDropped(let pinned)): return pinned ? .queued : .partial
        default: return nil
        }
    }
}

extension DownloadRow {
    /// Moves the row's status by `event` through the transition table; false (and nothing
    /// changed) when the event does not apply from where the row is. A pause records its cause;
    /// leaving `paused` forgets it.
    @discardableResult
    public mutating func apply(_ event: DownloadStatus.Event) -> Bool {
        guard let next = status.after(event) else { return false }
        status = next
        switch event {
        case _ where next != .paused: pauseCause = nil
        case .interrupted: pauseCause = .user
        case .parked(let cause): pauseCause = cause
        default: break
        }
        return true
    }

    /// Parks the row for `cause` with the sentence that says so; false when it cannot be parked
    /// from where it is.
    @discardableResult
    public mutating func park(_ cause: PauseCause) -> Bool {
        guard apply(.parked(cause)) else { return false }
        reason = cause.reason(server: key.server)
        return true
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
