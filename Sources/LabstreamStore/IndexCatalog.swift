import Foundation
import LabstreamCore

/// Servers, libraries, items and their media sources: the catalog and the tree's files.
extension OfflineIndex {
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
    /// Download rows are never touched here. An item without details takes those `staged` holds;
    /// with none staged it has none, or when not `full` (a refresh's changes merged into the
    /// stored catalog, read without details) it keeps the details stored for it.
    /// Every row is written only where it differs; returns whether any did (the daily full
    /// refresh of an unchanged library then rebuilds no tree). `full`: the catalog is the
    /// server's whole, read now (not changes merged into the stored one), recorded as its last
    /// whole read.
    @discardableResult
    public func replaceCatalog(
        server: ServerRow, libraries: [LibraryCatalog], tree: [TreeFile], now: Int64, staged: StagedDetails? = nil, full: Bool = false
    ) throws(LabstreamError) -> Bool {
        // Each path is joined when its row is written: all of them held at once were a tenth of
        // the peak of a sync in which every one of 100 000 items changed.
        let listed = TreeFileLookup(tree)
        do {
            return try db.transaction { c in
                var changed = false
                // Files gone from the server that still have local bytes stay, marked orphaned.
                let stored = try c.query(
                    """
                    SELECT m.item_id, m.id FROM media_sources m JOIN downloads d
                    ON d.server = m.server AND d.item_id = m.item_id AND d.source_id = m.id AND d.kind = 'original'
                    WHERE m.server = ? AND d.ranges != ''
                    """, [.text(server.name)])
                var keep: [(String, String)] = []
                for r in stored {
                    guard let item = r[0].text, let source = r[1].text else { continue }
                    if !listed.contains(FileKey(server: server.name, itemId: item, sourceId: source)) { keep.append((item, source)) }
                }
                // Every row is written only where it changed (below), so what is kept of an
                // unchanged row (its generated document's size) stays.
                let libraryRows = { (rows: [[SQLValue]]) in Set(rows) }
                let before = libraryRows(try c.query("SELECT id, name, left_out FROM libraries WHERE server=?", [.text(server.name)]))
                let after = libraryRows(libraries.map { [.text($0.id), .text($0.name), $0.leftOut.map(SQLValue.text) ?? .null] })
                changed = changed || before != after
                try c.run("DELETE FROM libraries WHERE server=?", [.text(server.name)])
                for (item, source) in keep {
                    // What its item said of it goes with the item's row (below): kept to know it again.
                    try c.run(
                        "UPDATE media_sources SET orphaned=1, orphan_identity=(\(Self.identityOfItem)) WHERE server=? AND item_id=? AND id=? AND orphaned=0",
                        [.text(server.name), .text(item), .text(source)])
                    changed = changed || c.changes > 0
                }
                // Only orphans need the new paths as a set (100 000 strings when every sync made it).
                let taken = keep.isEmpty ? [] : Set(tree.map { $0.path.joined(separator: "/") })
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
                func storedDetails(_ item: String) throws -> SQLValue {
                    try c.query("SELECT details FROM items WHERE server=? AND id=?", [.text(server.name), .text(item)]).first?.first ?? .null
                }
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
                            "details": try item.details.map(Self.encodeDetails) ?? staged?.details(of: item.id, on: c)
                                ?? (full ? .null : storedDetails(item.id))
                        ]
                        assert(columns.map(\.key) == ["server"] + Self.itemColumnNames)
                        try c.run(Self.itemUpsert, columns.map(\.value))
                        changed = changed || c.changes > 0
                        try c.run("INSERT OR IGNORE INTO temp.synced(kind, id) VALUES('item', ?)", [.text(item.id)])
                        for source in item.sources {
                            let key = FileKey(server: server.name, itemId: item.id, sourceId: source.id)
                            guard let path = listed[key]?.path.joined(separator: "/") else { continue }
                            try c.run(
                                Self.sourceUpsert,
                                [
                                    .text(server.name), .text(item.id), .text(source.id), source.name.map(SQLValue.text) ?? .null,
                                    source.container.map(SQLValue.text) ?? .null, .int(max(source.size ?? 0, 0)),
                                    source.etag.map(SQLValue.text) ?? .null, .text(path), .int(item.modified),
                                    source.bitrate.map { .int(Int64($0)) } ?? .null, source.itemId.map(SQLValue.text) ?? .null,
                                    source.path.map(SQLValue.text) ?? .null
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
        /// Everything but items' details (about a kilobyte each): what a refresh merges its
        /// changes into (`replaceCatalog` keeps an unchanged item's stored details) and what
        /// sizes learnt before are looked up in.
        case withoutDetails
    }

    /// A server's catalog as stored (orphans left out: they are kept by `replaceCatalog` anyway),
    /// for merging an incremental refresh into.
    public func catalog(server: String, reading: CatalogRead = .whole) throws(LabstreamError) -> [LibraryCatalog] {
        try read("the catalog") {
            let libraries = try db.query("SELECT id, name, left_out FROM libraries WHERE server=? ORDER BY id", [.text(server)])
            let columns: String
            switch reading {
            case .whole: columns = Self.itemColumns
            case .withoutDetails: columns = Self.itemColumnNames.map { $0 == "details" ? "NULL" : $0 }.joined(separator: ", ")
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
                // Each library's list made as large as it gets at once: grown by doubling, its
                // last copy held both (90 000 films: 33 MiB more for a moment).
                var total = 0
                for r in try c.query("SELECT library, count(*) FROM items WHERE server=? GROUP BY library", [.text(server)]) {
                    guard let library = r[0].text, let count = r[1].int else { continue }
                    itemsOf[library, default: []].reserveCapacity(Int(count))
                    total += Int(count)
                }
                // The side files are planned from the tree's files, not from items' sources.
                if reading != .sideFiles {
                    sourcesOf.reserveCapacity(total)
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
                let from = reading != .sideFiles ? "items WHERE server=? ORDER BY library, id" : "items NOT INDEXED WHERE server=?"
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
    /// item and series ids and each series' year; no items, sources or details.
    public func catalogOutline(server: String) throws(LabstreamError) -> CatalogOutline {
        try read("the catalog") {
            var itemIds: [String: Set<String>] = [:]
            var seriesIds: [String: Set<String>] = [:]
            var seriesYears: [String: Int?] = [:]
            for r in try db.query("SELECT id, library, series_id, series_year FROM items WHERE server=?", [.text(server)]) {
                guard let id = r[0].text, let library = r[1].text else { continue }
                itemIds[library, default: []].insert(id)
                if let series = r[2].text {
                    seriesIds[library, default: []].insert(series)
                    if seriesYears[series] == nil { seriesYears[series] = r[3].int.map { Int($0) } }
                }
            }
            let libraries = try db.query("SELECT id, name FROM libraries WHERE server=? ORDER BY id", [.text(server)]).compactMap {
                r -> CatalogOutline.Library? in
                guard let id = r[0].text else { return nil }
                return CatalogOutline.Library(id: id, name: r[1].text ?? id, itemIds: itemIds[id] ?? [], seriesIds: seriesIds[id] ?? [])
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
        let changeable = ["name", "container", "size", "etag", "tree_path", "modified", "orphaned", "bitrate", "remote_item", "path", "orphan_identity"]
        return """
            INSERT INTO media_sources(server, item_id, id, name, container, size, etag, tree_path, modified, orphaned, bitrate, remote_item, path,
                orphan_identity)
            VALUES(?,?,?,?,?,?,?,?,?,0,?,?,?,NULL)
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
        let sources = try listedSources(server: server) { Self.shown($0, keeping: $1) ?? $0 }
        return try read("the catalog") {
            // Finished copies at another quality appear beside their original.
            let finished = try db.query(
                """
                SELECT server, item_id, source_id, total, source_tag, partial, kind, quality FROM downloads WHERE kind = 'copy' AND status IN ('complete', 'unverified')
                \(server == nil ? "" : "AND server=?")
                """, server.map { [.text($0)] } ?? [])
            guard !finished.isEmpty else { return sources }
            let byKey = Dictionary(sources.map { ($0.key, $0) }, uniquingKeysWith: { a, _ in a })
            let copies = finished.compactMap { r -> TreeFile? in
                guard let s = r[0].text, let i = r[1].text, let id = r[2].text, let kind = r[6].text.flatMap({ FileKind(persisted: $0, quality: r[7].text) }),
                    let (base, quality) = DerivedCopy.parse(FileKey(server: s, itemId: i, sourceId: id, kind: kind)), let original = byKey[base]
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
    static let keptDownload = "d.server = m.server AND d.item_id = m.item_id AND d.source_id = m.id AND d.kind = 'original' AND \(keptCopy)"

    /// The catalog's media sources as files, each with the pinned complete download row it has,
    /// if any; `keptOnly`: only those that have one.
    func listedSources(server: String?, keptOnly: Bool = false) throws(LabstreamError) -> [(file: TreeFile, kept: DownloadRow?)] {
        try listedSources(server: server, keptOnly: keptOnly) { ($0, $1) }
    }

    /// The same, each made into what the caller keeps as it is read: a list of every file with
    /// its row beside it (a few hundred bytes each) was 40 MiB at 100 000 files, at the peak of
    /// the tree's rebuild after a sync, for rows that are almost all absent.
    func listedSources<Element>(
        server: String?, keptOnly: Bool = false, _ make: (TreeFile, DownloadRow?) -> Element
    ) throws(LabstreamError) -> [Element] {
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
            var files: [Element] = []
            var previous: [String] = []
            var serverName = ""
            try db.withConnection { c in
                // Made as large as it gets at once: grown by doubling, its last copy held both
                // (a third more than the list itself at its peak).
                if !keptOnly {
                    let count = try c.query("SELECT count(*) FROM media_sources\(server == nil ? "" : " WHERE server=?")", server.map { [.text($0)] } ?? [])
                    files.reserveCapacity(Int(count.first?.first?.int ?? 0))
                }
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
                    files.append(make(file, kept[file.key]))
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
        // Its stored files stay listed by title (`labstream orphans`) once its catalog goes.
        let kept = try pathsOfStoredFiles(of: name)
        do {
            try db.transaction { c in
                for (key, path) in kept {
                    try c.run(
                        "INSERT OR REPLACE INTO removed_copies(server, item_id, source_id, kind, quality, path) VALUES(?,?,?,?,?,?)",
                        Self.keyValues(key) + [.text(path)])
                }
                try c.run(
                    "UPDATE downloads SET status='paused', reason=?, reason_detail=?, pause_cause=? WHERE server=? AND status IN ('queued','downloading','preparing')",
                    Self.reasonValues(.serverRemoved) + [.text(PauseCause.serverRemoved.rawValue), .text(name)])
                for table in [
                    "servers", "libraries", "items", "media_sources", "managed_entries", "monitors", "monitored_episodes", "left_series", "series_details",
                    "item_extras"
                ] {
                    try c.run("DELETE FROM \(table) WHERE \(table == "servers" ? "name" : "server")=?", [.text(name)])
                }
            }
        } catch { throw .storage("removing \(name) from the index failed: \(error)") }
    }
}
