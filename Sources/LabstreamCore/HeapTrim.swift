/// When the daemon hands its heap's free pages back to the kernel. glibc keeps freed memory
/// resident: a walk of a 100 000-file library left about 100 MiB of it behind, and the first
/// background passes after an offline mount (the fill's and the side-asset planner's reads of
/// the catalog) about 90 MiB more, free but held, until the daemon stopped. What is measured is
/// that slack itself (anonymous memory resident minus what is allocated), whoever made it.
/// Trimming costs a pass over the heap, so it is done on a quiet tick (no walk under way) once
/// the slack grew enough since it was last at its lowest. Pure.
public struct HeapTrimPolicy: Sendable, Hashable {
    /// Slack grown since its lowest that makes a pass worth it.
    public var worth: Int
    /// The least slack since the last trim.
    private var lowest: Int

    /// `slack`: the slack now, just after a trim (the daemon trims once its tree is built).
    public init(worth: Int = 16 << 20, slack: Int) {
        self.worth = worth
        lowest = slack
    }

    /// Called once per tick with the requests served during it and the slack now; true when
    /// the heap should be trimmed now.
    public mutating func tick(served: Int, slack: Int) -> Bool {
        lowest = min(lowest, slack)
        guard served == 0, slack - lowest >= worth else { return false }
        // The next tick's slack (after the trim) lowers it again.
        lowest = slack
        return true
    }
}
