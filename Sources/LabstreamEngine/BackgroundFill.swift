import Foundation
import LabstreamBackends
import LabstreamCore
import LabstreamStore
import Synchronization

/// Tops up the segment train of every pinned file that still misses bytes, whenever pins,
/// catalogs, backends or finished transfers change something. It makes no call to a server but
/// for bytes: the registries (and the sizes of their copies), the server-prepared copies' jobs
/// and the servers' cleanup run on their own threads, which it only wakes, so a server that is
/// slow to answer them holds up no other server's files.
enum BackgroundFill {
    /// One pass over the pinned rows. Returns when it next needs to look again without a
    /// wake-up (a retry's backoff).
    static func pass(_ engine: any FillHost) -> Date? {
        engine.settleMovedChecks()
        engine.evictIfNeeded()
        engine.wakeServerWork()
        let versionsDue = NextVersions.pass(engine)
        let pinned: [DownloadRow]
        do { pinned = try engine.index.pinnedIncompleteDownloads() } catch {
            engine.log("background fill: \(error.userMessage)")
            return Date().addingTimeInterval(30)
        }
        // The queue's order (`QueueOrder`): a file being read first, then priority, then pin order.
        let queue = engine.inQueueOrder(pinned)
        engine.sampleRates(queue)
        let catalog = engine.catalogFiles()
        let watchDue = engine.watchFreeSpace(for: queue, catalog: catalog)
        var active = 0
        var soonest: Date?
        for row in queue {
            guard active < engine.maxConcurrentFiles else {
                // Files ahead of it took the slots: one that was downloading plans nothing more
                // (what is on the wire still lands) and says it waits its turn.
                if row.status == .downloading { engine.yieldSlot(row, catalog: catalog) }
                continue
            }
            // A registry's file is fetched once its registry has had its say (its entry made or
            // read back), as when the two ran in one pass; the registry wakes the fill after.
            if engine.entriesHoldFill(of: row.key.server) { continue }
            let state: FileTransfer.FillState
            if DerivedCopy.parse(row.key) != nil {
                state = engine.fillDerivedCopy(row)
            } else {
                guard let file = catalog[row.key] else { continue }
                if OpenEndedFill.applies(row, file) {
                    state = engine.fillOpenEnded(row, file: file)
                } else if row.present.contains(ByteRange(0, row.total)) {
                    continue
                } else if row.present.isEmpty && engine.shareStoredCopy(file) {
                    continue
                } else {
                    guard let filled = try? engine.fillTransfer(of: file) else { continue }
                    state = filled
                }
            }
            switch state {
            case .filling: active += 1
            case .waitUntil(let date):
                active += 1
                soonest = min(soonest ?? date, date)
            case .backoff(let date):
                // Waiting out a retry's backoff holds no slot: the next file in the queue fills
                // meanwhile, and this one is back in front of it when its backoff ends.
                soonest = min(soonest ?? date, date)
            case .idle: continue
            }
        }
        return [soonest, versionsDue, watchDue].compactMap { $0 }.min()
    }
}

/// How many passes the background fill ran, and how many of them a file's first open woke
/// (`TransferEngine.noteOpened`): the mount root's `user.labstream.fill`, so a test (or a person
/// wondering why a file being read did not start) sees that a pass ran for the open.
public struct FillPasses: Sendable, Hashable {
    public var passes: Int
    public var opened: Int

    /// The wake reason an open names.
    static let openedReason = "opened"

    public init(passes: Int, opened: Int) {
        self.passes = passes
        self.opened = opened
    }

    /// `passes=12 opened=3`
    public var attribute: String { "passes=\(passes) opened=\(opened)" }
}

/// All the background fill may ask of the transfer engine: its own work (evictions, version
/// swaps, the pinned rows' transfers) and the doors to the other kinds of fill, which it only
/// dispatches to.
protocol FillHost: NextVersionsHost, CatalogAccess {
    /// Pinned files filled at once.
    var maxConcurrentFiles: Int { get }
    /// `rows` in the download queue's order (`TransferEngine.inQueueOrder`).
    func inQueueOrder(_ rows: [DownloadRow]) -> [DownloadRow]
    /// Notes the queued rows' bytes for their rates (`labstream queue`).
    func sampleRates(_ rows: [DownloadRow])
    /// Open transfers learn the checks carried over to them (`TransferEngine.settleMovedChecks`).
    func settleMovedChecks()
    /// Drops least recently used copies while the cache is over its limits.
    func evictIfNeeded()
    /// The threads that call servers (download entries, cleanup) look again: never waited for.
    func wakeServerWork()
    /// Whether `server`'s registry has its say before its files are fetched (`ManagedEntries.holdsFill`).
    func entriesHoldFill(of server: String) -> Bool
    /// A copy at another quality (`LiveForward.consider`).
    func fillDerivedCopy(_ row: DownloadRow) -> FileTransfer.FillState
    /// Makes a file with nothing stored share another server's whole copy of it (`SharedCopies`);
    /// true when it does now.
    func shareStoredCopy(_ file: TreeFile) -> Bool
    /// A file of unknown size (`OpenEndedFill.consider`).
    func fillOpenEnded(_ row: DownloadRow, file: TreeFile) -> FileTransfer.FillState
    /// Resumes the files of `pinned` (queue order) parked for a full disk that fit now; returns
    /// when to look again while some still wait.
    func watchFreeSpace(for pinned: [DownloadRow], catalog: TreeFileLookup) -> Date?
    /// A file that was downloading lost its slot to files ahead of it in the queue.
    func yieldSlot(_ row: DownloadRow, catalog: TreeFileLookup)
}

