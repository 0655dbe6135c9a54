import Foundation
import LabstreamCore
import Synchronization

/// Download rows, their committed segments, and the quarantine of rows that cannot be read.
extension OfflineIndex {
    // MARK: - Downloads

    public func onStoredChange(_ listener: @escaping @Sendable (FileKey) -> Void) { storedListener.set(listener) }

    /// `listener` is told on the saving thread, after the row is committed: it must not block.
    public func onFinished(_ listener: @escaping @Sendable (DownloadRow, FinishedFile.Outcome) -> Void) { finishedListener.set(listener) }

    /// The bytes stored for `key` (0 when none, or when the index cannot be read), as `du` over
    /// the mount should add them up: a file shared with another server's row (`SharedCopy`)
    /// counts under one of its paths only.
    public func storedBytes(_ key: FileKey) -> Int64 {
        stored.withLock { cache in
            let filled = self.filledCache(&cache)
            return filled.uncounted.contains(key) ? 0 : filled.byKey[key] ?? 0
        }
    }

    /// The bytes `storedBytesByServer` counts twice or more: files that rows of two servers
    /// share. A total of everything stored takes them off.
    public func storedBytesCountedTwice() -> Int64 {
        stored.withLock { cache in self.filledCache(&cache).surplus }
    }

    /// The bytes stored per server (media and copies; side assets are `storedSideAssetBytesByServer`),
    /// kept as running totals beside the same cache: a storage budget is measured against them on
    /// every fill pass and every read that fetches, so they must not cost a walk of every row.
    public func storedBytesByServer() -> [String: Int64] {
        stored.withLock { cache in self.filledCache(&cache).byServer }
    }

    /// The rows whose bytes are one file with another row's (`shared_copies`): key → the file.
    public func sharedGroups() -> [FileKey: String] {
        stored.withLock { cache in self.filledCache(&cache).groups.mapValues(\.file) }
    }

    private func filledCache(_ cache: inout StoredBytes?) -> StoredBytes {
        if let cache { return cache }
        var fresh = StoredBytes()
        var whole = Set<FileKey>()
        for row in (try? downloads()) ?? [] where fresh.byKey[row.key] == nil {
            fresh.set(row.key, row.present.byteCount)
            if row.present.contains(ByteRange(0, row.total)) { whole.insert(row.key) }
        }
        fresh.groups = sharedFiles().filter { whole.contains($0.key) }
        fresh.recount()
        cache = fresh
        return fresh
    }

    func noteStored(_ row: DownloadRow) {
        let bytes = row.present.byteCount
        var recounted = Set<FileKey>()
        let before = stored.withLock { cache -> Int64? in
            guard cache != nil else { return nil }
            let uncounted = cache?.uncounted ?? []
            defer {
                cache?.note(row)
                recounted = uncounted.symmetricDifference(cache?.uncounted ?? []).subtracting([row.key])
            }
            return cache?.byKey[row.key] ?? 0
        }
        // The other name of a shared file now counts its bytes, or no longer does.
        for key in recounted { storedListener.function?(key) }
        guard let before, before != bytes, before == 0 || bytes == 0 || bytes >= row.total else { return }
        storedListener.function?(row.key)
    }

    func forgetStored() { stored.withLock { $0 = nil } }

