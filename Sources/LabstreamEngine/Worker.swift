import Foundation
import LabstreamBackends
import LabstreamCore
import LabstreamStore
import Synchronization

/// A named thread that sleeps until woken, or until the deadline its last pass asked for, and
/// then runs one pass. Off Swift's cooperative pool: a pass may block on the network or on mpv.
final class Worker: @unchecked Sendable {
    let name: String
    let condition = NSCondition()
    // Guarded by `condition`.
    var woken = true  // the first pass runs at start
    var running = false
    /// The reasons the wakes since the last pass named (`wake(for:)`).
    var reasons: Set<String> = []
    /// Passes run so far, and how many of them ran for each reason a wake named.
    var passes = 0
    var ranFor: [String: Int] = [:]

    init(name: String) { self.name = name }

    /// `reason`: a code the next pass is counted under (`record`), so whoever woke the worker
    /// can tell that a pass ran because of it, without guessing how long one takes.
    func wake(for reason: String? = nil) {
        condition.lock()
        woken = true
        if let reason { reasons.insert(reason) }
        condition.broadcast()
        condition.unlock()
    }

    /// Passes started so far, and of them how many ran for each named reason.
    func record() -> (passes: Int, ranFor: [String: Int]) {
        condition.lock()
        defer { condition.unlock() }
        return (passes, ranFor)
    }

    /// `pass(woken)` runs once per wake-up (`woken` is false when a deadline fired) and returns
    /// when it wants to run again without being woken.
    func start(_ pass: @escaping @Sendable (Bool) -> Date?) {
        condition.lock()
        defer { condition.unlock() }
        guard !running else { return }
        running = true
        let thread = Thread { [self] in
            var deadline: Date?
            while true {
                condition.lock()
                while running && !woken {
                    if let d = deadline {
                        if !condition.wait(until: d) { break }
                    } else {
                        condition.wait()
                    }
                }
                let (keepGoing, wasWoken) = (running, woken)
                woken = false
                if keepGoing {
                    passes += 1
                    for reason in reasons { ranFor[reason, default: 0] += 1 }
                }
                reasons = []
                condition.unlock()
                guard keepGoing else { return }
                deadline = pass(wasWoken)
            }
        }
        thread.name = name
        thread.start()
    }

    func stop() {
        condition.lock()
        running = false
        condition.broadcast()
        condition.unlock()
    }
}
