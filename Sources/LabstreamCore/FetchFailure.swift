/// A fetch that did not bring its bytes, classified once for every fetch path (ranged
/// segments, open-ended fills, live copies): what the reader and the status see, what the
/// retry policy judges, and what the engine does about it.
public struct FetchFailure: Error, Sendable, Equatable {
    public var error: LabstreamError
    public var kind: RetryPolicy.Failure
    /// A 200 to a ranged request from past byte 0: not a failure of the bytes asked for, a
    /// sign the server ignores `Range`.
    public var rangeIgnored: Bool

    public init(error: LabstreamError, kind: RetryPolicy.Failure, rangeIgnored: Bool = false) {
        self.error = error
        self.kind = kind
        self.rangeIgnored = rangeIgnored
    }

    /// What the engine does about a failure.
    public enum Class: Sendable, Hashable {
        /// Try again after the retry policy's delay (forever for a pinned file).
        case transient
        /// The server stopped sending for `fetch_timeout`: a pinned file tries again like a
        /// transient failure, but a reader has waited its timeout and fails with EIO now
        /// (labstream.conf(5)), as does a reader asking for those bytes right after
        /// (`echoesToReaders`).
        case stalled
        /// The server's file is another version now: start over as a new attempt.
        case changedVersion
        /// The local disk is full: park the file until there is room (never blame the server).
        case diskFull
        /// The server no longer accepts the stored sign-in: park the file until it does (the
        /// user signs in again); nothing is failed or deleted for it.
        case signedOut
        /// Asking again cannot help: the file fails with the reason.
        case permanent
    }

    public var `class`: Class {
        switch error {
        case .remoteChanged: return .changedVersion
        case .noSpace, .overBudget: return .diskFull
        case .authenticationFailed: return .signedOut
        default:
            if kind == .stall { return .stalled }
            return RetryPolicy.isTransient(kind) ? .transient : .permanent
        }
    }

    /// How long a stall stays the answer to reads of its bytes. The kernel asks again at once
    /// for the page of a read-ahead that failed, and one stall must not cost the reader behind
    /// it `fetch_timeout` twice; a reader coming later starts a new fetch.
    public static let stallEcho: Double = 1

    /// Whether a reader arriving `age` seconds after this failure of its bytes fails with it at
    /// once instead of fetching them again.
    public func echoesToReaders(age: Double) -> Bool { `class` == .stalled && age >= 0 && age < Self.stallEcho }

    /// What a whole-file path (an open-ended fill, a live copy) does after a failed try: a full
    /// disk or a refused sign-in parks the file until that is mended (nothing is failed for it,
    /// no retry is counted); anything else is retried while `retry` (the retry policy, asked only
    /// then) says so, and fails with the reason after.
    public enum Step: Sendable, Hashable {
        case retry
        case park(PauseCause)
        case fail
    }

    public func step(retry: () -> Bool) -> Step {
        switch `class` {
        case .diskFull: return .park(.storageFull)
        case .signedOut: return .park(.signInRefused)
        case .transient, .stalled, .changedVersion, .permanent: return retry() ? .retry : .fail
        }
    }

    /// The transport gave up (refused, reset, stalled, timed out): worth another try.
    public static func transport(_ error: LabstreamError) -> FetchFailure { FetchFailure(error: error, kind: .transientTransport) }

    /// The server stopped sending for the stall timeout.
    public static func stall(_ error: LabstreamError) -> FetchFailure { FetchFailure(error: error, kind: .stall) }

    /// Writing or syncing the bytes here failed.
    public static func local(_ error: LabstreamError) -> FetchFailure { FetchFailure(error: error, kind: .localFile) }

    /// The body ended before its bytes did.
    public static func cutShort(_ what: String) -> FetchFailure { transport(.fetchFailed(what)) }

    /// A ranged answer that the range checks did not accept, or that answered another status.
    /// nil for an accepted answer (the caller checks its length). 401 is the caller's: the
    /// sign-in is checked before it counts as a failure.
    public static func answer(_ verdict: RangeResponsePolicy.Verdict, status: Int, retryAfter: String?) -> FetchFailure? {
        switch verdict {
        case .accept, .acceptPrefix: return nil
        case .remoteChanged(let why): return FetchFailure(error: .remoteChanged(why), kind: .validation)
        case .restart(let why): return FetchFailure(error: .remoteChanged(why), kind: .validation, rangeIgnored: true)
        case .reject(let why):
            guard RetryPolicy.retriedStatuses.contains(status) else { return FetchFailure(error: .fetchFailed(why), kind: .validation) }
            return FetchFailure(error: .serverUnavailable("HTTP \(status)"), kind: .status(status, retryAfter: retryAfter))
        }
    }

    /// A live stream that answered `status` instead of 200, said as what failed: a 404 is a
    /// file the server has no stream for (not a server that is down), a 5xx its transcoder.
    public static func stream(status: Int) -> FetchFailure {
        let error: LabstreamError
        switch status {
        case 401, 403: error = .authenticationFailed("the live stream answered HTTP \(status)")
        case 404, 410:
            error = .fetchFailed(
                "the server has no live stream for this file (HTTP \(status)): it was removed from the server or cannot be transcoded there; "
                    + "run `labstream sync`, or pin the original")
        case 500..<600 where status != 503: error = .fetchFailed("the server could not make the stream (HTTP \(status)); its own log says why")
        default: error = .answered(status, to: "the live stream", body: [])
        }
        // A refused sign-in is not worth a retry by itself.
        return FetchFailure(error: error, kind: [401, 403].contains(status) ? .localFile : .status(status, retryAfter: nil))
    }
}
