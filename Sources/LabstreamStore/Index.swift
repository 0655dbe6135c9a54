import Foundation
import LabstreamCore
import Synchronization

// The index's statements are split by table: IndexCatalog.swift (servers, libraries, items, media
// sources, the tree's files), IndexDocuments.swift (generated documents), IndexManagedEntries.swift
// (a server's download entries), IndexDownloads.swift (download rows, their segments, the
// quarantine), IndexMonitors.swift and IndexSideAssets.swift; the schema and its migrations are in
// IndexSchema.swift. This file opens the index and holds what they share: the one connection,
// backups and the reserve.

/// The offline index: servers, libraries, items, media sources (with their tree paths) and
/// per-file download state. Never a token. Schema-versioned; a current index that cannot be
/// read fails closed.
public final class OfflineIndex: Sendable {
    public static let schemaVersion: Int64 = 27
    public let db: SQLiteDatabase

    /// Bytes each file holds, as its row says, kept in memory so that `stat` (`st_blocks`, what
    /// `du` adds up) costs no query: loaded on first use, kept in step by `saveDownload`, and
    /// forgotten by any other write that moves bytes between rows.
    let stored = Mutex<StoredBytes?>(nil)
    /// Told when a file's stored bytes start, end or become whole (not on every segment).
    let storedListener = Hook<@Sendable (FileKey) -> Void>()
    /// Told once each time a pinned row is saved with an outcome it did not have (`FinishedFile`).
    let finishedListener = Hook<@Sendable (DownloadRow, FinishedFile.Outcome) -> Void>()
    /// Told when a shared file's other name had its check carried over (`releasingName`).
    let checkMovedListener = Hook<@Sendable (OfflineIndex.MovedCheck) -> Void>()

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
        Self.keepPrivate(path)
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
        dropMigratedPartialNames()
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
    /// The index names everything stored: it is its owner's alone (`DataDirModes.privateFile`).
    /// SQLite gives the `-wal` and `-shm` the database file's mode, so a new index is made 0600
    /// before SQLite first opens it; one an earlier release left 0644 is narrowed, with its
    /// logs and backup. (Not the owner: chmod fails and nothing changes, as it should.)
    static func keepPrivate(_ path: String) {
        let fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, mode_t(DataDirModes.privateFile))
        if fd >= 0 { close(fd) }
        for file in [path, path + "-wal", path + "-shm", backupPath(of: path)] {
            var st = stat()
            if stat(file, &st) == 0, st.st_mode & 0o077 != 0 { chmod(file, mode_t(DataDirModes.privateFile)) }
        }
    }

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
        // Made private first: VACUUM INTO fills an empty file and keeps its mode.
        let made = open(fresh, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode_t(DataDirModes.privateFile))
        if made >= 0 { close(made) }
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

    /// The data directory this index lives in (partial paths are relative to it).
    public var dataRoot: String { (db.path as NSString).deletingLastPathComponent }

    func read<T>(_ what: String, _ body: () throws -> T) throws(LabstreamError) -> T {
        do { return try body() } catch { throw .storage("reading \(what) from the index failed: \(error)") }
    }
}

/// The bytes each download row holds, as its row says, and their sum per server, kept together
/// so the sums never walk every row. Rows whose bytes are one file on disk (`groups`, from
/// `shared_copies`) are counted once (`SharedCopy.counted`): `uncounted` are the rows whose
/// bytes another row of their file counts, `surplus` what the per-server sums hold twice.
struct StoredBytes: Sendable {
    var byKey: [FileKey: Int64] = [:]
    var byServer: [String: Int64] = [:]
    var groups: [FileKey: (attempt: AttemptID, file: String)] = [:]
    var uncounted = Set<FileKey>()
    var surplus: Int64 = 0

    mutating func set(_ key: FileKey, _ bytes: Int64) {
        let before = byKey[key] ?? 0
        byKey[key] = bytes
        let total = (byServer[key.server] ?? 0) - before + bytes
        byServer[key.server] = total > 0 ? total : nil
        if groups[key] != nil && before != bytes { recount() }
    }

    /// A row saved: a shared one that moved to another attempt, or lost bytes, is its own file
    /// from now on (a new attempt starts a fresh file under its name).
    mutating func note(_ row: DownloadRow) {
        if let group = groups[row.key], group.attempt != row.attempt || !row.present.contains(ByteRange(0, row.total)) {
            groups[row.key] = nil
            recount()
        }
        set(row.key, row.present.byteCount)
    }

    mutating func recount() {
        let counted = SharedCopy.counted(bytes: byKey.filter { groups[$0.key] != nil }, groups: groups.mapValues(\.file))
        uncounted = counted.uncounted
        surplus = counted.surplus
    }
}
