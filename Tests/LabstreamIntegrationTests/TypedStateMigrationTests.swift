import Foundation
import LabstreamCore
import LabstreamFixture
import Testing

@testable import LabstreamStore

/// Takes a current index back to schema 25: no series kept for their monitors (v27), no
/// orphan's identity (v26).
func undoSchema26(_ db: SQLiteDatabase) throws {
    try db.exec("DROP TABLE left_series; UPDATE meta SET value = '26' WHERE key = 'schema_version';")
    try db.exec("ALTER TABLE media_sources DROP COLUMN orphan_identity; UPDATE meta SET value = '25' WHERE key = 'schema_version';")
}

/// Takes a current index back to schema 24: each side asset's failure as the sentence it
/// stored then.
func undoSchema25(_ db: SQLiteDatabase) throws {
    try undoSchema26(db)
    for r in try db.query("SELECT rowid, reason, reason_detail FROM side_assets WHERE reason IS NOT NULL") {
        guard let rowid = r[0].int, let code = r[1].text else { continue }
        let words = SideAssetFailure(persisted: code, parameter: r[2].text).sentence
        try db.run("UPDATE side_assets SET reason=? WHERE rowid=?", [.text(words), .int(rowid)])
    }
    try db.exec("ALTER TABLE side_assets DROP COLUMN reason_detail; UPDATE meta SET value = '24' WHERE key = 'schema_version';")
}

/// Takes a current index back to schema 18: each row's kind spelled in its id again (the key
/// of `downloads` and `segments`), `managed_entries` without its kind columns, and neither the
/// queue (v19), removed servers' paths (v20), shared copies (v22), media sources' server
/// paths (v23), the index of items by series (v24), side assets' failure codes (v25) nor
/// orphans' identities (v26).
func undoSchema21(_ db: SQLiteDatabase) throws {
    try undoSchema25(db)
    let spelled = "source_id || CASE kind WHEN 'copy' THEN '@' || quality WHEN 'next' THEN '#next' ELSE '' END"
    try db.exec(
        """
        CREATE TABLE downloads_v18(server TEXT NOT NULL, item_id TEXT NOT NULL, source_id TEXT NOT NULL, status TEXT NOT NULL,
            attempt INTEGER NOT NULL, validator TEXT, total INTEGER NOT NULL, ranges TEXT NOT NULL, partial TEXT NOT NULL, reason TEXT,
            awaiting_validation INTEGER NOT NULL DEFAULT 0, updated INTEGER NOT NULL, pinned INTEGER NOT NULL DEFAULT 0, source_tag TEXT,
            job TEXT, checked TEXT, pause_cause TEXT, reason_detail TEXT, kind TEXT NOT NULL DEFAULT 'original', quality TEXT,
            PRIMARY KEY(server, item_id, source_id));
        INSERT INTO downloads_v18 SELECT server, item_id, \(spelled), status, attempt, validator, total, ranges, partial, reason,
            awaiting_validation, updated, pinned, source_tag, job, checked, pause_cause, reason_detail, kind, NULLIF(quality, '') FROM downloads;
        DROP TABLE downloads;
        ALTER TABLE downloads_v18 RENAME TO downloads;
        CREATE TABLE segments_v18(server TEXT NOT NULL, item_id TEXT NOT NULL, source_id TEXT NOT NULL, attempt INTEGER NOT NULL,
            lower INTEGER NOT NULL, upper INTEGER NOT NULL, digest TEXT NOT NULL, PRIMARY KEY(server, item_id, source_id, lower));
        INSERT INTO segments_v18 SELECT server, item_id, \(spelled), attempt, lower, upper, digest FROM segments;
        DROP TABLE segments;
        ALTER TABLE segments_v18 RENAME TO segments;
        UPDATE managed_entries SET source_id = \(spelled);
        ALTER TABLE managed_entries DROP COLUMN kind;
        ALTER TABLE managed_entries DROP COLUMN quality;
        DROP TABLE queue;
        DROP TABLE removed_copies;
        DROP TABLE shared_copies;
        ALTER TABLE media_sources DROP COLUMN path;
        DROP INDEX items_series;
        UPDATE meta SET value = '18' WHERE key = 'schema_version';
        """)
}

