/// A new version of a file whose complete copy is still the one shown: it downloads beside the
/// old copy under its own row (`<source>#next`) and replaces it in one step once complete, so
/// the old copy stays readable until then.
public enum NextVersion {
    static let marker = "#next"

    public static func key(of base: FileKey) -> FileKey {
        FileKey(server: base.server, itemId: base.itemId, sourceId: base.sourceId + marker)
    }

    /// The file the row of `key` replaces, when `key` is a next version.
    public static func base(of key: FileKey) -> FileKey? {
        guard key.sourceId.hasSuffix(marker) else { return nil }
        return FileKey(server: key.server, itemId: key.itemId, sourceId: String(key.sourceId.dropLast(marker.count)))
    }
}

extension FileKey {
    /// The server's id of the source these bytes come from (a next version is the same source).
    public var remoteSourceId: String { NextVersion.base(of: self)?.sourceId ?? sourceId }
}
