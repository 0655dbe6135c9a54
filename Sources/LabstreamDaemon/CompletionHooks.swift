import CLinux
import Foundation
import LabstreamCore
import LabstreamEngine

/// Runs labstream.conf's `on_complete` and `on_failed` commands when a pinned file (or copy)
/// finishes for good (`TransferEvent.finished`). Off the engine's threads: an event only queues
/// a job. At most `concurrent` hooks run at once, each without a shell, in a process group of its
/// own with nothing but /dev/null and its environment (`FinishedFile.environment`: never a
/// token); one that outlives the timeout is killed with its group, and a hook that hangs or
/// fails is logged (by its key, not its command line, which may hold a webhook's secret).
final class CompletionHooks: @unchecked Sendable {
    struct Job: Sendable {
        var key: FileKey
        var outcome: FinishedFile.Outcome
        var reason: StatusReason?
    }

    static let concurrent = 2
    /// Jobs waiting beyond this are dropped (and said): a burst of thousands of finishes must not
    /// grow without bound behind hooks that take their full timeout.
    static let backlog = 256

    let onComplete: [String]?
    let onFailed: [String]?
    let timeout: Double
    let mountpoint: String?
    let log: Logger
    let resolve: @Sendable (FileKey) -> [String]?

    /// Whether something that belongs beside a file (artwork, a subtitle) is neither stored nor
    /// tried yet: a pinned file is complete only then (as `pin --wait` and `status` say), so its
    /// `on_complete` waits in `held` until `sideAssetsChanged`.
    let missingBeside: @Sendable (FileKey) -> Bool

    /// Guards `jobs`, `held`, `running` and `stopping`.
    private let condition = NSCondition()
    private var jobs: [Job] = []
    private var held: [Job] = []
    private var running: Set<pid_t> = []
    private var stopping = false

    init(
        config: LabstreamConfig, mountpoint: String?, log: Logger, resolve: @escaping @Sendable (FileKey) -> [String]?,
        missingBeside: @escaping @Sendable (FileKey) -> Bool
    ) {
        self.missingBeside = missingBeside
        onComplete = config.onComplete
        onFailed = config.onFailed
        timeout = config.hookTimeout
        self.mountpoint = mountpoint
        self.log = log
        self.resolve = resolve
        guard onComplete != nil || onFailed != nil else { return }
        for n in 0..<Self.concurrent {
            let thread = Thread { [self] in work() }
            thread.name = "hook-\(n)"
            thread.start()
        }
    }

    /// Takes note of a finish; never blocks.
    func finished(_ key: FileKey, _ outcome: FinishedFile.Outcome, reason: StatusReason?) {
        guard (outcome.succeeded ? onComplete : onFailed) != nil else { return }
        condition.lock()
        defer { condition.unlock() }
        guard !stopping else { return }
        guard jobs.count < Self.backlog else {
            log.warn("\(outcome.succeeded ? "on_complete" : "on_failed") hook for \(key) not run: \(Self.backlog) hooks are already waiting")
            return
        }
        jobs.append(Job(key: key, outcome: outcome, reason: reason))
        condition.signal()
    }

    /// What is stored beside the media changed: held `on_complete` hooks whose files now have
    /// everything go.
    func sideAssetsChanged() {
        condition.lock()
        let waiting = held
        condition.unlock()
        guard !waiting.isEmpty else { return }
        // Asked without this lock: the fetcher answers under its own.
        let ready = Set(waiting.filter { !missingBeside($0.key) }.map(\.key))
        guard !ready.isEmpty else { return }
        condition.lock()
        defer { condition.unlock() }
        jobs += held.filter { ready.contains($0.key) }
        held.removeAll { ready.contains($0.key) }
        condition.broadcast()
    }

    /// Kills the hooks still running (with their process groups); waiting ones are not run.
    func stop() {
        condition.lock()
        stopping = true
        jobs.removeAll()
        held.removeAll()
        for pid in running { kill(-pid, SIGKILL) }
        condition.broadcast()
        condition.unlock()
    }

    private func work() {
        while true {
            condition.lock()
            while jobs.isEmpty && !stopping { condition.wait() }
            if stopping {
                condition.unlock()
                return
            }
            let job = jobs.removeFirst()
            condition.unlock()
            run(job)
        }
    }

