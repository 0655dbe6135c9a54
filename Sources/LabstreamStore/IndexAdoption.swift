import LabstreamCore

/// A stored copy moved to the item id its server now lists it under (issue 41 item 3).
extension OfflineIndex {
    /// Moves everything stored of `old` (an original's key, its copies and next version too) to
    /// `new` in one transaction: the download rows and their segments, the queue place, a
    /// removed server's path, side assets, item extras and a monitored episode. No file is
    /// renamed: a row opens its bytes by its `partial` column, which stays. A managed entry
    /// (Silo's) stays with the old item: it names the old ids on the server, so the registry
    /// deletes it as an unpinned file's, and registers the new item as a fresh pin.
    /// The old item's orphaned listing goes (the new item is the file's listing now) and the
    /// original's row says it was matched, and takes `sourceTag` (the new listing's tag of the
    /// same bytes: a Plex part key names the part's new id) when one is given. Refuses (nothing
    /// changed) when `new` already holds bytes of its own or `old` holds none.
    public func adoptCopy(from old: FileKey, to new: FileKey, sourceTag: String? = nil) throws(LabstreamError) {
        guard old.kind == .original, new.kind == .original, old.server == new.server else {
            throw .storage("adopting \(old) as \(new): only an original on the same server is adopted; nothing was changed")
        }
        do {
            try db.transaction { c in
                let oldIds: [SQLValue] = [.text(old.server), .text(old.itemId), .text(old.sourceId)]
                let newIds: [SQLValue] = [.text(new.server), .text(new.itemId), .text(new.sourceId)]
                let ids = "server=? AND item_id=? AND source_id=?"
                guard try c.query("SELECT 1 FROM downloads WHERE \(Self.keyMatch) AND ranges != ''", Self.keyValues(old)).first != nil else {
                    throw AdoptionRefused(why: "\(old) holds no stored bytes")
                }
                guard try c.query("SELECT 1 FROM downloads WHERE \(ids) AND ranges != ''", newIds).first == nil else {
                    throw AdoptionRefused(why: "\(new) already holds bytes of its own")
                }
                // Rows of the new item with nothing stored (a pin's fresh row) give way to the adopted ones.
                for table in ["segments", "downloads", "queue", "removed_copies", "shared_copies"] {
                    try c.run("DELETE FROM \(table) WHERE \(ids)", newIds)
                    try c.run("UPDATE \(table) SET item_id=?, source_id=? WHERE \(ids)", [.text(new.itemId), .text(new.sourceId)] + oldIds)
                }
                let oldItem: [SQLValue] = [.text(old.server), .text(old.itemId)]
                for table in ["side_assets", "item_extras"] {
                    try c.run("DELETE FROM \(table) WHERE server=? AND item_id=?", [.text(new.server), .text(new.itemId)])
                    try c.run("UPDATE \(table) SET item_id=? WHERE server=? AND item_id=?", [.text(new.itemId)] + oldItem)
                }
                // A monitored episode keeps its monitor's state (pinned by it, let go…) under the new id.
                try c.run("DELETE FROM monitored_episodes WHERE server=? AND item_id=?", [.text(new.server), .text(new.itemId)])
                try c.run(
                    "UPDATE monitored_episodes SET item_id=?, source_id=? WHERE server=? AND item_id=?",
                    [.text(new.itemId), .text(new.sourceId)] + oldItem)
                try c.run(
                    "UPDATE downloads SET reason=?, reason_detail=?, source_tag=COALESCE(?, source_tag) WHERE \(Self.keyMatch)",
                    Self.reasonValues(.matched(was: old.itemId)) + [sourceTag.map(SQLValue.text) ?? .null] + Self.keyValues(new))
                try c.run("DELETE FROM media_sources WHERE \(ids.replacingOccurrences(of: "source_id", with: "id")) AND orphaned=1", oldIds)
                try c.run(
                    "DELETE FROM items WHERE server=? AND id=? AND NOT EXISTS (SELECT 1 FROM media_sources m WHERE m.server=items.server AND m.item_id=items.id)",
                    oldItem)
            }
        } catch let refused as AdoptionRefused {
            throw .storage("adopting \(old) as \(new) refused: \(refused.why); nothing was changed")
        } catch {
            throw .storage("adopting \(old) as \(new) failed (\(error)); nothing was changed")
        }
        forgetStored()
        // A sidecar names its copy's key: a rebuilt index must take the copy back as the new item's.
        let adopted = (try? downloads().filter { $0.key.server == new.server && $0.key.itemId == new.itemId && $0.key.sourceId == new.sourceId }) ?? []
        for row in adopted {
            CopySidecar.rewrite(row, segments: (try? segments(row.key, attempt: row.attempt)) ?? [], root: dataRoot)
        }
    }
}

extension OfflineIndex {
    /// Each of `server`'s media sources' path on the server, where the server gave one: what
    /// `IdentityMatch` compares, read only when a stored copy's item vanished (the catalog's
    /// reads leave it out).
    public func sourcePaths(server: String) throws(LabstreamError) -> [FileKey: String] {
        try read("the media sources' paths") {
            var out: [FileKey: String] = [:]
            for r in try db.query("SELECT item_id, id, path FROM media_sources WHERE server=? AND path IS NOT NULL", [.text(server)]) {
                guard let item = r[0].text, let id = r[1].text, let path = r[2].text else { continue }
                out[FileKey(server: server, itemId: item, sourceId: id)] = path
            }
            return out
        }
    }
}

struct AdoptionRefused: Error {
    var why: String
}
