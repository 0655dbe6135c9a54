import LabstreamCore
import Testing

@Suite struct StorageBudgetTests {
    @Test func aPinOverMaxSizeIsOverBudgetBySoMuch() {
        let budget = StorageBudget(maxSize: 100, minFree: 10)
        // 60 stored, 51 more: 11 over, with the disk's room plenty.
        #expect(budget.room(for: 51, server: "home", usage: .init(stored: 60, free: 1000)) == .overBudget(need: 11, server: nil))
        #expect(budget.room(for: 40, server: "home", usage: .init(stored: 60, free: 1000)) == .fits)
        // Unpinned copies count as room: they are evicted to make it.
        #expect(budget.room(for: 51, server: "home", usage: .init(stored: 60, free: 1000, evictable: 11)) == .fits)
        // No cap: only the disk's floor.
        #expect(StorageBudget(minFree: 10).room(for: 5000, server: "home", usage: .init(stored: 1 << 40, free: 6000)) == .fits)
    }

    @Test func minFreeHoldsForEveryFileAndHasADefault() {
        #expect(StorageBudget().minFree == StorageBudget.defaultMinFree && StorageBudget.defaultMinFree == 32 << 20)
        let budget = StorageBudget(minFree: 64)
        #expect(budget.room(for: 36, server: "s", usage: .init(stored: 0, free: 100)) == .fits)
        #expect(budget.room(for: 37, server: "s", usage: .init(stored: 0, free: 100)) == .diskFull(need: 1))
        #expect(budget.room(for: 37, server: "s", usage: .init(stored: 0, free: 100, evictable: 1)) == .fits)
        // A 1.3 MiB file on a disk with 59 MiB free fits a floor of 32 MiB (the old hidden
        // 64 MiB headroom parked it).
        let mib: Int64 = 1 << 20
        #expect(StorageBudget().room(for: 13 * mib / 10, server: "s", usage: .init(stored: 0, free: 59 * mib)) == .fits)
    }

    @Test func aServersOwnBudgetCountsOnlyItsCopies() {
        let budget = StorageBudget(minFree: 0, serverMaxSize: ["den": 50, "off": 0])
        #expect(budget.serverMaxSize == ["den": 50])  // 0 is no cap
        let usage = StorageBudget.Usage(stored: 500, storedByServer: ["den": 40, "home": 460], free: 1000)
        #expect(budget.room(for: 20, server: "den", usage: usage) == .overBudget(need: 10, server: "den"))
        #expect(budget.room(for: 20, server: "home", usage: usage) == .fits)
        // Another server's evictable copies make no room under den's budget.
        var other = usage
        other.evictable = 100
        other.evictableByServer = ["home": 100]
        #expect(budget.room(for: 20, server: "den", usage: other) == .overBudget(need: 10, server: "den"))
        other.evictableByServer["den"] = 10
        #expect(budget.room(for: 20, server: "den", usage: other) == .fits)
        // The cache's budget is named before a server's.
        #expect(
            StorageBudget(maxSize: 510, minFree: 0, serverMaxSize: ["den": 50]).room(for: 20, server: "den", usage: usage) == .overBudget(need: 10, server: nil)
        )
    }

    @Test func theConfigSaysTheBudgetsAndTheFloor() throws {
        let config = try LabstreamConfig.parse(
            "[server \"den\"]\ntype = emby\nurl = http://den\nmax_size = 2G\n[server \"home\"]\ntype = jellyfin\nurl = http://home\n[cache]\nmax_size = 10G\n")
        #expect(config.budget == StorageBudget(maxSize: 10 << 30, minFree: StorageBudget.defaultMinFree, serverMaxSize: ["den": 2 << 30]))
        // Written back as read (the default floor is not spelled out).
        #expect(try LabstreamConfig.parse(config.serialized()).budget == config.budget)
        #expect(!config.serialized().contains("min_free"))
        #expect(try LabstreamConfig.parse("[cache]\nmin_free = 0\n").budget.minFree == 0)
        #expect(throws: LabstreamConfig.ParseError.self) { try LabstreamConfig.parse("[server \"den\"]\ntype = emby\nurl = u\nmax_size = lots\n") }
    }

    @Test func resumesInQueueOrderWhatFitsTogether() {
        // 100 free, 10 kept: the first (50) fits, the second (60) no longer does beside it, the
        // third (30) still does.
        let floor = StorageBudget(minFree: 10)
        let usage = StorageBudget.Usage(stored: 0, free: 100)
        #expect(floor.admitted([("a", 50), ("a", 60), ("a", 30)], usage: usage) == [0, 2])
        #expect(floor.admitted([("a", 91)], usage: usage).isEmpty)
        #expect(floor.admitted([("a", 90)], usage: usage) == [0])
        // A disk below its floor resumes nothing.
        #expect(floor.admitted([("a", 1), ("a", 2)], usage: .init(stored: 0, free: 5)).isEmpty)
        // A budget: each resumed file counts as stored for the next, per server too.
        let capped = StorageBudget(maxSize: 100, minFree: 0, serverMaxSize: ["den": 30])
        let stored = StorageBudget.Usage(stored: 40, storedByServer: ["den": 10, "home": 30], free: 1000)
        #expect(capped.admitted([("den", 15), ("den", 15), ("home", 40), ("home", 10)], usage: stored) == [0, 2])
    }

    /// The free-space watch counts what the files on their way still miss as the room check a
    /// resumed file meets next does: it resumes nothing that check would park again at once.
    @Test func whatAFileOnItsWayStillMissesIsNoRoomForAnother() {
        let floor = StorageBudget(minFree: 10)
        var usage = StorageBudget.Usage(stored: 0, free: 100)
        #expect(floor.admitted([("a", 50)], usage: usage) == [0])
        usage.reserve(60, server: "a")
        #expect(usage == .init(stored: 60, storedByServer: ["a": 60], free: 40))
        #expect(floor.admitted([("a", 50)], usage: usage).isEmpty)
        #expect(floor.room(for: 50, server: "a", usage: usage) == .diskFull(need: 20))
        #expect(floor.admitted([("a", 30)], usage: usage) == [0] && floor.room(for: 30, server: "a", usage: usage) == .fits)
    }
}
