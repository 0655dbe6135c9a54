import Synchronization

/// A callback that is set (or replaced) and called from any thread.
///
/// The closure lives in a class instance. Read out of a `Mutex` as a bare closure, it came back
/// wrapped in two more reabstraction thunks at every read (the lock's `inout` access writes the
/// value back in its generic form), so a hook called at each folder listing had grown a chain
/// of 200 000 thunks by the end of a 100 000-folder walk: every call walked all of them, the
/// walk took minutes, and a longer one would have overflowed the stack.
public final class Hook<Function: Sendable>: Sendable {
    private final class Box: Sendable {
        let function: Function
        init(_ function: Function) { self.function = function }
    }

    private let box = Mutex<Box?>(nil)

    public init() {}

    public func set(_ function: Function?) { box.withLock { $0 = function.map(Box.init) } }

    /// The function set last; nil before any.
    public var function: Function? { box.withLock { $0 }?.function }
}
