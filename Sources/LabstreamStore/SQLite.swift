import CSQLite
import LabstreamCore
import Synchronization

public struct SQLiteError: Error, Sendable, CustomStringConvertible {
    public let code: Int32
    public let message: String
    public var description: String { message }
}

public enum SQLValue: Sendable, Hashable {
    case null
    case int(Int64)
    case text(String)

    public var int: Int64? { if case .int(let v) = self { return v }; return nil }
    public var text: String? { if case .text(let v) = self { return v }; return nil }
}

/// One SQLite connection. Every statement runs under the connection's lock, so the type is
/// safe to share between FUSE workers and transfer threads.
public final class SQLiteDatabase: Sendable {
    struct Handle: @unchecked Sendable {
        let db: OpaquePointer
        let statements = StatementCache()
    }
    private let handle: Mutex<Handle>
    public let path: String

    public init(path: String, readOnly: Bool = false) throws(SQLiteError) {
        var db: OpaquePointer?
        let flags = (readOnly ? SQLITE_OPEN_READONLY : SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE) | SQLITE_OPEN_FULLMUTEX
        let rc = sqlite3_open_v2(path, &db, flags, nil)
        guard rc == SQLITE_OK, let db else {
            let message = db.map { String(cString: sqlite3_errmsg($0)) } ?? "cannot open"
            if let db { sqlite3_close(db) }
            throw SQLiteError(code: rc, message: "\(path): \(message)")
        }
        sqlite3_busy_timeout(db, 10_000)
        self.path = path
        self.handle = Mutex(Handle(db: db))
    }

    deinit {
        handle.withLock { h in
            h.statements.finalizeAll()
            _ = sqlite3_close_v2(h.db)
        }
    }

    /// Runs `body` holding the connection; statements inside share one lock acquisition.
    public func withConnection<T>(_ body: (Connection) throws -> T) rethrows -> T {
        try handle.withLock { h in try body(Connection(db: h.db, statements: h.statements)) }
    }

    /// `BEGIN IMMEDIATE … COMMIT`, rolled back if `body` throws.
    public func transaction<T>(_ body: (Connection) throws -> T) throws -> T {
        try withConnection { c in
            try c.exec("BEGIN IMMEDIATE")
            do {
                let result = try body(c)
                try c.exec("COMMIT")
                return result
            } catch {
                try? c.exec("ROLLBACK")
                throw error
            }
        }
    }

    public func exec(_ sql: String) throws { try withConnection { try $0.exec(sql) } }

    public func query(_ sql: String, _ args: [SQLValue] = []) throws -> [[SQLValue]] {
        try withConnection { try $0.query(sql, args) }
    }

    public func run(_ sql: String, _ args: [SQLValue] = []) throws {
        try withConnection { try $0.run(sql, args) }
    }
}

/// Prepared statements kept for reuse, by their SQL. A catalog sync runs the same few
/// statements 100 000 times each; preparing each anew was most of its SQLite time. Only touched
/// under the connection's lock. Statements are reset after every use, so none holds a read
/// transaction open between uses.
final class StatementCache {
    private var statements: [String: OpaquePointer] = [:]
    /// SQL built with a variable number of terms (`IN (?,?,…)`) would fill the cache with
    /// statements used once: past this many, the cache starts over.
    static let limit = 64

    func statement(_ sql: String, db: OpaquePointer) -> (OpaquePointer?, Int32) {
        if let kept = statements[sql] { return (kept, SQLITE_OK) }
        var stmt: OpaquePointer?
        let rc = sqlite3_prepare_v3(db, sql, -1, UInt32(SQLITE_PREPARE_PERSISTENT), &stmt, nil)
        guard rc == SQLITE_OK, let stmt else { return (nil, rc) }
        if statements.count >= Self.limit { finalizeAll() }
        statements[sql] = stmt
        return (stmt, rc)
    }

    func finalizeAll() {
        for stmt in statements.values { sqlite3_finalize(stmt) }
        statements.removeAll()
    }
}

/// A connection borrowed for the duration of `withConnection`.
public struct Connection {
    let db: OpaquePointer
    let statements: StatementCache