/// Takes a current index back to schema 17: each reason as the words schema 17 stored (its
/// sentence; a full disk and a pending check as it spelled them), and no kind columns.
func undoSchema18(_ db: SQLiteDatabase) throws {
    try undoSchema21(db)
    for r in try db.query("SELECT rowid, reason, reason_detail FROM downloads") {
        guard let rowid = r[0].int else { continue }
        let text = r[1].text.map { code -> String in
            switch StatusReason(persisted: code, parameters: r[2].text) {
            case .storageFull: return "storage_full"
            case .awaitingValidation: return "all bytes present; awaiting validation"
            case let reason: return reason.sentence
            }
        }
        try db.run("UPDATE downloads SET reason=? WHERE rowid=?", [text.map(SQLValue.text) ?? .null, .int(rowid)])
    }
    try db.exec("ALTER TABLE downloads DROP COLUMN reason_detail; ALTER TABLE downloads DROP COLUMN kind; ALTER TABLE downloads DROP COLUMN quality;")
}

/// Schema 17 → 18 → 19: stored sentences become typed reasons, markers in ids a kind column
/// (then part of the row's key, the id the server's alone), and every row means what it meant.
@Suite struct TypedStateMigrationTests {
    /// A row as schema 17 stored it, and what it showed then: its JSON code and its sentence.
    struct Old {
        var item: String
        var id: String
        var status: String
        var reason: String?
        var cause: String? = nil
        var job: String? = nil
        var code: String?
        var message: String?
        var kind: FileKind = .original
        /// The typed reason it must become (nil: its words are kept under their code).
        var typed: StatusReason?
    }

