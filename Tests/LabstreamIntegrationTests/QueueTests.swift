import Foundation
import LabstreamCore
import LabstreamFixture
import LabstreamStore
import Testing

/// The download queue on a real mount with one fill slot (`max_concurrent_files = 1`): the
/// order the fixture server sees each file's first request is pin order, changed by priority and
/// `queue move`; a file in a retry's backoff holds no slot; a file another process reads is
/// served while the slot is taken.
@Suite(.serialized) struct QueueTests {
    static let gamma = "test/Movies/Gamma/Gamma.mkv"
    static let beta = "test/Movies/Beta (2002)/Beta (2002).mp4"
    static let episodes = [
        "test/Shows/Show (2020)/Season 01/Show (2020) - S01E01 - Pilot.mkv", "test/Shows/Show (2020)/Season 01/Show (2020) - S01E02 - Second.mp4",
        "test/Shows/Show (2020)/Season 02/Show (2020) - S02E01 - Return.mkv", "test/Shows/Show (2020)/Season 00/Show (2020) - S00E01 - Special.mkv"
    ]

    func state(_ m: MountedLabstream, _ rel: String) -> String? {
        guard let json = try? m.cli(["status", "--json", m.path(rel)]),
            let rows = try? JSONSerialization.jsonObject(with: Data(json.stdout.utf8)) as? [[String: Any]]
        else { return nil }
        return rows.first?["state"] as? String
    }

    func done(_ m: MountedLabstream, _ rel: String) -> Bool { ["unverified", "complete"].contains(state(m, rel) ?? "") }

    func queue(_ m: MountedLabstream) throws -> [[String: Any]] {
        let r = try m.cli(["queue", "--json"])
        try #require(r.code == 0, "\(r.stderr)")
        return try #require(try JSONSerialization.jsonObject(with: Data(r.stdout.utf8)) as? [[String: Any]])
    }

