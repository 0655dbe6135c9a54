import Foundation
import LabstreamBackends
import LabstreamCore
import LabstreamStore
import Synchronization

/// The engine's change counter: bumped whenever a download row changes, so a follower
/// (`status`, `pin --wait`, tests) waits for the next change instead of polling.
final class Changes: @unchecked Sendable {
    let condition = NSCondition()
    var count = 0  // guarded by `condition`

    var current: Int { condition.withLock { count } }

    func bump() {
        condition.lock()
        count += 1
        condition.broadcast()
        condition.unlock()
    }

    func wait(after seen: Int, timeout: Double) -> Int {
        let deadline = Date().addingTimeInterval(timeout)
        condition.lock()
        defer { condition.unlock() }
        while count <= seen && condition.wait(until: deadline) {}
        return count
    }
}
