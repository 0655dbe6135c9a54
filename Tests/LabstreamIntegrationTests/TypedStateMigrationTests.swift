import Foundation
import LabstreamCore
import Testing

@testable import LabstreamStore

/// Takes a current index back to schema 17: each reason as the words schema 17 stored (its
/// sentence; a full disk and a pending check as it spelled them), and no kind columns.
func undoSchema18(_ db: SQLiteDatabase) throws {
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

/// Schema 17 → 18: stored sentences become typed reasons, markers in ids a kind column, and
/// every row means what it meant.
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
            #expect(row.status.rawValue == old.status && row.partialPath == "partials/\(n).part", "\(old.item)")
            #expect(row.pauseCause?.rawValue == old.cause, "\(old.item)")
            // The kind is a typed field; the id and the partial file's name stay as they were.
            #expect(row.key.kind == old.kind && row.key.sourceId == old.id, "\(old.item)")
            #expect(layout.partialRelativePath(for: row.key) == layout.partialRelativePath(for: FileKey(server: "home", itemId: old.item, sourceId: old.id)))
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
}
