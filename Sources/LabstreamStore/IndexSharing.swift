import Foundation
import LabstreamCore

/// One stored copy under two servers' paths (issue 41 item 4, `SharedCopy`): the file on disk is
/// one, each row names it by a partial of its own (a hard link), and `shared_copies` says which
/// rows are one file, so what is stored is counted once.
extension OfflineIndex {
    /// What the catalog says of `key`'s file (no server path: another server's would not compare).
    public func fileIdentity(_ key: FileKey) throws(LabstreamError) -> FileIdentity? {
        try read("the catalog") {
            try db.query(
                """
                SELECT i.kind, i.season, i.episode, i.details, m.container, m.size FROM media_sources m
                JOIN items i ON i.server = m.server AND i.id = m.item_id WHERE m.server=? AND m.item_id=? AND m.id=? AND m.orphaned=0
                """, [.text(key.server), .text(key.itemId), .text(key.sourceId)]
            ).first.flatMap { Self.identity(key, $0) }
        }
    }

    /// Whole originals of servers other than `server`, `size` bytes long, complete or unverified
    /// (or waiting for that check: `awaitingValidation`), with what their catalogs say of them:
    /// the copies a file of `server` may share.
    public func wholeCopies(size: Int64, otherThan server: String) throws(LabstreamError) -> [(identity: FileIdentity, row: DownloadRow)] {
        let columns = DownloadColumn.allCases.map { "d." + $0.rawValue }.joined(separator: ", ")
        return try read("download state") {
            try db.query(
                """
                SELECT \(columns), i.kind, i.season, i.episode, i.details, m.container, m.size FROM downloads d
                JOIN media_sources m ON m.server = d.server AND m.item_id = d.item_id AND m.id = d.source_id AND m.orphaned = 0
                JOIN items i ON i.server = d.server AND i.id = d.item_id
                WHERE d.kind = 'original' AND d.server != ? AND d.total = ? AND d.status IN ('complete', 'unverified')
                """, [.text(server), .int(size)]
            ).compactMap { r -> (FileIdentity, DownloadRow)? in
                let n = DownloadColumn.allCases.count
                guard let row = Self.decodeDownload(Array(r.prefix(n))), row.present.contains(ByteRange(0, row.total)),
                    let identity = Self.identity(row.key, Array(r.dropFirst(n)))
                else { return nil }
                return (identity, row)
            }
        }
    }

    static func identity(_ key: FileKey, _ r: [SQLValue]) -> FileIdentity? {
        guard let kind = r[0].text.flatMap(ItemKind.init(rawValue:)) else { return nil }
        return FileIdentity(
            key: key, kind: kind, providerIds: decodeDetails(r[3].text)?.ids ?? [:], size: r[5].int, container: r[4].text,
            season: r[1].int.map { Int($0) }, episode: r[2].int.map { Int($0) })
    }

    /// Which file on disk holds `path`'s bytes: its device and inode (nil: none there).
    public static func fileGroup(ofPartial path: String) -> String? {
        var st = stat()
        guard stat(path, &st) == 0 else { return nil }
        return "\(st.st_dev):\(st.st_ino)"
    }

