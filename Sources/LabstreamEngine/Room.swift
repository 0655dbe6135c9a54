import Foundation
import LabstreamCore
import LabstreamStore

/// Room on the cache for more bytes (`StorageBudget`): what is stored and free is measured here,
/// what fits is the policy's to say, and eviction (`evictIfNeeded`) makes room for reads.
extension TransferEngine {
    /// What is stored and free now, nothing counted as evictable. What is stored is added up
    /// only when a budget is set: `min_free` alone needs only the disk's free space.
    func storageUsage() -> StorageBudget.Usage {
        // Unmeasurable free space is taken as plenty, never as overflow in the policy's sums.
        let free = freeBytes() ?? Int64.max / 4
        guard budget.countsStored else { return .init(stored: 0, free: free) }
        var byServer = index.storedBytesByServer()
        for (server, bytes) in (try? index.storedSideAssetBytesByServer()) ?? [:] { byServer[server, default: 0] += bytes }
        // A file two servers' rows share is each server's copy, and one file on the disk.
        return .init(stored: byServer.values.reduce(0, +) - index.storedBytesCountedTwice(), storedByServer: byServer, free: free)
    }

    /// `usage` with the bytes eviction could take counted as room. `locking`: whether the other
    /// transfers may be asked if they are idle (not while a file's condition is held: the lock
    /// order forbids taking `files` then); without it an unpinned, closed copy counts.
    func withEvictable(_ usage: StorageBudget.Usage, except: FileKey?, locking: Bool) -> StorageBudget.Usage {
        var out = usage
        let candidates = SharedCopy.evictable(evictionCandidates(except: except, locking: locking), groups: index.sharedGroups()).candidates
        for c in candidates where !c.pinned && !c.open && !c.inTransfer && c.bytes > 0 {
            out.evictable += c.bytes
            out.evictableByServer[c.key.server, default: 0] += c.bytes
        }
        return out
    }

    /// Whether the rest of a pinned file (`bytes` more of `key`) may be fetched now. What the
    /// other pinned files on their way still miss counts as taken, and unpinned copies count as
    /// room: eviction takes them as the file grows (each commit wakes the fill, whose pass
    /// evicts first). Called with the file's condition held.
    func room(for bytes: Int64, of key: FileKey) -> StorageBudget.Room {
        let budget = self.budget
        guard budget.hasLimits else { return .fits }
        var usage = storageUsage()
        for row in (try? index.pinnedIncompleteDownloads()) ?? [] where row.key != key && row.status == .downloading {
            usage.reserve(max(row.total - row.present.byteCount, 0), server: row.key.server)
        }
        let room = budget.room(for: bytes, server: key.server, usage: usage)
        guard room != .fits else { return .fits }
        return budget.room(for: bytes, server: key.server, usage: withEvictable(usage, except: key, locking: false))
    }

    /// Room for a read to fetch `bytes` of `key`: unpinned copies are evicted first (never the
    /// file being read); what is left says whether the read may go on.
    func makeRoom(forRead bytes: Int64, of key: FileKey) -> StorageBudget.Room {
        let budget = self.budget
        guard budget.hasLimits, bytes > 0 else { return .fits }
        if budget.room(for: bytes, server: key.server, usage: storageUsage()) == .fits { return .fits }
        evict(wanted: bytes, server: key.server, except: key)
        return budget.room(for: bytes, server: key.server, usage: storageUsage())
    }

    /// The error a read that cannot get room fails with (ENOSPC either way), in words that say
    /// which limit: the budget's advice is to raise it, the disk's to free it.
    func noRoom(_ room: StorageBudget.Room, reading path: String) -> LabstreamError {
        let budget = self.budget
        switch room {
        case .fits: return .noSpace("reading \(path)")
        case .overBudget(let need, let server?):
            return .overBudget(
                "reading \(path) would take server \(server)'s copies over its max_size (\(ByteCount.text(budget.serverMaxSize[server] ?? 0))) by \(ByteCount.text(need)), and no unpinned copy of it is left to evict"
            )
        case .overBudget(let need, nil):
            return .overBudget(
                "reading \(path) would take the cache over max_size (\(ByteCount.text(budget.maxSize))) by \(ByteCount.text(need)), and no unpinned copy is left to evict"
            )
        case .diskFull(let need):
            return .noSpace(
                "reading \(path) needs \(ByteCount.text(need)) more free space on the cache's disk (min_free \(ByteCount.text(budget.minFree)) is kept), and no unpinned copy is left to evict"
            )
        }
    }
}
