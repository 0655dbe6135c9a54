import LabstreamBackends
import LabstreamCore

/// What one file's transfer (`FileTransfer` and its `RangeFetch`es) may ask of the engine that
/// owns it, and nothing more: the engine's maps, workers, locks and listeners stay private to
/// it. `TransferEngine` is the one host; a transfer is read, changed and tested against this.
protocol TransferHost: AnyObject, Sendable {
    var settings: TransferEngine.Settings { get }
    var log: @Sendable (String) -> Void { get }
    /// Seconds since the epoch, as the index records them.
    func now() -> Int64
    /// Something a status reader shows changed.
    func noteChange()

    func backend(for server: String) -> (any MediaBackend)?
    func reachability(of server: String) -> Reachability
    func markUnreachable(_ server: String, _ state: Reachability)
    /// A reader waits for a server that is away: look at it again soon.
    func lookForServerSoon()

    /// Whether the rest of a pinned file (`bytes` more of `key`) fits the storage budget and
    /// leaves `min_free` on the disk (`StorageBudget.room`).
    func room(for bytes: Int64, of key: FileKey) -> StorageBudget.Room
    /// Keeps a rejected copy aside for inspection (it is fetched again).
    func setAside(_ path: String) throws(LabstreamError)
    /// Whether a finished copy of `key` is checked before it is done (playback probe, or the
    /// server's integrity data).
    func checksFinishedCopy(of key: FileKey) -> Bool

    /// A whole file is waiting for its check.
    func wakeValidation()
    /// A pinned file wants the background fill (its bytes, or its server job to close).
    func wakeFill()
    /// A file failed: a server that keeps entries may have ended its one, and the fill looks again.
    func fileFailed()
    /// The bytes of `key` were dropped (`labstream cancel`).
    func dropped(_ key: FileKey)

    /// Queues a range fetch on the engine's fetch pool (`fetch_threads`); never blocks.
    func runFetch(background: Bool, _ job: @escaping FetchPool.Job)
    /// A ranged request goes on the wire; its share of the rate limit (0: none).
    func fetchStarted() -> Int64
    func fetchEnded()
    /// The daemon stops: bodies on the wire end at their next chunk, keeping what arrived.
    var isStopping: Bool { get }
}

extension TransferEngine: TransferHost {
    func lookForServerSoon() { health.wake() }
    func checksFinishedCopy(of key: FileKey) -> Bool { judges(with: integrityEntry(of: key)) }
    func wakeValidation() { validation.wake() }
    func wakeFill() { filler.wake() }

    func fileFailed() {
        managed.poke()
        filler.wake()
    }

    func dropped(_ key: FileKey) { tell(.mediaDropped(key)) }

    func runFetch(background: Bool, _ job: @escaping FetchPool.Job) { fetchPool.submit(background: background, job) }

    func fetchStarted() -> Int64 {
        let running = activeFetches.withLock {
            $0 += 1
            return $0
        }
        guard settings.rateLimit > 0 else { return 0 }
        return max(settings.rateLimit / Int64(max(running, 1)), 1024)
    }

    func fetchEnded() {
        activeFetches.withLock { $0 -= 1 }
        fetchesEnded.withLock { fetchesEnded.broadcast() }
    }

    var isStopping: Bool { stopping.load(ordering: .relaxed) }
}
