/// When to try a failed transfer again. Pure: the clock and the random source are parameters,
/// so the schedule is tested exactly without sleeping.
public struct RetryPolicy: Sendable, Hashable {
    public var maxAttempts: Int
    public var baseDelay: Double
    public var maxDelay: Double
    /// `Retry-After` is honoured up to this many seconds.
    public var maxRetryAfter: Double

    public init(maxAttempts: Int = 3, baseDelay: Double = 1, maxDelay: Double = 60, maxRetryAfter: Double = 86_400) {
        self.maxAttempts = maxAttempts
        self.baseDelay = baseDelay
        self.maxDelay = maxDelay
        self.maxRetryAfter = maxRetryAfter
    }

    public enum Failure: Sendable, Hashable {
        case status(Int, retryAfter: String?)
        /// Connection refused, reset, dropped mid-body, timed out.
        case transientTransport
        /// The server stopped sending for the stall timeout (`fetch_timeout`): it is up, but
        /// its answer stopped (mid-body, or before it began).
        case stall
        /// The response failed the range checks (wrong Content-Range, 200 for a range, …).
        case validation
        case localFile
    }

    public enum Decision: Sendable, Hashable {
        case retry(after: Double)
        case giveUp
    }

    public static let retriedStatuses: Set<Int> = [408, 429, 500, 502, 503, 504]

    /// Whether the failure may pass by itself (a server restarting or busy, a dropped
    /// connection), as opposed to one that trying again cannot change.
    public static func isTransient(_ failure: Failure) -> Bool {
        switch failure {
        case .validation, .localFile: return false
        case .status(let code, _): return retriedStatuses.contains(code)
        case .transientTransport, .stall: return true
        }
    }

    /// `failures` counts the failures so far including this one. `persistent`: a transient
    /// failure is retried however many came before (a pinned download waits for its server
    /// with capped backoff; only a permanent failure ends it).
    public func decide(_ failure: Failure, failures: Int, now: Double, random: Double, persistent: Bool = false) -> Decision {
        guard Self.isTransient(failure) else { return .giveUp }
        guard persistent || failures < maxAttempts else { return .giveUp }
        if case .status(_, let header?) = failure, let wait = Self.retryAfter(header, now: now) {
            return .retry(after: min(max(wait, 0), maxRetryAfter))
        }
        let exponential = Backoff.doubled(baseDelay, steps: failures - 1, cap: maxDelay)
        // Jitter between half and all of the delay keeps many clients from retrying in step.
        return .retry(after: exponential * (0.5 + 0.5 * min(max(random, 0), 1)))
    }

    /// `Retry-After: 120` or `Retry-After: Wed, 21 Oct 2015 07:28:00 GMT`, as seconds from `now`.
    public static func retryAfter(_ header: String, now: Double) -> Double? {
        let h = header.trimmingSpaces
        if let seconds = Double(h), seconds >= 0 { return seconds }
        guard let date = HTTPDate.epochSeconds(h) else { return nil }
        return Double(date) - now
    }
}

/// IMF-fixdate (`Sun, 06 Nov 1994 08:49:37 GMT`), the form HTTP uses.
public enum HTTPDate {
    static let months = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]

    public static func epochSeconds(_ text: String) -> Int64? {
        let parts = text.split(separator: " ")
        guard parts.count == 6, parts[5] == "GMT", let day = Int(parts[1]), let year = Int(parts[3]),
            let month = months.firstIndex(of: String(parts[2]))
        else { return nil }
        let time = parts[4].split(separator: ":").compactMap { Int($0) }
        guard time.count == 3 else { return nil }
        let iso = "\(year)-\(month < 9 ? "0" : "")\(month + 1)-\(day < 10 ? "0" : "")\(day)T\(parts[4])Z"
        return ISODate.epochSeconds(iso)
    }
}
