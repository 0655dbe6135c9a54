import Foundation
import LabstreamCore

/// The index's schema: what every table holds at the current version, and the migrations
/// that take an older index there (each in one transaction, run in order at open; an index
/// newer than this build is refused, never guessed at).
extension OfflineIndex {
    /// The columns of every table at the current schema version.
    static let schemaColumns: [(String, [String])] = [
        ("meta", ["key", "value"]),
        ("servers", ["name", "type", "url", "server_id", "last_sync", "last_full_sync"]),
        ("libraries", ["server", "id", "name", "left_out"]),
        (
            "items",
            [
                "server", "id", "library", "kind", "title", "year", "series_id", "series_name", "series_year", "season", "episode", "modified",
                "album", "album_artist", "disc", "track", "folders", "played", "details"
            ]
        ),
        (
            "media_sources",
            [
                "server", "item_id", "id", "name", "container", "size", "etag", "tree_path", "modified", "orphaned", "bitrate", "remote_item", "path",
                "orphan_identity"
            ]
        ),
        (
            "downloads",
            [
                "server", "item_id", "source_id", "status", "attempt", "validator", "total", "ranges", "partial", "reason",
                "awaiting_validation", "updated", "pinned", "source_tag", "job", "checked", "pause_cause", "reason_detail", "kind", "quality"
            ]
        ),
        ("segments", ["server", "item_id", "source_id", "attempt", "lower", "upper", "digest", "kind", "quality"]),
        ("quarantine", ["id", "source", "row", "partial", "reason", "at"]),
        (
            "managed_entries",
            ["server", "item_id", "source_id", "entry_id", "revision", "status", "delivery", "reported", "reported_at", "manifest", "kind", "quality"]
        ),
        (
            "monitors",
            [
                "server", "series_id", "mode", "delete_watched", "max_storage", "baseline", "created", "remote_id", "remote_etag", "held_episodes",
                "held_bytes", "in_scope", "skipped"
            ]
        ),
        ("monitored_episodes", ["server", "item_id", "series_id", "source_id", "state"]),
        ("left_series", ["server", "series_id", "snapshot"]),
        ("series_details", ["server", "series_id", "details"]),
        ("side_assets", ["server", "item_id", "asset", "state", "tag", "file", "ext", "size", "reason", "attempts", "retry_at", "reason_detail"]),
        ("item_extras", ["server", "item_id", "tag", "details"]),
        ("documents", ["server", "doc", "format", "size", "digest"]),
        ("queue", ["server", "item_id", "source_id", "kind", "quality", "position", "priority"]),
        ("removed_copies", ["server", "item_id", "source_id", "kind", "quality", "path"]),
        ("shared_copies", ["server", "item_id", "source_id", "kind", "quality", "attempt", "file"])
    ]

    /// `migrations[n - 1]` takes an index from schema n to n + 1.
    static let migrations: [@Sendable (Connection) throws -> Void] = [
        migrateV1toV2, migrateV2toV3, migrateV3toV4, migrateV4toV5, migrateV5toV6, migrateV6toV7, migrateV7toV8, migrateV8toV9, migrateV9toV10, migrateV10toV11,
        migrateV11toV12, migrateV12toV13, migrateV13toV14, migrateV14toV15, migrateV15toV16, migrateV16toV17, migrateV17toV18,
        migrateV18toV19, migrateV19toV20, moveKindsOutOfSourceIds, addSharedCopies, keepSourcePaths, indexItemsBySeries,
        codeSideAssetReasons, keepOrphanIdentities, keepLeftSeries
    ]

    static func createV1(_ c: Connection) throws {
        try c.exec(
            """
            CREATE TABLE meta(key TEXT PRIMARY KEY, value TEXT NOT NULL);
            INSERT INTO meta VALUES('schema_version', '1');
            CREATE TABLE servers(name TEXT PRIMARY KEY, type TEXT NOT NULL, url TEXT NOT NULL, server_id TEXT, last_sync INTEGER);
            CREATE TABLE libraries(server TEXT NOT NULL, id TEXT NOT NULL, name TEXT NOT NULL, PRIMARY KEY(server, id));
            CREATE TABLE items(server TEXT NOT NULL, id TEXT NOT NULL, library TEXT NOT NULL, kind TEXT NOT NULL,
                title TEXT NOT NULL, year INTEGER, series_id TEXT, series_name TEXT, series_year INTEGER,
                season INTEGER, episode INTEGER, modified INTEGER NOT NULL, PRIMARY KEY(server, id));
            CREATE TABLE media_sources(server TEXT NOT NULL, item_id TEXT NOT NULL, id TEXT NOT NULL, name TEXT,
                container TEXT, size INTEGER NOT NULL, etag TEXT, tree_path TEXT NOT NULL, modified INTEGER NOT NULL,
                PRIMARY KEY(server, item_id, id));
            CREATE TABLE downloads(server TEXT NOT NULL, item_id TEXT NOT NULL, source_id TEXT NOT NULL,
                status TEXT NOT NULL, attempt INTEGER NOT NULL, validator TEXT, total INTEGER NOT NULL,
                ranges TEXT NOT NULL, partial TEXT NOT NULL, reason TEXT, awaiting_validation INTEGER NOT NULL DEFAULT 0,
                updated INTEGER NOT NULL, PRIMARY KEY(server, item_id, source_id));
            """)
    }

