import Foundation
import LabstreamCore
import Synchronization

// Why this file is long: every statement against the index lives beside the others, over the
// one connection (catalog, downloads and their segments, the reserve), so that what each
// transaction changes together can be read in one place. The schema and its migrations are in
// IndexSchema.swift.

/// The offline index: servers, libraries, items, media sources (with their tree paths) and
/// per-file download state. Never a token. Schema-versioned; a current index that cannot be
/// read fails closed.
public final class OfflineIndex: Sendable {
    public static let schemaVersion: Int64 = 17
    public let db: SQLiteDatabase

    public struct ServerRow: Sendable, Hashable {
        public var name: String
        public var type: String
        public var url: String
        public var serverId: String?
        public var lastSync: Int64?
        /// When the whole catalog was last read (not merged changes): `FullRefreshPolicy`.
        public var lastFullSync: Int64?

        public init(name: String, type: String, url: String, serverId: String?, lastSync: Int64?, lastFullSync: Int64? = nil) {
            self.name = name
            self.type = type
            self.url = url
            self.serverId = serverId
            self.lastSync = lastSync
            self.lastFullSync = lastFullSync
        }
    }

    public init(path: String) throws(LabstreamError) {
        do {
            db = try SQLiteDatabase(path: path)
            try db.exec("PRAGMA journal_mode=WAL")
            try db.exec("PRAGMA synchronous=NORMAL")
            try db.exec("PRAGMA foreign_keys=ON")
        } catch {
            throw .storage("cannot open the index \(path): \(error). Run `labstream repair` to put its last backup in its place (nothing stored is deleted).")
        }
        // SQLite opens a truncated or partly overwritten file happily and fails later, page by
        // page. Check the structure once, before anything is trusted.
        let verdict: [String]
        do { verdict = try db.query("PRAGMA quick_check").compactMap { $0.first?.text } } catch {
            throw .storage(
                "the index \(path) is unreadable (\(error)); Labstream will not guess. Run `labstream repair` to put its last backup in its place (nothing stored is deleted)."
            )
        }
        guard verdict == ["ok"] else {
            throw .storage(
                "the index \(path) is damaged (\(verdict.prefix(3).joined(separator: "; "))); Labstream will not guess. Run `labstream repair` to put its last backup in its place (nothing stored is deleted)."
            )
        }
        try migrate()
    }

    func migrate() throws(LabstreamError) {
        do {
            let version: Int64 = try db.transaction { c in
                let hasMeta = try c.query("SELECT count(*) FROM sqlite_master WHERE type='table' AND name='meta'")[0][0].int ?? 0
                let tables = try c.query("SELECT count(*) FROM sqlite_master WHERE type='table'")[0][0].int ?? 0
                if hasMeta == 0 {
                    guard tables == 0 else { return -1 }  // someone else's database: do not touch it
                    try Self.createV1(c)
                }
                var version = Int64(try c.query("SELECT value FROM meta WHERE key='schema_version'").first?[0].text ?? "") ?? 0
                // Forward migrations, each in this same transaction: a failure leaves the old schema.
                while version >= 1 && version < Self.schemaVersion {
                    try Self.migrations[Int(version) - 1](c)
                    version += 1
                }
                return version
            }
            if version == -1 { throw LabstreamError.storage("\(db.path) is not a Labstream index (no schema version); move it aside") }
            if version != Self.schemaVersion {
                throw LabstreamError.storage(
                    "\(db.path) has index schema \(version), this Labstream understands \(Self.schemaVersion); upgrade Labstream or move the index aside")
            }
            // A file that says the current version must have its shape too (a development
            // build's index may not): refuse rather than fail later on a missing column.
            for (table, columns) in Self.schemaColumns {
                let present = Set(try db.query("SELECT name FROM pragma_table_info(?)", [.text(table)]).compactMap { $0[0].text })
                let missing = columns.filter { !present.contains($0) }
                guard missing.isEmpty else {
                    let what = present.isEmpty ? "table \(table)" : "\(table).\(missing.joined(separator: ", "))"
                    throw LabstreamError.storage(
                        "the index \(db.path) says schema \(version) but lacks \(what); Labstream will not guess. Run `labstream repair` to put its last backup in its place (nothing stored is deleted)."
                    )
                }
            }
        } catch let e as LabstreamError {
            throw e
        } catch {
            throw .storage(
                "the index \(db.path) is unreadable (\(error)); Labstream will not guess. Run `labstream repair` to put its last backup in its place (nothing stored is deleted)."
            )
        }
    }

    // MARK: - Backups

    /// Where the verified copy of the index at `indexPath` lives.
    public static func backupPath(of indexPath: String) -> String {
        (indexPath as NSString).deletingLastPathComponent + "/index.backup.sqlite"
    }

    /// Writes a consistent copy of the index beside it (`VACUUM INTO` a new file, checked with
    /// `quick_check`, then renamed over the previous backup), so a damaged index can be
    /// replaced by it (`labstream repair`). The previous backup stays if anything fails.
    /// `unlessNewerThan`: seconds; a backup younger than that is kept as it is (a library of
    /// 100 000 items refreshed every minute need not be copied every minute: the copies stored
    /// since are described by their sidecars anyway).
    public func backUp(unlessNewerThan seconds: Double = 0) throws(LabstreamError) {
        let target = Self.backupPath(of: db.path)
        var st = stat()
        if seconds > 0, stat(target, &st) == 0, Date().timeIntervalSince1970 - Double(st.st_mtim.tv_sec) < seconds { return }
        let fresh = target + ".new"
        unlink(fresh)
        do {
            _ = try db.query("VACUUM INTO ?", [.text(fresh)])
            let copy = try SQLiteDatabase(path: fresh)
            let verdict = try copy.query("PRAGMA quick_check").compactMap { $0.first?.text }
            guard verdict == ["ok"] else { throw LabstreamError.storage("the new backup fails its check (\(verdict.prefix(2)))") }
        } catch {
            unlink(fresh)
            throw .storage("backing up the index to \(target) failed: \(error)")
        }
        let fd = open(fresh, O_RDONLY)
        if fd >= 0 { _ = fsync(fd); close(fd) }
        guard rename(fresh, target) == 0 else {
            unlink(fresh)
            throw .storage("backing up the index to \(target) failed: \(String(cString: strerror(errno)))")
        }
    }

    /// Puts the backup in the place of a missing index (one moved aside after damage), before
    /// it is opened. Returns whether it did.
    public static func restoreBackupIfMissing(indexPath: String) throws(LabstreamError) -> Bool {
        let backup = backupPath(of: indexPath)
        guard access(indexPath, F_OK) != 0, access(backup, F_OK) == 0 else { return false }
        // A log left by the index that is gone belongs to it, not to the backup: SQLite would
        // replay it into the wrong file. Kept aside if it holds anything.
        var st = stat()
        if stat(indexPath + "-wal", &st) == 0 {
            if st.st_size > 0 { rename(indexPath + "-wal", indexPath + "-wal.of-missing-index") } else { unlink(indexPath + "-wal") }
        }
        unlink(indexPath + "-shm")
        try copyFile(backup, to: indexPath)
        return true
    }

