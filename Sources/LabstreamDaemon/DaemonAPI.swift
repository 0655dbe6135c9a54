import LabstreamCore

/// What the daemon is asked, by the CLI over its control socket (and, next, by a local HTTP
/// API): typed values, one JSON encoding (Codable), served by `Daemon.handle`. Paths are
/// relative to the mount's root (`SERVER/LIBRARY/…`; empty: the root).
public enum DaemonRequest: Sendable, Hashable, Codable {
    /// The status of every file at or below each path. With `after`, the answer waits until a
    /// download changed past that point (or `wait` seconds, at most 10, went by): a follower
    /// needs no polling.
    case status(paths: [String], after: Int? = nil, wait: Double? = nil)
    /// A person's command on every file at or below each path.
    case perform(FileCommand, paths: [String])
    /// Refresh the catalog of one server (nil: every one) now; progress comes before the answer.
    case sync(server: String?, full: Bool)
    /// The pinned files still to fetch, in the order they are worked on (`QueueOrder`).
    case queue
    /// Gives the pinned files at or below each path a priority in the queue.
    case prioritize(QueuePriority, paths: [String])
    /// Moves the pinned files at or below `path` first in the queue (`before` nil), or just
    /// before the first queued file at or below `before`.
    case moveInQueue(path: String, before: String?)
    /// Free stored copies: every one of `server` (`server remove --delete-files`), else those of
    /// removed servers `paths` name (`orphans --purge [PATH…]`; none: all of them).
    case reclaim(server: String?, paths: [String])
}

extension DaemonRequest {
    /// Whether answering changes what the mount holds (`AccessPolicy` gates those) or only reads.
    /// No `default:` on purpose: a new request does not compile until it says which it is.
    public var access: AccessPolicy.Kind {
        switch self {
        case .status, .queue: return .read
        case .perform, .sync, .prioritize, .moveInQueue, .reclaim: return .change
        }
    }
}

/// The daemon's answer. A request gets `progress` lines (a sync's steps) and then exactly one
/// other answer.
public enum DaemonResponse: Sendable, Hashable, Codable {
    case statuses(entries: [FileStatus], change: Int)
    /// `parkedAgain`: files a `resume`/`retry` dispatched off a full disk that parked again.
    case performed(files: Int, parkedAgain: [ParkedAgain]? = nil)
    case synced([SyncResult])
    /// The queue, in order; paths relative to the mount's root.
    case queue([QueueEntry])
    /// What a `reclaim` freed.
    case reclaimed(files: Int, bytes: Int64)
    case progress(String)
    /// Refused or failed: the sysexits code and the sentence a person reads.
    case failure(code: Int32, message: String)
}

/// A file a person's `resume`/`retry` dispatched although the cache's disk was full, which
/// parked again for it (the CLI says so, and why).
public struct ParkedAgain: Sendable, Hashable, Codable {
    public var path: String
    /// Bytes it still misses.
    public var missing: Int64
    /// Free bytes on the data dir's disk as it parked again; nil when they cannot be measured.
    public var free: Int64?
    /// Bytes it is over the storage budget by, when that is why it parked (nil: the disk).
    public var overBy: Int64?

    public init(path: String, missing: Int64, free: Int64?, overBy: Int64? = nil) {
        self.path = path
        self.missing = missing
        self.free = free
        self.overBy = overBy
    }

    /// A file's status as it parked again: over its budget by what its reason says (0 when the
    /// reason came as words, from the mount's attributes, which do not carry the amount).
    public init(_ status: FileStatus, free: Int64?) {
        var overBy: Int64?
        if case .overBudget(let need, _)? = status.reason { overBy = need } else if status.pauseCause == .overBudget { overBy = 0 }
        self.init(path: status.path, missing: max(status.total - status.present, 0), free: free, overBy: overBy)
    }

    /// What the command prints for it.
    public var sentence: String {
        if let overBy {
            return "\(path) was tried again and parked again: it is over the storage budget (max_size)\(overBy > 0 ? " by \(ByteCount.text(overBy))" : ""); "
                + "it resumes by itself once there is room (raise max_size in labstream.conf and send the daemon SIGHUP, or free some with `labstream cancel` or `labstream unpin`)"
        }
        return
            "\(path) was tried again and parked again: the cache's disk is still full (\(free.map { ByteCount.text($0) + " free, " } ?? "")"
            + "\(ByteCount.text(missing)) still to fetch); it resumes by itself once there is room (free some with `labstream cancel` or `labstream unpin`)"
    }
}

/// One server's sync as a person reads it (the same whether the CLI or the daemon ran it).
public struct SyncResult: Sendable, Hashable, Codable {
    public var server: String
    /// How many files its catalog has now; nil when it failed.
    public var files: Int?
    /// false: nothing changed, and the index and tree were left as they were.
    public var changed: Bool
    /// Why it failed (the previous catalog is kept), and the exit code it means.
    public var error: String?
    public var code: Int32?

    public static func succeeded(_ server: String, files: Int, changed: Bool) -> SyncResult {
        SyncResult(server: server, files: files, changed: changed)
    }

    public static func failed(_ server: String, _ message: String, code: Int32) -> SyncResult {
        SyncResult(server: server, changed: false, error: message, code: code)
    }
}
