/// How a `storage_full` pause lifts by itself: the fill looks at the disk's free space again
/// with backoff (a wake-up, such as a cancel or an unpin, also makes it look at once), and
/// resumes the parked files in queue order while each one's remaining bytes, on top of the
/// ones resumed before it in the same look, still leave the headroom free. Pure: the free
/// space and the number of fruitless looks are parameters.
public struct FreeSpaceWatch: Sendable, Hashable {
    /// Seconds before the first look after a file parks, doubled each look that found no room.
    public var firstDelay: Double
    public var maxDelay: Double

    public init(firstDelay: Double = 5, maxDelay: Double = 300) {
        self.firstDelay = firstDelay
        self.maxDelay = maxDelay
    }

    /// Seconds until the next look, after `fruitless` looks in a row resumed nothing.
    public func delay(afterFruitless fruitless: Int) -> Double {
        Backoff.doubled(firstDelay, steps: fruitless, cap: maxDelay)
    }

    /// The indices of `remaining` (each parked file's missing bytes, in queue order) to resume
    /// now. A file that does not fit is skipped, not waited for: a smaller one behind it may fit,
    /// and the larger one keeps its place for the next look.
    public static func resumable(remaining: [Int64], free: Int64, headroom: Int64) -> [Int] {
        var budget = free - headroom
        var out: [Int] = []
        for (i, bytes) in remaining.enumerated() where bytes <= budget {
            budget -= bytes
            out.append(i)
        }
        return out
    }
}