    /// Copies `source` to `target` durably (a temporary name, fsync, rename).
    static func copyFile(_ source: String, to target: String) throws(LabstreamError) {
        let temporary = target + ".restoring"
        do {
            unlink(temporary)
            try FileManager.default.copyItem(atPath: source, toPath: temporary)
        } catch { throw .storage("copying \(source) to \(target) failed: \(error)") }
        let fd = open(temporary, O_RDONLY)
        if fd >= 0 { _ = fsync(fd); close(fd) }
        guard rename(temporary, target) == 0 else { throw .storage("copying \(source) to \(target) failed: \(String(cString: strerror(errno)))") }
    }

    /// Moves an index (and its write-ahead log) aside as `index.sqlite.damaged-STAMP`, never
    /// deleting it. Returns the new name, nil when there was none.
    public static func moveAside(indexPath: String, stamp: String) throws(LabstreamError) -> String? {
        guard access(indexPath, F_OK) == 0 else { return nil }
        let aside = indexPath + ".damaged-" + stamp
        for suffix in ["", "-wal", "-shm"] where access(indexPath + suffix, F_OK) == 0 {
            guard rename(indexPath + suffix, aside + suffix) == 0 else {
                throw .storage("moving \(indexPath + suffix) aside failed: \(String(cString: strerror(errno)))")
            }
        }
        return aside
    }

    /// Moves the write-ahead log into the database file (a clean shutdown). Returns what went
    /// wrong, if anything; the log is still valid then.
    public func checkpoint() -> String? {
        do { _ = try db.query("PRAGMA wal_checkpoint(TRUNCATE)") } catch { return "\(error)" }
        return nil
    }

    // MARK: - Catalog

    /// A sync that found nothing changed: only its time is kept (the catalog stays as it is).
    public func noteSynced(server: String, now: Int64) throws(LabstreamError) {
        do {
            try db.transaction { c in try c.run("UPDATE servers SET last_sync=? WHERE name=?", [.int(now), .text(server)]) }
        } catch {
            throw .storage("noting the sync of \(server) failed (\(error)); its catalog is unchanged")
        }
    }

    /// Replaces one server's catalog in a single transaction: a failure leaves the old one.
    /// Download rows are never touched here. An item without details takes those `staged` holds.
    /// Every row is written only where it differs; returns whether any did (the daily full
    /// refresh of an unchanged library then rebuilds no tree). `full`: the catalog is the
    /// server's whole, read now (not changes merged into the stored one), recorded as its last
    /// whole read.
    @discardableResult
    public func replaceCatalog(
        server: ServerRow, libraries: [LibraryCatalog], tree: [TreeFile], now: Int64, staged: StagedDetails? = nil, full: Bool = false
    ) throws(LabstreamError) -> Bool {
        let pathOf = Dictionary(tree.map { ($0.key, $0.path.joined(separator: "/")) }, uniquingKeysWith: { a, _ in a })
        do {
            return try db.transaction { c in
                var changed = false
                // Files gone from the server that still have local bytes stay, marked orphaned.
                let stored = try c.query(
                    """
                    SELECT m.item_id, m.id FROM media_sources m JOIN downloads d
                    ON d.server = m.server AND d.item_id = m.item_id AND d.source_id = m.id
                    WHERE m.server = ? AND d.ranges != ''
                    """, [.text(server.name)])
                var keep: [(String, String)] = []
                for r in stored {
                    guard let item = r[0].text, let source = r[1].text else { continue }
                    if pathOf[FileKey(server: server.name, itemId: item, sourceId: source)] == nil { keep.append((item, source)) }
                }
                // Every row is written only where it changed (below), so what is kept of an
                // unchanged row (its generated document's size) stays.
                let libraryRows = { (rows: [[SQLValue]]) in Set(rows) }
                let before = libraryRows(try c.query("SELECT id, name, left_out FROM libraries WHERE server=?", [.text(server.name)]))
                let after = libraryRows(libraries.map { [.text($0.id), .text($0.name), $0.leftOut.map(SQLValue.text) ?? .null] })
                changed = changed || before != after
                try c.run("DELETE FROM libraries WHERE server=?", [.text(server.name)])
                for (item, source) in keep {
                    try c.run(
                        "UPDATE media_sources SET orphaned=1 WHERE server=? AND item_id=? AND id=? AND orphaned=0",
                        [.text(server.name), .text(item), .text(source)])
                    changed = changed || c.changes > 0
                }
                // Only orphans need the new paths as a set (100 000 strings when every sync made it).
                let taken = keep.isEmpty ? [] : Set(pathOf.values)
                for (item, source) in keep {
                    // A new file took the orphan's name: the orphan moves aside rather than hide it.
                    let path =
                        try c.query(
                            "SELECT tree_path FROM media_sources WHERE server=? AND item_id=? AND id=?",
                            [.text(server.name), .text(item), .text(source)]
                        ).first?[0].text ?? ""
                    if taken.contains(path) {
                        try c.run(
                            "UPDATE media_sources SET tree_path=? WHERE server=? AND item_id=? AND id=?",
                            [.text(path + " (orphaned)"), .text(server.name), .text(item), .text(source)])
                        changed = true
                    }
                }
                try c.run(
                    """
                    INSERT OR REPLACE INTO servers(name, type, url, server_id, last_sync, last_full_sync)
                    VALUES(?,?,?,?,?, CASE WHEN ? THEN ? ELSE (SELECT last_full_sync FROM servers WHERE name = ?) END)
                    """,
                    [
                        .text(server.name), .text(server.type), .text(server.url), server.serverId.map(SQLValue.text) ?? .null, .int(now),
                        .int(full ? 1 : 0), .int(now), .text(server.name)
                    ])
                try c.run("CREATE TEMP TABLE IF NOT EXISTS synced(kind TEXT NOT NULL, id TEXT NOT NULL, PRIMARY KEY(kind, id))")
                try c.run("DELETE FROM temp.synced")
                for library in libraries {
                    try c.run(
                        "INSERT OR REPLACE INTO libraries(server, id, name, left_out) VALUES(?,?,?,?)",
                        [.text(server.name), .text(library.id), .text(library.name), library.leftOut.map(SQLValue.text) ?? .null])
                    for (series, details) in library.seriesDetails {
                        try c.run(
                            """
                            INSERT INTO series_details(server, series_id, details) VALUES(?,?,?)
                            ON CONFLICT(server, series_id) DO UPDATE SET details = excluded.details WHERE details IS NOT excluded.details
                            """, [.text(server.name), .text(series), Self.encodeDetails(details)])
                        changed = changed || c.changes > 0
                        try c.run("INSERT OR IGNORE INTO temp.synced(kind, id) VALUES('series', ?)", [.text(series)])
                    }
                    for item in library.items {
                        func number(_ n: Int?) -> SQLValue { n.map { .int(Int64($0)) } ?? .null }
                        func text(_ t: String?) -> SQLValue { t.map(SQLValue.text) ?? .null }
                        let columns: KeyValuePairs<String, SQLValue> = [
                            "server": .text(server.name), "id": .text(item.id), "library": .text(library.id), "kind": .text(item.kind.rawValue),
                            "title": .text(item.title), "year": number(item.year), "series_id": text(item.seriesId), "series_name": text(item.seriesName),
                            "series_year": number(item.seriesYear), "season": number(item.seasonNumber), "episode": number(item.episodeNumber),
                            "modified": .int(item.modified), "album": text(item.album), "album_artist": text(item.albumArtist),
                            "disc": number(item.discNumber), "track": number(item.trackNumber), "folders": Self.encodeFolders(item.folders),
                            "played": .int(item.played ? 1 : 0),
                            "details": item.details == nil ? try staged?.details(of: item.id, on: c) ?? .null : Self.encodeDetails(item.details)
                        ]
                        assert(columns.map(\.key) == ["server"] + Self.itemColumnNames)
                        try c.run(Self.itemUpsert, columns.map(\.value))
                        changed = changed || c.changes > 0
                        try c.run("INSERT OR IGNORE INTO temp.synced(kind, id) VALUES('item', ?)", [.text(item.id)])
                        for source in item.sources {
                            let key = FileKey(server: server.name, itemId: item.id, sourceId: source.id)
                            guard let path = pathOf[key] else { continue }
                            try c.run(
                                Self.sourceUpsert,
                                [
                                    .text(server.name), .text(item.id), .text(source.id), source.name.map(SQLValue.text) ?? .null,
                                    source.container.map(SQLValue.text) ?? .null, .int(max(source.size ?? 0, 0)),
                                    source.etag.map(SQLValue.text) ?? .null, .text(path), .int(item.modified),
                                    source.bitrate.map { .int(Int64($0)) } ?? .null, source.itemId.map(SQLValue.text) ?? .null
                                ])
                            changed = changed || c.changes > 0
                            try c.run("INSERT OR IGNORE INTO temp.synced(kind, id) VALUES('source', ? || char(10) || ?)", [.text(item.id), .text(source.id)])
                        }
                    }
                }
                // Sources gone from the server go, but those with local bytes stay (orphaned, above).
                try c.run(
                    "DELETE FROM media_sources WHERE server=? AND item_id || char(10) || id NOT IN (SELECT id FROM temp.synced WHERE kind='source')"
                        + (keep.isEmpty ? "" : " AND NOT (" + keep.map { _ in "(item_id=? AND id=?)" }.joined(separator: " OR ") + ")"),
                    [.text(server.name)] + keep.flatMap { [SQLValue.text($0.0), .text($0.1)] })
                changed = changed || c.changes > 0
                try c.run("DELETE FROM items WHERE server=? AND id NOT IN (SELECT id FROM temp.synced WHERE kind='item')", [.text(server.name)])
                changed = changed || c.changes > 0
                try c.run(
                    "DELETE FROM series_details WHERE server=? AND series_id NOT IN (SELECT id FROM temp.synced WHERE kind='series')",
                    [.text(server.name)])
                changed = changed || c.changes > 0
                try c.run("DELETE FROM temp.synced")
                return changed
            }
        } catch {
            throw .storage("saving the catalog of \(server.name) failed (\(error)); the previous catalog is unchanged")
        }
    }

