import Foundation
import LabstreamCore

/// The entries a server's download registry holds for this device's copies.
extension OfflineIndex {
    // MARK: - Managed entries

    /// The server's entries for this device's copies on `server`, by item.
    public func managedEntries(server: String) throws(LabstreamError) -> [String: ManagedEntry] {
        Dictionary(try managedEntries(where: "server=?", [.text(server)]).map { ($0.itemId, $0) }, uniquingKeysWith: { a, _ in a })
    }

    /// The entry of one item (the one a file's fill or completion check asks about).
    public func managedEntry(server: String, item: String) throws(LabstreamError) -> ManagedEntry? {
        try managedEntries(where: "server=? AND item_id=?", [.text(server), .text(item)]).first
    }

    func managedEntries(where condition: String, _ parameters: [SQLValue]) throws(LabstreamError) -> [ManagedEntry] {
        try read("managed entries") {
            try db.query(
                "SELECT item_id, source_id, entry_id, revision, status, delivery, reported, reported_at, manifest, kind, quality FROM managed_entries WHERE \(condition)",
                parameters
            ).compactMap { r in
                guard let item = r[0].text, let source = r[1].text else { return nil }
                return ManagedEntry(
                    itemId: item, sourceId: source, kind: r[9].text.flatMap { FileKind(persisted: $0, quality: r[10].text) }, id: r[2].text,
                    revision: Int(r[3].int ?? 0), status: r[4].text ?? "",
                    deliveryFormat: r[5].text ?? "original", reported: r[6].text.flatMap(ManagedEntry.Report.init(rawValue:)),
                    reportedAt: r[7].int, manifest: r[8].text.map { Array($0.utf8) })
            }
        }
    }

    /// Records `entry` (an intent to create one when its id is nil), replacing the item's.
    public func saveManagedEntry(_ entry: ManagedEntry, server: String) throws(LabstreamError) {
        do {
            try db.run(
                "INSERT OR REPLACE INTO managed_entries(server, item_id, source_id, entry_id, revision, status, delivery, reported, reported_at, manifest, kind, quality) VALUES(?,?,?,?,?,?,?,?,?,?,?,?)",
                [
                    .text(server), .text(entry.itemId), .text(entry.sourceId), entry.id.map(SQLValue.text) ?? .null, .int(Int64(entry.revision)),
                    .text(entry.status), .text(entry.deliveryFormat), entry.reported.map { .text($0.rawValue) } ?? .null,
                    entry.reportedAt.map(SQLValue.int) ?? .null, entry.manifest.map { .text(String(decoding: $0, as: UTF8.self)) } ?? .null
                ] + (entry.kind.map(Self.kindValues) ?? [.text("copy"), .text("")]))
        } catch { throw .storage("recording the download entry of \(server)/\(entry.itemId) failed: \(error)") }
    }

    public func removeManagedEntry(server: String, item: String) throws(LabstreamError) {
        do { try db.run("DELETE FROM managed_entries WHERE server=? AND item_id=?", [.text(server), .text(item)]) } catch {
            throw .storage("forgetting the download entry of \(server)/\(item) failed: \(error)")
        }
    }

    /// Download rows of `server` that are pinned, originals and copies at a preset (not next
    /// versions): the files a managed registry holds entries for.
    public func pinnedManaged(server: String) throws(LabstreamError) -> [DownloadRow] {
        try downloads(where: "server = ? AND pinned = 1", [.text(server)]).filter { NextVersion.base(of: $0.key) == nil }
    }
}