    /// v2: per-segment SHA-256 digests and pinning. v1 recorded ranges without digests, so they
    /// cannot be re-verified: they are dropped (fail closed) and will be fetched again.
    static func migrateV1toV2(_ c: Connection) throws {
        try c.exec(
            """
            ALTER TABLE downloads ADD COLUMN pinned INTEGER NOT NULL DEFAULT 0;
            UPDATE downloads SET ranges = '', awaiting_validation = 0, reason = 'index upgraded; bytes will be fetched and verified again' WHERE ranges != '';
            CREATE TABLE segments(server TEXT NOT NULL, item_id TEXT NOT NULL, source_id TEXT NOT NULL, attempt INTEGER NOT NULL,
                lower INTEGER NOT NULL, upper INTEGER NOT NULL, sha256 TEXT NOT NULL, PRIMARY KEY(server, item_id, source_id, lower));
            UPDATE meta SET value = '2' WHERE key = 'schema_version';
            """)
    }

    /// v3: media sources removed on the server but still stored locally stay in the tree,
    /// marked orphaned, until the user removes them.
    static func migrateV2toV3(_ c: Connection) throws {
        try c.exec(
            """
            ALTER TABLE media_sources ADD COLUMN orphaned INTEGER NOT NULL DEFAULT 0;
            UPDATE meta SET value = '3' WHERE key = 'schema_version';
            """)
    }

    /// v4: each download remembers the source tag (ETag of the media source, Plex part key) of
    /// the version its bytes belong to, so a new version on the server is noticed even at the
    /// same size. Older rows have none and adopt the current tag. Media sources keep their
    /// bitrate (route choice under a quality cap; unknown until the next sync). A row copied
    /// through a server-side job (Emby Convert) keeps the job's id, so polling resumes after a
    /// restart. Rows that cannot be decoded move to `quarantine`, verbatim, instead of being
    /// guessed at or dropped.
    static func migrateV3toV4(_ c: Connection) throws {
        try c.exec(
            """
            ALTER TABLE downloads ADD COLUMN source_tag TEXT;
            ALTER TABLE downloads ADD COLUMN job TEXT;
            ALTER TABLE media_sources ADD COLUMN bitrate INTEGER;
            CREATE TABLE quarantine(id INTEGER PRIMARY KEY, source TEXT NOT NULL, row TEXT NOT NULL, partial TEXT,
                reason TEXT NOT NULL, at INTEGER NOT NULL);
            UPDATE meta SET value = '4' WHERE key = 'schema_version';
            """)
    }

    /// v5: segment digests name their algorithm (`SegmentDigest`): new segments are XXH3-128;
    /// the SHA-256 digests already stored stay valid and are checked as SHA-256.
    static func migrateV4toV5(_ c: Connection) throws {
        try c.exec(
            """
            ALTER TABLE segments RENAME COLUMN sha256 TO digest;
            UPDATE meta SET value = '5' WHERE key = 'schema_version';
            """)
    }

    /// v6: a download remembers its local copy's identity when every byte was last checked
    /// (`DownloadRow.checked`). Older rows have none: they are checked again as they are read.
    static func migrateV5toV6(_ c: Connection) throws {
        try c.exec(
            """
            ALTER TABLE downloads ADD COLUMN checked TEXT;
            UPDATE meta SET value = '6' WHERE key = 'schema_version';
            """)
    }

    /// v7: a media source remembers the item the server's download route takes for it (Emby's
    /// `MediaSourceInfo.ItemId`). Unknown until the next sync; the backend's fallback applies.
    static func migrateV6toV7(_ c: Connection) throws {
        try c.exec(
            """
            ALTER TABLE media_sources ADD COLUMN remote_item TEXT;
            UPDATE meta SET value = '7' WHERE key = 'schema_version';
            """)
    }

    /// v8: items carry their placement beyond movies and episodes: a track's album, album
    /// artist, disc and track number, and the server's folders of any other item. Existing items
    /// are movies and episodes, which need none of them.
    static func migrateV7toV8(_ c: Connection) throws {
        try c.exec(
            """
            ALTER TABLE items ADD COLUMN album TEXT;
            ALTER TABLE items ADD COLUMN album_artist TEXT;
            ALTER TABLE items ADD COLUMN disc INTEGER;
            ALTER TABLE items ADD COLUMN track INTEGER;
            ALTER TABLE items ADD COLUMN folders TEXT;
            UPDATE meta SET value = '8' WHERE key = 'schema_version';
            """)
    }

