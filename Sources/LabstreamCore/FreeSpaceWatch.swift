/// How a `storage_full` or `over_budget` pause lifts by itself: the fill looks at the disk's free space again
/// with backoff (a wake-up, such as a cancel or an unpin, also makes it look at once), and
/// resumes the parked files in queue order as they fit the storage budget and `min_free`
/// (`StorageBudget.admitted`). Pure: the number of fruitless looks is a parameter.
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
}
