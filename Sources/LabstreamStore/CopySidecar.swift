import Foundation
import LabstreamCore
import Synchronization

/// What makes a stored copy self-describing: `NAME.part.meta` beside `NAME.part`, so a rebuilt
/// index can take the copy back (`Reconcile`) with nothing fetched again. Append-only text, one
/// record a line, written as the index commits (the same rule as the range map: after the
/// bytes' `fdatasync`, not synced itself):
///
///     labstream-copy 1
///     key SERVER ITEM SOURCE
///     kind KIND QUALITY                          (as the index's columns; older sidecars spell
///                                                 it in SOURCE: `OfflineIndex.spelledKey`)
///     version ATTEMPT TOTAL VALIDATOR TAG        (a new attempt starts the file again)
///     pin 0|1
///     segment LOWER UPPER DIGEST
///     drop LOWER
///
/// Fields are percent-encoded (`%`, space, tab, newline), `-` for none. Nothing here is trusted
/// as such: every segment is checked against its digest before it is adopted.
public enum CopySidecar {
    public static func path(ofPartial partial: String) -> String { partial + ".meta" }

    /// What a sidecar says about its copy.
    public struct Record: Sendable, Hashable {
        public var key: FileKey
        public var attempt: AttemptID
        public var total: Int64
        public var validator: Validator?
        public var sourceTag: String?
        public var pinned: Bool
        /// By lower bound; later lines replace earlier ones.
        public var segments: [Int64: OfflineIndex.Segment]
    }

    /// Which attempt and pin each sidecar this process wrote last is at, so a line is written
    /// only when something changed.
    static let written = Mutex<[String: (attempt: Int64, pinned: Bool)]>([:])

    /// Records `row` (and a newly committed segment) in the sidecar of its partial under `root`.
    /// Failures are ignored: the index stays the authority, the sidecar only a way back.
    static func note(_ row: DownloadRow, segment: OfflineIndex.Segment?, dropped: Int64? = nil, root: String) {
        let path = self.path(ofPartial: root + "/" + row.partialPath)
        var last = written.withLock { $0[path] }
        // After a restart the first note of a path learns where its sidecar stands (most rows
        // have none: one access(2), not a read).
        if last == nil, access(path, F_OK) == 0, let existing = read(path) { last = (existing.attempt.rawValue, existing.pinned) }
        // A row with nothing committed yet needs no record until its first segment.
        guard last != nil || segment != nil else { return }
        var lines: [String] = []
        var truncate = false
        if last?.attempt != row.attempt.rawValue {
            truncate = true
            lines = [
                "labstream-copy 1",
                "key \(field(row.key.server)) \(field(row.key.itemId)) \(field(row.key.sourceId))",
                "kind \(field(row.key.kind.persisted.kind)) \(field(row.key.kind.persisted.quality))",
                "version \(row.attempt.rawValue) \(row.total) \(field(row.validator?.description)) \(field(row.sourceTag))",
                "pin \(row.pinned ? 1 : 0)"
            ]
        } else if last?.pinned != row.pinned {
            lines.append("pin \(row.pinned ? 1 : 0)")
        }
        if let segment { lines.append("segment \(segment.range.lower) \(segment.range.upper) \(field(segment.digest))") }
        if let dropped { lines.append("drop \(dropped)") }
        guard !lines.isEmpty else { return }
        let fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | (truncate ? O_TRUNC : 0), 0o600)
        guard fd >= 0 else { return }
        defer { close(fd) }
        let text = Array((lines.joined(separator: "\n") + "\n").utf8)
        let n = text.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
        if n == text.count { written.withLock { $0[path] = (row.attempt.rawValue, row.pinned) } }
    }

    /// Writes the sidecar of `row` afresh with `segments` (a row that took over another's file).
    static func rewrite(_ row: DownloadRow, segments: [OfflineIndex.Segment], root: String) {
        let path = self.path(ofPartial: root + "/" + row.partialPath)
        written.withLock { _ = $0.removeValue(forKey: path) }
        unlink(path)
        for segment in segments { note(row, segment: segment, root: root) }
    }

    /// Parses a sidecar; nil when it is not one or says nothing usable.
    public static func read(_ path: String) -> Record? {
        guard let data = FileManager.default.contents(atPath: path) else { return nil }
        let lines = String(decoding: data, as: UTF8.self).split(separator: "\n").map { $0.split(separator: " ").map(String.init) }
        guard lines.first == ["labstream-copy", "1"] else { return nil }
        var ids: (server: String, item: String, source: String)?
        var kind: FileKind?
        var version: (AttemptID, Int64, Validator?, String?)?
        var pinned = false
        var segments: [Int64: OfflineIndex.Segment] = [:]
        for f in lines.dropFirst() {
            switch (f.first, f.count) {
            case ("key", 4):
                guard let s = value(f[1]), let i = value(f[2]), let id = value(f[3]) else { return nil }
                ids = (s, i, id)
            case ("kind", 3):
                guard let k = value(f[1]), let typed = FileKind(persisted: k, quality: value(f[2])) else { return nil }
                kind = typed
            case ("version", 5):
                guard let a = Int64(f[1]), let t = Int64(f[2]), t >= 0 else { return nil }
                version = (AttemptID(a), t, value(f[3]).flatMap(Validator.init(persisted:)), value(f[4]))
            case ("pin", 2): pinned = f[1] == "1"
            case ("segment", 4):
                guard let l = Int64(f[1]), let u = Int64(f[2]), l < u, let d = value(f[3]) else { continue }
                segments[l] = OfflineIndex.Segment(range: ByteRange(l, u), digest: d)
            case ("drop", 2): if let l = Int64(f[1]) { segments[l] = nil }
            default: continue  // a torn last line, or a record a later release writes
            }
        }
        guard let ids, let version else { return nil }
        let key =
            kind.map { FileKey(server: ids.server, itemId: ids.item, sourceId: ids.source, kind: $0) }
            ?? OfflineIndex.spelledKey(server: ids.server, itemId: ids.item, id: ids.source)
        return Record(
            key: key, attempt: version.0, total: version.1, validator: version.2, sourceTag: version.3, pinned: pinned,
            segments: segments.filter { $0.value.range.upper <= version.1 })
    }

    /// `-` for none, `%` for empty, a literal `-` as `%2D`; `%`, space, tab and line breaks
    /// percent-encoded.
    static func field(_ s: String?) -> String {
        guard let s else { return "-" }
        if s.isEmpty { return "%" }
        if s == "-" { return "%2D" }
        var out = ""
        for scalar in s.unicodeScalars {
            switch scalar {
            case "%": out += "%25"
            case " ": out += "%20"
            case "\t": out += "%09"
            case "\n": out += "%0A"
            case "\r": out += "%0D"
            default: out.unicodeScalars.append(scalar)
            }
        }
        return out
    }

    static func value(_ s: String) -> String? {
        if s == "-" { return nil }
        if s == "%" { return "" }
        return s.removingPercentEncoding
    }
}