    /// An item's folders in one column (a unit separator between names: no folder name has one).
    static func encodeFolders(_ folders: [String]) -> SQLValue { folders.isEmpty ? .null : .text(folders.joined(separator: "\u{1F}")) }
    static func decodeFolders(_ value: String?) -> [String] { value.map { $0.split(separator: "\u{1F}").map(String.init) } ?? [] }

    /// An item's or series' details as JSON (NULL when the server told nothing).
    static func encodeDetails(_ details: ItemDetails?) -> SQLValue {
        // Sorted keys: the same details are the same text in every process (a dictionary's order
        // is not), so a sync that changed nothing writes nothing.
        let encoder = JSONEncoder()
        encoder.outputFormatting = .sortedKeys
        guard let details = details?.orNil, let data = try? encoder.encode(details) else { return .null }
        return .text(String(decoding: data, as: UTF8.self))
    }

    /// A details column read back; an unreadable one is as if the server had told nothing.
    static func decodeDetails(_ value: String?) -> ItemDetails? {
        value.flatMap { try? JSONDecoder().decode(ItemDetails.self, from: Data($0.utf8)) }
    }

    /// v9: a library Labstream cannot place is kept with why (`server list` says it), instead of
    /// being forgotten. Existing libraries are all placed ones.
    static func migrateV8toV9(_ c: Connection) throws {
        try c.exec(
            """
            ALTER TABLE libraries ADD COLUMN left_out TEXT;
            UPDATE meta SET value = '9' WHERE key = 'schema_version';
            """)
    }

    /// v10: the server's record of each copy this device holds (Silo's managed download
    /// entries), one per item: its id (NULL while a create's answer is awaited), revision,
    /// state, what was reported and when, and the manifest the copy was checked against.
    static func migrateV9toV10(_ c: Connection) throws {
        try c.exec(
            """
            CREATE TABLE managed_entries(server TEXT NOT NULL, item_id TEXT NOT NULL, source_id TEXT NOT NULL, entry_id TEXT,
                revision INTEGER NOT NULL DEFAULT 0, status TEXT NOT NULL DEFAULT '', delivery TEXT NOT NULL DEFAULT 'original',
                reported TEXT, reported_at INTEGER, manifest TEXT, PRIMARY KEY(server, item_id));
            UPDATE meta SET value = '10' WHERE key = 'schema_version';
            """)
    }

    /// v11: monitored series (mode, delete-watched, cap, the episodes it had when made, the
    /// server's own record of it and its validator), what the server says of each item and
    /// series (their `.nfo`, as JSON), and what
    /// each monitor did to an episode (`pinned` it, or the person `declined` it by unpinning);
    /// the user's watched state per item.
    static func migrateV10toV11(_ c: Connection) throws {
        try c.exec(
            """
            ALTER TABLE items ADD COLUMN played INTEGER NOT NULL DEFAULT 0;
            ALTER TABLE items ADD COLUMN details TEXT;
            CREATE TABLE series_details(server TEXT NOT NULL, series_id TEXT NOT NULL, details TEXT NOT NULL, PRIMARY KEY(server, series_id));
            CREATE TABLE monitors(server TEXT NOT NULL, series_id TEXT NOT NULL, mode TEXT NOT NULL, delete_watched INTEGER NOT NULL DEFAULT 0,
                max_storage INTEGER, baseline TEXT NOT NULL DEFAULT '', created INTEGER NOT NULL, remote_id TEXT, remote_etag TEXT,
                PRIMARY KEY(server, series_id));
            CREATE TABLE monitored_episodes(server TEXT NOT NULL, item_id TEXT NOT NULL, series_id TEXT NOT NULL, source_id TEXT NOT NULL,
                state TEXT NOT NULL, PRIMARY KEY(server, item_id));
            UPDATE meta SET value = '11' WHERE key = 'schema_version';
            """)
    }

    /// v12: artwork and subtitles stored beside the media (`side/`), or why the last try failed.
    static func migrateV11toV12(_ c: Connection) throws {
        try c.exec(
            """
            CREATE TABLE side_assets(server TEXT NOT NULL, item_id TEXT NOT NULL, asset TEXT NOT NULL, state TEXT NOT NULL, tag TEXT, file TEXT,
                ext TEXT, size INTEGER NOT NULL DEFAULT 0, reason TEXT, attempts INTEGER NOT NULL DEFAULT 0, retry_at INTEGER NOT NULL DEFAULT 0,
                PRIMARY KEY(server, item_id, asset));
            UPDATE meta SET value = '12' WHERE key = 'schema_version';
            """)
    }

