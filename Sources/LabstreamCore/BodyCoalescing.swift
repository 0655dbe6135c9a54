/// When a body's bytes go to the partial file. libcurl hands the body over in 16 KiB pieces; each
/// write of its own costs a syscall, ext4's per-page bookkeeping for a small write, a lock and a
/// wakeup of every waiting reader. Pieces are gathered and written together, but never held back
/// from a reader who could be answered with them.
public enum BodyCoalescing {
    /// Bytes gathered before a write when no reader waits for them.
    public static let unit: Int64 = 256 << 10

    /// Whether the gathered bytes `pending` (received, not yet written) must be written now:
    /// a unit is full, a checkpoint is due, or a waiting reader's demand would be whole with
    /// them (`readable`: what readers can already be served).
    public static func mustWrite(pending: ByteRange, checkpointDue: Bool, readable: RangeSet, waiting: [ByteRange]) -> Bool {
        if pending.isEmpty { return false }
        if pending.count >= unit || checkpointDue { return true }
        return waiting.contains { demand in
            guard demand.overlaps(pending) else { return false }
            var after = readable
            after.insert(pending)
            return after.contains(demand)
        }
    }
}
