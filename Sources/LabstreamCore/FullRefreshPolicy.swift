/// Whether a scheduled sync of a server (the daemon's start-up sync, its periodic refresh, the
/// catch-up when a server answers again) reads the whole catalog or asks only for what changed.
///
/// What changed, with each library's count for removals, is what a sync reads; once a day the
/// whole catalog is read in case a count hid something (one item gone and another come). The
/// day is counted from the last whole read the index recorded, so a daemon restarted every
/// night still reads everything once a day, and one restarted every hour does not read 100 000
/// items at every start. `labstream sync` and `sync --full` are the user's to choose.
public enum FullRefreshPolicy {
    public static let interval: Int64 = 24 * 3600

    /// `lastFull`: when the index last recorded a whole read of the server (nil: never, or an
    /// index from before this was recorded).
    public static func due(lastFull: Int64?, now: Int64) -> Bool {
        guard let lastFull else { return true }
        // A clock set back leaves a "last full read" in the future: read everything.
        return now - lastFull >= interval || lastFull > now
    }
}