    /// v13: what a server tells only item by item (Plex: subtitle streams, chapters), asked once
    /// per version of the item (`tag`) and kept apart from the catalog, which a sync rewrites.
    static func migrateV12toV13(_ c: Connection) throws {
        try c.exec(
            """
            CREATE TABLE item_extras(server TEXT NOT NULL, item_id TEXT NOT NULL, tag TEXT NOT NULL, details TEXT, PRIMARY KEY(server, item_id));
            UPDATE meta SET value = '13' WHERE key = 'schema_version';
            """)
    }

    /// v14: the size and digest of each generated `.nfo` as last made, so a mount need not make
    /// 100 000 documents to learn their sizes. A cache: triggers drop a document's row whenever
    /// the catalog rows it is made from change, whichever code writes them.
    static func migrateV13toV14(_ c: Connection) throws {
        try c.exec(
            """
            CREATE TABLE documents(server TEXT NOT NULL, doc TEXT NOT NULL, format INTEGER NOT NULL, size INTEGER NOT NULL, digest INTEGER NOT NULL,
                PRIMARY KEY(server, doc));
            CREATE TRIGGER documents_item_inserted AFTER INSERT ON items BEGIN
                DELETE FROM documents WHERE server = NEW.server AND doc = 'item:' || NEW.id; END;
            CREATE TRIGGER documents_item_updated AFTER UPDATE ON items BEGIN
                DELETE FROM documents WHERE (server = OLD.server AND doc = 'item:' || OLD.id) OR (server = NEW.server AND doc = 'item:' || NEW.id); END;
            CREATE TRIGGER documents_item_deleted AFTER DELETE ON items BEGIN
                DELETE FROM documents WHERE server = OLD.server AND doc = 'item:' || OLD.id; END;
            CREATE TRIGGER documents_series_inserted AFTER INSERT ON series_details BEGIN
                DELETE FROM documents WHERE server = NEW.server AND doc >= 'series:' || NEW.series_id || char(10) AND doc < 'series:' || NEW.series_id || char(11); END;
            CREATE TRIGGER documents_series_updated AFTER UPDATE ON series_details BEGIN
                DELETE FROM documents WHERE (server = OLD.server AND doc >= 'series:' || OLD.series_id || char(10) AND doc < 'series:' || OLD.series_id || char(11))
                    OR (server = NEW.server AND doc >= 'series:' || NEW.series_id || char(10) AND doc < 'series:' || NEW.series_id || char(11)); END;
            CREATE TRIGGER documents_series_deleted AFTER DELETE ON series_details BEGIN
                DELETE FROM documents WHERE server = OLD.server AND doc >= 'series:' || OLD.series_id || char(10) AND doc < 'series:' || OLD.series_id || char(11); END;
            UPDATE meta SET value = '14' WHERE key = 'schema_version';
            """)
    }

    /// v15: a paused row keeps why (`PauseCause`) beside its sentence. Older pauses get the
    /// cause their sentence names; one naming none keeps none (it waits for the user, as before).
    static func migrateV14toV15(_ c: Connection) throws {
        try c.exec("ALTER TABLE downloads ADD COLUMN pause_cause TEXT;")
        for r in try c.query("SELECT rowid, reason FROM downloads WHERE status = 'paused'") {
            guard let rowid = r[0].int, let cause = PauseCause.recorded(before: r[1].text) else { continue }
            try c.run("UPDATE downloads SET pause_cause = ? WHERE rowid = ?", [.text(cause.rawValue), .int(rowid)])
        }
        try c.exec("UPDATE meta SET value = '15' WHERE key = 'schema_version';")
    }

    /// v16: when each server's whole catalog was last read, so that a restarted daemon asks only
    /// for changes unless a whole read is due (`FullRefreshPolicy`). Older indexes know of none:
    /// their next scheduled sync reads everything, as every start-up sync did before.
    static func migrateV15toV16(_ c: Connection) throws {
        try c.exec("ALTER TABLE servers ADD COLUMN last_full_sync INTEGER;")
        try c.exec("UPDATE meta SET value = '16' WHERE key = 'schema_version';")
    }

    /// v17: what each monitor held and skipped at its last evaluation (`MonitorOutcome`: counts,
    /// and `skipped` as codes), so `monitor list` and `status` tell it with no daemon running.
    /// Older monitors have none until their next evaluation.
    static func migrateV16toV17(_ c: Connection) throws {
        try c.exec(
            """
            ALTER TABLE monitors ADD COLUMN held_episodes INTEGER;
            ALTER TABLE monitors ADD COLUMN held_bytes INTEGER;
            ALTER TABLE monitors ADD COLUMN in_scope INTEGER;
            ALTER TABLE monitors ADD COLUMN skipped TEXT;
            UPDATE meta SET value = '17' WHERE key = 'schema_version';
            """)
    }