extension TransferEngine: FillHost {
    var maxConcurrentFiles: Int { settings.maxConcurrentFiles }

    func wakeServerWork() {
        cleanup.wake()
        entries.wake()
    }

    func entriesHoldFill(of server: String) -> Bool { managed.holdsFill(server, engine: self) }
    func fillDerivedCopy(_ row: DownloadRow) -> FileTransfer.FillState { live.consider(row, engine: self) }
    func fillOpenEnded(_ row: DownloadRow, file: TreeFile) -> FileTransfer.FillState { openEnded.consider(row, file: file, engine: self) }

    func yieldSlot(_ row: DownloadRow, catalog: TreeFileLookup) {
        // A live copy's stream cannot be held back, and a file of unknown size keeps its own row.
        guard let file = catalog[row.key] ?? (row.total > 0 ? derivedTreeFile(row) : nil), file.size > 0 else { return }
        (try? transfer(for: file))?.yieldSlot(engine: self)
    }

    func watchFreeSpace(for pinned: [DownloadRow], catalog: TreeFileLookup) -> Date? {
        // Each waits for the rest of its bytes; a copy at another quality whose size is not
        // known yet (a live copy's, until its stream ends) for `CopyRoom`'s estimate, and it
        // resumes on its own row (`file` nil). The transfer's own row otherwise: on a full disk
        // the index may not have taken the pause.
        let waiting = pinned.compactMap { stored -> (row: DownloadRow, file: TreeFile?, bytes: Int64)? in
            if let (base, _) = DerivedCopy.parse(stored.key), stored.total == 0 {
                guard stored.status == .paused, stored.pauseCause?.waitsForRoom == true, let original = catalog[base] else { return nil }
                return (stored, nil, live.roomWanted(stored, original: original, engine: self))
            }
            guard let file = catalog[stored.key] ?? derivedTreeFile(stored), let row = row(for: file), row.status == .paused,
                row.pauseCause?.waitsForRoom == true
            else { return nil }
            return (row, file, row.total - row.present.byteCount)
        }
        let now = Date()
        guard !waiting.isEmpty else {
            freeSpaceLooks.withLock { $0 = (0, nil) }
            return nil
        }
        // Unpinned copies count as room (the pass evicts them as the resumed files grow); they
        // are counted only on a look the schedule makes or a cancel or unpin asked for, as that
        // reads every row.
        let due = freeSpaceLooks.withLock { $0.next.map { $0 <= now } ?? true }
        var usage = storageUsage()
        // What the files on their way still miss is taken, as the room check a resumed file
        // meets next counts it (`room(for:of:)`): a file resumed into room that check refuses
        // would park again, and each park and resume wakes the fill for the next.
        for row in pinned where row.status == .downloading { usage.reserve(max(row.total - row.present.byteCount, 0), server: row.key.server) }
        if due { usage = withEvictable(usage, except: nil, locking: true) }
        let lift = budget.admitted(waiting.map { ($0.row.key.server, $0.bytes) }, usage: usage)
        for i in lift {
            if let file = waiting[i].file {
                (try? transfer(for: file))?.liftStorageFull(engine: self)
            } else if let base = DerivedCopy.parse(waiting[i].row.key)?.base {
                live.liftStorageFull(waiting[i].row.key, path: catalog[base]?.path ?? [], engine: self)
            }
        }
        return freeSpaceLooks.withLock { looks in
            if !lift.isEmpty {
                looks.fruitless = 0
            } else if looks.next.map({ $0 <= now }) ?? false {
                // Only a look the schedule made counts: wake-ups for other work look for free.
                looks.fruitless += 1
            }
            if lift.count == waiting.count {
                looks.next = nil
            } else if lift.isEmpty, let next = looks.next, next > now {
                return next
            } else {
                let delay = FreeSpaceWatch().delay(afterFruitless: looks.fruitless)
                looks.next = now.addingTimeInterval(delay)
                let count = waiting.count - lift.count
                log("\(count) pinned files wait for room on the cache (\(ByteCount.text(usage.free)) free); looking again in \(Int(delay)) s")
            }
            return looks.next
        }
    }
}
