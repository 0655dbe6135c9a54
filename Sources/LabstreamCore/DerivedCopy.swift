/// A copy of a media source at another quality than the original (a live transcode, a
/// server-prepared file). It is its own download row (kind `copy`), and appears in the tree
/// beside the original once complete (its size is unknown before).
public enum DerivedCopy {
    /// Server transcodes are written as Matroska.
    public static let container = "mkv"

    public static func key(of base: FileKey, quality: Quality) -> FileKey {
        FileKey(server: base.server, itemId: base.itemId, sourceId: base.sourceId, kind: .copy(quality))
    }

    /// The original's key and the quality, when `key` names a derived copy.
    public static func parse(_ key: FileKey) -> (base: FileKey, quality: Quality)? {
        guard case .copy(let quality) = key.kind else { return nil }
        return (key.base, quality)
    }

    /// `Title (Year) - 10mbps.mkv` beside `Title (Year).mp4` (`ext`: what the copy turned out
    /// to be, `ContainerSniff`).
    public static func fileName(besides original: String, quality: Quality, extension ext: String = container) -> String {
        let stem = original.lastIndex(of: ".").map { String(original[..<$0]) } ?? original
        return Naming.sanitize(stem + " - " + quality.description, extension: ext)
    }

    /// The tree entry of a finished copy of `base`.
    public static func treeFile(of base: TreeFile, quality: Quality, size: Int64, extension ext: String = container) -> TreeFile {
        TreeFile(
            path: base.path.dropLast() + [fileName(besides: base.path.last ?? "", quality: quality, extension: ext)],
            key: key(of: base.key, quality: quality), size: size, modified: base.modified, etag: nil, orphaned: base.orphaned,
            remoteItemId: base.remoteItemId)
    }
}