    // Every kind of sentence schema 17 stored, with the code and message its `--json` showed
    // (what `StatusReason.code`/`sentence` of that release made of the words), and each marker.
    static let rows: [Old] = [
        Old(
            item: "full", id: "m", status: "paused", reason: "storage_full", cause: "storage_full", code: "storage_full",
            message: "the cache's disk is full; it resumes by itself once there is room (`labstream resume` tries now)", typed: .storageFull),
        Old(
            item: "checking", id: "m", status: "unverified", reason: "all bytes present; awaiting validation", code: "awaiting_validation",
            message: "all bytes present; waiting for the playback check", typed: .awaitingValidation),
        Old(
            item: "probeoff", id: "m", status: "unverified", reason: "all bytes present; the playback probe is off", code: "probe_off",
            message: "all bytes present; the playback probe is off", typed: .probeOff),
        Old(
            item: "user", id: "m", status: "paused", reason: "paused by user", cause: "paused_by_user", code: "paused_by_user",
            message: "paused by user", typed: .pausedByUser),
        Old(
            item: "away", id: "m", status: "paused", reason: "server unavailable", cause: "server_unavailable", code: "server_unavailable",
            message: "server unavailable", typed: .serverUnavailable),
        Old(
            item: "waiting", id: "m", status: "queued", reason: "server unavailable: HTTP 503, next try in 4 s", code: "server_unavailable",
            message: "server unavailable: HTTP 503, next try in 4 s", typed: .waiting(what: "HTTP 503", retryIn: 4)),
        Old(
            item: "refused", id: "m", status: "paused",
            reason: "home no longer accepts the stored sign-in (HTTP 401); sign in again with `labstream server add`, and this file resumes",
            cause: "sign_in_refused", code: "sign_in_refused",
            message: "home no longer accepts the stored sign-in (HTTP 401); sign in again with `labstream server add`, and this file resumes",
            typed: .signInRefused(server: "home")),
        Old(
            item: "evicted", id: "m", status: "partial", reason: "evicted to stay within the cache limits", code: "evicted",
            message: "evicted to stay within the cache limits", typed: .evicted),
        Old(
            item: "monitor", id: "m", status: "partial", reason: "removed by its series monitor (watched, or over the monitor's storage cap)",
            code: "monitor_removed", message: "removed by its series monitor (watched, or over the monitor's storage cap)", typed: .monitorLetGo),
        Old(
            item: "changed", id: "m", status: "queued", reason: "file changed on the server (ETag); fetching it again", code: "file_changed",
            message: "file changed on the server (ETag); fetching it again", typed: .fileChanged("ETag", refetching: true)),
        Old(
            item: "changed-plain", id: "m", status: "queued", reason: "file changed on the server; fetching it again", code: "file_changed",
            message: "file changed on the server; fetching it again", typed: .fileChanged()),
        Old(
            item: "changed-kept", id: "m", status: "partial", reason: "file changed on the server (size)", code: "file_changed",
            message: "file changed on the server (size)", typed: .fileChanged("size", refetching: false)),
        Old(
            item: "keeps", id: "m", status: "failed", reason: "the file keeps changing on the server (ETag); run `labstream sync`", code: "file_changed",
            message: "the file keeps changing on the server (ETag); run `labstream sync`", typed: .keepsChanging("ETag")),
        Old(
            item: "vanished", id: "m", status: "queued", reason: "the local file vanished; fetching it again", code: "local_file_vanished",
            message: "the local file vanished; fetching it again", typed: .localFileVanished),
        Old(
            item: "damaged", id: "m", status: "queued", reason: "damaged bytes found on disk were dropped and will be fetched again",
            code: "damaged_bytes", message: "damaged bytes found on disk were dropped and will be fetched again", typed: .damagedBytes),
        Old(
            item: "job", id: "m@10mbps", status: "preparing", reason: "the server is preparing the copy (job 7)", job: "7", code: "preparing_copy",
            message: "the server is preparing the copy (job 7)", kind: .copy(.capped(megabitsPerSecond: 10)), typed: .preparing(job: "7")),
        Old(
            item: "entry", id: "m@2mbps", status: "preparing", reason: "the server is preparing the 2mbps copy (download entry e1)", code: "other",
            message: "the server is preparing the 2mbps copy (download entry e1)", kind: .copy(.capped(megabitsPerSecond: 2)),
            typed: .preparingEntry(quality: "2mbps", entry: "e1")),
        Old(
            item: "emby", id: "m@remux", status: "preparing", reason: "Emby is converting (job 4: Transcoding 12%)", job: "4", code: "other",
            message: "Emby is converting (job 4: Transcoding 12%)", kind: .copy(.remux), typed: .said("Emby is converting (job 4: Transcoding 12%)")),
        Old(
            item: "live", id: "m@5mbps", status: "queued", reason: "the live stream stopped (timed out: read); it starts again from the beginning",
            code: "live_stream", message: "the live stream stopped (timed out: read); it starts again from the beginning",
            kind: .copy(.capped(megabitsPerSecond: 5)), typed: .liveStreamStopped("timed out: read")),
        Old(
            item: "live-failed", id: "m@1mbps", status: "failed", reason: "the live stream failed: the server refused the request: HTTP 400",
            code: "live_stream", message: "the live stream failed: the server refused the request: HTTP 400",
            kind: .copy(.capped(megabitsPerSecond: 1)), typed: .liveStreamFailed("the server refused the request: HTTP 400")),
        Old(
            item: "plays-not", id: "m@20mbps", status: "failed", reason: "the copy does not play: mpv: invalid data", code: "failed",
            message: "the copy does not play: mpv: invalid data", kind: .copy(.capped(megabitsPerSecond: 20)), typed: .doesNotPlay("mpv: invalid data")),
        Old(
            item: "retrying", id: "m", status: "downloading", reason: "timed out: read; resuming from byte 4096", code: "retrying",
            message: "timed out: read; resuming from byte 4096", typed: .retrying("timed out: read", fromByte: 4096)),
        Old(
            item: "unknown-size", id: "m", status: "downloading", reason: "size unknown: fetching to the end", code: "size_unknown",
            message: "size unknown: fetching to the end", typed: .sizeUnknown),
        Old(
            item: "removed", id: "m", status: "paused", reason: "server removed; after adding it again, resume with labstream resume",
            // Today's sentence: it says where the copy is listed and how to free it (issue 40).
            cause: "server_removed", code: "server_removed", message: StatusReason.serverRemoved.sentence, typed: .serverRemoved),
        Old(
            item: "upgraded", id: "m", status: "partial", reason: "index upgraded; bytes will be fetched and verified again", code: "index_upgraded",
            message: "index upgraded; bytes will be fetched and verified again", typed: .indexUpgraded),
        Old(
            item: "mpv", id: "m", status: "failed", reason: "mpv: invalid data", code: "failed", message: "mpv: invalid data",
            typed: .said("mpv: invalid data")),
        Old(
            item: "probe", id: "m", status: "unverified", reason: "probe timed out", code: "check_inconclusive", message: "probe timed out",
            typed: .said("probe timed out")),
        Old(
            item: "odd-pause", id: "m", status: "paused", reason: "paused by a build long gone", code: "other", message: "paused by a build long gone",
            typed: .said("paused by a build long gone")),
        Old(
            item: "revoked", id: "m", status: "failed",
            reason: "the server revoked this download; the bytes already here stay readable, nothing more is fetched (unpin and pin again to ask anew)",
            code: "failed",
            message: "the server revoked this download; the bytes already here stay readable, nothing more is fetched (unpin and pin again to ask anew)",
            typed: .entryEnded(revoked: true)),
        // Words with a code's opening this release cannot take apart: kept, under that code.
        Old(
            item: "older-wording", id: "m", status: "preparing", reason: "the server is preparing the copy (an older wording)", code: "preparing_copy",
            message: "the server is preparing the copy (an older wording)", typed: nil),
        Old(item: "next", id: "m#next", status: "downloading", reason: nil, code: nil, message: nil, kind: .nextVersion, typed: nil),
        Old(item: "plain", id: "m", status: "complete", reason: nil, code: nil, message: nil, typed: nil)
    ]