    public func download(_ key: FileKey) throws(LabstreamError) -> DownloadRow? {
        try read("download state") {
            try db.query(
                "SELECT \(Self.downloadColumns) FROM downloads WHERE \(Self.keyMatch)", Self.keyValues(key)
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
                        "SELECT \(Self.downloadColumns) FROM downloads WHERE \(Self.keyMatch)", Self.keyValues(next)
                    ).first.flatMap(Self.decodeDownload)
                else { return nil }
                let old = try c.query(
                    "SELECT \(Self.downloadColumns) FROM downloads WHERE \(Self.keyMatch)", Self.keyValues(base)
                ).first.flatMap(Self.decodeDownload)
                var swapped = nextRow
                swapped.key = base
                swapped.attempt = AttemptID(max(old?.attempt.rawValue ?? 0, nextRow.attempt.rawValue) + 1)
                swapped.pinned = old?.pinned ?? nextRow.pinned  // the user's pin, not the fetch's
                try c.run("DELETE FROM segments WHERE \(Self.keyMatch)", Self.keyValues(base))
                try c.run(
                    "UPDATE segments SET source_id=?, kind=?, quality=?, attempt=? WHERE \(Self.keyMatch) AND attempt=?",
                    [.text(base.sourceId)] + Self.kindValues(base.kind) + [.int(swapped.attempt.rawValue)] + Self.keyValues(next)
                        + [.int(nextRow.attempt.rawValue)])
                try c.run("DELETE FROM segments WHERE \(Self.keyMatch)", Self.keyValues(next))
                try c.run("DELETE FROM downloads WHERE \(Self.keyMatch)", Self.keyValues(next))
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
                "SELECT \(Self.downloadColumns) FROM downloads WHERE server=? AND item_id=? AND kind='copy'", [.text(base.server), .text(base.itemId)]
            )
            .compactMap(Self.decodeDownload).filter { $0.key.base == base }
        }
    }

    public func downloadsAwaitingValidation() throws(LabstreamError) -> [DownloadRow] {
        try downloads(where: "awaiting_validation = 1")
    }

    func downloads(where condition: String, _ parameters: [SQLValue] = []) throws(LabstreamError) -> [DownloadRow] {
        try read("download state") {
            try db.query("SELECT \(Self.downloadColumns) FROM downloads WHERE \(condition) ORDER BY server, item_id, source_id, kind, quality", parameters)
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

    func saveDownloadOnce(_ row: DownloadRow, committing segment: Segment?, learnedSize: Bool, now: Int64) throws(LabstreamError) -> Bool {
        let k = Self.keyValues(row.key)
        do {
            var before: (status: DownloadStatus, reason: StatusReason?)?
            let saved = try db.transaction { c in
                let current = try c.query(
                    "SELECT attempt, status, reason, reason_detail, pinned FROM downloads WHERE \(Self.keyMatch)", k
                ).first
                if let attempt = current?[0].int, attempt > row.attempt.rawValue { return false }
                // A cancel unpins by saving the row: its place in the queue goes with the pin, as
                // an unpin's does (`setPinned`); nothing else would ever remove it.
                if !row.pinned, current?[4].int == 1 { try c.run("DELETE FROM queue WHERE \(Self.keyMatch)", k) }
                before = current.flatMap { r in
                    r[1].text.flatMap(DownloadStatus.init(rawValue:)).map { ($0, r[2].text.map { StatusReason(persisted: $0, parameters: r[3].text) }) }
                }
                try Self.insert(row, into: c, now: now)
                try c.run("DELETE FROM segments WHERE \(Self.keyMatch) AND attempt<?", k + [.int(row.attempt.rawValue)])
                if let segment {
                    try c.run(
                        "INSERT OR REPLACE INTO segments(server, item_id, source_id, kind, quality, attempt, lower, upper, digest) VALUES(?,?,?,?,?,?,?,?,?)",
                        k + [
                            .int(row.attempt.rawValue), .int(segment.range.lower), .int(segment.range.upper), .text(segment.digest)
                        ])
                }
                if learnedSize {
                    try c.run("UPDATE media_sources SET size=? WHERE server=? AND item_id=? AND id=?", [.int(row.total)] + k.prefix(3))
                }
                return true
            }
            if saved {
                CopySidecar.note(row, segment: segment, root: dataRoot)
                noteStored(row)
                if let outcome = FinishedFile.newOutcome(pinned: row.pinned, before: before, after: (row.status, row.reason)) {
                    finishedListener.function?(row, outcome)
                }
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
                "SELECT lower, upper, digest FROM segments WHERE \(Self.keyMatch) AND attempt=? ORDER BY lower",
                Self.keyValues(key) + [.int(attempt.rawValue)]
            ).compactMap { r in
                guard let l = r[0].int, let u = r[1].int, l <= u, let d = r[2].text else { return nil }
                return Segment(range: ByteRange(l, u), digest: d)
            }
        }
    }

    /// Forgets a segment whose bytes no longer match their digest, with the row, atomically.
    public func dropSegment(_ row: DownloadRow, range: ByteRange, now: Int64) throws(LabstreamError) {
        defer {
            CopySidecar.note(row, segment: nil, dropped: range.lower, root: dataRoot)
            forgetStored()
        }
        do {
            try db.transaction { c in
                try c.run(
                    "DELETE FROM segments WHERE \(Self.keyMatch) AND lower=?", Self.keyValues(row.key) + [.int(range.lower)])
                // Its bytes are fetched again into a file of its own (`PartialFile.write`).
                try c.run("DELETE FROM shared_copies WHERE \(Self.keyMatch)", Self.keyValues(row.key))
                try c.run(
                    "UPDATE downloads SET ranges=?, awaiting_validation=0, status=?, reason=?, reason_detail=?, pause_cause=?, updated=? WHERE \(Self.keyMatch) AND attempt=?",
                    [.text(row.present.serialized), .text(row.status.rawValue)] + Self.reasonValues(row.reason) + [
                        row.pauseCause.map { .text($0.rawValue) } ?? .null, .int(now)
                    ] + Self.keyValues(row.key) + [.int(row.attempt.rawValue)])
            }
        } catch { throw .storage("dropping a damaged segment failed: \(error)") }
    }

    /// Pins or unpins files in one transaction (no half-pinned season after a crash). New rows
    /// are created for files never read; pinned rows become `queued` unless already complete.
    /// A pin goes to the end of the download queue (`QueuePlace`) at `priority` (default
    /// normal); a file already pinned keeps its place, and takes `priority` when one is given.
    /// An unpin takes the file out of the queue.
    public func setPinned(
        _ pinned: Bool, files: [TreeFile], layout: DataLayout, now: Int64, priority: QueuePriority? = nil
    ) throws(LabstreamError) -> [DownloadRow] {
        do { return try setPinnedOnce(pinned, files: files, layout: layout, now: now, priority: priority) } catch {
            // An unpin is how a person frees a full disk (the copies become evictable): on a
            // full disk it may use the index's reserve, like a cancel; a pin may not (it only
            // asks for more room). Nothing is lost either way: the transaction commits whole or
            // not at all.
            guard !pinned, case .noSpace = error, releaseReserve() else { throw error }
            return try setPinnedOnce(pinned, files: files, layout: layout, now: now, priority: priority)
        }
    }

    func setPinnedOnce(_ pinned: Bool, files: [TreeFile], layout: DataLayout, now: Int64, priority: QueuePriority?) throws(LabstreamError) -> [DownloadRow] {
        do {
            return try db.transaction { c in
                var out: [DownloadRow] = []
                var last = try c.query("SELECT max(position) FROM queue").first?[0].int ?? 0
                for f in files {
                    let existing = try c.query(
                        "SELECT \(Self.downloadColumns) FROM downloads WHERE \(Self.keyMatch)", Self.keyValues(f.key)
                    ).first.flatMap(Self.decodeDownload)
                    var row =
                        existing
                        ?? DownloadRow(
                            key: f.key, status: .partial, attempt: AttemptID(1), validator: nil, total: f.size,
                            present: RangeSet(), partialPath: layout.partialRelativePath(for: f.key), sourceTag: f.etag)
                    let wasPinned = existing?.pinned == true
                    row.setPinned(pinned)
                    try Self.insert(row, into: c, now: now)
                    let id = Self.keyValues(f.key)
                    let placed = try !c.query("SELECT 1 FROM queue WHERE \(Self.keyMatch)", id).isEmpty
                    if !pinned {
                        if placed { try c.run("DELETE FROM queue WHERE \(Self.keyMatch)", id) }
                    } else if !wasPinned || !placed {
                        last += 1
                        try c.run(
                            "INSERT OR REPLACE INTO queue(server, item_id, source_id, kind, quality, position, priority) VALUES(?,?,?,?,?,?,?)",
                            id + [.int(last), .text((priority ?? .normal).rawValue)])
                    } else if let priority {
                        try c.run("UPDATE queue SET priority=? WHERE \(Self.keyMatch)", [.text(priority.rawValue)] + id)
                    }
                    out.append(row)
                    CopySidecar.note(row, segment: nil, root: dataRoot)
                }
                return out
            }
        } catch {
            if let e = error as? SQLiteError, e.code == 13 { throw .noSpace("recording the pin in \(db.path)") }  // SQLITE_FULL
            throw .storage("pinning failed: \(error)")
        }
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
        case reasonDetail = "reason_detail", kind, quality
    }

    /// A reason's two columns: its code (`reason`) and its parameters (`reason_detail`).
    static func reasonValues(_ reason: StatusReason?) -> [SQLValue] {
        guard let (code, parameters) = reason?.persisted else { return [.null, .null] }
        return [.text(code), parameters.map(SQLValue.text) ?? .null]
    }

    /// A row's kind in its two columns: `kind` (original, copy, next) and a copy's `quality`
    /// (empty for the others: the columns are part of the row's key, where NULL would not be).
    static func kindValues(_ kind: FileKind) -> [SQLValue] {
        [.text(kind.persisted.kind), .text(kind.persisted.quality ?? "")]
    }

    /// A download or segment row's key, as a condition and its values (`keyValues`).
    static let keyMatch = "server=? AND item_id=? AND source_id=? AND kind=? AND quality=?"
    static func keyValues(_ key: FileKey) -> [SQLValue] { [.text(key.server), .text(key.itemId), .text(key.sourceId)] + kindValues(key.kind) }

    static let downloadColumns = DownloadColumn.allCases.map(\.rawValue).joined(separator: ", ")

    static func insert(_ row: DownloadRow, into c: Connection, now: Int64) throws {
        try c.run(
            """
            INSERT OR REPLACE INTO downloads(server, item_id, source_id, status, attempt, validator, total, ranges, partial,
                awaiting_validation, updated, pinned, source_tag, job, checked, pause_cause, reason, reason_detail, kind, quality)
                VALUES(?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)
            """,
            [
                .text(row.key.server), .text(row.key.itemId), .text(row.key.sourceId), .text(row.status.rawValue),
                .int(row.attempt.rawValue), row.validator.map { .text($0.description) } ?? .null, .int(row.total),
                .text(row.present.serialized), .text(row.partialPath),
                .int(row.awaitingValidation ? 1 : 0), .int(now), .int(row.pinned ? 1 : 0), row.sourceTag.map(SQLValue.text) ?? .null,
                row.job.map { .text($0.persisted) } ?? .null, row.checked.map(SQLValue.text) ?? .null, row.pauseCause.map { .text($0.rawValue) } ?? .null
            ] + reasonValues(row.reason) + kindValues(row.key.kind))
    }

    static func decodeDownload(_ values: [SQLValue]) -> DownloadRow? {
        let r = NamedRow<DownloadColumn>(values)
        guard let s = r[.server].text, let i = r[.itemId].text, let id = r[.sourceId].text,
            let status = r[.status].text.flatMap(DownloadStatus.init(rawValue:)), let attempt = r[.attempt].int, let total = r[.total].int,
            let ranges = r[.ranges].text.flatMap(RangeSet.init(serialized:)), let partial = r[.partial].text, DataLayout.isValidPartialPath(partial),
            let kind = r[.kind].text.flatMap({ FileKind(persisted: $0, quality: r[.quality].text) })
        else { return nil }
        return DownloadRow(
            key: FileKey(server: s, itemId: i, sourceId: id, kind: kind), status: status, attempt: AttemptID(attempt),
            validator: r[.validator].text.flatMap(Validator.init(persisted:)), total: total, present: ranges,
            partialPath: partial, reason: r[.reason].text.map { StatusReason(persisted: $0, parameters: r[.reasonDetail].text) },
            awaitingValidation: (r[.awaitingValidation].int ?? 0) != 0,
            pinned: (r[.pinned].int ?? 0) != 0, sourceTag: r[.sourceTag].text, job: r[.job].text.map(ServerJob.init(persisted:)),
            checked: r[.checked].text, pauseCause: r[.pauseCause].text.flatMap(PauseCause.init(rawValue:)))
    }
}