    /// v18: typed reasons and row kinds. A reason is a code (`reason`) and its parameters
    /// (`reason_detail`, `StatusReason.persisted`) instead of a sentence, so rewording a message
    /// changes nothing stored; a row's kind (original, a copy at `quality`, a next version) is a
    /// column instead of a marker read out of its id (the id keeps its spelling: partial files
    /// on disk are named after it). Each old sentence is read once, through the openings the
    /// codes were derived from: a sentence this release can take apart becomes its case,
    /// parameters and all; any other keeps its words under the code it was shown with.
    static func migrateV17toV18(_ c: Connection) throws {
        try c.exec(
            """
            ALTER TABLE downloads ADD COLUMN reason_detail TEXT;
            ALTER TABLE downloads ADD COLUMN kind TEXT NOT NULL DEFAULT 'original';
            ALTER TABLE downloads ADD COLUMN quality TEXT;
            """)
        for r in try c.query("SELECT rowid, source_id, status, reason FROM downloads") {
            guard let rowid = r[0].int, let id = r[1].text else { continue }
            // A row whose status is unreadable is quarantined at open with its words as they were.
            let state = r[2].text.flatMap(DownloadStatus.init(rawValue:)).map(DisplayState.init(status:))
            let text = r[3].text ?? ""
            let reason = state.flatMap { text.isEmpty ? nil : StatusReason(sentence: text, state: $0) }
            let kind = spelledKey(server: "", itemId: "", id: id).kind
            try c.run(
                "UPDATE downloads SET reason=?, reason_detail=?, kind=?, quality=? WHERE rowid=?",
                (state == nil ? [r[3], .null] : reasonValues(reason)) + kindValues(kind) + [.int(rowid)])
        }
        try c.exec("UPDATE meta SET value = '18' WHERE key = 'schema_version';")
    }

    /// v19: the download queue's order (`QueuePlace`): each pinned row's position and priority,
    /// in a table of its own so a row's save (a replace of its columns) never resets them.
    /// Rows pinned before it keep the order the fill used then (server, item, source); new
    /// pins go after them.
    static func migrateV18toV19(_ c: Connection) throws {
        try c.exec(
            """
            CREATE TABLE IF NOT EXISTS queue(server TEXT NOT NULL, item_id TEXT NOT NULL, source_id TEXT NOT NULL,
                position INTEGER NOT NULL, priority TEXT NOT NULL DEFAULT 'normal', PRIMARY KEY(server, item_id, source_id));
            INSERT OR IGNORE INTO queue(server, item_id, source_id, position)
                SELECT server, item_id, source_id, ROW_NUMBER() OVER (ORDER BY server, item_id, source_id) FROM downloads WHERE pinned = 1;
            UPDATE meta SET value = '19' WHERE key = 'schema_version';
            """)
    }

    /// v20: the path each stored file of a removed server had in the mount, so `status` and
    /// `orphans` name it by its title and `orphans --purge PATH`, `cancel` and `unpin` take it.
    /// (`IF NOT EXISTS`: an older index made by lowering a current one's version keeps the table.)
    static func migrateV19toV20(_ c: Connection) throws {
        try c.exec(
            """
            CREATE TABLE IF NOT EXISTS removed_copies(server TEXT NOT NULL, item_id TEXT NOT NULL, source_id TEXT NOT NULL, path TEXT NOT NULL,
                PRIMARY KEY(server, item_id, source_id));
            UPDATE meta SET value = '20' WHERE key = 'schema_version';
            """)
    }

    /// v23: a media source keeps the file's path as the server gives it (MediaSourceInfo.Path,
    /// Plex Part.file, Silo's file_name): a copy whose item came back under a new id is known
    /// by it (`IdentityMatch`). Unknown until the next sync.
    static func keepSourcePaths(_ c: Connection) throws {
        try c.exec(
            """
            ALTER TABLE media_sources ADD COLUMN path TEXT;
            UPDATE meta SET value = '23' WHERE key = 'schema_version';
            """)
    }

    /// v24: a series' items found by the series (`seriesEpisodes`, what a playing episode's next
    /// is picked from), not by a scan of every item of the server.
    static func indexItemsBySeries(_ c: Connection) throws {
        try c.exec(
            """
            CREATE INDEX IF NOT EXISTS items_series ON items(server, series_id);
            UPDATE meta SET value = '24' WHERE key = 'schema_version';
            """)
    }