    /// How much of each item a catalog read takes.
    public enum CatalogRead: Sendable {
        case whole
        /// What the tree's side files are planned from: each item's kind, series, season, time
        /// and, of its details, its artwork and chapters; no titles, plots, genres, people… (a
        /// document is made from its own row), and no media sources (the tree's files say them).
        /// At 100 000 items, decoding every item's whole details was a fifth of an offline mount.
        case sideFiles
    }

    /// A server's catalog as stored (orphans left out: they are kept by `replaceCatalog` anyway),
    /// for merging an incremental refresh into.
    public func catalog(server: String, reading: CatalogRead = .whole) throws(LabstreamError) -> [LibraryCatalog] {
        try read("the catalog") {
            let libraries = try db.query("SELECT id, name, left_out FROM libraries WHERE server=? ORDER BY id", [.text(server)])
            let columns: String
            switch reading {
            case .whole: columns = Self.itemColumns
            case .sideFiles:
                // The same positions, the texts not needed read as NULL; SQLite's JSON functions
                // pick the two members out of the details, and an item with neither decodes nothing.
                columns = Self.itemColumnNames.map { name in
                    switch name {
                    case "title", "album", "album_artist", "folders": return "NULL"
                    case "details":
                        // Details are written with sorted keys, so most items' start with these
                        // two empty members and need no JSON parse at all.
                        return """
                            CASE WHEN substr(details, 1, 27) = '{"assets":[],"chapters":[],' THEN NULL
                            WHEN json_valid(details) AND (json_array_length(details, '$.assets') > 0 OR json_array_length(details, '$.chapters') > 0)
                            THEN json_object('assets', json(json_extract(details, '$.assets')), 'chapters', json(json_extract(details, '$.chapters'))) END
                            """
                    default: return name
                    }
                }.joined(separator: ", ")
            }
            // Row by row (as `listedSources`): the items kept sit together, with no freed row
            // between them for what the mount keeps after them to be scattered into.
            var sourcesOf: [String: [MediaSource]] = [:]
            var itemsOf: [String: [CatalogItem]] = [:]
            try db.withConnection { c in
                // The side files are planned from the tree's files, not from items' sources.
                if reading == .whole {
                    try c.forEachRow(
                        """
                        SELECT item_id, id, name, container, size, etag, bitrate, remote_item FROM media_sources WHERE server=? AND orphaned=0
                        ORDER BY item_id, rowid
                        """, [.text(server)]
                    ) { r in
                        guard let item = r.text(0), let id = r.text(1) else { return }
                        sourcesOf[item, default: []].append(
                            MediaSource(
                                id: id, name: r.text(2), container: r.text(3), size: r.int(4), etag: r.text(5),
                                bitrate: r.int(6).flatMap { Int(exactly: $0) }, itemId: r.text(7)))
                    }
                }
                // Side files look items up by id, so they take the table's own order: a plain scan
                // is a third of walking the key's index and sorting by library.
                let from = reading == .whole ? "items WHERE server=? ORDER BY library, id" : "items NOT INDEXED WHERE server=?"
                var library = ""
                try c.forEachRow("SELECT \(columns) FROM \(from)", [.text(server)]) { r in
                    guard r.withText(1, { $0 != nil }), let item = Self.item(r, sources: { sourcesOf[$0] ?? [] }) else { return }
                    if !r.withText(1, { $0!.elementsEqual(library.utf8) }) { library = r.text(1)! }
                    itemsOf[library, default: []].append(item)
                }
            }
            var seriesDetails: [String: ItemDetails] = [:]
            for r in try db.query("SELECT series_id, details FROM series_details WHERE server=?", [.text(server)]) {
                if let series = r[0].text, let details = Self.decodeDetails(r[1].text) { seriesDetails[series] = details }
            }
            return libraries.compactMap { r in
                guard let id = r[0].text else { return nil }
                let items = itemsOf[id] ?? []
                let ofSeries = Set(items.compactMap(\.seriesId))
                return LibraryCatalog(
                    id: id, name: r[1].text ?? id, items: items, leftOut: r[2].text,
                    seriesDetails: seriesDetails.filter { ofSeries.contains($0.key) })
            }
        }
    }

