/// How urgently a person wants a pinned file (`labstream priority`, `pin --priority`): every
/// `high` file goes before every `normal` one, `low` after them all.
public enum QueuePriority: String, Sendable, Hashable, Codable, CaseIterable {
    case high, normal, low

    var rank: Int {
        switch self {
        case .high: return 0
        case .normal: return 1
        case .low: return 2
        }
    }

    public static let spellings = allCases.map(\.rawValue).joined(separator: "|")
}

/// A pinned file's stored place in the download queue: its priority, then its position (the
/// order it was pinned in, until a `queue move` renumbers).
public struct QueuePlace: Sendable, Hashable, Codable {
    public var position: Int64
    public var priority: QueuePriority

    public init(position: Int64, priority: QueuePriority = .normal) {
        self.position = position
        self.priority = priority
    }
}

/// Where `labstream queue move` puts a file: before every other, or just before one.
public enum QueueTarget<Key: Hashable & Sendable>: Sendable, Hashable {
    case first
    case before(Key)
}

/// The order pinned work is done in (the fill's slots, the playback checks) and how a move
/// renumbers it. A file a player is reading goes first (its demand beats queued fills), then
/// priority, then position; files without a stored place (pinned by a build that kept none)
/// come after those with one, in the order given.
public enum QueueOrder {
    public struct Entry<Key: Hashable & Sendable>: Sendable, Hashable {
        public var key: Key
        public var place: QueuePlace?
        /// A handle of the file is open (a player reads it).
        public var reading: Bool

        public init(key: Key, place: QueuePlace?, reading: Bool = false) {
            self.key = key
            self.place = place
            self.reading = reading
        }
    }

    /// `entries` in queue order.
    public static func sorted<Key>(_ entries: [Entry<Key>]) -> [Entry<Key>] {
        entries.enumerated().sorted { a, b in
            let (x, y) = (a.element, b.element)
            if x.reading != y.reading { return x.reading }
            let (px, py) = ((x.place?.priority ?? .normal).rank, (y.place?.priority ?? .normal).rank)
            if px != py { return px < py }
            let (sx, sy) = (x.place?.position ?? .max, y.place?.position ?? .max)
            if sx != sy { return sx < sy }
            return a.offset < b.offset
        }.map(\.element)
    }

    /// The places every entry has once `keys` (a file, or a folder's files, keeping their
    /// order among themselves) moved to `target`: positions 1, 2, … in the new order, and the
    /// moved files take the priority of the place they move to (the first entry's, or
    /// `target`'s), so they are listed exactly there. Reading is left out: a move is what stays
    /// once the player stops. Nil when none of `keys`, or not the target, is queued.
    public static func moved<Key>(_ keys: Set<Key>, to target: QueueTarget<Key>, in entries: [Entry<Key>]) -> [Key: QueuePlace]? {
        var order = sorted(entries.map { Entry(key: $0.key, place: $0.place) })
        var moving = order.filter { keys.contains($0.key) }
        guard !moving.isEmpty else { return nil }
        order.removeAll { keys.contains($0.key) }
        let at: Int
        switch target {
        case .first:
            at = 0
        case .before(let other):
            if keys.contains(other) { return places(sorted(entries.map { Entry(key: $0.key, place: $0.place) })) }
            guard let i = order.firstIndex(where: { $0.key == other }) else { return nil }
            at = i
        }
        if order.indices.contains(at) {
            let priority = order[at].place?.priority ?? .normal
            for i in moving.indices { moving[i].place = QueuePlace(position: 0, priority: priority) }
        }
        order.insert(contentsOf: moving, at: at)
        return places(order)
    }

    static func places<Key>(_ order: [Entry<Key>]) -> [Key: QueuePlace] {
        var out: [Key: QueuePlace] = [:]
        for (i, e) in order.enumerated() { out[e.key] = QueuePlace(position: Int64(i + 1), priority: e.place?.priority ?? .normal) }
        return out
    }
}