    /// v25: a side asset's failure is a code and its parameter (`SideAssetFailure.persisted`)
    /// instead of a sentence, so rewording a message changes nothing stored. Each old sentence
    /// is read once (`SideAssetFailure(sentence:)`): one this release wrote becomes its case;
    /// other words (an error's) are kept as a failed request's.
    static func codeSideAssetReasons(_ c: Connection) throws {
        try c.exec("ALTER TABLE side_assets ADD COLUMN reason_detail TEXT;")
        for r in try c.query("SELECT rowid, reason FROM side_assets WHERE reason IS NOT NULL") {
            guard let rowid = r[0].int, let words = r[1].text else { continue }
            let failure = SideAssetFailure(sentence: words).persisted
            try c.run(
                "UPDATE side_assets SET reason=?, reason_detail=? WHERE rowid=?",
                [.text(failure.code), failure.parameter.map(SQLValue.text) ?? .null, .int(rowid)])
        }
        try c.exec("UPDATE meta SET value = '25' WHERE key = 'schema_version';")
    }

    /// v26: an orphaned media source keeps what its item said of it (`orphan_identity`: kind,
    /// provider ids, season, episode, series), which goes with the item's row, so a library
    /// removed and later added again is still known (`IdentityMatch`). Orphans made before have
    /// none: their items' rows are gone.
    /// v27: a monitored series that left the catalog with nothing in its place (its library
    /// removed, to be added again later) keeps what a later sync needs to follow it: its episodes'
    /// season and episode numbers (which carry the baseline) and its provider ids, deleted with
    /// the catalog's rows of it (`OfflineIndex.LeftSeries`).
    static func keepLeftSeries(_ c: Connection) throws {
        try c.exec(
            """
            CREATE TABLE left_series(server TEXT NOT NULL, series_id TEXT NOT NULL, snapshot TEXT NOT NULL, PRIMARY KEY(server, series_id));
            UPDATE meta SET value = '27' WHERE key = 'schema_version';
            """)
    }

    static func keepOrphanIdentities(_ c: Connection) throws {
        try c.exec(
            """
            ALTER TABLE media_sources ADD COLUMN orphan_identity TEXT;
            UPDATE meta SET value = '26' WHERE key = 'schema_version';
            """)
    }

    /// The key a row id of an index before v21 spells (`@QUALITY`, `#next` after the server's
    /// id), as v20's rows, older sidecars and partial names have it: read only here, by the
    /// migrations and `CopySidecar.read`.
    static func spelledKey(server: String, itemId: String, id: String) -> FileKey {
        if id.hasSuffix("#next") { return FileKey(server: server, itemId: itemId, sourceId: String(id.dropLast(5)), kind: .nextVersion) }
        if let at = id.lastIndex(of: "@"), let quality = Quality(String(id[id.index(after: at)...])), quality != .original {
            return FileKey(server: server, itemId: itemId, sourceId: String(id[..<at]), kind: .copy(quality))
        }
        return FileKey(server: server, itemId: itemId, sourceId: id)
    }

    /// How a row id of an index before v21 spells `key`.
    static func spelledId(_ key: FileKey) -> String {
        switch key.kind {
        case .original: return key.sourceId
        case .copy(let quality): return key.sourceId + "@" + quality.description
        case .nextVersion: return key.sourceId + "#next"
        }
    }