    /// An index made by schema 17's own SQL (the migrations as they run), holding `rows`.
    func schema17Index(_ path: String) throws {
        let db = try SQLiteDatabase(path: path)
        try db.transaction { c in
            try OfflineIndex.createV1(c)
            for migration in OfflineIndex.migrations.prefix(16) { try migration(c) }
            for (n, r) in Self.rows.enumerated() {
                try c.run(
                    """
                    INSERT INTO downloads(server, item_id, source_id, status, attempt, validator, total, ranges, partial, reason,
                        awaiting_validation, updated, pinned, source_tag, job, checked, pause_cause) VALUES(?,?,?,?,1,NULL,100,'',?,?,0,1,1,NULL,?,NULL,?)
                    """,
                    [
                        .text("home"), .text(r.item), .text(r.id), .text(r.status), .text("partials/\(n).part"), r.reason.map(SQLValue.text) ?? .null,
                        r.job.map(SQLValue.text) ?? .null, r.cause.map(SQLValue.text) ?? .null
                    ])
            }
        }
        #expect(try db.query("SELECT value FROM meta WHERE key='schema_version'").first?[0].text == "17")
    }

    @Test func aVersion17IndexKeepsEveryRowsMeaning() throws {
        let scratch = Scratch("migrate17")
        let path = scratch.path + "/index.sqlite"
        try schema17Index(path)
        let index = try OfflineIndex(path: path)
        #expect(try index.db.query("SELECT value FROM meta WHERE key='schema_version'").first?[0].text == "\(OfflineIndex.schemaVersion)")
        let layout = DataLayout(root: scratch.path)
        let rows = Dictionary(try index.downloads().map { ($0.key.itemId, $0) }, uniquingKeysWith: { a, _ in a })
        #expect(rows.count == Self.rows.count)
        for (n, old) in Self.rows.enumerated() {
            let row = try #require(rows[old.item], "\(old.item)")
            #expect(row.status.rawValue == old.status, "\(old.item)")
            #expect(row.pauseCause?.rawValue == old.cause, "\(old.item)")
            // The kind is a typed field; the id is the server's. An original's partial keeps its
            // name; another kind's (no file here: nothing to move) takes the typed key's.
            #expect(row.key.kind == old.kind && row.key.sourceId == "m", "\(old.item)")
            #expect(row.partialPath == (old.kind == .original ? "partials/\(n).part" : layout.partialRelativePath(for: row.key)), "\(old.item)")
            #expect(row.key.base == FileKey(server: "home", itemId: old.item, sourceId: "m"), "\(old.item)")
            if let typed = old.typed { #expect(row.reason == typed, "\(old.item): \(String(describing: row.reason))") }
            // The edge says what it said: the JSON code and sentence of the same status.
            let json = try #require(
                try JSONSerialization.jsonObject(with: JSONEncoder().encode(FileStatus(path: "x", size: 100, row: row))) as? [String: Any])
            #expect(json["reason"] as? String == old.code, "\(old.item): \(json["reason"] ?? "nil")")
            #expect(json["message"] as? String == old.message, "\(old.item): \(json["message"] ?? "nil")")
        }
        // Stored as a code and its parameters, no longer as the sentence.
        let waiting = try index.db.query("SELECT reason, reason_detail, kind, quality FROM downloads WHERE item_id='waiting'").first
        #expect(waiting?[0].text == "waiting_for_server" && waiting?[1].text == #"{"retry_in":"4","text":"HTTP 503"}"#)
        let copy = try index.db.query("SELECT reason, reason_detail, kind, quality FROM downloads WHERE item_id='job'").first
        #expect(copy?[0].text == "preparing_copy" && copy?[1].text == #"{"job":"7"}"# && copy?[2].text == "copy" && copy?[3].text == "10mbps")
        #expect(try index.db.query("SELECT kind FROM downloads WHERE item_id='next'").first?[0].text == "next")
        // Saved again by this release and read back: the same row.
        for row in rows.values { try index.saveDownload(row, now: 2) }
        let again = Dictionary(try index.downloads().map { ($0.key.itemId, $0) }, uniquingKeysWith: { a, _ in a })
        #expect(again == rows)
    }