    /// Makes `target` (a file of another server with nothing stored) hold `source`'s whole copy:
    /// its partial becomes a hard link of `source`'s, made before the commit (as v21's renamed
    /// partials), and its row, in one transaction, `source`'s bytes and digests under an attempt
    /// of its own, complete as `source` is, with `reason`, `validator` and `tag` (what its own
    /// server said of the file); one still waiting for its check waits for its own. A crash between the link and the commit leaves `target` with no
    /// bytes on a name that is the other file: its transfer starts a fresh file there, never
    /// writing into the other's (`PartialFile.isShared`). Refuses, the link undone, when
    /// `source` changed meanwhile or `target` holds bytes. Returns `target`'s row.
    public func shareCopy(
        _ source: DownloadRow, with target: FileKey, layout: DataLayout, validator: Validator?, tag: String?, reason: StatusReason, now: Int64
    ) throws(LabstreamError) -> DownloadRow {
        let existing = try download(target)
        guard existing?.present.isEmpty ?? true else { throw .storage("\(target) holds bytes of its own; nothing was shared") }
        let sourcePath = layout.absolute(source.partialPath)
        let relative = existing?.partialPath ?? layout.partialRelativePath(for: target)
        let targetPath = layout.absolute(relative)
        // The identity the source's check recorded holds until the link changes the file's ctime:
        // both rows record the file as it is after it, if the source's was still current.
        let before = Self.identity(ofPartial: sourcePath)
        guard let group = Self.fileGroup(ofPartial: sourcePath) else { throw .storage("\(source.partialPath) is gone; nothing was shared") }
        let linking = targetPath + ".share"
        unlink(linking)
        guard link(sourcePath, linking) == 0 else {
            throw .storage("cannot link \(source.partialPath) as \(relative): \(String(cString: strerror(errno))); nothing was shared")
        }
        guard rename(linking, targetPath) == 0 else {
            let why = String(cString: strerror(errno))
            unlink(linking)
            throw .storage("cannot name \(relative): \(why); nothing was shared")
        }
        let after = Self.identity(ofPartial: targetPath)
        let checked = before != nil && before == source.checked ? after : nil
        var row = DownloadRow(
            key: target, status: source.status, attempt: existing.map { $0.attempt.next } ?? AttemptID(1), validator: validator,
            total: source.total, present: source.present, partialPath: relative, reason: reason, awaitingValidation: source.awaitingValidation,
            pinned: existing?.pinned ?? false,
            sourceTag: tag, checked: checked)
        let was = existing.map { ($0.status, $0.reason) }
        do {
            try db.transaction { c in
                guard
                    let current = try c.query("SELECT \(Self.downloadColumns) FROM downloads WHERE \(Self.keyMatch)", Self.keyValues(source.key)).first
                        .flatMap(Self.decodeDownload), current.attempt == source.attempt, current.present == source.present,
                    current.partialPath == source.partialPath
                else { throw AdoptionRefused(why: "\(source.key) changed meanwhile") }
                guard try c.query("SELECT 1 FROM downloads WHERE \(Self.keyMatch) AND ranges != ''", Self.keyValues(target)).first == nil else {
                    throw AdoptionRefused(why: "\(target) holds bytes of its own")
                }
                try Self.insert(row, into: c, now: now)
                try c.run("DELETE FROM segments WHERE \(Self.keyMatch)", Self.keyValues(target))
                try c.run(
                    """
                    INSERT INTO segments(server, item_id, source_id, kind, quality, attempt, lower, upper, digest)
                    SELECT ?, ?, ?, ?, ?, ?, lower, upper, digest FROM segments WHERE \(Self.keyMatch) AND attempt=?
                    """, Self.keyValues(target) + [.int(row.attempt.rawValue)] + Self.keyValues(source.key) + [.int(source.attempt.rawValue)])
                if let checked, source.checked != nil {
                    try c.run(
                        "UPDATE downloads SET checked=? WHERE \(Self.keyMatch) AND attempt=?",
                        [.text(checked)] + Self.keyValues(source.key) + [.int(source.attempt.rawValue)])
                }
                for (key, attempt) in [(source.key, source.attempt), (target, row.attempt)] {
                    try c.run(
                        "INSERT OR REPLACE INTO shared_copies(server, item_id, source_id, kind, quality, attempt, file) VALUES(?,?,?,?,?,?,?)",
                        Self.keyValues(key) + [.int(attempt.rawValue), .text(group)])
                }
            }
        } catch {
            // Nothing recorded: the name goes again, so no row's file is the other's unrecorded.
            if Self.fileGroup(ofPartial: targetPath) == group { unlink(targetPath) }
            if let refused = error as? AdoptionRefused { throw .storage("sharing \(source.key) with \(target) refused: \(refused.why); nothing was shared") }
            throw .storage("sharing \(source.key) with \(target) failed (\(error)); nothing was shared")
        }
        forgetStored()
        CopySidecar.rewrite(row, segments: (try? segments(target, attempt: row.attempt)) ?? [], root: dataRoot)
        // Both paths' counted bytes changed (`du` counts the file under one of them).
        storedListener.function?(target)
        storedListener.function?(source.key)
        if let saved = (try? download(target)) ?? nil { row = saved }
        if let outcome = FinishedFile.newOutcome(pinned: row.pinned, before: was, after: (row.status, row.reason)) {
            finishedListener.function?(row, outcome)
        }
        return row
    }

    /// A check carried over to the file as it is after one of its other names went: `key`'s
    /// row at `attempt` recorded `from`, and records `to` now.
    public struct MovedCheck: Sendable, Hashable {
        public var key: FileKey
        public var attempt: AttemptID
        public var from: String
        public var to: String
    }

    /// Told of each check `releasingName` carries over, on its thread (it must not block): a
    /// transfer open on that row holds it too, and would write its old one back.
    public func onCheckMoved(_ listener: @escaping @Sendable (MovedCheck) -> Void) { checkMovedListener.set(listener) }

    /// Lets go of `key`'s name of its file (`remove`: a cancel's fresh file, a purge's unlink)
    /// while other rows' names keep the file (`shared_copies`). Dropping a name changes the
    /// file's change time, part of the fingerprint each row's check recorded (`checked`): in
    /// the same step, each other name whose check held just before records the file as it is
    /// after (`SharedCopy.keptCheck`), so its bytes are not checked against their digests
    /// again (nor kept from passthrough meanwhile). A survivor written meanwhile keeps nothing:
    /// a write needs a dropped segment first (its range map changes) and moves the
    /// modification time.
    public func releasingName(of key: FileKey, _ remove: () throws(LabstreamError) -> Void) throws(LabstreamError) {
        let others = survivingNames(of: key).filter { $0.checked != nil }
        let before = others.map { Self.identity(ofPartial: dataRoot + "/" + $0.partialPath) }
        try remove()
        for (row, before) in zip(others, before) {
            guard let from = row.checked,
                let to = SharedCopy.keptCheck(recorded: from, before: before, after: Self.identity(ofPartial: dataRoot + "/" + row.partialPath))
            else { continue }
            let moved = try? db.transaction { c -> Bool in
                guard
                    let current = try c.query("SELECT \(Self.downloadColumns) FROM downloads WHERE \(Self.keyMatch)", Self.keyValues(row.key)).first
                        .flatMap(Self.decodeDownload), current.attempt == row.attempt, current.checked == from, current.present == row.present
                else { return false }
                try c.run(
                    "UPDATE downloads SET checked=? WHERE \(Self.keyMatch) AND attempt=?",
                    [.text(to)] + Self.keyValues(row.key) + [.int(row.attempt.rawValue)])
                return true
            }
            if moved == true { checkMovedListener.function?(MovedCheck(key: row.key, attempt: row.attempt, from: from, to: to)) }
        }
    }