    /// v21: `source_id` is the server's id alone; the kind and a copy's quality (v18's columns)
    /// are part of the key of `downloads` and `segments`, and `managed_entries` keeps them too
    /// (quality '' where there is none: NULL is no key). SQLite cannot change a primary key, so
    /// both tables are made anew, filled and renamed, in this transaction.
    ///
    /// A copy's or next version's partial file is named from the typed key
    /// (`DataLayout.partialRelativePath`). The new name is a hard link made here, before the
    /// commit, so that no outcome loses bytes: rolled back, the old name (the one the old
    /// schema's row names) is still there, and the link is found again (same inode) when this
    /// runs again; committed, the row names the new one and the old name is unlinked after the
    /// commit (`dropMigratedPartialNames`, at every open, so a crash in between only delays
    /// it). A link that cannot be made (a filesystem without them, a name taken by another
    /// file) leaves the row on its old name, which it keeps: the column is what the file is
    /// opened by.
    static func moveKindsOutOfSourceIds(_ c: Connection) throws {
        try c.exec(
            """
            CREATE TABLE downloads_v19(server TEXT NOT NULL, item_id TEXT NOT NULL, source_id TEXT NOT NULL, status TEXT NOT NULL,
                attempt INTEGER NOT NULL, validator TEXT, total INTEGER NOT NULL, ranges TEXT NOT NULL, partial TEXT NOT NULL, reason TEXT,
                awaiting_validation INTEGER NOT NULL DEFAULT 0, updated INTEGER NOT NULL, pinned INTEGER NOT NULL DEFAULT 0, source_tag TEXT,
                job TEXT, checked TEXT, pause_cause TEXT, reason_detail TEXT, kind TEXT NOT NULL DEFAULT 'original', quality TEXT NOT NULL DEFAULT '',
                PRIMARY KEY(server, item_id, source_id, kind, quality));
            CREATE TABLE segments_v19(server TEXT NOT NULL, item_id TEXT NOT NULL, source_id TEXT NOT NULL, attempt INTEGER NOT NULL,
                lower INTEGER NOT NULL, upper INTEGER NOT NULL, digest TEXT NOT NULL, kind TEXT NOT NULL DEFAULT 'original',
                quality TEXT NOT NULL DEFAULT '', PRIMARY KEY(server, item_id, source_id, kind, quality, lower));
            ALTER TABLE managed_entries ADD COLUMN kind TEXT NOT NULL DEFAULT 'original';
            ALTER TABLE managed_entries ADD COLUMN quality TEXT;
            """)
        let root = try c.query("SELECT file FROM pragma_database_list WHERE name = 'main'").first?[0].text.flatMap {
            $0.isEmpty ? nil : ($0 as NSString).deletingLastPathComponent
        }
        let layout = root.map { DataLayout(root: $0) }
        for r in try c.query("SELECT rowid, server, item_id, source_id, partial FROM downloads") {
            guard let rowid = r[0].int, let id = r[3].text else { continue }
            // v18 took the kind out of the same spelling; a row it could not decode keeps its id
            // (it is quarantined at open, words and all).
            let key = spelledKey(server: r[1].text ?? "", itemId: r[2].text ?? "", id: id)
            var partial = r[4]
            if key.kind != .original, let layout, let old = r[4].text, DataLayout.isValidPartialPath(old) {
                let new = layout.partialRelativePath(for: key)
                if linkPartial(layout.absolute(old), as: layout.absolute(new)) { partial = .text(new) }
            }
            try c.run(
                """
                INSERT INTO downloads_v19(server, item_id, source_id, kind, quality, status, attempt, validator, total, ranges, partial, reason,
                    awaiting_validation, updated, pinned, source_tag, job, checked, pause_cause, reason_detail)
                SELECT server, item_id, ?, kind, COALESCE(quality, ''), status, attempt, validator, total, ranges, ?, reason,
                    awaiting_validation, updated, pinned, source_tag, job, checked, pause_cause, reason_detail FROM downloads WHERE rowid = ?
                """, [.text(key.sourceId), partial, .int(rowid)])
        }
        for r in try c.query("SELECT DISTINCT server, item_id, source_id FROM segments") {
            guard let id = r[2].text else { continue }
            let key = spelledKey(server: r[0].text ?? "", itemId: r[1].text ?? "", id: id)
            try c.run(
                """
                INSERT INTO segments_v19(server, item_id, source_id, kind, quality, attempt, lower, upper, digest)
                SELECT server, item_id, ?, ?, ?, attempt, lower, upper, digest FROM segments WHERE server = ? AND item_id = ? AND source_id = ?
                """, [.text(key.sourceId)] + kindValues(key.kind) + [r[0], r[1], r[2]])
        }
        for r in try c.query("SELECT rowid, item_id, source_id FROM managed_entries") {
            guard let rowid = r[0].int, let id = r[2].text else { continue }
            let key = spelledKey(server: "", itemId: r[1].text ?? "", id: id)
            // An entry at a preset Labstream has no name for was spelled `@PRESET` too, as a
            // copy no row is: it stays one (kind copy, no quality).
            let unnamed = key.kind == .original && id.contains("@")
            try c.run(
                "UPDATE managed_entries SET source_id = ?, kind = ?, quality = ? WHERE rowid = ?",
                (unnamed
                    ? [.text(String(id[..<id.lastIndex(of: "@")!])), .text("copy"), .null]
                    : [.text(key.sourceId)] + kindValues(key.kind)) + [.int(rowid)])
        }
        try c.exec(
            """
            DROP TABLE downloads;
            ALTER TABLE downloads_v19 RENAME TO downloads;
            DROP TABLE segments;
            ALTER TABLE segments_v19 RENAME TO segments;
            """)
        // The queue's places (v19) and removed servers' paths (v20) were keyed by the spelled id too.
        try c.exec(
            """
            CREATE TABLE queue_v21(server TEXT NOT NULL, item_id TEXT NOT NULL, source_id TEXT NOT NULL, kind TEXT NOT NULL DEFAULT 'original',
                quality TEXT NOT NULL DEFAULT '', position INTEGER NOT NULL, priority TEXT NOT NULL DEFAULT 'normal',
                PRIMARY KEY(server, item_id, source_id, kind, quality));
            CREATE TABLE removed_copies_v21(server TEXT NOT NULL, item_id TEXT NOT NULL, source_id TEXT NOT NULL, kind TEXT NOT NULL DEFAULT 'original',
                quality TEXT NOT NULL DEFAULT '', path TEXT NOT NULL, PRIMARY KEY(server, item_id, source_id, kind, quality));
            """)
        for (table, rest) in [("queue", "position, priority"), ("removed_copies", "path")] {
            for r in try c.query("SELECT rowid, server, item_id, source_id FROM \(table)") {
                guard let rowid = r[0].int, let id = r[3].text else { continue }
                let key = spelledKey(server: r[1].text ?? "", itemId: r[2].text ?? "", id: id)
                try c.run(
                    """
                    INSERT OR IGNORE INTO \(table)_v21(server, item_id, source_id, kind, quality, \(rest))
                    SELECT server, item_id, ?, ?, ?, \(rest) FROM \(table) WHERE rowid = ?
                    """, [.text(key.sourceId)] + kindValues(key.kind) + [.int(rowid)])
            }
        }
        try c.exec(
            """
            DROP TABLE queue;
            ALTER TABLE queue_v21 RENAME TO queue;
            DROP TABLE removed_copies;
            ALTER TABLE removed_copies_v21 RENAME TO removed_copies;
            UPDATE meta SET value = '21' WHERE key = 'schema_version';
            """)
    }

