import LabstreamCore
import Synchronization
import Testing

/// A hook is read at every folder listing, attribute read or stored segment for as long as the
/// daemon runs: reading it must not change it.
@Suite struct HookTests {
    @Test func aHookReadOftenStillCallsTheLastFunctionSet() {
        let hook = Hook<@Sendable (Int) -> Int>()
        #expect(hook.function == nil)
        hook.set { $0 + 1 }
        hook.set { $0 * 2 }
        // A bare closure in a Mutex came back two thunks deeper at every read: 300 000 reads
        // made a chain whose call overflowed the stack.
        for _ in 0..<300_000 { _ = hook.function }
        #expect(hook.function?(21) == 42)
        hook.set(nil)
        #expect(hook.function == nil)
    }
}
