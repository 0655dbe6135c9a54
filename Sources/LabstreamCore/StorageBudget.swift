/// Whether the cache may take more bytes: one budget (`max_size`) over everything stored
/// (pinned, read-on-demand, copies at another quality, side assets), an optional budget per
/// server, and a floor of free space on the data dir's disk (`min_free`) that pinned fills and
/// reads both keep. Unpinned, closed, idle copies count as room: they are evicted to make it
/// (`EvictionPolicy`). Pure: what is stored, free and evictable are parameters.
public struct StorageBudget: Sendable, Hashable {
    /// The free space kept on the data dir's disk unless `min_free` says otherwise: room for the
    /// index's transactions, the log and a checkpoint in flight when the cache is at its floor.
    public static let defaultMinFree: Int64 = 32 << 20

    /// 0: no cap.
    public var maxSize: Int64
    public var minFree: Int64
    /// `max_size` in a server's section (absent or 0: none).
    public var serverMaxSize: [String: Int64]

    public init(maxSize: Int64 = 0, minFree: Int64 = StorageBudget.defaultMinFree, serverMaxSize: [String: Int64] = [:]) {
        self.maxSize = maxSize
        self.minFree = minFree
        self.serverMaxSize = serverMaxSize.filter { $0.value > 0 }
    }

    /// Whether anything is kept at all (a `min_free` of 0 and no budget keep nothing).
    public var hasLimits: Bool { maxSize > 0 || minFree > 0 || !serverMaxSize.isEmpty }

    /// Whether measuring means adding up what is stored (a budget is set), not just free space.
    public var countsStored: Bool { maxSize > 0 || !serverMaxSize.isEmpty }

    /// What is on the disk now.
    public struct Usage: Sendable, Hashable {
        /// Bytes stored in the cache, all servers together, side assets included.
        public var stored: Int64
        /// Bytes stored per server.
        public var storedByServer: [String: Int64]
        /// Free bytes on the data dir's disk (`statvfs`, as an unprivileged writer sees it).
        public var free: Int64
        /// Bytes of unpinned, closed, idle copies eviction may take, all together and per server.
        public var evictable: Int64
        public var evictableByServer: [String: Int64]

        public init(
            stored: Int64, storedByServer: [String: Int64] = [:], free: Int64, evictable: Int64 = 0, evictableByServer: [String: Int64] = [:]
        ) {
            self.stored = stored
            self.storedByServer = storedByServer
            self.free = free
            self.evictable = evictable
            self.evictableByServer = evictableByServer
        }

        /// `bytes` more of a file of `server` counted as stored already (a file on its way will
        /// take them; a file admitted before another).
        public mutating func reserve(_ bytes: Int64, server: String) {
            stored += bytes
            storedByServer[server, default: 0] += bytes
            free -= bytes
        }
    }

    /// The answer for `bytes` more of a file of one server.
    public enum Room: Sendable, Hashable {
        case fits
        /// Over `max_size` (`server` nil) or over that server's `max_size`, by `need` bytes even
        /// once every evictable copy is gone.
        case overBudget(need: Int64, server: String?)
        /// The disk would go under `min_free` by `need` bytes even once every evictable copy is gone.
        case diskFull(need: Int64)
    }

    /// Whether `bytes` more of a file of `server` fit. The budget is asked before the disk: a
    /// budget a person set is the cause to name, and raising it is what they can do.
    public func room(for bytes: Int64, server: String, usage: Usage) -> Room {
        let bytes = max(bytes, 0)
        if maxSize > 0 {
            let need = usage.stored + bytes - usage.evictable - maxSize
            if need > 0 { return .overBudget(need: need, server: nil) }
        }
        if let cap = serverMaxSize[server] {
            let need = (usage.storedByServer[server] ?? 0) + bytes - (usage.evictableByServer[server] ?? 0) - cap
            if need > 0 { return .overBudget(need: need, server: server) }
        }
        let need = minFree + bytes - usage.free - usage.evictable
        if need > 0 { return .diskFull(need: need) }
        return .fits
    }

    /// The indices of `files` (each one's server and missing bytes, in queue order) that may go
    /// on now, each counted as stored on top of the ones before it. A file that does not fit is
    /// skipped, not waited for: a smaller one behind it may fit, and the larger one keeps its
    /// place for the next look.
    public func admitted(_ files: [(server: String, bytes: Int64)], usage: Usage) -> [Int] {
        var usage = usage
        var out: [Int] = []
        for (i, file) in files.enumerated() where room(for: file.bytes, server: file.server, usage: usage) == .fits {
            usage.reserve(file.bytes, server: file.server)
            out.append(i)
        }
        return out
    }
}
