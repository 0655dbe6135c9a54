import Foundation
import LabstreamCore
import LabstreamStore

/// The download queue people steer (`labstream queue`, `priority`, `queue move`): the order
/// is `QueueOrder`'s, the stored places the index's; here it is applied to the pinned rows.
extension TransferEngine {
    /// `rows` in the queue's order: a file being read first, then priority, then pin order.
    func inQueueOrder(_ rows: [DownloadRow]) -> [DownloadRow] {
        let places = (try? index.queuePlaces()) ?? [:]
        return QueueOrder.sorted(rows.map { QueueOrder.Entry(key: $0, place: places[$0.key], reading: isOpen($0.key)) }).map(\.key)
    }

    func sampleRates(_ rows: [DownloadRow]) {
        let at = ProcessInfo.processInfo.systemUptime
        queueRates.withLock { meters in
            var kept: [FileKey: RateMeter] = [:]
            for row in rows {
                var meter = meters[row.key] ?? RateMeter()
                meter.record(row.present.byteCount, at: at)
                kept[row.key] = meter
            }
            meters = kept
        }
    }

    /// The pinned files still to fetch, in queue order, each live if open. Paths are the
    /// catalog's (`SERVER/LIBRARY/…`); a copy at another quality is listed under its original.
    public func queue() -> [QueueEntry] {
        let stored = (try? index.pinnedIncompleteDownloads()) ?? []
        // A new version arriving beside a shown copy is not queued work of its own (see `NextVersions`).
        let rows = stored.filter { NextVersion.base(of: $0.key) == nil }.map { row in treeFile(for: row).flatMap(self.row(for:)) ?? row }
        let ordered = inQueueOrder(rows)
        sampleRates(ordered)
        let places = (try? index.queuePlaces()) ?? [:]
        let meters = queueRates.withLock { $0 }
        return ordered.enumerated().compactMap { i, row -> QueueEntry? in
            let copy = DerivedCopy.parse(row.key)
            guard let path = catalogPath(of: copy?.0 ?? row.key) else { return nil }
            let meter = meters[row.key]
            return QueueEntry(
                path: path.joined(separator: "/"), quality: copy.map { "\($0.1)" }, position: i + 1, priority: places[row.key]?.priority ?? .normal,
                state: DisplayState(status: row.status), reading: isOpen(row.key), present: row.present.byteCount, total: row.total,
                rate: meter?.bytesPerSecond.map { Int64($0) }, eta: meter?.secondsLeft(toReach: row.total), reason: row.reason,
                pauseCause: row.pauseCause)
        }
    }

    /// The queued keys of `files`: the files and their copies at other qualities that are pinned.
    func queuedKeys(of files: [TreeFile]) -> [FileKey] {
        let places = (try? index.queuePlaces(waitingOnly: false)) ?? [:]
        return files.flatMap { [$0.key] + copies(of: $0.key).map(\.key) }.filter { places[$0] != nil }
    }

    /// Gives every pinned file of `files` (and its pinned copies) `priority`. Throws when none
    /// of them is pinned: a priority is a place in the queue, which only a pin has.
    public func setPriority(_ priority: QueuePriority, files: [TreeFile], named what: String) throws(LabstreamError) -> Int {
        var places = try index.queuePlaces(waitingOnly: false)
        let keys = queuedKeys(of: files)
        guard !keys.isEmpty else {
            throw .invalidArgument(
                "nothing at \(what) is pinned, so it has no place in the queue: pin it with `labstream pin --priority \(priority.rawValue) \(what)`")
        }
        for key in keys { places[key]?.priority = priority }
        try index.setQueuePlaces(places.filter { keys.contains($0.key) })
        log("priority \(priority.rawValue) for \(keys.count) files")
        filler.wake()
        validation.wake()
        return keys.count
    }

    /// Moves the pinned files of `files` (a file, or a folder's in their order) first in the
    /// queue, or just before the first queued file of `before`.
    public func move(_ files: [TreeFile], named what: String, before: (files: [TreeFile], named: String)?) throws(LabstreamError) -> Int {
        let keys = Set(queuedKeys(of: files))
        guard !keys.isEmpty else { throw .invalidArgument("nothing at \(what) is pinned, so it has no place in the queue to move: pin it first") }
        let places = try index.queuePlaces()
        let queued = inQueueOrder((try index.pinnedIncompleteDownloads()).filter { places[$0.key] != nil })
        let entries = queued.map { QueueOrder.Entry(key: $0.key, place: places[$0.key]) }
        let target: QueueTarget<FileKey>
        if let before {
            let others = Set(queuedKeys(of: before.files))
            // The first of them the queue works on (the one a person sees first in `labstream queue`).
            guard
                let first = QueueOrder.sorted(entries).first(where: { others.contains($0.key) && !keys.contains($0.key) })?.key
                    ?? others.first(where: { keys.contains($0) })
            else {
                throw .invalidArgument("nothing at \(before.named) is waiting in the queue, so there is nothing to move \(what) before; see `labstream queue`")
            }
            target = .before(first)
        } else {
            target = .first
        }
        guard let moved = QueueOrder.moved(keys.filter { k in entries.contains { $0.key == k } }, to: target, in: entries) else {
            throw .invalidArgument("\(what) is pinned but has nothing left to fetch, so it is not in the queue; see `labstream queue`")
        }
        try index.setQueuePlaces(moved)
        log("moved \(keys.count) files in the queue")
        filler.wake()
        validation.wake()
        return keys.count
    }
}
