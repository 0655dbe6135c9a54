/// Where a server-prepared copy's bytes are once the server has made it. The index keeps it as
/// the copy's source tag (one spelling per case, parsed only here); everything else uses the
/// typed value.
public enum PreparedFile: Sendable, Hashable {
    /// An Emby Convert job's item: its file is `/Sync/JobItems/{id}/File`.
    case syncJobItem(String)
    /// An item of Plex's download queue: `/downloadQueue/{queue}/item/{item}/media`.
    case queueItem(queue: Int, item: Int)

    static let syncJobItemTag = "syncjobitem:"
    static let queueItemTag = "downloadqueue:"

    /// The value a stored tag names; nil for any other tag (an original's ETag, a Plex part key).
    public init?(tag: String) {
        if tag.hasPrefix(Self.syncJobItemTag) {
            let id = String(tag.dropFirst(Self.syncJobItemTag.count))
            guard !id.isEmpty else { return nil }
            self = .syncJobItem(id)
        } else if tag.hasPrefix(Self.queueItemTag) {
            let parts = tag.dropFirst(Self.queueItemTag.count).split(separator: "/")
            guard parts.count == 2, let queue = Int(parts[0]), let item = Int(parts[1]) else { return nil }
            self = .queueItem(queue: queue, item: item)
        } else {
            return nil
        }
    }

    /// How the index keeps it.
    public var tag: String {
        switch self {
        case .syncJobItem(let id): Self.syncJobItemTag + id
        case .queueItem(let queue, let item): Self.queueItemTag + "\(queue)/\(item)"
        }
    }
}

extension TreeFile {
    /// The server-prepared file this tree file's bytes come from, when it is such a copy.
    public var prepared: PreparedFile? { etag.flatMap(PreparedFile.init(tag:)) }
}
