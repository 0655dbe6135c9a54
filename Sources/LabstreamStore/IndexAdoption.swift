import Foundation
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

/// What `IdentityMatch` compares, read from the index: of listed sources, and of orphaned ones
/// from what their items said when they vanished (`orphan_identity`, kept by `replaceCatalog`).
extension OfflineIndex {
    /// An item's identity as one JSON text: `items i`'s kind, season, episode, series and provider ids.
    static let itemIdentity = """
        json_object('kind', i.kind, 'season', i.season, 'episode', i.episode, 'series', i.series_id,
            'ids', CASE WHEN json_valid(i.details) THEN json(json_extract(i.details, '$.ids')) END)
        """
    /// The same, of the item `media_sources`' row being written belongs to.
    static let identityOfItem = "SELECT \(itemIdentity) FROM items i WHERE i.server = media_sources.server AND i.id = media_sources.item_id"

    struct StoredIdentity: Decodable {
        var kind: String
        var season: Int?
        var episode: Int?
        var ids: [String: String]?
    }

    static func fileIdentity(_ key: FileKey, size: Int64?, container: String?, path: String?, json: String?) -> FileIdentity? {
        guard let json, let stored = try? JSONDecoder().decode(StoredIdentity.self, from: Data(json.utf8)),
            let kind = ItemKind(rawValue: stored.kind)
        else { return nil }
        return FileIdentity(
            key: key, kind: kind, providerIds: stored.ids ?? [:], size: size, container: container, path: path, season: stored.season,
            episode: stored.episode)
    }

    /// The orphaned sources of `server` that still hold stored bytes of their original, by what
    /// their items said when they left the catalog. One made before schema 26 has nothing kept.
    public func orphanIdentities(server: String) throws(LabstreamError) -> [FileIdentity] {
        try read("the orphaned copies") {
            // From the stored copies (few), not a scan of every source.
            try db.query(
                """
                SELECT m.item_id, m.id, m.size, m.container, m.path, m.orphan_identity FROM downloads d JOIN media_sources m
                ON m.server = d.server AND m.item_id = d.item_id AND m.id = d.source_id
                WHERE d.server = ? AND d.kind = 'original' AND d.ranges != '' AND m.orphaned = 1 AND m.orphan_identity IS NOT NULL
                """, [.text(server)]
            ).compactMap { r in
                guard let item = r[0].text, let id = r[1].text else { return nil }
                return Self.fileIdentity(
                    FileKey(server: server, itemId: item, sourceId: id), size: r[2].int, container: r[3].text, path: r[4].text, json: r[5].text)
            }
        }
    }

    /// The listed (not orphaned) sources `keys` of `server`, those the index has.
    public func listedIdentities(server: String, keys: Set<FileKey>) throws(LabstreamError) -> [FileIdentity] {
        try read("the catalog") {
            try keys.sorted { ($0.itemId, $0.sourceId) < ($1.itemId, $1.sourceId) }.compactMap { key in
                try db.query(
                    """
                    SELECT m.size, m.container, m.path, \(Self.itemIdentity) FROM media_sources m JOIN items i ON i.server = m.server AND i.id = m.item_id
                    WHERE m.server = ? AND m.item_id = ? AND m.id = ? AND m.orphaned = 0
                    """, [.text(server), .text(key.itemId), .text(key.sourceId)]
                ).first.flatMap { r in Self.fileIdentity(key, size: r[0].int, container: r[1].text, path: r[2].text, json: r[3].text) }
            }
        }
    }

    /// The listed sources of `server` of one of `sizes` (`IdentityMatch` pairs only files of one
    /// size): a scan of the sources' sizes, so no table of the whole catalog is made.
    public func listedKeys(server: String, sizes: Set<Int64>) throws(LabstreamError) -> Set<FileKey> {
        guard !sizes.isEmpty else { return [] }
        var keys: Set<FileKey> = []
        try read("the catalog") {
            try db.withConnection { c in
                try c.forEachRow("SELECT size, item_id, id FROM media_sources WHERE server = ? AND orphaned = 0", [.text(server)]) { r in
                    guard let size = r.int(0), sizes.contains(size), let item = r.text(1), let id = r.text(2) else { return }
                    keys.insert(FileKey(server: server, itemId: item, sourceId: id))
                }
            }
        }
        return keys
    }
}
