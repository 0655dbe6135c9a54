import Foundation
import LabstreamBackends
import LabstreamCore
import LabstreamStore
import Synchronization

/// Per-server reachability, re-probed with backoff while a server is not online.
final class ServerHealth: Sendable {
    struct Entry {
        var state: Reachability
        var failures: Int
        var nextProbe: Date
    }

    let entries = Mutex<[String: Entry]>([:])
    let worker = Worker(name: "server-health")
    let lastReaderProbe = Mutex(Date.distantPast)
    let policy = ReachabilityPolicy()

    func state(of server: String) -> Reachability { entries.withLock { $0[server]?.state ?? .online } }

    /// Returns true when the state changed.
    @discardableResult
    func mark(_ server: String, _ state: Reachability) -> Bool {
        let old = entries.withLock { e -> Reachability in
            let old = e[server]?.state ?? .online
            if state == .online {
                e[server] = nil
            } else {
                let failures = (e[server]?.failures ?? 0) + 1
                e[server] = Entry(state: state, failures: failures, nextProbe: Date().addingTimeInterval(policy.nextProbe(after: failures)))
            }
            return old
        }
        if state != .online { worker.wake() }
        return old != state
    }

    /// `server` is asked at once whether it answers (new credentials were loaded for it).
    func probeSoon(_ server: String) {
        let due = entries.withLock { e -> Bool in
            guard e[server] != nil else { return false }
            e[server]?.nextProbe = Date()
            return true
        }
        if due { worker.wake() }
    }

    func wake() { worker.wake() }
    func stop() { worker.stop() }

    func start(_ engine: any HealthHost) {
        worker.start { [self] woken in
            // A waiting reader may ask for a probe, but at most once a second.
            let now = Date()
            let readerAsked =
                woken
                && lastReaderProbe.withLock { last in
                    guard now.timeIntervalSince(last) >= 1 else { return false }
                    last = now
                    return true
                }
            let due = entries.withLock { $0.filter { $0.value.nextProbe <= now || readerAsked }.map(\.key) }
            for server in due {
                guard let backend = engine.backend(for: server) else { continue }
                let state = backend.checkReachability()
                if mark(server, state) {
                    engine.log("server \(server) is \(state.rawValue)")
                    if state == .online { engine.answersAgain(server) }
                    engine.noteChange()
                }
            }
            return entries.withLock { $0.values.map(\.nextProbe).min() }
        }
    }
}

/// All server health may ask of the transfer engine.
protocol HealthHost: AnyObject, Sendable {
    var log: @Sendable (String) -> Void { get }
    func backend(for server: String) -> (any MediaBackend)?
    /// A server's reachability changed (status shows it).
    func noteChange()
    /// `server` answers again: its files fill, its monitors are evaluated, the daemon is told.
    func answersAgain(_ server: String)
}

extension TransferEngine: HealthHost {
    func answersAgain(_ server: String) {
        filler.wake()
        monitors.schedule([server])
        tell(.serverOnline(server))
    }
}
