import Foundation
import LabstreamCore

/// Generated `.nfo` documents: their bytes and the sizes last made.
extension OfflineIndex {
    /// The bytes of a generated `.nfo` as the index says now (nil: its item is gone).
    public func document(_ doc: NFODocument) throws(LabstreamError) -> [UInt8]? {
        try read("the catalog") {
            switch doc {
            case .item(let server, let id):
                var item: CatalogItem?
                try db.withConnection { c in
                    try c.forEachRow("SELECT \(Self.itemColumns) FROM items WHERE server=? AND id=?", [.text(server), .text(id)]) { r in
                        item = Self.item(r, sources: { _ in [] })
                    }
                }
                return SideFiles.document(doc, item: item, series: nil)
            case .series(let server, let series, _, _):
                let row = try db.query("SELECT details FROM series_details WHERE server=? AND series_id=?", [.text(server), .text(series)]).first
                return SideFiles.document(doc, item: nil, series: row.flatMap { Self.decodeDetails($0[0].text) })
            }
        }
    }

    /// The size and digest of each of `server`'s generated documents as last made by this
    /// build's format (`NFODocument.cacheKey` → size, digest).
    public func documentSizes(server: String) throws(LabstreamError) -> [String: (size: Int64, digest: UInt64)] {
        try read("the documents' sizes") {
            var out: [String: (size: Int64, digest: UInt64)] = [:]
            try db.withConnection { c in
                // Scanned, not found through the key's index: a seek into the table per row.
                try c.forEachRow("SELECT doc, size, digest FROM documents NOT INDEXED WHERE server=? AND format=?", [.text(server), .int(Int64(NFO.format))]) {
                    r in
                    if let doc = r.text(0), let size = r.int(1), let digest = r.int(2) { out[doc] = (size, UInt64(bitPattern: digest)) }
                }
            }
            return out
        }
    }

    /// Records the size and digest of documents just made (`NFODocument.cacheKey`).
    public func storeDocumentSizes(server: String, _ made: [(doc: String, size: Int64, digest: UInt64)]) throws(LabstreamError) {
        do {
            try db.transaction { c in
                for m in made {
                    try c.run(
                        "INSERT OR REPLACE INTO documents(server, doc, format, size, digest) VALUES(?,?,?,?,?)",
                        [.text(server), .text(m.doc), .int(Int64(NFO.format)), .int(m.size), .int(Int64(bitPattern: m.digest))])
                }
            }
        } catch { throw .storage("recording the sizes of \(server)'s .nfo documents failed: \(error)") }
    }
}
