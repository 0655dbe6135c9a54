import LabstreamCore

/// The download queue's stored order: each pinned row's `QueuePlace` (table `queue`, written
/// with the pin in `setPinned`). The order itself is decided by `QueueOrder`.
extension OfflineIndex {
    /// The place of every pinned row that has one; `waitingOnly`: only of rows with work left
    /// (bytes to fetch, or a check to run), which is what every fill pass asks, without reading
    /// the places of a whole library's complete pins.
    public func queuePlaces(waitingOnly: Bool = true) throws(LabstreamError) -> [FileKey: QueuePlace] {
        try read("the download queue") {
            var out: [FileKey: QueuePlace] = [:]
            let rows = try db.query(
                """
                SELECT q.server, q.item_id, q.source_id, d.kind, d.quality, q.position, q.priority FROM queue q
                    JOIN downloads d ON d.server = q.server AND d.item_id = q.item_id AND d.source_id = q.source_id
                        AND d.kind = q.kind AND d.quality = q.quality WHERE d.pinned = 1
                """
                    + (waitingOnly ? " AND (d.status NOT IN ('complete', 'unverified') OR d.awaiting_validation = 1)" : ""))
            for r in rows {
                guard let server = r[0].text, let item = r[1].text, let id = r[2].text, let position = r[5].int,
                    let kind = r[3].text.flatMap({ FileKind(persisted: $0, quality: r[4].text) })
                else { continue }
                // An unknown priority (a newer build's) is read as normal rather than dropping the place.
                let priority = r[6].text.flatMap(QueuePriority.init(rawValue:)) ?? .normal
                out[FileKey(server: server, itemId: item, sourceId: id, kind: kind)] = QueuePlace(position: position, priority: priority)
            }
            return out
        }
    }

    /// Gives each of `places`' rows its place, in one transaction (a move renumbers them all).
    public func setQueuePlaces(_ places: [FileKey: QueuePlace]) throws(LabstreamError) {
        do {
            try db.transaction { c in
                for (key, place) in places {
                    try c.run(
                        "INSERT OR REPLACE INTO queue(server, item_id, source_id, kind, quality, position, priority) VALUES(?,?,?,?,?,?,?)",
                        Self.keyValues(key) + [.int(place.position), .text(place.priority.rawValue)])
                }
            }
        } catch { throw .storage("reordering the download queue failed: \(error)") }
    }
}
