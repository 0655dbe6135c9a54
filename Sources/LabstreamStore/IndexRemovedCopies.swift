import Foundation
import LabstreamCore

/// The stored copies of servers that were removed (`labstream server remove`): named by the path
/// each had in the mount (kept in `removed_copies` as the server's catalog goes), listed by
/// `labstream orphans`, and freed by `orphans --purge`, `cancel` or `server remove --delete-files`.
extension OfflineIndex {
    public struct RemovedCopy: Sendable, Hashable {
        public var key: FileKey
        /// `SERVER/LIBRARY/…` as the mount showed it; the key when it was removed before paths were kept.
        public var path: String
        public var bytes: Int64
        public var pinned: Bool
    }

    /// Every download row of a server the index has no catalog of (a removed one) that holds bytes.
    public func removedCopies() throws(LabstreamError) -> [RemovedCopy] {
        let servers = try serversWithCatalog()
        let paths: [FileKey: String] = try read("removed copies") {
            var out: [FileKey: String] = [:]
            for r in try db.query("SELECT server, item_id, source_id, kind, quality, path FROM removed_copies", []) {
                guard let s = r[0].text, let i = r[1].text, let id = r[2].text, let p = r[5].text,
                    let kind = r[3].text.flatMap({ FileKind(persisted: $0, quality: r[4].text) })
                else { continue }
                out[FileKey(server: s, itemId: i, sourceId: id, kind: kind)] = p
            }
            return out
        }
        return try downloads().filter { !servers.contains($0.key.server) && !$0.present.isEmpty }.map {
            RemovedCopy(key: $0.key, path: paths[$0.key] ?? $0.key.description, bytes: $0.present.byteCount, pinned: $0.pinned)
        }.sorted { $0.path < $1.path }
    }

    /// Where each stored file of `server` is in the mount now, to keep for after its catalog goes.
    func pathsOfStoredFiles(of server: String) throws(LabstreamError) -> [(FileKey, String)] {
        let tree = Dictionary(try treeFiles(server: server).map { ($0.key, $0.path.joined(separator: "/")) }, uniquingKeysWith: { a, _ in a })
        return try downloads(where: "server = ?", [.text(server)]).compactMap { row in
            guard !row.present.isEmpty else { return nil }
            // A copy at another quality or a next version is named after the file it belongs to.
            let owner = FileStatus.owner(of: row.key)
            let label: String
            switch row.key.kind {
            case .original: label = row.key.sourceId
            case .copy(let quality): label = "copy at \(quality)"
            case .nextVersion: label = "next version"
            }
            guard let path = tree[row.key] ?? tree[owner].map({ $0 + " (\(label))" }) else { return nil }
            return (row.key, path)
        }
    }

    /// Lets go of `keys`' copies: their bytes and sidecars are deleted, then their rows and
    /// digests. Returns how many files held how many bytes.
    @discardableResult
    public func purge(_ keys: [FileKey], layout: DataLayout) throws(LabstreamError) -> (files: Int, bytes: Int64) {
        var freed: (files: Int, bytes: Int64) = (0, 0)
        let living = try serversWithCatalog()
        for key in keys {
            guard let row = try download(key) else { continue }
            if DataLayout.isValidPartialPath(row.partialPath) {
                let path = layout.absolute(row.partialPath)
                // Another server's name of a shared copy keeps the bytes, and its check.
                try releasingName(of: key) { _ = unlink(path) }
                unlink(CopySidecar.path(ofPartial: path))
            }
            // A removed server's artwork and subtitles go with the copy they belong to.
            if !living.contains(key.server) {
                for asset in try sideAssets(server: key.server) where asset.key.itemId == key.itemId {
                    if let file = asset.file, !file.contains(".."), unlink(layout.absolute(file)) == 0 { freed.bytes += asset.size }
                    do {
                        try db.run(
                            "DELETE FROM side_assets WHERE server=? AND item_id=? AND asset=?", [.text(key.server), .text(key.itemId), .text(asset.key.asset)])
                    } catch { throw .storage("forgetting \(key)'s side assets in the index failed: \(error)") }
                }
            }
            do {
                try db.transaction { c in
                    for table in ["downloads", "segments", "removed_copies"] {
                        try c.run("DELETE FROM \(table) WHERE \(Self.keyMatch)", Self.keyValues(key))
                    }
                }
            } catch { throw .storage("forgetting \(key) in the index failed: \(error)") }
            freed = (freed.files + (row.present.isEmpty ? 0 : 1), freed.bytes + row.present.byteCount)
        }
        forgetStored()  // the bytes each file holds are read again when next asked
        // A removed server with no copy left: its series' and seasons' artwork goes too.
        let withRows = Set(try downloads().map(\.key.server))
        for server in Set(keys.map(\.server)) where !living.contains(server) && !withRows.contains(server) {
            freed.bytes += try purgeSideAssets(of: server, layout: layout)
        }
        return freed
    }

    /// Deletes every side asset of `server`, bytes and rows; returns the bytes freed.
    func purgeSideAssets(of server: String, layout: DataLayout) throws(LabstreamError) -> Int64 {
        var bytes: Int64 = 0
        for asset in try sideAssets(server: server) {
            if let file = asset.file, !file.contains(".."), unlink(layout.absolute(file)) == 0 { bytes += asset.size }
        }
        do { try db.run("DELETE FROM side_assets WHERE server=?", [.text(server)]) } catch {
            throw .storage("forgetting \(server)'s side assets in the index failed: \(error)")
        }
        return bytes
    }

    /// Deletes every stored copy, partial and side asset of `server` (`server remove --delete-files`).
    @discardableResult
    public func purgeServer(_ server: String, layout: DataLayout) throws(LabstreamError) -> (files: Int, bytes: Int64) {
        var freed = try purge(try downloads(where: "server = ?", [.text(server)]).map(\.key), layout: layout)
        freed.bytes += try purgeSideAssets(of: server, layout: layout)
        return freed
    }

    /// Unpins `keys` (copies of a removed server: they stay listed in `labstream orphans`).
    public func unpinRemoved(_ keys: [FileKey]) throws(LabstreamError) {
        do {
            for key in keys {
                try db.run("UPDATE downloads SET pinned=0 WHERE \(Self.keyMatch)", Self.keyValues(key))
            }
        } catch { throw .storage("unpinning in the index failed: \(error)") }
    }
}