    /// Every reason this release writes is read back as itself from its stored form, and its
    /// stored form names no sentence: rewording a message changes nothing stored.
    @Test func everyReasonIsStoredAsACodeAndReadBackAsItself() {
        let reasons: [StatusReason] = [
            .awaitingValidation, .probeOff, .serverUnavailable, .storageFull, .pausedByUser, .evicted, .monitorLetGo, .heldByCap,
            .orphaned(kept: true), .orphaned(kept: false), .localFileVanished, .damagedBytes, .fetchingSideAssets, .serverRemoved,
            .daemonNotRunning, .indexUpgraded, .fileChanged(), .fileChanged("ETag", refetching: false), .keepsChanging("size"),
            .preparing(job: "7"), .preparingEntry(quality: "10mbps", entry: "e"), .serverAway(.offline), .serverAway(.authFailed),
            .waiting(what: "HTTP 503", retryIn: 4), .signInRefused(server: "home"), .retrying("timed out", fromByte: 9), .sizeUnknown,
            .liveStreamStopped("x"), .liveStreamFailed("y"), .entryEnded(revoked: true), .entryEnded(revoked: false), .doesNotPlay("z"),
            .said("the server's words"), .coded(.fileChanged, "older words")
        ]
        for reason in reasons {
            let (code, parameters) = reason.persisted
            #expect(StatusReason(persisted: code, parameters: parameters) == reason, "\(reason)")
            #expect(!code.contains(" "), "\(reason)")
            switch reason {
            case .said, .coded: break  // words not ours: kept as they are
            default: #expect(!(parameters ?? "").contains(reason.sentence), "\(reason)")
            }
        }
    }

    /// A schema 18 index of one film held three ways (its original, a 10mbps copy, a next
    /// version), ids spelled as schema 18 keyed them, each with a real partial file named after
    /// that spelling, its sidecar and a segment; the copy with its managed entry.
    struct Held {
        var spelled: String
        var kind: FileKind
        var seed: UInt64
    }
    static let held = [
        Held(spelled: "m", kind: .original, seed: 1), Held(spelled: "m@10mbps", kind: .copy(.capped(megabitsPerSecond: 10)), seed: 2),
        Held(spelled: "m#next", kind: .nextVersion, seed: 3)
    ]

    /// The path schema 18 gave the partial of a row spelled `id`.
    static func oldPartial(_ layout: DataLayout, _ id: String) -> String { "partials/" + layout.digestName("home/film/" + id) + ".part" }