    /// The files of `server`'s catalog (media sources of its items, orphans left out).
    public func fileCount(server: String) throws(LabstreamError) -> Int {
        try read("the catalog") {
            let count = try db.query(
                """
                SELECT count(*) FROM media_sources m JOIN items i ON i.server = m.server AND i.id = m.item_id
                WHERE m.server = ? AND m.orphaned = 0
                """, [.text(server)]
            ).first?.first?.int
            return Int(count ?? 0)
        }
    }

    /// `server`'s libraries with only what a refresh needs to ask for changes: each library's
    /// item ids and each series' year; no items, sources or details.
    public func catalogOutline(server: String) throws(LabstreamError) -> CatalogOutline {
        try read("the catalog") {
            var itemIds: [String: Set<String>] = [:]
            var seriesYears: [String: Int?] = [:]
            for r in try db.query("SELECT id, library, series_id, series_year FROM items WHERE server=?", [.text(server)]) {
                guard let id = r[0].text, let library = r[1].text else { continue }
                itemIds[library, default: []].insert(id)
                if let series = r[2].text, seriesYears[series] == nil { seriesYears[series] = r[3].int.map { Int($0) } }
            }
            let libraries = try db.query("SELECT id, name FROM libraries WHERE server=? ORDER BY id", [.text(server)]).compactMap {
                r -> CatalogOutline.Library? in
                guard let id = r[0].text else { return nil }
                return CatalogOutline.Library(id: id, name: r[1].text ?? id, itemIds: itemIds[id] ?? [])
            }
            return CatalogOutline(libraries: libraries, seriesYears: seriesYears)
        }
    }

    /// An `items` row's columns as `item(_:sources:)` reads them (and `replaceCatalog` writes
    /// them, after `server`).
    static let itemColumnNames = [
        "id", "library", "kind", "title", "year", "series_id", "series_name", "series_year", "season", "episode",
        "modified", "album", "album_artist", "disc", "track", "folders", "played", "details"
    ]
    static let itemColumns = itemColumnNames.joined(separator: ", ")

    /// Writes an item row; an unchanged row is not written (the update's WHERE), so its
    /// triggers do not fire and what is kept of it (its document's size) stays.
    static let itemUpsert: String = {
        let changeable = itemColumnNames.dropFirst()  // all but id
        return """
            INSERT INTO items(server, \(itemColumns)) VALUES(\(Array(repeating: "?", count: itemColumnNames.count + 1).joined(separator: ",")))
            ON CONFLICT(server, id) DO UPDATE SET \(changeable.map { "\($0) = excluded.\($0)" }.joined(separator: ", "))
            WHERE \(changeable.map { "\($0) IS NOT excluded.\($0)" }.joined(separator: " OR "))
            """
    }()

    /// A media source written only where it differs; one the server lists again is no longer
    /// orphaned.
    static let sourceUpsert: String = {
        let changeable = ["name", "container", "size", "etag", "tree_path", "modified", "orphaned", "bitrate", "remote_item"]
        return """
            INSERT INTO media_sources(server, item_id, id, name, container, size, etag, tree_path, modified, orphaned, bitrate, remote_item)
            VALUES(?,?,?,?,?,?,?,?,?,0,?,?)
            ON CONFLICT(server, item_id, id) DO UPDATE SET \(changeable.map { "\($0) = excluded.\($0)" }.joined(separator: ", "))
            WHERE \(changeable.map { "\($0) IS NOT excluded.\($0)" }.joined(separator: " OR "))
            """
    }()

    /// An `items` row read with `itemColumns`.
    static func item(_ r: borrowing Row, sources: (String) -> [MediaSource]) -> CatalogItem? {
        guard let kind = r.withText(2, { $0.flatMap { ItemKind(rawValue: String(decoding: $0, as: UTF8.self)) } }), let id = r.text(0)
        else { return nil }
        return CatalogItem(
            id: id, kind: kind, title: r.text(3) ?? "", year: r.int(4).map { Int($0) }, seriesId: r.text(5), seriesName: r.text(6),
            seriesYear: r.int(7).map { Int($0) }, seasonNumber: r.int(8).map { Int($0) }, episodeNumber: r.int(9).map { Int($0) },
            album: r.text(11), albumArtist: r.text(12), discNumber: r.int(13).map { Int($0) }, trackNumber: r.int(14).map { Int($0) },
            folders: Self.decodeFolders(r.text(15)), modified: r.int(10) ?? 0, sources: sources(id), played: r.int(16) == 1,
            details: Self.decodeDetails(r.text(17)))
    }

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

    /// The libraries of `server` left out of the tree, with why.
    public func leftOutLibraries(server: String) throws(LabstreamError) -> [(name: String, why: String)] {
        try read("the catalog") {
            try db.query("SELECT name, left_out FROM libraries WHERE server=? AND left_out IS NOT NULL ORDER BY name", [.text(server)])
                .compactMap { r in r[1].text.map { (r[0].text ?? "", $0) } }
        }
    }

    public func servers() throws(LabstreamError) -> [ServerRow] {
        try read("servers") {
            try db.query("SELECT name, type, url, server_id, last_sync, last_full_sync FROM servers ORDER BY name").map {
                ServerRow(
                    name: $0[0].text ?? "", type: $0[1].text ?? "", url: $0[2].text ?? "", serverId: $0[3].text, lastSync: $0[4].int,
                    lastFullSync: $0[5].int)
            }
        }
    }

    /// The servers that have a catalog in the index (a sync succeeded once).
    public func serversWithCatalog() throws(LabstreamError) -> Set<String> {
        try read("the catalog") { Set(try db.query("SELECT DISTINCT server FROM media_sources").compactMap { $0[0].text }) }
    }

    public func treeFiles(server: String? = nil) throws(LabstreamError) -> [TreeFile] {
        // A pinned complete copy of an older version is what is shown until its next version
        // replaces it (an unpinned one is simply fetched again when read).
        let sources = try listedSources(server: server).map { Self.shown($0.file, keeping: $0.kept) ?? $0.file }
        return try read("the catalog") {
            // Finished copies at another quality appear beside their original.
            let finished = try db.query(
                """
                SELECT server, item_id, source_id, total, source_tag, partial FROM downloads WHERE source_id LIKE '%@%' AND status IN ('complete', 'unverified')
                \(server == nil ? "" : "AND server=?")
                """, server.map { [.text($0)] } ?? [])
            guard !finished.isEmpty else { return sources }
            let byKey = Dictionary(sources.map { ($0.key, $0) }, uniquingKeysWith: { a, _ in a })
            let copies = finished.compactMap { r -> TreeFile? in
                guard let s = r[0].text, let i = r[1].text, let id = r[2].text,
                    let (base, quality) = DerivedCopy.parse(FileKey(server: s, itemId: i, sourceId: id)), let original = byKey[base]
                else { return nil }
                // Named by what arrived, not by what was asked for.
                let header = r[5].text.map { Self.header(ofPartial: (db.path as NSString).deletingLastPathComponent + "/" + $0) } ?? []
                var copy = DerivedCopy.treeFile(
                    of: original, quality: quality, size: r[3].int ?? 0,
                    extension: ContainerSniff.fileExtension(ofHeader: header) ?? DerivedCopy.container)
                copy.etag = r[4].text
                return copy
            }
            return sources + copies
        }
    }