    /// The rows whose names are the file `key`'s name is, as the markers say, whole at their
    /// current attempts.
    func survivingNames(of key: FileKey) -> [DownloadRow] {
        let columns = DownloadColumn.allCases.map { "d." + $0.rawValue }.joined(separator: ", ")
        let rows =
            (try? db.query(
                """
                SELECT \(columns) FROM shared_copies s
                JOIN shared_copies o ON o.file = s.file
                JOIN downloads d ON d.server = o.server AND d.item_id = o.item_id AND d.source_id = o.source_id AND d.kind = o.kind
                    AND d.quality = o.quality AND d.attempt = o.attempt
                WHERE s.server=? AND s.item_id=? AND s.source_id=? AND s.kind=? AND s.quality=?
                """, Self.keyValues(key))) ?? []
        return rows.compactMap(Self.decodeDownload).filter { $0.key != key && $0.present.contains(ByteRange(0, $0.total)) }
    }

    /// Records again which rows share one file, after the index was rebuilt from the copies'
    /// sidecars (`Reconcile`: the markers are the index's alone, so a fresh index, or a backup
    /// older than a share, lacks them and counted the file under each name): whole copies whose
    /// names are one file on disk (`SharedCopy.relinked`). Returns the rows recorded anew.
    public func relinkSharedCopies() throws(LabstreamError) -> [FileKey] {
        let rows = try downloads().filter { DataLayout.isValidPartialPath($0.partialPath) }
        let linked = rows.compactMap { row -> SharedCopy.Linked? in
            guard let group = Self.fileGroup(ofPartial: dataRoot + "/" + row.partialPath) else { return nil }
            return SharedCopy.Linked(
                key: row.key, group: group, total: row.total, whole: row.present.contains(ByteRange(0, row.total)),
                identity: (try? fileIdentity(row.key)) ?? nil)
        }
        let recorded = sharedFiles()
        let attempts = Dictionary(rows.map { ($0.key, $0.attempt) }, uniquingKeysWith: { a, _ in a })
        let fresh = SharedCopy.relinked(linked).filter { recorded[$0.key]?.file != $0.value || recorded[$0.key]?.attempt != attempts[$0.key] }
        guard !fresh.isEmpty else { return [] }
        do {
            try db.transaction { c in
                for (key, file) in fresh {
                    guard let attempt = attempts[key] else { continue }
                    try c.run(
                        "INSERT OR REPLACE INTO shared_copies(server, item_id, source_id, kind, quality, attempt, file) VALUES(?,?,?,?,?,?,?)",
                        Self.keyValues(key) + [.int(attempt.rawValue), .text(file)])
                }
            }
        } catch { throw .storage("recording the shared copies again failed: \(error)") }
        forgetStored()
        for key in fresh.keys { storedListener.function?(key) }
        return fresh.keys.sorted { $0.description < $1.description }
    }

    /// `PartialFile.identity` of the file at `path`.
    static func identity(ofPartial path: String) -> String? {
        var st = stat()
        guard stat(path, &st) == 0 else { return nil }
        return "\(st.st_dev):\(st.st_ino):\(st.st_size):\(st.st_mtim.tv_sec).\(st.st_mtim.tv_nsec):\(st.st_ctim.tv_sec).\(st.st_ctim.tv_nsec)"
    }

    /// The rows whose bytes are one file with another row's, as the markers say for their rows'
    /// current attempts: key → the file.
    func sharedFiles() -> [FileKey: (attempt: AttemptID, file: String)] {
        guard
            let rows = try? db.query(
                """
                SELECT s.server, s.item_id, s.source_id, s.kind, s.quality, s.attempt, s.file FROM shared_copies s
                JOIN downloads d ON d.server = s.server AND d.item_id = s.item_id AND d.source_id = s.source_id AND d.kind = s.kind
                    AND d.quality = s.quality AND d.attempt = s.attempt
                """)
        else { return [:] }
        var out: [FileKey: (attempt: AttemptID, file: String)] = [:]
        for r in rows {
            guard let kind = r[3].text.flatMap({ FileKind(persisted: $0, quality: r[4].text) }), let attempt = r[5].int, let file = r[6].text else { continue }
            out[FileKey(server: r[0].text ?? "", itemId: r[1].text ?? "", sourceId: r[2].text ?? "", kind: kind)] = (AttemptID(attempt), file)
        }
        return out
    }
}