    func schema18Index(_ root: String) throws -> DataLayout {
        let layout = DataLayout(root: root)
        try makeDirectories(layout.partialsDir)
        let db = try SQLiteDatabase(path: layout.indexPath)
        try db.transaction { c in
            try OfflineIndex.createV1(c)
            for migration in OfflineIndex.migrations.prefix(17) { try migration(c) }
            for h in Self.held {
                let partial = Self.oldPartial(layout, h.spelled)
                writeRandomFile(layout.absolute(partial), size: 1000, seed: h.seed)
                try Data("labstream-copy 1\nkey home film \(h.spelled)\nversion 1 1000 - -\npin 1\nsegment 0 1000 d\(h.seed)\n".utf8)
                    .write(to: URL(fileURLWithPath: CopySidecar.path(ofPartial: layout.absolute(partial))))
                try c.run(
                    """
                    INSERT INTO downloads(server, item_id, source_id, status, attempt, validator, total, ranges, partial, reason,
                        awaiting_validation, updated, pinned, source_tag, job, checked, pause_cause, reason_detail, kind, quality)
                        VALUES('home','film',?,'complete',1,NULL,1000,'0-1000',?,NULL,0,1,1,NULL,NULL,NULL,NULL,NULL,?,?)
                    """, [.text(h.spelled), .text(partial)] + OfflineIndex.kindValues(h.kind).map { $0 == .text("") ? .null : $0 })
                try c.run("INSERT INTO segments VALUES('home','film',?,1,0,1000,?)", [.text(h.spelled), .text("d\(h.seed)")])
            }
            try c.run("INSERT INTO managed_entries(server, item_id, source_id, entry_id) VALUES('home','film','m@10mbps','e1')")
            try c.run("INSERT INTO managed_entries(server, item_id, source_id, entry_id) VALUES('home','odd','m@15mbps','e2')")
        }
        #expect(try db.query("SELECT value FROM meta WHERE key='schema_version'").first?[0].text == "18")
        return layout
    }

    func bytes(_ path: String) -> Data? { FileManager.default.contents(atPath: path) }

    func expected(_ h: Held) -> Data {
        var rng = SeededRandom(seed: h.seed)
        return Data(rng.bytes(1000))
    }

    /// Every row is found by its typed key, with its segment; every partial's bytes (and its
    /// sidecar, which names the same key) under the name made from that key; no old name stays.
    @Test func aVersion18IndexFindsEveryRowAndEveryPartialByItsTypedKey() throws {
        let scratch = Scratch("migrate18")
        let layout = try schema18Index(scratch.path)
        let index = try OfflineIndex(path: layout.indexPath)
        #expect(try index.db.query("SELECT value FROM meta WHERE key='schema_version'").first?[0].text == String(OfflineIndex.schemaVersion))
        #expect(try index.db.query("SELECT count(*) FROM downloads WHERE source_id != 'm'").first?[0].int == 0)
        for h in Self.held {
            let key = FileKey(server: "home", itemId: "film", sourceId: "m", kind: h.kind)
            let row = try #require(try index.download(key), "\(h.spelled)")
            #expect(row.key == key && row.present == RangeSet([ByteRange(0, 1000)]) && row.status == .complete, "\(h.spelled)")
            #expect(row.partialPath == layout.partialRelativePath(for: key), "\(h.spelled)")
            #expect(bytes(layout.absolute(row.partialPath)) == expected(h), "\(h.spelled)")
            #expect(try index.segments(key, attempt: AttemptID(1)) == [.init(range: ByteRange(0, 1000), digest: "d\(h.seed)")], "\(h.spelled)")
            #expect(CopySidecar.read(CopySidecar.path(ofPartial: layout.absolute(row.partialPath)))?.key == key, "\(h.spelled)")
            if h.kind != .original {
                #expect(access(layout.absolute(Self.oldPartial(layout, h.spelled)), F_OK) != 0, "\(h.spelled)")
                #expect(access(CopySidecar.path(ofPartial: layout.absolute(Self.oldPartial(layout, h.spelled))), F_OK) != 0, "\(h.spelled)")
            }
        }
        #expect(Set(try index.partialPathsInUse()).count == 3)
        let copy = try #require(try index.managedEntry(server: "home", item: "film"))
        #expect(copy.sourceId == "m" && copy.kind == .copy(.capped(megabitsPerSecond: 10)) && copy.id == "e1")
        let odd = try #require(try index.managedEntry(server: "home", item: "odd"))
        #expect(odd.sourceId == "m" && odd.kind == nil && odd.key(server: "home") == nil)
        // A row saved again by this release stays one row per kind.
        for row in try index.downloads() { try index.saveDownload(row, now: 2) }
        #expect(try index.downloads().count == 3)
    }