    func error(_ rc: Int32, _ sql: String) -> SQLiteError {
        SQLiteError(code: rc, message: "\(String(cString: sqlite3_errmsg(db))) (in: \(sql.prefix(60)))")
    }

    public func exec(_ sql: String) throws(SQLiteError) {
        let rc = sqlite3_exec(db, sql, nil, nil, nil)
        guard rc == SQLITE_OK else { throw error(rc, sql) }
    }

    public func run(_ sql: String, _ args: [SQLValue] = []) throws(SQLiteError) {
        _ = try query(sql, args)
    }

    /// Rows the last statement inserted, updated or deleted (a trigger's own not counted).
    public var changes: Int64 { sqlite3_changes64(db) }

    public func query(_ sql: String, _ args: [SQLValue] = []) throws(SQLiteError) -> [[SQLValue]] {
        var rows: [[SQLValue]] = []
        try forEachRow(sql, args) { row in
            rows.append((0..<row.count).map { c in row.int(c).map(SQLValue.int) ?? row.text(c).map(SQLValue.text) ?? .null })
        }
        return rows
    }

    /// Runs `sql`, handing each row to `body` as it is stepped to: the columns `body` reads are
    /// made from SQLite's own buffers, and nothing else is. A read that keeps a few columns of
    /// 100 000 rows then leaves no freed row between the values it keeps (those holes kept tens
    /// of MiB of the heap resident after a mount).
    public func forEachRow(_ sql: String, _ args: [SQLValue] = [], _ body: (borrowing Row) throws(SQLiteError) -> Void) throws(SQLiteError) {
        let (prepared, rc) = statements.statement(sql, db: db)
        guard rc == SQLITE_OK, let stmt = prepared else { throw error(rc, sql) }
        defer {
            sqlite3_reset(stmt)
            sqlite3_clear_bindings(stmt)
        }
        for (i, arg) in args.enumerated() {
            let index = Int32(i + 1)
            switch arg {
            case .null: sqlite3_bind_null(stmt, index)
            case .int(let v): sqlite3_bind_int64(stmt, index, v)
            case .text(let v): sqlite3_bind_text(stmt, index, v, -1, CSQLite_transient())
            }
        }
        let row = Row(stmt: stmt)
        while true {
            let step = sqlite3_step(stmt)
            if step == SQLITE_DONE { return }
            guard step == SQLITE_ROW else { throw error(step, sql) }
            try body(row)
        }
    }
}

/// The row a statement is stepped to, valid only inside `Connection.forEachRow`'s body.
public struct Row: ~Copyable {
    fileprivate let stmt: OpaquePointer

    public var count: Int32 { sqlite3_column_count(stmt) }

    /// An integer column (nil when it holds text or nothing).
    public func int(_ column: Int32) -> Int64? {
        sqlite3_column_type(stmt, column) == SQLITE_INTEGER ? sqlite3_column_int64(stmt, column) : nil
    }

    /// A text column as a new string (nil when it holds nothing or an integer).
    public func text(_ column: Int32) -> String? {
        withText(column) { $0.map { String(decoding: $0, as: UTF8.self) } }
    }

    /// A text column's bytes, borrowed from SQLite for the length of `body` (nil when it holds
    /// nothing or an integer).
    public func withText<T, E: Error>(_ column: Int32, _ body: (UnsafeBufferPointer<UInt8>?) throws(E) -> T) throws(E) -> T {
        switch sqlite3_column_type(stmt, column) {
        case SQLITE_NULL, SQLITE_INTEGER: return try body(nil)
        default:
            guard let p = sqlite3_column_text(stmt, column) else { return try body(nil) }
            return try body(UnsafeBufferPointer(start: p, count: Int(sqlite3_column_bytes(stmt, column))))
        }
    }
}

/// A result row read by column name: `Column`'s cases, in order, are the columns the SELECT
/// listed (a missing one reads as NULL).
struct NamedRow<Column: CaseIterable & Equatable> {
    let values: [SQLValue]

    init(_ values: [SQLValue]) { self.values = values }

    subscript(_ column: Column) -> SQLValue {
        guard let at = Column.allCases.firstIndex(of: column).map({ Column.allCases.distance(from: Column.allCases.startIndex, to: $0) }),
            at < values.count
        else { return .null }
        return values[at]
    }
}
