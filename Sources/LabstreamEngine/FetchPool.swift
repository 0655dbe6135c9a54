import Foundation

/// The threads range fetches run on: at most `size` fetches at once (`fetch_threads`), however
/// many files are read and filled. Each of the pool's threads has a `Lane` of its own for its
/// fetch's checkpoints (the syncs and commits that follow a body), so a fetch never waits for
/// another's disk and the two threads of a fetch are taken together or not at all. Submitting
/// never blocks: a FUSE thread or a task of Swift's cooperative pool only queues the fetch (a
/// reader's goes before the fill's). Threads start on demand and end after `idleTimeout` with no
/// work, or once the engine stopped (`close`), so an engine that fetches nothing holds none.
/// `condition` guards every `var`.
final class FetchPool: @unchecked Sendable {
    typealias Job = @Sendable (Lane) -> Void

    let size: Int
    let idleTimeout: Double
    let condition = NSCondition()
    var foreground: [Job] = []
    var background: [Job] = []
    /// Work below the fill (the next episode's prefetch): taken only when no read or fill waits
    /// and a thread of the pool would still be left for one arriving.
    var spare: [Job] = []
    var threads = 0
    var idle = 0
    var closed = false

    init(size: Int, idleTimeout: Double = 10) {
        precondition(size > 0, "a fetch pool needs a thread")
        self.size = size
        self.idleTimeout = idleTimeout
    }

    /// Queues `job`; it runs on one of the pool's threads with that thread's lane.
    func submit(background isBackground: Bool, _ job: @escaping Job) {
        condition.lock()
        defer { condition.unlock() }
        if isBackground { background.append(job) } else { foreground.append(job) }
        condition.signal()
        // A thread for each queued fetch no idle thread will take, up to the pool's size.
        if foreground.count + background.count > idle && threads < size {
            threads += 1
            let thread = Thread { [self] in work() }
            thread.name = "fetch"
            thread.start()
        }
    }

    /// Queues `job` below every read and fill (`spare`).
    func submitSpare(_ job: @escaping Job) {
        condition.lock()
        defer { condition.unlock() }
        spare.append(job)
        condition.signal()
        if idle == 0 && threads < size - 1 {
            threads += 1
            let thread = Thread { [self] in work() }
            thread.name = "fetch"
            thread.start()
        }
    }

    /// Whether a spare job may start now (call with `condition` held, from a thread of the pool
    /// that is not counted idle): nothing else waits, and a thread is left for what comes.
    private var spareMayRun: Bool { !spare.isEmpty && threads - idle < size }

    /// Idle threads end now, busy ones once the queue is empty; a fetch queued later still runs
    /// (and puts nothing on the wire: the engine is stopping).
    func close() {
        condition.withLock {
            closed = true
            condition.broadcast()
        }
    }

    /// Fetches queued and not started yet (a test's view).
    var queued: Int { condition.withLock { foreground.count + background.count + spare.count } }

    private func next() -> Job? {
        condition.lock()
        defer { condition.unlock() }
        let deadline = Date().addingTimeInterval(idleTimeout)
        while foreground.isEmpty && background.isEmpty && !spareMayRun {
            idle += 1
            let woken = !closed && condition.wait(until: deadline)
            idle -= 1
            if !woken && foreground.isEmpty && background.isEmpty && !spareMayRun {
                threads -= 1
                return nil
            }
        }
        if !foreground.isEmpty { return foreground.removeFirst() }
        return background.isEmpty ? spare.removeFirst() : background.removeFirst()
    }

    private func work() {
        let lane = Lane(name: "checkpoint")
        defer { lane.close() }
        while let job = next() { job(lane) }
    }
}

/// One thread that runs what it is given, in order: a fetch's checkpoint committer.
final class Lane: @unchecked Sendable {
    let condition = NSCondition()
    var jobs: [@Sendable () -> Void] = []
    var closed = false

    init(name: String) {
        let thread = Thread { [self] in
            while let job = take() { job() }
        }
        thread.name = name
        thread.start()
    }

    func run(_ job: @escaping @Sendable () -> Void) {
        condition.withLock {
            jobs.append(job)
            condition.signal()
        }
    }

    /// Ends the thread once what was given to it has run.
    func close() {
        condition.withLock {
            closed = true
            condition.signal()
        }
    }

    private func take() -> (@Sendable () -> Void)? {
        condition.lock()
        defer { condition.unlock() }
        while jobs.isEmpty && !closed { condition.wait() }
        return jobs.isEmpty ? nil : jobs.removeFirst()
    }
}
