/// A new version of a file whose complete copy is still the one shown: it downloads beside the
/// old copy under its own row (kind `nextVersion`) and replaces it in one step once complete,
/// so the old copy stays readable until then.
public enum NextVersion {
    public static func key(of base: FileKey) -> FileKey {
        FileKey(server: base.server, itemId: base.itemId, sourceId: base.sourceId, kind: .nextVersion)
    }

    /// The file the row of `key` replaces, when `key` is a next version.
    public static func base(of key: FileKey) -> FileKey? { key.kind == .nextVersion ? key.base : nil }
}