    private func run(_ job: Job) {
        let name = job.outcome.succeeded ? "on_complete" : "on_failed"
        guard let argv = job.outcome.succeeded ? onComplete : onFailed else { return }
        if job.outcome.succeeded && missingBeside(job.key) {
            condition.lock()
            held.append(job)
            condition.unlock()
            // Stored meanwhile (a change told before it was held): it goes now.
            sideAssetsChanged()
            return
        }
        let components = resolve(job.key) ?? [job.key.server, job.key.itemId]
        let path = (mountpoint.map { $0 + "/" } ?? "") + components.joined(separator: "/")
        let env = FinishedFile.environment(
            path: path, server: job.key.server, title: FinishedFile.title(ofName: components.last ?? ""), outcome: job.outcome,
            reason: job.reason, base: ProcessInfo.processInfo.environment)
        condition.lock()
        if stopping {
            condition.unlock()
            return
        }
        let (pid, rc) = Self.spawn(argv, environment: env)
        if rc == 0 { running.insert(pid) }
        condition.unlock()
        guard rc == 0 else {
            log.warn("\(name) hook for \(path) could not start: \(String(cString: strerror(rc)))")
            return
        }
        let exited = Self.waitForExit(pid, timeout: timeout)
        if !exited { kill(-pid, SIGKILL) }
        var status: Int32 = 0
        while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
        condition.lock()
        running.remove(pid)
        condition.unlock()
        let signal = status & 0x7f, code = (status >> 8) & 0xff
        if !exited {
            log.warn("\(name) hook for \(path) did not finish within \(Int(timeout)) s (hook_timeout): killed")
        } else if signal != 0 {
            log.warn("\(name) hook for \(path) was ended by signal \(signal)")
        } else if code != 0 {
            log.warn("\(name) hook for \(path) failed: exit status \(code)")
        } else {
            log.info("\(name) hook for \(path) ran")
        }
    }

    /// Starts `argv` in a process group of its own, its signals at their defaults and unblocked,
    /// with /dev/null as its standard streams and no other descriptor of the daemon's.
    /// The child's pid, and 0 or the error number it could not start with.
    static func spawn(_ argv: [String], environment: [String: String]) -> (pid_t, Int32) {
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0)
        posix_spawn_file_actions_adddup2(&actions, 1, 2)
        _ = CLinux_spawn_closefrom(&actions, 3)
        var attr = posix_spawnattr_t()
        posix_spawnattr_init(&attr)
        defer { posix_spawnattr_destroy(&attr) }
        posix_spawnattr_setflags(&attr, Int16(POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF))
        posix_spawnattr_setpgroup(&attr, 0)
        var none = sigset_t()
        sigemptyset(&none)
        posix_spawnattr_setsigmask(&attr, &none)
        var defaults = sigset_t()
        sigemptyset(&defaults)
        for s in [SIGPIPE, SIGTERM, SIGINT, SIGHUP] { sigaddset(&defaults, s) }
        posix_spawnattr_setsigdefault(&attr, &defaults)
        var cArgs: [UnsafeMutablePointer<CChar>?] = argv.map { strdup($0) } + [nil]
        var cEnv: [UnsafeMutablePointer<CChar>?] = environment.sorted { $0.key < $1.key }.map { strdup("\($0.key)=\($0.value)") } + [nil]
        defer {
            cArgs.forEach { free($0) }
            cEnv.forEach { free($0) }
        }
        var pid: pid_t = 0
        let rc = posix_spawn(&pid, argv[0], &actions, &attr, &cArgs, &cEnv)
        return (pid, rc)
    }

    /// Whether `pid` (a child) exited within `timeout` seconds.
    static func waitForExit(_ pid: pid_t, timeout: Double) -> Bool {
        let fd = CLinux_pidfd_open(pid)
        guard fd >= 0 else { return true }  // already reaped elsewhere: nothing to wait for
        defer { close(fd) }
        let deadline = Date().addingTimeInterval(timeout)
        while true {
            let left = deadline.timeIntervalSinceNow
            if left <= 0 { return false }
            var p = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            let n = poll(&p, 1, Int32(min(left * 1000, 60_000)))
            if n > 0 { return true }
            if n < 0 && errno != EINTR { return true }
        }
    }
}
