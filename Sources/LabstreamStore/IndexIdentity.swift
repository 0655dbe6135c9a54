import Foundation
import LabstreamCore

/// A server name signed in again as another user, profile or server (`IdentityChange`): what the
/// old identity was told is forgotten, and the copies the new one cannot see go.
extension OfflineIndex {
    /// Forgets what was `server`'s old identity's own, once the new one's catalog is in (it
    /// replaced the old catalog and watched state): monitors, the server's download entries and
    /// the generated documents. The items only the old identity listed went with the catalog,
    /// but those holding bytes, kept orphaned (`visibleItems` leaves them out).
    public func forgetIdentity(server: String) throws(LabstreamError) {
        do {
            try db.transaction { c in
                for table in ["managed_entries", "monitors", "monitored_episodes", "left_series", "documents"] {
                    try c.run("DELETE FROM \(table) WHERE server=?", [.text(server)])
                }
            }
        } catch { throw .storage("forgetting what \(server) said before the sign-in changed failed: \(error)") }
    }

    /// The items `server`'s catalog lists now (not the orphans kept for their bytes).
    public func visibleItems(server: String) throws(LabstreamError) -> Set<String> {
        try read("the catalog") {
            Set(try db.query("SELECT DISTINCT item_id FROM media_sources WHERE server=? AND orphaned=0", [.text(server)]).compactMap { $0[0].text })
        }
    }

    /// Deletes the rows of `keys` (their segments and their items' side assets too) and returns
    /// the files they stored, relative to the data directory, for the caller to delete.
    public func dropDownloads(_ keys: [FileKey]) throws(LabstreamError) -> [String] {
        var files: [String] = []
        do {
            try db.transaction { c in
                for key in keys {
                    let k = Self.keyValues(key)
                    if let partial = try c.query("SELECT partial FROM downloads WHERE \(Self.keyMatch)", k).first?[0].text { files.append(partial) }
                    for table in ["segments", "downloads", "queue"] { try c.run("DELETE FROM \(table) WHERE \(Self.keyMatch)", k) }
                    let item: [SQLValue] = [.text(key.server), .text(key.itemId)]
                    files += try c.query("SELECT file FROM side_assets WHERE server=? AND item_id=? AND file IS NOT NULL", item).compactMap { $0[0].text }
                    try c.run("DELETE FROM side_assets WHERE server=? AND item_id=?", item)
                    // The orphaned listing that held it goes with it; an item the catalog still lists stays.
                    try c.run("DELETE FROM media_sources WHERE server=? AND item_id=? AND orphaned=1", item)
                    try c.run(
                        "DELETE FROM items WHERE server=? AND id=? AND NOT EXISTS (SELECT 1 FROM media_sources m WHERE m.server=items.server AND m.item_id=items.id)",
                        item)
                }
            }
        } catch { throw .storage("dropping the copies the new sign-in cannot see failed: \(error)") }
        forgetStored()
        return files
    }
}
