/// What a download row holds of its media source: the original, a copy at another quality
/// (`DerivedCopy`), or a new version arriving beside the copy shown (`NextVersion`). The index
/// keeps it in a column of its own; code asks this, never the id's spelling.
public enum FileKind: Sendable, Hashable {
    case original
    case copy(Quality)
    case nextVersion

    static let copyMarker: Unicode.Scalar = "@"
    static let nextMarker = "#next"

    /// How the row's id spells the kind after the source's own id. Older releases keyed rows
    /// by that spelling alone, and partial files on disk are named after it, so it stays in the
    /// id (`FileKey.sourceId`); the kind is never read back from it but at `init(spelledIn:)`.
    var marker: String {
        switch self {
        case .original: return ""
        case .copy(let quality): return String(Self.copyMarker) + quality.description
        case .nextVersion: return Self.nextMarker
        }
    }

    /// The kind a row id spells, and the source's own id: for keys made before the kind was a
    /// column (a row of an older index, a sidecar, a managed entry's id), the only place the
    /// spelling is read.
    static func spelled(in id: String) -> (kind: FileKind, source: Substring) {
        if id.hasSuffix(nextMarker) { return (.nextVersion, id.dropLast(nextMarker.count)) }
        if let at = id.utf8.lastIndex(of: UInt8(ascii: copyMarker)), let quality = Quality(String(id[id.index(after: at)...])),
            quality != .original
        {
            return (.copy(quality), id[..<at])
        }
        return (.original, Substring(id))
    }

    /// The index's two columns: `kind` and a copy's `quality`.
    public var persisted: (kind: String, quality: String?) {
        switch self {
        case .original: return ("original", nil)
        case .copy(let quality): return ("copy", quality.description)
        case .nextVersion: return ("next", nil)
        }
    }

    public init?(persisted kind: String, quality: String?) {
        switch kind {
        case "original": self = .original
        case "next": self = .nextVersion
        case "copy":
            guard let quality = quality.flatMap(Quality.init), quality != .original else { return nil }
            self = .copy(quality)
        default: return nil
        }
    }

    public var quality: Quality? {
        if case .copy(let quality) = self { return quality }
        return nil
    }
}