    /// A run that made the new names and never committed (a crash: the links are there, the
    /// index still says 18), then one whose commit landed but whose clean-up did not: each
    /// next open ends where one clean run does, every byte where its row says.
    @Test func aMigrationInterruptedEitherSideOfItsCommitLosesNothing() throws {
        let scratch = Scratch("migrate18-crash")
        let layout = try schema18Index(scratch.path)
        let typed = { (h: Held) in layout.partialRelativePath(for: FileKey(server: "home", itemId: "film", sourceId: "m", kind: h.kind)) }
        for h in Self.held where h.kind != .original {
            #expect(link(layout.absolute(Self.oldPartial(layout, h.spelled)), layout.absolute(typed(h))) == 0)
        }
        _ = try OfflineIndex(path: layout.indexPath)
        for h in Self.held where h.kind != .original {
            #expect(access(layout.absolute(Self.oldPartial(layout, h.spelled)), F_OK) != 0)
            // The commit landed, the old name was not dropped yet: the next open drops it.
            #expect(link(layout.absolute(typed(h)), layout.absolute(Self.oldPartial(layout, h.spelled))) == 0)
        }
        let index = try OfflineIndex(path: layout.indexPath)
        for h in Self.held {
            let row = try #require(try index.download(FileKey(server: "home", itemId: "film", sourceId: "m", kind: h.kind)))
            #expect(bytes(layout.absolute(row.partialPath)) == expected(h), "\(h.spelled)")
            if h.kind != .original { #expect(access(layout.absolute(Self.oldPartial(layout, h.spelled)), F_OK) != 0, "\(h.spelled)") }
        }
    }

    /// A new name taken by another file: the row keeps its old name (what it is opened by), and
    /// neither file loses a byte.
    @Test func aPartialThatCannotTakeItsNewNameKeepsItsOld() throws {
        let scratch = Scratch("migrate18-taken")
        let layout = try schema18Index(scratch.path)
        let copy = Self.held[1]
        let key = FileKey(server: "home", itemId: "film", sourceId: "m", kind: copy.kind)
        writeRandomFile(layout.absolute(layout.partialRelativePath(for: key)), size: 10, seed: 9)
        let index = try OfflineIndex(path: layout.indexPath)
        let row = try #require(try index.download(key))
        #expect(row.partialPath == Self.oldPartial(layout, copy.spelled))
        #expect(bytes(layout.absolute(row.partialPath)) == expected(copy))
        #expect(bytes(layout.absolute(layout.partialRelativePath(for: key)))?.count == 10)
    }

    /// A sidecar written now names its key's kind in a line of its own: an id that happens to
    /// end like an old spelling is the server's, and each kind's sidecar reads back as itself.
    @Test func aSidecarNamesItsKindApartFromTheId() throws {
        let scratch = Scratch("sidecar-kind")
        let layout = DataLayout(root: scratch.path)
        try makeDirectories(layout.partialsDir)
        for kind in [FileKind.original, .copy(.remux), .nextVersion] {
            let key = FileKey(server: "home", itemId: "film", sourceId: "odd@10mbps", kind: kind)
            let row = DownloadRow(
                key: key, status: .partial, attempt: AttemptID(1), validator: nil, total: 10, present: RangeSet(),
                partialPath: layout.partialRelativePath(for: key), sourceTag: nil)
            CopySidecar.note(row, segment: .init(range: ByteRange(0, 10), digest: "d"), root: layout.root)
            #expect(CopySidecar.read(CopySidecar.path(ofPartial: layout.absolute(row.partialPath)))?.key == key, "\(kind)")
        }
    }

    /// The next episode's query (`seriesEpisodes`, once per playback) searches the series' items
    /// by `items_series`, then each one's sources by its key, on a new index and on one from
    /// before v24 once upgraded; without it the plan searched every item of the server (the
    /// primary key's `server=?` alone).
    @Test func theNextEpisodesQuerySearchesTheSeriesIndex() throws {
        let scratch = Scratch("series-index")
        let path = scratch.path + "/index.sqlite"
        // A connection of its own each time: an EXPLAIN kept prepared is not made again when
        // the schema changes.
        func plan() throws -> [String] {
            try SQLiteDatabase(path: path).query("EXPLAIN QUERY PLAN " + OfflineIndex.seriesEpisodesQuery, [.text("s"), .text("s"), .text("e")]).compactMap {
                $0.last?.text
            }
        }
        func searchesBySeries(_ plan: [String]) -> Bool {
            plan.first == "SEARCH i USING INDEX items_series (server=? AND series_id=?)"
                && plan.contains { $0.hasPrefix("SEARCH m USING INDEX sqlite_autoindex_media_sources_1 (server=? AND item_id=?)") }
        }
        do {
            let index = try OfflineIndex(path: path)
            let current = try plan()
            #expect(searchesBySeries(current), "\(current)")
            try undoSchema21(index.db)
            let old = try plan()
            #expect(!searchesBySeries(old), "\(old)")
        }
        let upgraded = try OfflineIndex(path: path)
        #expect(try upgraded.db.query("SELECT value FROM meta WHERE key='schema_version'").first?[0].text == String(OfflineIndex.schemaVersion))
        let after = try plan()
        #expect(searchesBySeries(after), "\(after)")
    }

    /// Schema 24 kept a side asset's failure as its sentence: v25 reads each once into its code
    /// and parameter (the words an error gave, or any this release never wrote, stay a failed
    /// request's words), so `status` says the same as before and a row saved again stays typed.
    @Test func aVersion24IndexsSideAssetFailuresBecomeCodes() throws {
        let scratch = Scratch("migrate24-side")
        let path = scratch.path + "/index.sqlite"
        let typed: [(String, SideAssetFailure)] = [
            ("empty", .noBytes), ("codec", .notTextSubtitle), ("encoding", .subtitleNotText), ("srt", .subtitleUnparsed(format: "srt")),
            ("html", .notAnImage), ("cut", .doesNotDecode("mpv: invalid data")), ("route", .noRoute),
            ("refused", .signInRefused(status: 403)), ("gone", .notOnServer), ("busy", .httpStatus(503)),
            ("timeout", .requestFailed("timed out: read"))
        ]
        // Words no release of the side asset fetcher wrote: the failed request's code, kept as said.
        let odd = "a sentence from a build long gone"
        do {
            let current = try OfflineIndex(path: path)
            for (item, failure) in typed {
                try current.saveSideAsset(
                    .init(
                        key: SideAssetKey(server: "s", itemId: item, asset: "poster:Primary"), state: .failed, tag: "t", file: nil, fileExtension: nil,
                        size: 0, reason: failure, attempts: 2, retryAt: 9))
            }
            try undoSchema25(current.db)
            #expect(try current.db.query("SELECT reason FROM side_assets WHERE item_id='busy'").first?[0].text == "the server answered HTTP 503")
            try current.db.run(
                "INSERT INTO side_assets(server, item_id, asset, state, reason, attempts, retry_at) VALUES('s', 'odd', 'poster:Primary', 'failed', ?, 1, 5)",
                [.text(odd)])
        }
        let index = try OfflineIndex(path: path)
        #expect(try index.db.query("SELECT value FROM meta WHERE key='schema_version'").first?[0].text == String(OfflineIndex.schemaVersion))
        let rows = Dictionary(try index.sideAssets().map { ($0.key.itemId, $0) }, uniquingKeysWith: { a, _ in a })
        for (item, failure) in typed {
            #expect(rows[item]?.reason == failure, "\(item): \(String(describing: rows[item]?.reason))")
            #expect(rows[item]?.attempts == 2 && rows[item]?.retryAt == 9 && rows[item]?.state == .failed, "\(item)")
        }
        #expect(rows["odd"]?.reason == .requestFailed(odd) && rows["odd"]?.reason?.sentence == odd)
        // Stored as codes, never as the sentence.
        let stored = try index.db.query("SELECT reason, reason_detail FROM side_assets WHERE item_id IN ('busy', 'html', 'odd') ORDER BY item_id")
        #expect(stored.map { $0[0].text } == ["http_status", "not_an_image", "request_failed"])
        #expect(stored.map { $0[1].text } == ["503", nil, odd])
    }
}
