import Foundation
import LabstreamCore

/// Artwork and subtitles fetched beside the media: one row per asset, its bytes in `side/`.
extension OfflineIndex {
    public enum SideAssetState: String, Sendable, Hashable {
        /// Its bytes are in `file`, checked.
        case stored
        /// The last try failed (`reason`); tried again after `retryAt`.
        case failed
    }

    public struct SideAssetRow: Sendable, Hashable {
        public var key: SideAssetKey
        public var state: SideAssetState
        /// The server's tag the bytes were fetched at.
        public var tag: String?
        /// Relative to the data directory; set when stored.
        public var file: String?
        public var fileExtension: String?
        public var size: Int64
        /// Why the last try failed (stored as its code and parameter).
        public var reason: SideAssetFailure?
        public var attempts: Int
        public var retryAt: Int64

        public init(
            key: SideAssetKey, state: SideAssetState, tag: String?, file: String?, fileExtension: String?, size: Int64,
            reason: SideAssetFailure?, attempts: Int, retryAt: Int64
        ) {
            self.key = key
            self.state = state
            self.tag = tag
            self.file = file
            self.fileExtension = fileExtension
            self.size = size
            self.reason = reason
            self.attempts = attempts
            self.retryAt = retryAt
        }
    }

    public func sideAssets(server: String? = nil) throws(LabstreamError) -> [SideAssetRow] {
        try read("side assets") {
            let condition = server == nil ? "" : " WHERE server=?"
            return try db.query(
                "SELECT server, item_id, asset, state, tag, file, ext, size, reason, attempts, retry_at, reason_detail FROM side_assets\(condition)",
                server.map { [SQLValue.text($0)] } ?? []
            ).compactMap { r in
                guard let server = r[0].text, let item = r[1].text, let asset = r[2].text, let state = r[3].text.flatMap(SideAssetState.init) else {
                    return nil
                }
                // A stored file must be one of ours (a damaged index cannot point elsewhere).
                let file = r[5].text.flatMap { DataLayout.isValidSideAssetPath($0) ? $0 : nil }
                return SideAssetRow(
                    key: SideAssetKey(server: server, itemId: item, asset: asset), state: state == .stored && file == nil ? .failed : state,
                    tag: r[4].text, file: file, fileExtension: r[6].text, size: r[7].int ?? 0,
                    reason: r[8].text.map { SideAssetFailure(persisted: $0, parameter: r[11].text) }, attempts: Int(r[9].int ?? 0), retryAt: r[10].int ?? 0)
            }
        }
    }

    /// The bytes of every stored side asset (they count in the cache size).
    public func storedSideAssetBytes() throws(LabstreamError) -> Int64 {
        try read("side assets") { try db.query("SELECT COALESCE(SUM(size), 0) FROM side_assets WHERE state='stored'", []).first?[0].int ?? 0 }
    }

    public func storedSideAssetBytesByServer() throws(LabstreamError) -> [String: Int64] {
        try read("side assets") {
            var out: [String: Int64] = [:]
            for r in try db.query("SELECT server, COALESCE(SUM(size), 0) FROM side_assets WHERE state='stored' GROUP BY server", []) {
                if let server = r[0].text { out[server] = r[1].int ?? 0 }
            }
            return out
        }
    }

    public func saveSideAsset(_ row: SideAssetRow) throws(LabstreamError) {
        do {
            try db.run(
                "INSERT OR REPLACE INTO side_assets(server, item_id, asset, state, tag, file, ext, size, reason, attempts, retry_at, reason_detail) VALUES(?,?,?,?,?,?,?,?,?,?,?,?)",
                [
                    .text(row.key.server), .text(row.key.itemId), .text(row.key.asset), .text(row.state.rawValue), row.tag.map(SQLValue.text) ?? .null,
                    row.file.map(SQLValue.text) ?? .null, row.fileExtension.map(SQLValue.text) ?? .null, .int(row.size),
                    row.reason.map { .text($0.persisted.code) } ?? .null, .int(Int64(row.attempts)), .int(row.retryAt),
                    row.reason?.persisted.parameter.map(SQLValue.text) ?? .null
                ])
        } catch { throw .storage("recording the side asset \(row.key) failed: \(error)") }
    }

    public func removeSideAsset(_ key: SideAssetKey) throws(LabstreamError) {
        do {
            try db.run("DELETE FROM side_assets WHERE server=? AND item_id=? AND asset=?", [.text(key.server), .text(key.itemId), .text(key.asset)])
        } catch { throw .storage("forgetting the side asset \(key) failed: \(error)") }
    }

    // MARK: - Item extras

    /// What `server` told item by item, by item id: the item's version it was asked at (`tag`)
    /// and the details (nil: it had nothing more to say).
    public func itemExtras(server: String) throws(LabstreamError) -> [String: (tag: String, details: ItemDetails?)] {
        try read("item extras") {
            var out: [String: (tag: String, details: ItemDetails?)] = [:]
            for r in try db.query("SELECT item_id, tag, details FROM item_extras WHERE server=?", [.text(server)]) {
                if let item = r[0].text, let tag = r[1].text { out[item] = (tag, Self.decodeDetails(r[2].text)) }
            }
            return out
        }
    }

    public func saveItemExtras(server: String, itemId: String, tag: String, details: ItemDetails?) throws(LabstreamError) {
        do {
            try db.run(
                "INSERT OR REPLACE INTO item_extras(server, item_id, tag, details) VALUES(?,?,?,?)",
                [.text(server), .text(itemId), .text(tag), Self.encodeDetails(details)])
        } catch { throw .storage("recording what \(server) said of item \(itemId) failed: \(error)") }
    }

}

extension DataLayout {
    public var sideAssetsDir: String { root + "/side" }

    /// Where an asset's bytes go, relative to the data dir: a digest of its key, so hostile ids
    /// cannot leave the directory.
    public func sideAssetRelativePath(for key: SideAssetKey, extension ext: String) -> String {
        "side/" + digestName(key.description) + "." + Naming.sanitizeExtension(ext)
    }

    public static func isValidSideAssetPath(_ p: String) -> Bool {
        let parts = p.split(separator: "/", omittingEmptySubsequences: false)
        return parts.count == 2 && parts[0] == "side" && !parts[1].hasPrefix(".") && !parts[1].isEmpty
    }
}
