/// When the daemon hands its heap's free pages back to the kernel. glibc keeps freed memory
/// resident: a walk of a 100 000-file library left about 100 MiB of it behind, free but held,
/// until the daemon stopped. Trimming costs a pass over the heap, so it is done once a burst of
/// requests is over (a tick with none after many), not at every request. Pure.
public struct HeapTrimPolicy: Sendable, Hashable {
    /// Requests that make a burst worth trimming after.
    public var burst: Int
    private var sinceTrim = 0

    public init(burst: Int = 2000) { self.burst = burst }

    /// Called once per tick with the requests served during it; true when the heap should be
    /// trimmed now.
    public mutating func tick(served: Int) -> Bool {
        sinceTrim += served
        guard served == 0, sinceTrim >= burst else { return false }
        sinceTrim = 0
        return true
    }
}