    /// v22: rows whose bytes are one file on disk with another server's row (`SharedCopy`: a
    /// hard link in `partials/`), so budgets and `du` count that file once. `file` names the
    /// file (device and inode when linked); a marker holds for its row's `attempt` only, so a
    /// new attempt (a cancel, a changed file: a fresh file under the name) ends it, and it goes
    /// with its row (the trigger; an `INSERT OR REPLACE` of the row keeps it).
    static func addSharedCopies(_ c: Connection) throws {
        try c.exec(
            """
            CREATE TABLE IF NOT EXISTS shared_copies(server TEXT NOT NULL, item_id TEXT NOT NULL, source_id TEXT NOT NULL,
                kind TEXT NOT NULL DEFAULT 'original', quality TEXT NOT NULL DEFAULT '', attempt INTEGER NOT NULL, file TEXT NOT NULL,
                PRIMARY KEY(server, item_id, source_id, kind, quality));
            CREATE TRIGGER IF NOT EXISTS shared_copies_row_gone AFTER DELETE ON downloads BEGIN
                DELETE FROM shared_copies WHERE server = OLD.server AND item_id = OLD.item_id AND source_id = OLD.source_id
                    AND kind = OLD.kind AND quality = OLD.quality; END;
            UPDATE meta SET value = '22' WHERE key = 'schema_version';
            """)
    }

    /// Gives the partial at `old` (and its sidecar) the name `new` too; true when `new` names
    /// `old`'s file now (made here, or by an earlier run rolled back), or `old` is gone and
    /// `new` holds it. Never removes a name.
    static func linkPartial(_ old: String, as new: String) -> Bool {
        var a = stat(), b = stat()
        let hasOld = stat(old, &a) == 0, hasNew = stat(new, &b) == 0
        if hasNew { return !hasOld || (a.st_dev == b.st_dev && a.st_ino == b.st_ino) }
        guard hasOld else { return true }  // no bytes yet: nothing to keep
        guard link(old, new) == 0 else { return false }
        let oldMeta = CopySidecar.path(ofPartial: old), newMeta = CopySidecar.path(ofPartial: new)
        if access(newMeta, F_OK) != 0 { _ = link(oldMeta, newMeta) }
        return true
    }

    /// After v21's commit: each copy's or next version's partial still also reachable by its
    /// name before v21 (the same file: a link `moveKindsOutOfSourceIds` made) loses that name,
    /// and its sidecar's. A name that is another file is left alone (`Reconcile` sets it aside).
    func dropMigratedPartialNames() {
        guard let rows = try? db.query("SELECT server, item_id, source_id, kind, quality, partial FROM downloads WHERE kind != 'original'") else { return }
        let layout = DataLayout(root: dataRoot)
        for r in rows {
            guard let kind = r[3].text.flatMap({ FileKind(persisted: $0, quality: r[4].text) }), let partial = r[5].text else { continue }
            let key = FileKey(server: r[0].text ?? "", itemId: r[1].text ?? "", sourceId: r[2].text ?? "", kind: kind)
            let old = layout.absolute(layout.partialRelativePath(for: FileKey(server: key.server, itemId: key.itemId, sourceId: Self.spelledId(key))))
            let current = layout.absolute(partial)
            guard old != current else { continue }
            var a = stat(), b = stat()
            guard stat(old, &a) == 0, stat(current, &b) == 0, a.st_dev == b.st_dev, a.st_ino == b.st_ino else { continue }
            unlink(old)
            let oldMeta = CopySidecar.path(ofPartial: old), newMeta = CopySidecar.path(ofPartial: current)
            if stat(oldMeta, &a) == 0, stat(newMeta, &b) == 0, a.st_dev == b.st_dev, a.st_ino == b.st_ino { unlink(oldMeta) }
        }
    }
}
