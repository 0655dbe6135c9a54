import Foundation

/// Runs bodies one at a time per key; bodies of different keys run at once. A body waiting for
/// its key blocks its thread: call it only from threads of our own (the daemon's sync, control
/// and catch-up threads), never from Swift's cooperative pool or a FUSE worker.
public final class KeyedGate: @unchecked Sendable {
    private let condition = NSCondition()
    /// The keys whose body runs now; guarded by `condition`.
    private var running: Set<String> = []

    public init() {}

    public func run<T, E: Error>(_ key: String, _ body: () throws(E) -> T) throws(E) -> T {
        condition.lock()
        while running.contains(key) { condition.wait() }
        running.insert(key)
        condition.unlock()
        defer {
            condition.lock()
            running.remove(key)
            condition.broadcast()
            condition.unlock()
        }
        return try body()
    }
}