    /// The item id of each file, by its path in the mount.
    func ids(_ m: MountedLabstream, _ rels: [String]) throws -> [String: String] {
        let tree = expectedTree(m.mediaDir)
        var out: [String: String] = [:]
        for rel in rels { out[rel] = try #require(m.fixture.itemId(forFile: tree[rel]!)) }
        return out
    }

    /// The item ids in the order their first download request reached the server.
    func firstRequests(_ m: MountedLabstream, among ids: [String]) -> [String] {
        var seen: [String] = []
        for r in m.fixture.downloadRequests {
            guard let id = ids.first(where: { r.path.contains("/Items/\($0)/") }), !seen.contains(id) else { continue }
            seen.append(id)
        }
        return seen
    }

    /// Holds the server's first download answer until `release` (at most a minute, so a failing
    /// test cannot hang): the file it belongs to keeps the one slot meanwhile.
    final class Gate: Sendable {
        let semaphore = DispatchSemaphore(value: 0)
        let entered = LockedBox(false)
        func install(on fixture: ServerFixture) {
            fixture.onDownloadRequest { [self] n in
                guard n == 1 else { return }
                entered.set(true)
                _ = semaphore.wait(timeout: .now() + 60)
            }
        }
        func release() { semaphore.signal() }
    }

    @Test func pinOrderPriorityAndMoveDecideWhatTheServerIsAskedFirst() throws {
        let m = try MountedLabstream("queue-order", cacheConfig: "max_concurrent_files = 1")
        try m.mount()
        defer { stopDaemon(at: m.mountpoint, pid: m.daemonPid, env: m.env) }
        let gate = Gate()
        gate.install(on: m.fixture)
        defer { gate.release() }
        #expect(try m.cli(["pin", m.path(Self.gamma)]).code == 0)
        #expect(eventually { gate.entered.get() }, "gamma's first request never came")

        // Pinned in the reverse of their ids' order, so the old order (server, item id) differs.
        let id = try ids(m, Self.episodes + [Self.beta, Self.gamma])
        let pinned = Self.episodes.sorted { id[$0]! > id[$1]! }
        let (a, b, c, d) = (pinned[0], pinned[1], pinned[2], pinned[3])
        for rel in pinned { #expect(try m.cli(["pin", m.path(rel)]).code == 0) }
        #expect(try queue(m).map { $0["path"] as? String } == ([Self.gamma] + pinned).map { m.path($0) })

        // b goes last (low), d before c.
        let low = try m.cli(["priority", m.path(b), "low"])
        #expect(low.code == 0 && low.stdout.contains("Priority low for 1 pinned file"), "\(low.stdout) \(low.stderr)")
        let move = try m.cli(["queue", "move", m.path(d), "--before", m.path(c)])
        #expect(move.code == 0, "\(move.stderr)")
        let listed = try queue(m)
        #expect(listed.map { $0["path"] as? String } == [Self.gamma, a, d, c, b].map { m.path($0) }, "\(listed)")
        #expect(listed.map { $0["position"] as? Int } == [1, 2, 3, 4, 5])
        #expect(listed.map { $0["priority"] as? String } == ["normal", "normal", "normal", "normal", "low"])
        #expect(listed.first?["state"] as? String == "downloading" && listed.allSatisfy { $0["bytes_total"] as? Int ?? 0 > 0 })
        let text = try m.cli(["queue"]).stdout.split(separator: "\n")
        #expect(text.first?.hasPrefix("1.  [normal]  downloading") == true && text.last?.hasPrefix("5.  [low]  queued") == true, "\(text)")
        // A path the queue printed is one the other commands take; an unpinned one has no place.
        #expect(try m.cli(["priority", try #require(listed[4]["path"] as? String), "low"]).code == 0)
        let unpinned = try m.cli(["priority", m.path("test/Movies/Alpha (2001)"), "high"])
        #expect(unpinned.code == 64 && unpinned.stderr.contains("is pinned"), "\(unpinned.stderr)")

        // Beta, pinned high, takes the slot although gamma's answer is still held; the rest wait.
        #expect(try m.cli(["pin", "--priority", "high", m.path(Self.beta)]).code == 0)
        #expect(eventually { done(m, Self.beta) }, "\(state(m, Self.beta) ?? "nil")")
        #expect(firstRequests(m, among: [a, b, c, d].map { id[$0]! }).isEmpty)
        gate.release()
        for rel in pinned { #expect(eventually { done(m, rel) }, "\(rel): \(state(m, rel) ?? "nil")") }
        #expect(firstRequests(m, among: [Self.gamma, Self.beta, a, d, c, b].map { id[$0]! }) == [Self.gamma, Self.beta, a, d, c, b].map { id[$0]! })
        #expect(try queue(m).isEmpty)
        #expect(try m.cli(["queue"]).stdout.contains("Nothing is waiting"))
    }

    @Test func aFileInBackoffHoldsNoSlot() throws {
        let m = try MountedLabstream("queue-backoff", cacheConfig: "max_concurrent_files = 1")
        // The failing file goes first in any order (pin order, and the old one by item id), so
        // only a slot it does not hold lets the other through.
        let id = try ids(m, [Self.gamma, Self.beta, Self.episodes[3]])
        let byId = id.keys.sorted { id[$0]! < id[$1]! }
        let (failing, other) = (byId[0], byId[1])
        m.fixture.inject(.status(503), pathPrefix: "/Items/\(id[failing]!)/Download", times: nil)
        try m.mount()
        defer { stopDaemon(at: m.mountpoint, pid: m.daemonPid, env: m.env) }
        #expect(try m.cli(["pin", m.path(failing)]).code == 0)
        #expect(eventually { m.fixture.downloadRequests.contains { $0.path.contains(id[failing]!) } })
        #expect(try m.cli(["pin", m.path(other)]).code == 0)
        // The first keeps failing and waits out its backoff; the other fills in the one slot meanwhile.
        #expect(eventually { done(m, other) }, "\(state(m, other) ?? "nil")")
        #expect(state(m, failing) == "queued")
        let waiting = try queue(m)
        #expect(waiting.count == 1 && (waiting.first?["message"] as? String)?.contains("503") == true, "\(waiting)")
        m.fixture.clearFaults()
        #expect(eventually(timeout: 60) { done(m, failing) }, "\(state(m, failing) ?? "nil")")
        #expect(try sha256(m.path(other)) == sha256(expectedTree(m.mediaDir)[other]!))
    }

    @Test func aReaderIsServedWhileTheQueueIsFullAndAFileBeingReadGoesFirst() throws {
        let m = try MountedLabstream("queue-reader", cacheConfig: "max_concurrent_files = 1")
        try m.mount()
        defer { stopDaemon(at: m.mountpoint, pid: m.daemonPid, env: m.env) }
        let gate = Gate()
        gate.install(on: m.fixture)
        defer { gate.release() }
        #expect(try m.cli(["pin", m.path(Self.gamma)]).code == 0)
        #expect(eventually { gate.entered.get() })
        let (read, opened, last) = (Self.episodes[0], Self.episodes[1], Self.episodes[2])
        for rel in [last, opened, read] { #expect(try m.cli(["pin", m.path(rel)]).code == 0) }
        let id = try ids(m, [read, opened, last])

        // Another process reads a queued file whole while gamma holds the only slot.
        let sum = try runProcess("/usr/bin/sha256sum", [m.path(read)])
        #expect(sum.code == 0, "\(sum.stderr)")
        #expect(sum.stdout.split(separator: " ").first.map(String.init) == (try sha256(expectedTree(m.mediaDir)[read]!)))
        #expect(eventually { state(m, Self.gamma) == "downloading" }, "\(state(m, Self.gamma) ?? "nil")")
        #expect(firstRequests(m, among: [id[last]!, id[opened]!]).isEmpty)

        // A file a player holds open goes to the front of the queue, and is filled first: at
        // once, while gamma's answer is still held.
        let fd = open(m.path(opened), O_RDONLY)
        try #require(fd >= 0)
        defer { close(fd) }
        #expect(eventually { done(m, opened) }, "\(state(m, opened) ?? "nil")")
        #expect(firstRequests(m, among: [id[opened]!, id[last]!]) == [id[opened]!])
        gate.release()
        #expect(eventually { done(m, last) }, "\(state(m, last) ?? "nil")")
        #expect(firstRequests(m, among: [id[opened]!, id[last]!]) == [id[opened]!, id[last]!])
    }

    /// Holds the server's first two download answers, each until its own release (at most a
    /// minute): the file of the first keeps its slot, the second's shows who took it.
    final class TwoGates: Sendable {
        let gates = [DispatchSemaphore(value: 0), DispatchSemaphore(value: 0)]
        let entered = LockedBox(0)
        func install(on fixture: ServerFixture) {
            fixture.onDownloadRequest { [self] n in
                guard n <= 2 else { return }
                entered.set(n)
                _ = gates[n - 1].wait(timeout: .now() + 60)
            }
        }
        func releaseAll() { for g in gates { g.signal() } }
    }

    /// The background fill's passes so far and how many a file's open woke, from the mount
    /// root's `user.labstream.fill` (`passes=12 opened=3`).
    func fillPasses(_ m: MountedLabstream) -> [String: Int] {
        var out: [String: Int] = [:]
        for pair in (StatusCommandXattr.get(m.mountpoint, "fill") ?? "").split(separator: " ") {
            let kv = pair.split(separator: "=", maxSplits: 1)
            if kv.count == 2, let n = Int(kv[1]) { out[String(kv[0])] = n }
        }
        return out
    }

    /// A player opening a queued pinned file wakes the fill at once: the server sees that
    /// file's request next, and the file it pushed back says it waits its turn, not
    /// `downloading`. The pass that gave it the slot is counted as one the open woke (the
    /// mount root's `user.labstream.fill`), so another wake that happens to come after the
    /// open (the pins', a registry's) cannot pass for it.
    @Test func openingAQueuedFileTakesTheSlotAtOnceAndTheFilePushedBackSaysSo() throws {
        let m = try MountedLabstream("queue-open", cacheConfig: "max_concurrent_files = 1\nside_assets = off")
        try m.mount()
        defer { stopDaemon(at: m.mountpoint, pid: m.daemonPid, env: m.env) }
        let gates = TwoGates()
        gates.install(on: m.fixture)
        defer { gates.releaseAll() }
        let (opened, last) = (Self.episodes[1], Self.episodes[2])
        let id = try ids(m, [Self.gamma, opened, last])
        #expect(try m.cli(["pin", m.path(Self.gamma)]).code == 0)
        #expect(eventually { gates.entered.get() == 1 }, "gamma's first request never came")
        for rel in [opened, last] { #expect(try m.cli(["pin", m.path(rel)]).code == 0) }
        #expect(state(m, Self.gamma) == "downloading" && state(m, opened) == "queued")
        let before = fillPasses(m)
        try #require(before["passes"] != nil && before["opened"] == 0, "\(before)")

        let fd = open(m.path(opened), O_RDONLY)
        try #require(fd >= 0)
        defer { close(fd) }
        #expect(eventually { gates.entered.get() == 2 }, "the opened file was not fetched while gamma held the slot")
        #expect(fillPasses(m)["opened"] == 1, "no fill pass ran for the open: \(fillPasses(m))")
        #expect(firstRequests(m, among: [id[Self.gamma]!, id[opened]!, id[last]!]) == [id[Self.gamma]!, id[opened]!])
        let listed = try queue(m)
        #expect(listed.first?["path"] as? String == m.path(opened) && listed.first?["reading"] as? Bool == true, "\(listed)")
        let pushedBack = try queue(m).first { $0["path"] as? String == m.path(Self.gamma) }
        #expect(pushedBack?["state"] as? String == "queued" && pushedBack?["reason"] as? String == "yielding", "\(pushedBack ?? [:])")
        #expect((pushedBack?["message"] as? String)?.contains("waiting for its turn") == true)
        let status = try m.cli(["status", m.path(Self.gamma)])
        #expect(status.stdout.contains("queued") && status.stdout.contains("files ahead of it in the queue took the download slots"), "\(status.stdout)")

        gates.releaseAll()
        for rel in [Self.gamma, opened, last] { #expect(eventually { done(m, rel) }, "\(rel): \(state(m, rel) ?? "nil")") }
        #expect(try sha256(m.path(Self.gamma)) == sha256(expectedTree(m.mediaDir)[Self.gamma]!))
    }

    /// Bad input is refused with what to do; with no daemon the queue says to mount, and a pin
    /// at a priority goes into the index with its place.
    @Test func theQueueCommandsSayWhatIsWrong() throws {
        let m = try MountedLabstream("queue-usage")
        let unmounted = try m.cli(["queue"])
        #expect(unmounted.code == 69 && unmounted.stderr.contains("mount first"), "\(unmounted.stderr)")
        let level = try m.cli(["priority", m.path(Self.gamma), "urgent"])
        #expect(level.code == 64 && level.stderr.contains("high|normal|low"), "\(level.stderr)")
        let both = try m.cli(["queue", "move", m.path(Self.gamma), "--first", "--before", m.path(Self.beta)])
        #expect(both.code == 64 && both.stderr.contains("--first | labstream queue move PATH --before OTHER"), "\(both.stderr)")
        let unpin = try m.cli(["unpin", "--priority", "high", Self.gamma])
        #expect(unpin.code == 64 && unpin.stderr.contains("--priority goes with pin"), "\(unpin.stderr)")
        #expect(try m.cli(["sync"]).code == 0)
        let offline = try m.cli(["pin", "--priority", "low", Self.gamma])
        #expect(offline.code == 0, "\(offline.stderr)")
        do {
            let index = try OfflineIndex(path: DataLayout(root: m.dataDir).indexPath)
            #expect(try index.queuePlaces().values.map(\.priority) == [.low])
        }
        try m.mount()
        defer { stopDaemon(at: m.mountpoint, pid: m.daemonPid, env: m.env) }
        let outside = try m.cli(["priority", m.scratch.path, "high"])
        #expect(outside.code == 66 && outside.stderr.contains("is not inside"), "\(outside.stderr)")

        // A cancel unpins by saving the row; its place in the queue table goes with the pin.
        let cancel = try m.cli(["cancel", m.path(Self.gamma)])
        #expect(cancel.code == 0, "\(cancel.stderr)")
        let index = try OfflineIndex(path: DataLayout(root: m.dataDir).indexPath)
        #expect(try index.db.query("SELECT count(*) FROM queue").first?[0].int == 0)
        let rows = try JSONSerialization.jsonObject(with: Data(try m.cli(["status", "--json", m.path(Self.gamma)]).stdout.utf8)) as? [[String: Any]]
        #expect(rows?.first?["pinned"] as? Bool == false)
    }

    /// Schema 18 → 19: pinned rows get places in the order the fill used then; new pins go after.
    @Test func aVersion18IndexGetsQueuePlacesInItsOldOrder() throws {
        let scratch = Scratch("migrate18")
        let layout = DataLayout(root: scratch.path)
        func file(_ item: String) -> TreeFile {
            TreeFile(path: ["s", "Movies", item], key: FileKey(server: "s", itemId: item, sourceId: "src"), size: 10, modified: 1, etag: nil)
        }
        do {
            let index = try OfflineIndex(path: layout.indexPath)
            _ = try index.setPinned(true, files: [file("c"), file("a"), file("b")], layout: layout, now: 1)
            _ = try index.setPinned(false, files: [file("b")], layout: layout, now: 1)
            try undoSchema21(index.db)
        }
        let index = try OfflineIndex(path: layout.indexPath)
        let places = try index.queuePlaces()
        #expect(places.count == 2)
        #expect(places[file("a").key] == QueuePlace(position: 1) && places[file("c").key] == QueuePlace(position: 2))
        _ = try index.setPinned(true, files: [file("b")], layout: layout, now: 2, priority: .low)
        #expect(try index.queuePlaces()[file("b").key] == QueuePlace(position: 3, priority: .low))
        // Pinning again keeps the place and takes a new priority only when one is given.
        _ = try index.setPinned(true, files: [file("a")], layout: layout, now: 3)
        _ = try index.setPinned(true, files: [file("c")], layout: layout, now: 3, priority: .high)
        #expect(try index.queuePlaces()[file("a").key] == QueuePlace(position: 1))
        #expect(try index.queuePlaces()[file("c").key] == QueuePlace(position: 2, priority: .high))
    }
}
