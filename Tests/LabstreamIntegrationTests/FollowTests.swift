import Foundation
import LabstreamCore
import Testing

@testable import LabstreamCLI
@testable import LabstreamDaemon

/// `pin --wait` follows the daemon's change counter instead of polling.
@Suite(.serialized) struct FollowTests {
    @Test func aFollowerIsAnsweredWithTheChangeThatMovedItsRows() throws {
        let m = try MountedLabstream("follow")
        try m.mount()
        let context = Context(configDir: m.configDir, dataDir: m.dataDir)
        let file = m.path("test/Movies/Beta (2002)/Beta (2002).mp4")
        let first = try #require(try StatusCommand.follow([file], after: nil, context: context))
        #expect(first.entries.map(\.path) == [file] && first.entries[0].state == .notLocal)
        // Nothing moves: the daemon answers after its wait with the same counter.
        let idle = try #require(try StatusCommand.follow([file], after: first.change, context: context))
        #expect(idle.change == first.change)
        #expect(try m.cli(["pin", file]).code == 0)
        // A pin changes rows: the answer carries a later counter.
        var latest = first.change
        var entries = first.entries
        for _ in 0..<60 where !(entries.first.map { PinWait.finished(state: $0.state.rawValue, reason: $0.reason) } ?? false) {
            let next = try #require(try StatusCommand.follow([file], after: latest, context: context))
            #expect(next.change >= latest)
            latest = next.change
            entries = next.entries
        }
        #expect(latest > first.change && entries[0].present == entries[0].total && entries[0].total == 3 * MiB)
        // No daemon, nothing to follow.
        try m.unmount()
        #expect(try StatusCommand.follow([file], after: latest, context: context) == nil)
    }
}
