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

    init(name: String) { self.name = name }

    func wake() {
        condition.lock()
        woken = true
        condition.broadcast()
        condition.unlock()
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
