/// What a download row holds of its media source: the original, a copy at another quality
/// (`DerivedCopy`), or a new version arriving beside the copy shown (`NextVersion`). The index
/// keeps it in columns of its own (part of each row's key); the source id is the server's.
public enum FileKind: Sendable, Hashable {
    case original
    case copy(Quality)
    case nextVersion

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
