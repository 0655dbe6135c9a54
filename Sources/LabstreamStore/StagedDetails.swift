import LabstreamCore
import Synchronization

/// Item details a catalog sync has received but not yet written, kept in a staging table of the
/// index's own connection (`temp.staged_details`, SQLite's temporary storage: gone with the
/// connection, never in the index file) instead of in memory until the last page came.
/// `replaceCatalog` takes an item's details from here when the item arrives without them.
/// One per sync, staged under a number of its own (two syncs of one server may run at once);
/// `discard` after it, whatever happened.
public final class StagedDetails: DetailsStash {
    let index: OfflineIndex
    let server: String
    let stage: Int64
    private static let stages = Atomic<Int64>(0)
    private var pending: [(id: String, details: SQLValue)] = []
    private var failure: LabstreamError?
    /// Details written in one transaction: a page or two.
    static let batch = 500

    public init(index: OfflineIndex, server: String) throws(LabstreamError) {
        self.index = index
        self.server = server
        self.stage = Self.stages.add(1, ordering: .relaxed).newValue
        do {
            try index.db.exec("CREATE TEMP TABLE IF NOT EXISTS staged_details(stage INTEGER NOT NULL, id TEXT NOT NULL, details TEXT, PRIMARY KEY(stage, id))")
        } catch {
            throw .storage("staging the catalog of \(server) failed (\(error)); the previous catalog is unchanged")
        }
    }

    /// An item without details is staged too (as null): a refresh that merges changes into the
    /// stored catalog keeps the stored details of an item nothing was staged for, so a changed
    /// item that lost its details must say so.
    public func stash(_ item: CatalogItem) -> CatalogItem {
        guard failure == nil else { return item }
        pending.append((item.id, item.details.map(OfflineIndex.encodeDetails) ?? .null))
        guard item.details != nil else { return item }
        if pending.count >= Self.batch { flush() }
        var bare = item
        bare.details = nil
        return bare
    }

    /// Writes what is pending; a failure (a full disk) is kept for `finish`, and later items keep
    /// their details in memory.
    private func flush() {
        guard !pending.isEmpty, failure == nil else { return }
        do {
            try index.db.transaction { c in
                for (id, details) in pending {
                    try c.run("INSERT OR REPLACE INTO temp.staged_details(stage, id, details) VALUES(?,?,?)", [.int(stage), .text(id), details])
                }
            }
            pending.removeAll(keepingCapacity: true)
        } catch {
            failure = .storage("staging the catalog of \(server) failed (\(error)); the previous catalog is unchanged")
        }
    }

    /// Everything staged, or the error staging it ended in: items already handed back without
    /// their details must not be written without them.
    public func finish() throws(LabstreamError) {
        flush()
        if let failure { throw failure }
    }

    /// An item's staged details (null when it had none; nil when nothing was staged for it).
    func details(of item: String, on c: Connection) throws -> SQLValue? {
        try c.query("SELECT details FROM temp.staged_details WHERE stage=? AND id=?", [.int(stage), .text(item)]).first?.first
    }

    /// Drops what was staged.
    public func discard() {
        pending.removeAll()
        try? index.db.run("DELETE FROM temp.staged_details WHERE stage=?", [.int(stage)])
    }
}
