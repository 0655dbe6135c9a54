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
        engine.evictIfNeeded()
        engine.wakeServerWork()
        let versionsDue = NextVersions.pass(engine)
        let pinned: [DownloadRow]
        do { pinned = try engine.index.pinnedIncompleteDownloads() } catch {
            engine.log("background fill: \(error.userMessage)")
            return Date().addingTimeInterval(30)
        }
        // Copies at another quality have no size until they are complete.
        let copies = pinned.filter { DerivedCopy.parse($0.key) != nil }
        let catalog = engine.catalogFiles()
        let originals = pinned.filter { DerivedCopy.parse($0.key) == nil }
        var active = 0
        var soonest: Date?
        for row in copies + originals where active < engine.maxConcurrentFiles {
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
            case .idle: continue
            }
        }
        return [soonest, versionsDue].compactMap { $0 }.min()
    }
}

/// All the background fill may ask of the transfer engine: its own work (evictions, version
/// swaps, the pinned rows' transfers) and the doors to the other kinds of fill, which it only
/// dispatches to.
protocol FillHost: NextVersionsHost, CatalogAccess {
    /// Pinned files filled at once.
    var maxConcurrentFiles: Int { get }
    /// Drops least recently used copies while the cache is over its limits.
    func evictIfNeeded()
    /// The threads that call servers (download entries, cleanup) look again: never waited for.
    func wakeServerWork()
    /// Whether `server`'s registry has its say before its files are fetched (`ManagedEntries.holdsFill`).
    func entriesHoldFill(of server: String) -> Bool
    /// A copy at another quality (`LiveForward.consider`).
    func fillDerivedCopy(_ row: DownloadRow) -> FileTransfer.FillState
    /// A file of unknown size (`OpenEndedFill.consider`).
    func fillOpenEnded(_ row: DownloadRow, file: TreeFile) -> FileTransfer.FillState
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
}
