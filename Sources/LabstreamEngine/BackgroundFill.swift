import Foundation
import LabstreamBackends
import LabstreamCore
import LabstreamStore
import Synchronization

/// Tops up the segment train of every pinned file that still misses bytes, whenever pins,
/// catalogs, backends or finished transfers change something. It makes no call to a server but
/// for bytes: the registries and the servers' cleanup run on their own threads, which it only
/// wakes, so a server that is slow to answer them holds up no other server's files.
enum BackgroundFill {
    /// One pass over the pinned rows. Returns when it next needs to look again without a
    /// wake-up (a retry's backoff).
    static func pass(_ engine: TransferEngine) -> Date? {
        engine.evictIfNeeded()
        engine.cleanup.wake()
        engine.entries.wake()
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
        for row in copies + originals where active < engine.settings.maxConcurrentFiles {
            // A registry's file is fetched once its registry has had its say (its entry made or
            // read back), as when the two ran in one pass; the registry wakes the fill after.
            if engine.managed.holdsFill(row.key.server, engine: engine) { continue }
            let state: FileTransfer.FillState
            if DerivedCopy.parse(row.key) != nil {
                state = engine.live.consider(row, engine: engine)
            } else {
                guard let file = catalog[row.key] else { continue }
                if OpenEndedFill.applies(row, file) {
                    state = engine.openEnded.consider(row, file: file, engine: engine)
                } else if row.present.contains(ByteRange(0, row.total)) {
                    continue
                } else {
                    guard let transfer = try? engine.transfer(for: file) else { continue }
                    state = transfer.fill(engine: engine)
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
