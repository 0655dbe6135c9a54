/// Which local copies to drop when the cache is over its size cap or the disk is short of
/// free space. Pure.
public enum EvictionPolicy {
    public struct Candidate: Sendable, Hashable {
        public var key: FileKey
        public var bytes: Int64
        /// Seconds since the epoch of the last read (or write) of the file.
        public var lastUse: Int64
        public var pinned: Bool
        public var open: Bool
        public var inTransfer: Bool

        public init(key: FileKey, bytes: Int64, lastUse: Int64, pinned: Bool, open: Bool, inTransfer: Bool) {
            self.key = key
            self.bytes = bytes
            self.lastUse = lastUse
            self.pinned = pinned
            self.open = open
            self.inTransfer = inTransfer
        }
    }

    public struct Limits: Sendable, Hashable {
        /// 0 means no cap.
        public var maxSize: Int64
        public var minFree: Int64

        public init(maxSize: Int64 = 0, minFree: Int64 = 0) {
            self.maxSize = maxSize
            self.minFree = minFree
        }
    }

    /// Least recently used first; pinned, open and in-transfer files never. Stops as soon as
    /// both limits hold (it may not reach them if too little is evictable).
    public static func choose(_ candidates: [Candidate], used: Int64, free: Int64, limits: Limits) -> [FileKey] {
        var overSize = limits.maxSize > 0 ? max(used - limits.maxSize, 0) : 0
        var underFree = max(limits.minFree - free, 0)
        guard overSize > 0 || underFree > 0 else { return [] }
        var out: [FileKey] = []
        let evictable = candidates.filter { !$0.pinned && !$0.open && !$0.inTransfer && $0.bytes > 0 }
            .sorted { ($0.lastUse, $0.key.description) < ($1.lastUse, $1.key.description) }
        for c in evictable where overSize > 0 || underFree > 0 {
            out.append(c.key)
            overSize -= c.bytes
            underFree -= c.bytes
        }
        return out
    }
}
