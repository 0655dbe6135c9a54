import Foundation
import LabstreamBackends
import LabstreamCore
import LabstreamEngine
import Synchronization

/// Each server's event channel, on a thread of its own (never Swift's cooperative pool: it
/// blocks on the socket): what the server tells is applied at once by an incremental sync
/// through the scheduler (so its monitors act on it, as after any sync); a lost channel is
/// opened again with backoff, and says so in the log and in the mount's
/// `user.labstream.events.SERVER`. The periodic refresh runs beside it as the fallback.
final class EventChannels: Sendable {
    let scheduler: SyncScheduler
    let transfers: TransferEngine
    let log: Logger
    let open: EventStreamOpener
    private let workers = Mutex<[String: Worker]>([:])
    /// Servers whose kind offers no channel Labstream reads.
    private let without = Mutex<Set<String>>([])

    init(scheduler: SyncScheduler, transfers: TransferEngine, log: Logger, open: @escaping EventStreamOpener) {
        self.scheduler = scheduler
        self.transfers = transfers
        self.log = log
        self.open = open
    }

    /// One server's channel and the thread that serves it.
    final class Worker: Sendable {
        let server: String
        let stopping = Atomic<Bool>(false)
        let stream = Mutex<(any EventStream)?>(nil)
        let state = Mutex<EventChannelState>(.connecting)
        /// Signalled to cut a backoff short (stop).
        let wake = DispatchSemaphore(value: 0)
        /// Signalled when the thread has finished.
        let done = DispatchSemaphore(value: 0)

        init(server: String) { self.server = server }

        func stop() {
            stopping.store(true, ordering: .sequentiallyConsistent)
            stream.withLock { $0?.interrupt() }
            wake.signal()
        }
    }

    /// Follows `names`, the servers mounted now: opens a channel for each new one that offers
    /// one, and closes those of servers no longer among them (removed), waiting for each to end.
    func follow(_ names: [String]) {
        let wanted = Set(names)
        let gone = workers.withLock { w -> [Worker] in
            let out = w.values.filter { !wanted.contains($0.server) }
            for worker in out { w[worker.server] = nil }
            return out
        }
        without.withLock { $0.formIntersection(wanted) }
        end(gone)
        for name in names.sorted() {
            guard workers.withLock({ $0[name] == nil }), !without.withLock({ $0.contains(name) }) else { continue }
            guard let source = transfers.backend(for: name) as? any ServerEventSource else {
                without.withLock { _ = $0.insert(name) }
                continue
            }
            let worker = Worker(server: name)
            workers.withLock { $0[name] = worker }
            let thread = Thread { [self] in
                run(worker, source)
                worker.done.signal()
            }
            thread.name = "events-\(name)"
            thread.start()
        }
    }

    /// Closes every channel and waits for their threads (unmount).
    func stopAll() {
        let all = workers.withLock { w -> [Worker] in
            defer { w.removeAll() }
            return Array(w.values)
        }
        end(all)
    }

    private func end(_ gone: [Worker]) {
        for worker in gone { worker.stop() }
        for worker in gone {
            worker.done.wait()
            log.info("events \(worker.server): channel closed")
        }
    }

    /// Where each server's channel stands (`none` for a server whose kind offers none).
    func states() -> [String: EventChannelState] {
        var out = workers.withLock { $0.mapValues { $0.state.withLock { $0 } } }
        for name in without.withLock({ $0 }) { out[name] = EventChannelState.none }
        return out
    }

    private func run(_ worker: Worker, _ source: any ServerEventSource) {
        let server = worker.server
        var machine = EventChannel()
        let channel = source.eventChannel()
        // The address without its query (Emby's carries the token).
        let address = channel.request.redactedDescription.dropFirst(channel.request.method.count + 1)
        func now() -> Int64 { Int64(Date().timeIntervalSince1970) }
        func publish() { worker.state.withLock { $0 = machine.state } }
        while !worker.stopping.load(ordering: .sequentiallyConsistent) {
            let current = worker.stream.withLock { s -> any EventStream in
                if s == nil { s = open(channel) }
                return s!
            }
            if worker.stopping.load(ordering: .sequentiallyConsistent) { break }
            publish()
            var actions: [EventChannel.Action] = []
            let wait = min(machine.untilKeepAlive(now: now()) ?? 30, 30)
            switch current.receive(within: max(wait, 0.05)) {
            case .opened:
                actions = machine.opened(now: now())
                log.info("events \(server): channel open at \(address); changes apply as the server tells them")
            case .messages(let messages):
                for message in messages { actions += machine.received(source.event(from: message), now: now()) }
                actions += machine.takeSync()
            case .idle:
                actions = machine.tick(now: now())
            case .closed(let why):
                current.close()
                worker.stream.withLock { $0 = nil }
                if worker.stopping.load(ordering: .sequentiallyConsistent) { break }
                actions = machine.lost(why: why, now: now())
            }
            publish()
            for action in actions {
                switch action {
                case .sync:
                    log.info("events \(server): the server told of changes; syncing what changed")
                    scheduler.sync([server], .event)
                case .keepAlive:
                    if let message = channel.keepAlive { current.send(message) }
                case .reconnect(let delay):
                    if case .lost(let failures, _, let why) = machine.state {
                        let line =
                            "events \(server): channel lost (\(why)); opening it again in \(Int(delay.rounded(.up))) s"
                            + " (the periodic refresh still runs)"
                        if failures <= 1 { log.warn(line) } else { log.info(line + ", failure \(failures) in a row") }
                    }
                    _ = worker.wake.wait(timeout: .now() + delay)  // a backoff, cut short by stop
                    if !worker.stopping.load(ordering: .sequentiallyConsistent) { _ = machine.retryDue() }
                case .connect:
                    break  // the loop opens a stream when there is none
                }
            }
        }
        worker.stream.withLock {
            $0?.close()
            $0 = nil
        }
    }
}
