import Foundation
import LabstreamCore
import LabstreamStore

/// Files whose complete copy is of an older version than the server's: the old copy stays what
/// the tree shows and what reads get, the new version downloads beside it (a pinned
/// `#next` row), and once it is complete (and checked) it replaces the old one in one index
/// transaction; the old bytes are then freed and the kernel told.
enum NextVersions {
    static func pass(_ engine: any NextVersionsHost) -> Date? {
        guard let stale = try? engine.index.staleVersions(), !stale.isEmpty else { return nil }
        var soonest: Date?
        for (shown, current) in stale {
            guard engine.backend(for: shown.key.server) != nil, engine.reachability(of: shown.key.server) == .online else { continue }
            let key = NextVersion.key(of: shown.key)
            let next = TreeFile(
                path: shown.path, key: key, size: current.size, modified: current.modified, etag: current.etag, bitrate: current.bitrate,
                remoteItemId: current.remoteItemId)
            let row = try? engine.index.download(key)
            if row == nil {
                guard (try? engine.index.setPinned(true, files: [next], layout: engine.layout, now: engine.now())) != nil else { continue }
                engine.log("\(shown.path.joined(separator: "/")) changed on the server: fetching the new version beside the old copy")
            }
            if let row, [.complete, .unverified].contains(row.status), !row.isStale(for: next),
                !(row.awaitingValidation && engine.playbackProbe)
            {
                swap(shown, next: next, engine: engine)
                continue
            }
            guard let state = try? engine.fillTransfer(of: next) else { continue }
            switch state {
            case .waitUntil(let date), .backoff(let date): soonest = min(soonest ?? date, date)
            case .filling, .idle: break
            }
        }
        return soonest
    }

    static func swap(_ shown: TreeFile, next: TreeFile, engine: any NextVersionsHost) {
        // Not while a reader is inside the old copy: the next pass swaps.
        guard engine.retireTransfers([shown.key, next.key]) else { return }
        do {
            if let old = try engine.index.swapVersion(shown.key, next: next.key, now: engine.now()) {
                unlink(engine.layout.absolute(old))
                unlink(CopySidecar.path(ofPartial: engine.layout.absolute(old)))
            }
            engine.log("\(shown.path.joined(separator: "/")): the new version replaced the old copy")
            engine.noteChange()
            engine.treeChanged()
        } catch {
            engine.log("\(shown.path.joined(separator: "/")): \(error.userMessage)")
        }
    }
}

/// All version swaps may ask of the transfer engine.
protocol NextVersionsHost: ServerAccess, RowAccess, TransferDriving {
    /// Whether complete files are probed with libmpv (a copy awaiting its probe is not swapped in).
    var playbackProbe: Bool { get }
    /// Drops the transfers of `keys` if none is in use; false when one is, and nothing changed.
    func retireTransfers(_ keys: [FileKey]) -> Bool
}

extension TransferEngine: NextVersionsHost {}
