import Foundation
import LabstreamCore
import Synchronization

/// Retry state of whole-body fetches (live copies, open-ended fills), per file: how many
/// failed in a row and when the next may start. The decision itself is `RetryPolicy`'s.
final class StreamRetries: Sendable {
    let state = Mutex<[FileKey: (failures: Int, retryAt: Date)]>([:])

    /// When `key` may try again, if that is still ahead.
    func wait(_ key: FileKey) -> Date? {
        state.withLock { $0[key]?.retryAt }.flatMap { $0 > Date() ? $0 : nil }
    }

    func succeeded(_ key: FileKey) { state.withLock { _ = $0.removeValue(forKey: key) } }

    /// Counts a failure of `key` and asks `policy` what now; a retry is scheduled, a give-up
    /// forgets the count.
    func failed(_ key: FileKey, _ kind: RetryPolicy.Failure, policy: RetryPolicy) -> RetryPolicy.Decision {
        state.withLock { s in
            let failures = (s[key]?.failures ?? 0) + 1
            let decision = policy.decide(kind, failures: failures, now: Date().timeIntervalSince1970, random: Double.random(in: 0...1))
            switch decision {
            case .retry(let after): s[key] = (failures, Date().addingTimeInterval(after))
            case .giveUp: s.removeValue(forKey: key)
            }
            return decision
        }
    }
}
