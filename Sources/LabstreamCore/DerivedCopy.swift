/// A copy of a media source at another quality than the original (a live transcode, a
/// server-prepared file). It is its own download row, keyed `<source>@<quality>`, and appears
/// in the tree beside the original once complete (its size is unknown before).
public enum DerivedCopy {
    static let marker: Unicode.Scalar = "@"
    /// Server transcodes are written as Matroska.
    public static let container = "mkv"

    public static func key(of base: FileKey, quality: Quality) -> FileKey {
        FileKey(server: base.server, itemId: base.itemId, sourceId: base.sourceId + String(marker) + quality.description)
    }

    /// The original's key and the quality, when `key` names a derived copy.
    public static func parse(_ key: FileKey) -> (base: FileKey, quality: Quality)? {
        guard let at = key.sourceId.utf8.lastIndex(of: UInt8(ascii: marker)), let quality = Quality(String(key.sourceId[key.sourceId.index(after: at)...])),
            quality != .original
        else { return nil }
        return (FileKey(server: key.server, itemId: key.itemId, sourceId: String(key.sourceId[..<at])), quality)
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
