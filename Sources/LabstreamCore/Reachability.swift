/// Whether a server answers, and when to ask it again. Pure.
public enum Reachability: String, Sendable, Hashable {
    case online
    case offline
    case authFailed = "auth-failed"
}

public struct ReachabilityPolicy: Sendable, Hashable {
    public var firstRetry: Double
    public var maxRetry: Double

    public init(firstRetry: Double = 1, maxRetry: Double = 60) {
        self.firstRetry = firstRetry
        self.maxRetry = maxRetry
    }

    /// Seconds until the next probe of a server that has failed `failures` probes in a row.
    public func nextProbe(after failures: Int) -> Double {
        guard failures > 0 else { return maxRetry }
        return Backoff.doubled(firstRetry, steps: failures - 1, cap: maxRetry)
    }

    /// The state a probe result leads to.
    public static func state(probeStatus: Int?, authStatus: Int?) -> Reachability {
        guard let probeStatus, probeStatus == 200 else { return .offline }
        if let authStatus, authStatus == 401 || authStatus == 403 { return .authFailed }
        return .online
    }
}