    /// The first bytes of a stored partial (none when it cannot be read).
    public static func header(ofPartial path: String) -> [UInt8] {
        guard DataLayout.isValidPartialPath(String(path.split(separator: "/").suffix(2).joined(separator: "/"))) else { return [] }
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return [] }
        defer { close(fd) }
        var bytes = [UInt8](repeating: 0, count: ContainerSniff.headerLength)
        let n = bytes.withUnsafeMutableBytes { pread(fd, $0.baseAddress, $0.count, 0) }
        return n > 0 ? Array(bytes[0..<n]) : []
    }

    /// A download row that is a kept copy: pinned and complete.
    static let keptCopy = "pinned = 1 AND status IN ('complete', 'unverified')"
    /// Media source `m`'s kept copy, as a condition on `downloads d` (a subquery's own table, so
    /// `keptCopy`'s columns are d's).
    static let keptDownload = "d.server = m.server AND d.item_id = m.item_id AND d.source_id = m.id AND \(keptCopy)"

    /// The catalog's media sources as files, each with the pinned complete download row it has,
    /// if any; `keptOnly`: only those that have one.
    func listedSources(server: String?, keptOnly: Bool = false) throws(LabstreamError) -> [(file: TreeFile, kept: DownloadRow?)] {
        let kept = Dictionary(
            try downloads(
                where: Self.keptCopy + (server == nil ? "" : " AND server=?"),
                server.map { [.text($0)] } ?? []
            ).map { ($0.key, $0) }, uniquingKeysWith: { a, _ in a })
        return try read("the catalog") {
            // Row by row, making only the strings a file keeps: a freed row between the kept values
            // of the next left the heap fragmented (tens of MiB resident at 100 000 files). Rows
            // come in path order, so a folder's name is the previous file's string, not a copy.
            // The sources are scanned, not found through their key's index: at 100 000 files the
            // index's seeks were half of the read.
            var files: [(TreeFile, DownloadRow?)] = []
            var previous: [String] = []
            var serverName = ""
            try db.withConnection { c in
                try c.forEachRow(
                    """
                    SELECT m.server, m.item_id, NULLIF(m.id, m.item_id), m.size, m.modified, m.etag, m.tree_path, m.orphaned, m.bitrate,
                    m.remote_item, i.kind
                    FROM media_sources m NOT INDEXED LEFT JOIN items i ON i.server = m.server AND i.id = m.item_id
                    WHERE \(server == nil ? "1" : "m.server=?") \(keptOnly ? "AND EXISTS (SELECT 1 FROM downloads d WHERE \(Self.keptDownload))" : "")
                    ORDER BY m.tree_path
                    """, server.map { [.text($0)] } ?? []
                ) { r in
                    guard let i = r.text(1), r.withText(6, { $0 != nil }) else { return }
                    if !r.withText(0, { $0.map { $0.elementsEqual(serverName.utf8) } ?? false }) { serverName = r.text(0) ?? "" }
                    previous = r.withText(6) { Self.components($0!, reusing: previous) }
                    // A source's id is often its item's (Jellyfin): one string for both.
                    let file = TreeFile(
                        path: previous, key: FileKey(server: serverName, itemId: i, sourceId: r.text(2) ?? i),
                        size: r.int(3) ?? 0, modified: r.int(4) ?? 0, etag: r.text(5), orphaned: (r.int(7) ?? 0) != 0,
                        bitrate: r.int(8).flatMap { Int(exactly: $0) }, remoteItemId: r.text(9),
                        kind: r.withText(10) { $0.flatMap { ItemKind(rawValue: String(decoding: $0, as: UTF8.self)) } } ?? .movie)
                    files.append((file, kept[file.key]))
                }
            }
            return files
        }
    }

    /// A stored tree path's components, each the string `previous` has at its place when the
    /// bytes are the same (the files of one folder share their folders' names).
    static func components(_ path: UnsafeBufferPointer<UInt8>, reusing previous: [String]) -> [String] {
        var out: [String] = []
        out.reserveCapacity(previous.count)
        var start = path.startIndex
        for end in path.indices where path[end] == UInt8(ascii: "/") || end == path.endIndex - 1 {
            let bytes = UnsafeBufferPointer(rebasing: path[start..<(path[end] == UInt8(ascii: "/") ? end : end + 1)])
            start = end + 1
            guard !bytes.isEmpty else { continue }
            let place = out.count
            out.append(place < previous.count && previous[place].utf8.elementsEqual(bytes) ? previous[place] : String(decoding: bytes, as: UTF8.self))
        }
        return out
    }

    /// `file` as its kept row's older version (the old copy's size and tag), or nil when the row
    /// is of the catalog's version (or there is none).
    static func shown(_ file: TreeFile, keeping row: DownloadRow?) -> TreeFile? {
        guard let row, row.isStale(for: file) else { return nil }
        var shown = file
        shown.size = row.total
        shown.etag = row.sourceTag
        return shown
    }

    /// Forgets a server's catalog. Its download rows and bytes stay; active ones are paused
    /// (never deleted), as a sign-out pauses a backend's work.
    public func removeServer(_ name: String) throws(LabstreamError) {
        do {
            try db.transaction { c in
                try c.run(
                    "UPDATE downloads SET status='paused', reason=?, pause_cause=? WHERE server=? AND status IN ('queued','downloading','preparing')",
                    [.text(StatusReason.serverRemoved), .text(PauseCause.serverRemoved.rawValue), .text(name)])
                for table in [
                    "servers", "libraries", "items", "media_sources", "managed_entries", "monitors", "monitored_episodes", "series_details", "item_extras"
                ] {
                    try c.run("DELETE FROM \(table) WHERE \(table == "servers" ? "name" : "server")=?", [.text(name)])
                }
            }
        } catch { throw .storage("removing \(name) from the index failed: \(error)") }
    }

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
                "SELECT item_id, source_id, entry_id, revision, status, delivery, reported, reported_at, manifest FROM managed_entries WHERE \(condition)",
                parameters
            ).compactMap { r in
                guard let item = r[0].text, let source = r[1].text else { return nil }
                return ManagedEntry(
                    itemId: item, sourceId: source, id: r[2].text, revision: Int(r[3].int ?? 0), status: r[4].text ?? "",
                    deliveryFormat: r[5].text ?? "original", reported: r[6].text.flatMap(ManagedEntry.Report.init(rawValue:)),
                    reportedAt: r[7].int, manifest: r[8].text.map { Array($0.utf8) })
            }
        }
    }

    /// Records `entry` (an intent to create one when its id is nil), replacing the item's.
    public func saveManagedEntry(_ entry: ManagedEntry, server: String) throws(LabstreamError) {
        do {
            try db.run(
                "INSERT OR REPLACE INTO managed_entries(server, item_id, source_id, entry_id, revision, status, delivery, reported, reported_at, manifest) VALUES(?,?,?,?,?,?,?,?,?,?)",
                [
                    .text(server), .text(entry.itemId), .text(entry.sourceId), entry.id.map(SQLValue.text) ?? .null, .int(Int64(entry.revision)),
                    .text(entry.status), .text(entry.deliveryFormat), entry.reported.map { .text($0.rawValue) } ?? .null,
                    entry.reportedAt.map(SQLValue.int) ?? .null, entry.manifest.map { .text(String(decoding: $0, as: UTF8.self)) } ?? .null
                ])
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

    // MARK: - Downloads

    /// Bytes each file holds, as its row says, kept in memory so that `stat` (`st_blocks`, what
    /// `du` adds up) costs no query: loaded on first use, kept in step by `saveDownload`, and
    /// forgotten by any other write that moves bytes between rows.
    let stored = Mutex<[FileKey: Int64]?>(nil)
    /// Told when a file's stored bytes start, end or become whole (not on every segment).
    let storedListener = Hook<@Sendable (FileKey) -> Void>()

    public func onStoredChange(_ listener: @escaping @Sendable (FileKey) -> Void) { storedListener.set(listener) }

    /// The bytes stored for `key` (0 when none, or when the index cannot be read).
    public func storedBytes(_ key: FileKey) -> Int64 {
        stored.withLock { cache in
            if cache == nil {
                let rows = (try? downloads()) ?? []
                cache = Dictionary(rows.map { ($0.key, $0.present.byteCount) }, uniquingKeysWith: { a, _ in a })
            }
            return cache?[key] ?? 0
        }
    }

    func noteStored(_ row: DownloadRow) {
        let bytes = row.present.byteCount
        let before = stored.withLock { cache -> Int64? in
            guard cache != nil else { return nil }
            defer { cache?[row.key] = bytes }
            return cache?[row.key] ?? 0
        }
        guard let before, before != bytes, before == 0 || bytes == 0 || bytes >= row.total else { return }
        storedListener.function?(row.key)
    }

    func forgetStored() { stored.withLock { $0 = nil } }

    public func download(_ key: FileKey) throws(LabstreamError) -> DownloadRow? {
        try read("download state") {
            try db.query(
                "SELECT \(Self.downloadColumns) FROM downloads WHERE server=? AND item_id=? AND source_id=?",
                [.text(key.server), .text(key.itemId), .text(key.sourceId)]
            ).first.flatMap(Self.decodeDownload)
        }
    }

    public func downloads() throws(LabstreamError) -> [DownloadRow] { try downloads(where: "1") }

    /// Pinned rows that may still need bytes: what the background fill looks at on every pass,
    /// without reading every row of the cache.
    public func pinnedIncompleteDownloads() throws(LabstreamError) -> [DownloadRow] {
        try downloads(where: "pinned = 1 AND status NOT IN ('complete', 'unverified')")
    }

    /// Pinned files whose complete copy is of an older version than the catalog's: the file as
    /// shown (the old copy) and as the server has it now.
    public func staleVersions() throws(LabstreamError) -> [(shown: TreeFile, current: TreeFile)] {
        // Only files with a kept copy: every fill pass asks, and the whole catalog was 100 000
        // files read for none.
        try listedSources(server: nil, keptOnly: true).compactMap { entry in
            guard !entry.file.orphaned, let shown = Self.shown(entry.file, keeping: entry.kept) else { return nil }
            return (shown, entry.file)
        }
    }

    /// Makes the complete next version of `base` its row, in one transaction: the row, its
    /// segment digests and its partial file become `base`'s. Returns the old partial's path
    /// (relative to the data dir), which nothing references any more.
    public func swapVersion(_ base: FileKey, next: FileKey, now: Int64) throws(LabstreamError) -> String? {
        defer { forgetStored() }
        do {
            let swappedRow = Mutex<DownloadRow?>(nil)
            defer {
                // The file now belongs to `base`: its sidecar says so, with its segments.
                if let row = swappedRow.withLock({ $0 }) {
                    CopySidecar.rewrite(row, segments: (try? segments(row.key, attempt: row.attempt)) ?? [], root: dataRoot)
                }
            }
            return try db.transaction { c in
                guard
                    let nextRow = try c.query(
                        "SELECT \(Self.downloadColumns) FROM downloads WHERE server=? AND item_id=? AND source_id=?",
                        [.text(next.server), .text(next.itemId), .text(next.sourceId)]
                    ).first.flatMap(Self.decodeDownload)
                else { return nil }
                let old = try c.query(
                    "SELECT \(Self.downloadColumns) FROM downloads WHERE server=? AND item_id=? AND source_id=?",
                    [.text(base.server), .text(base.itemId), .text(base.sourceId)]
                ).first.flatMap(Self.decodeDownload)
                var swapped = nextRow
                swapped.key = base
                swapped.attempt = AttemptID(max(old?.attempt.rawValue ?? 0, nextRow.attempt.rawValue) + 1)
                swapped.pinned = old?.pinned ?? nextRow.pinned  // the user's pin, not the fetch's
                let k: [SQLValue] = [.text(base.server), .text(base.itemId), .text(base.sourceId)]
                try c.run("DELETE FROM segments WHERE server=? AND item_id=? AND source_id=?", k)
                try c.run(
                    "UPDATE segments SET source_id=?, attempt=? WHERE server=? AND item_id=? AND source_id=? AND attempt=?",
                    [
                        .text(base.sourceId), .int(swapped.attempt.rawValue), .text(next.server), .text(next.itemId), .text(next.sourceId),
                        .int(nextRow.attempt.rawValue)
                    ])
                try c.run("DELETE FROM segments WHERE server=? AND item_id=? AND source_id=?", [.text(next.server), .text(next.itemId), .text(next.sourceId)])
                try c.run("DELETE FROM downloads WHERE server=? AND item_id=? AND source_id=?", [.text(next.server), .text(next.itemId), .text(next.sourceId)])
                try Self.insert(swapped, into: c, now: now)
                swappedRow.withLock { $0 = swapped }
                return old.map(\.partialPath).flatMap { $0 == swapped.partialPath ? nil : $0 }
            }
        } catch { throw .storage("swapping in the new version of \(base) failed: \(error)") }
    }

    /// Copies made through a server-side job whose bytes are all here: the job can be closed.
    public func finishedServerJobs() throws(LabstreamError) -> [DownloadRow] {
        try downloads(where: "job IS NOT NULL AND status IN ('complete', 'unverified')")
    }

    /// The rows of `base`'s copies at other qualities.
    public func derivedCopies(of base: FileKey) throws(LabstreamError) -> [DownloadRow] {
        try read("download state") {
            try db.query(
                "SELECT \(Self.downloadColumns) FROM downloads WHERE server=? AND item_id=? AND source_id LIKE ? ESCAPE '\\'",
                [
                    .text(base.server), .text(base.itemId),
                    .text(
                        base.sourceId.replacingOccurrences(of: "\\", with: "\\\\").replacingOccurrences(of: "%", with: "\\%")
                            .replacingOccurrences(of: "_", with: "\\_") + "@%")
                ]
            )
            .compactMap(Self.decodeDownload).filter { DerivedCopy.parse($0.key)?.base == base }
        }
    }

    public func downloadsAwaitingValidation() throws(LabstreamError) -> [DownloadRow] {
        try downloads(where: "awaiting_validation = 1")
    }

    func downloads(where condition: String, _ parameters: [SQLValue] = []) throws(LabstreamError) -> [DownloadRow] {
        try read("download state") {
            try db.query("SELECT \(Self.downloadColumns) FROM downloads WHERE \(condition) ORDER BY server, item_id, source_id", parameters)
                .compactMap(Self.decodeDownload)
        }
    }

    /// A committed segment: its bytes are durable and their digest is known.
    public struct Segment: Sendable, Hashable {
        public var range: ByteRange
        /// As `SegmentDigest` writes it.
        public var digest: String

        public init(range: ByteRange, digest: String) {
            self.range = range
            self.digest = digest
        }
    }

    /// Writes `row` (and the digest of a newly committed segment, in the same transaction) only
    /// if the stored row still belongs to `row.attempt` or an older one: stale work cannot
    /// overwrite a newer attempt. Digests of older attempts go. Returns false when refused.
    /// `learnedSize`: the row's total is the size of a source the catalog listed without one,
    /// recorded there in the same transaction.
    @discardableResult
    /// `freeing`: this write records bytes just freed (a cancel); on a full disk it may use the
    /// index's reserve, which nothing else may (a download parks instead).
    public func saveDownload(
        _ row: DownloadRow, committing segment: Segment? = nil, learnedSize: Bool = false, freeing: Bool = false,
        now: Int64
    ) throws(LabstreamError) -> Bool {
        do { return try saveDownloadOnce(row, committing: segment, learnedSize: learnedSize, now: now) } catch {
            // A full disk: the space kept in reserve lets the index record this (a cancel that
            // just freed a file's bytes must always be recordable).
            guard freeing, case .noSpace = error, releaseReserve() else { throw error }
            return try saveDownloadOnce(row, committing: segment, learnedSize: learnedSize, now: now)
        }
    }

    // MARK: - Space kept for the index

    /// A file of real blocks beside the index, given back when the disk is full so the index can
    /// still commit, and taken again when there is room (`keepReserve`).
    public var reservePath: String { dataRoot + "/index.reserve" }
    public static let reserveBytes = 1 << 20

    /// Makes sure the reserve exists, when the disk has room for it comfortably.
    public func keepReserve() {
        var st = stat()
        guard stat(reservePath, &st) != 0 || Int(st.st_size) < Self.reserveBytes else { return }
        var vfs = statvfs()
        guard statvfs(dataRoot, &vfs) == 0, Int64(vfs.f_bavail) * Int64(vfs.f_frsize) > Int64(Self.reserveBytes) * 4 else { return }
        let fd = open(reservePath, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600)
        guard fd >= 0 else { return }
        defer { close(fd) }
        let zeros = [UInt8](repeating: 0, count: 64 << 10)
        var written = 0
        while written < Self.reserveBytes {
            let n = zeros.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
            guard n > 0 else { unlink(reservePath); return }
            written += n
        }
        _ = fsync(fd)
    }

    /// Gives the reserve back to the file system; false when there was none.
    func releaseReserve() -> Bool { unlink(reservePath) == 0 }

    func saveDownloadOnce(_ row: DownloadRow, committing segment: Segment?, learnedSize: Bool, now: Int64) throws(LabstreamError) -> Bool {
        let k: [SQLValue] = [.text(row.key.server), .text(row.key.itemId), .text(row.key.sourceId)]
        do {
            let saved = try db.transaction { c in
                let current = try c.query("SELECT attempt FROM downloads WHERE server=? AND item_id=? AND source_id=?", k).first?[0].int
                if let current, current > row.attempt.rawValue { return false }
                try Self.insert(row, into: c, now: now)
                try c.run("DELETE FROM segments WHERE server=? AND item_id=? AND source_id=? AND attempt<?", k + [.int(row.attempt.rawValue)])
                if let segment {
                    try c.run(
                        "INSERT OR REPLACE INTO segments VALUES(?,?,?,?,?,?,?)",
                        k + [
                            .int(row.attempt.rawValue), .int(segment.range.lower), .int(segment.range.upper), .text(segment.digest)
                        ])
                }
                if learnedSize {
                    try c.run("UPDATE media_sources SET size=? WHERE server=? AND item_id=? AND id=?", [.int(row.total)] + k)
                }
                return true
            }
            if saved {
                CopySidecar.note(row, segment: segment, root: dataRoot)
                noteStored(row)
            }
            return saved
        } catch {
            if let e = error as? SQLiteError, e.code == 13 { throw .noSpace("saving download state in \(db.path)") }  // SQLITE_FULL
            throw .storage("saving download state failed: \(error)")
        }
    }

    /// The digests of `key`'s committed segments under `attempt`.
    public func segments(_ key: FileKey, attempt: AttemptID) throws(LabstreamError) -> [Segment] {
        try read("segment digests") {
            try db.query(
                "SELECT lower, upper, digest FROM segments WHERE server=? AND item_id=? AND source_id=? AND attempt=? ORDER BY lower",
                [.text(key.server), .text(key.itemId), .text(key.sourceId), .int(attempt.rawValue)]
            ).compactMap { r in
                guard let l = r[0].int, let u = r[1].int, l <= u, let d = r[2].text else { return nil }
                return Segment(range: ByteRange(l, u), digest: d)
            }
        }
    }

    /// The data directory this index lives in (partial paths are relative to it).
    public var dataRoot: String { (db.path as NSString).deletingLastPathComponent }

    /// Forgets a segment whose bytes no longer match their digest, with the row, atomically.
    public func dropSegment(_ row: DownloadRow, range: ByteRange, now: Int64) throws(LabstreamError) {
        defer {
            CopySidecar.note(row, segment: nil, dropped: range.lower, root: dataRoot)
            forgetStored()
        }
        do {
            try db.transaction { c in
                try c.run(
                    "DELETE FROM segments WHERE server=? AND item_id=? AND source_id=? AND lower=?",
                    [.text(row.key.server), .text(row.key.itemId), .text(row.key.sourceId), .int(range.lower)])
                try c.run(
                    "UPDATE downloads SET ranges=?, awaiting_validation=0, status=?, reason=?, pause_cause=?, updated=? WHERE server=? AND item_id=? AND source_id=? AND attempt=?",
                    [
                        .text(row.present.serialized), .text(row.status.rawValue), row.reason.map(SQLValue.text) ?? .null,
                        row.pauseCause.map { .text($0.rawValue) } ?? .null, .int(now),
                        .text(row.key.server), .text(row.key.itemId), .text(row.key.sourceId), .int(row.attempt.rawValue)
                    ])
            }
        } catch { throw .storage("dropping a damaged segment failed: \(error)") }
    }

    /// Pins or unpins files in one transaction (no half-pinned season after a crash). New rows
    /// are created for files never read; pinned rows become `queued` unless already complete.
    public func setPinned(_ pinned: Bool, files: [TreeFile], layout: DataLayout, now: Int64) throws(LabstreamError) -> [DownloadRow] {
        do {
            return try db.transaction { c in
                var out: [DownloadRow] = []
                for f in files {
                    let existing = try c.query(
                        "SELECT \(Self.downloadColumns) FROM downloads WHERE server=? AND item_id=? AND source_id=?",
                        [.text(f.key.server), .text(f.key.itemId), .text(f.key.sourceId)]
                    ).first.flatMap(Self.decodeDownload)
                    var row =
                        existing
                        ?? DownloadRow(
                            key: f.key, status: .partial, attempt: AttemptID(1), validator: nil, total: f.size,
                            present: RangeSet(), partialPath: layout.partialRelativePath(for: f.key), sourceTag: f.etag)
                    row.setPinned(pinned)
                    try Self.insert(row, into: c, now: now)
                    out.append(row)
                    CopySidecar.note(row, segment: nil, root: dataRoot)
                }
                return out
            }
        } catch { throw .storage("pinning failed: \(error)") }
    }

    /// Every partial path any row names, decodable or not (a damaged row still owns its file).
    /// Partial files some row points at, quarantined rows included (their bytes are kept).
    public func partialPathsInUse() throws(LabstreamError) -> Set<String> {
        try read("download rows") {
            Set(try db.query("SELECT partial FROM downloads UNION SELECT partial FROM quarantine WHERE partial IS NOT NULL").compactMap { $0[0].text })
        }
    }

    /// Moves download rows that cannot be decoded into `quarantine` (their columns as text, and
    /// why), in one transaction; their files stay. Returns a description of each.
    public func quarantineMalformedDownloads(now: Int64) throws(LabstreamError) -> [String] {
        defer { forgetStored() }
        do {
            return try db.transaction { c in
                var out: [String] = []
                for r in try c.query("SELECT rowid, \(Self.downloadColumns) FROM downloads") {
                    let columns = Array(r.dropFirst())
                    guard Self.decodeDownload(columns) == nil, let rowid = r[0].int else { continue }
                    let named = NamedRow<DownloadColumn>(columns)
                    let verbatim = zip(DownloadColumn.allCases.map(\.rawValue), columns).map { "\($0)=\($1.text ?? $1.int.map { String($0) } ?? "NULL")" }
                        .joined(separator: "; ")
                    let partial = named[.partial].text.flatMap { DataLayout.isValidPartialPath($0) ? $0 : nil }
                    let name = "\(named[.server].text ?? "?")/\(named[.itemId].text ?? "?")/\(named[.sourceId].text ?? "?")"
                    try c.run(
                        "INSERT INTO quarantine(source, row, partial, reason, at) VALUES('downloads', ?, ?, ?, ?)",
                        [.text(verbatim), partial.map(SQLValue.text) ?? .null, .text(Self.whyMalformed(columns)), .int(now)])
                    try c.run("DELETE FROM downloads WHERE rowid=?", [.int(rowid)])
                    out.append(name)
                }
                return out
            }
        } catch { throw .storage("quarantining damaged rows failed: \(error)") }
    }

    /// The quarantined rows: what each was and why it was set aside.
    public func quarantined() throws(LabstreamError) -> [(row: String, reason: String)] {
        try read("the quarantine") { try db.query("SELECT row, reason FROM quarantine ORDER BY id").map { ($0[0].text ?? "", $0[1].text ?? "") } }
    }

    static func whyMalformed(_ r: [SQLValue]) -> String {
        if r[3].text.flatMap(DownloadStatus.init(rawValue:)) == nil { return "unknown status" }
        if r[7].text.flatMap(RangeSet.init(serialized:)) == nil { return "unreadable range map" }
        if !(r[8].text.map(DataLayout.isValidPartialPath) ?? false) { return "partial path outside the data directory" }
        return "missing or invalid column"
    }

    /// The columns a download row is read from, in the order every SELECT of them lists them:
    /// a row is decoded by column name, never by a position written out by hand.
    enum DownloadColumn: String, CaseIterable {
        case server, itemId = "item_id", sourceId = "source_id", status, attempt, validator, total, ranges, partial, reason
        case awaitingValidation = "awaiting_validation", pinned, sourceTag = "source_tag", job, checked, pauseCause = "pause_cause"
    }

    static let downloadColumns = DownloadColumn.allCases.map(\.rawValue).joined(separator: ", ")

    static func insert(_ row: DownloadRow, into c: Connection, now: Int64) throws {
        try c.run(
            """
            INSERT OR REPLACE INTO downloads(server, item_id, source_id, status, attempt, validator, total, ranges, partial, reason,
                awaiting_validation, updated, pinned, source_tag, job, checked, pause_cause) VALUES(?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)
            """,
            [
                .text(row.key.server), .text(row.key.itemId), .text(row.key.sourceId), .text(row.status.rawValue),
                .int(row.attempt.rawValue), row.validator.map { .text($0.description) } ?? .null, .int(row.total),
                .text(row.present.serialized), .text(row.partialPath), row.reason.map(SQLValue.text) ?? .null,
                .int(row.awaitingValidation ? 1 : 0), .int(now), .int(row.pinned ? 1 : 0), row.sourceTag.map(SQLValue.text) ?? .null,
                row.job.map { .text($0.persisted) } ?? .null, row.checked.map(SQLValue.text) ?? .null, row.pauseCause.map { .text($0.rawValue) } ?? .null
            ])
    }

    static func decodeDownload(_ values: [SQLValue]) -> DownloadRow? {
        let r = NamedRow<DownloadColumn>(values)
        guard let s = r[.server].text, let i = r[.itemId].text, let id = r[.sourceId].text,
            let status = r[.status].text.flatMap(DownloadStatus.init(rawValue:)), let attempt = r[.attempt].int, let total = r[.total].int,
            let ranges = r[.ranges].text.flatMap(RangeSet.init(serialized:)), let partial = r[.partial].text, DataLayout.isValidPartialPath(partial)
        else { return nil }
        return DownloadRow(
            key: FileKey(server: s, itemId: i, sourceId: id), status: status, attempt: AttemptID(attempt),
            validator: r[.validator].text.flatMap(Validator.init(persisted:)), total: total, present: ranges,
            partialPath: partial, reason: r[.reason].text, awaitingValidation: (r[.awaitingValidation].int ?? 0) != 0,
            pinned: (r[.pinned].int ?? 0) != 0, sourceTag: r[.sourceTag].text, job: r[.job].text.map(ServerJob.init(persisted:)),
            checked: r[.checked].text, pauseCause: r[.pauseCause].text.flatMap(PauseCause.init(rawValue:)))
    }

    func read<T>(_ what: String, _ body: () throws -> T) throws(LabstreamError) -> T {
        do { return try body() } catch { throw .storage("reading \(what) from the index failed: \(error)") }
    }
}
