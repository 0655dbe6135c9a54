import Foundation
import LabstreamCore
import LabstreamFixture
import LabstreamStore
import Testing

/// `kill -9` of the daemon during pinned downloads, through real mounts.
@Suite(.serialized) struct CrashTests {
    static let segment = 4 * MiB
    /// The segment train's head plus one look-ahead.
    static let maxInFlight = 2

    @Test func killedDaemonsResumeAndRefetchOnlyTheSegmentsInFlight() throws {
        let m = try MountedLabstream(
            "kill9",
            catalog: { dir in
                var c = testCatalog(in: dir)
                let big = dir + "/big.mkv"
                writeRandomFile(big, size: 128 * MiB + 4321, seed: 77)
                c.movies.append(.init(title: "Big", year: 2024, file: big, container: "mkv"))
                return c
            }, cacheConfig: "segment_size = 4M")
        let rel = "test/Movies/Big (2024)/Big (2024).mkv"
        let source = m.mediaDir + "/big.mkv"
        try m.mount()
        let pin = try m.cli(["pin", m.path(rel)])
        try #require(pin.code == 0, "\(pin.stderr)")

        var previous: [ByteRange] = []
        var committedBefore = RangeSet()
        let key = try #require(try OfflineIndex(path: m.dataDir + "/index.sqlite").treeFiles().first { $0.path.last == "Big (2024).mkv" }?.key)
        var rng = SeededRandom(seed: 2026)
        for run in 0..<10 {
            // Kill as the k-th download request of this run arrives, with others mid-body.
            let k = 1 + Int(rng.next() % 2)
            let fixture = m.fixture
            fixture.clearLog()
            let victim = LockedBox<Int32>(run == 0 ? m.daemonPid : 0)
            let killed = LockedBox(false)
            // What had been served when the kill was sent (socket buffers may take more after it).
            let servedAtKill = LockedBox<[ByteRange]>([])
            fixture.onDownloadRequest { _ in
                let pid = victim.get()
                if pid > 0 && !killed.get() && fixture.downloadRequests.count >= k {
                    killed.set(true)
                    servedAtKill.set(fixture.downloadRequests.compactMap(\.servedRange))
                    kill(pid, SIGKILL)
                }
            }
            if run > 0 {
                try m.mount()  // the pin survives in the index and resumes by itself
                victim.set(m.daemonPid)
            }
            #expect(waitForExit(pid: m.daemonPid, timeoutMs: 60_000), "run \(run): the daemon was never killed")
            fixture.onDownloadRequest(nil)
            let requested = fixture.downloadRequests.compactMap(\.requestedRange)
            // Nothing committed before the previous crash is asked for again; of what was served,
            // only the segments that were in flight (head and look-ahead) can be.
            #expect(requested.allSatisfy { committedBefore.intersection($0).isEmpty }, "run \(run): refetched committed bytes")
            let again = Self.overlap(requested, previous)
            #expect(again <= Int64(Self.maxInFlight * Self.segment), "run \(run): re-requested \(again) bytes; now \(requested) before \(previous)")
            previous = servedAtKill.get()
            committedBefore = try OfflineIndex(path: m.dataDir + "/index.sqlite").download(key)?.present ?? RangeSet()
            // The dead mount is cleared by `labstream unmount`, or by the next mount itself.
            if run % 2 == 0 {
                let cleared = try m.cli(["unmount", m.mountpoint])
                #expect(cleared.code == 0, "run \(run): \(cleared.stderr)")
            }
        }

        m.fixture.clearLog()
        try m.mount()  // over the dead mount of the last run
        let wait = try m.cli(["pin", "--wait", "--json", m.path(rel)])
        #expect(wait.code == 0, "\(wait.stderr)")
        #expect(wait.stdout.split(separator: "\n").last?.contains("\"done\":1") == true, "\(wait.stdout)")
        let last = m.fixture.downloadRequests.compactMap(\.requestedRange)
        #expect(last.allSatisfy { committedBefore.intersection($0).isEmpty })
        #expect(Self.overlap(last, previous) <= Int64(Self.maxInFlight * Self.segment))
        #expect(try sha256(m.path(rel)) == sha256(source))
        let attrs = try m.cli(["status", "--json", m.path(rel)])
        #expect(attrs.stdout.contains("\"state\" : \"unverified\""))
        try m.unmount()
    }

    static func overlap(_ requested: [ByteRange], _ served: [ByteRange]) -> Int64 {
        var servedSet = RangeSet(served)
        var total: Int64 = 0
        for r in requested {
            total += servedSet.intersection(r).byteCount
            servedSet.remove(r)  // count each byte once
        }
        return total
    }

    @Test func pinningThroughSetfattrAndStatusOfAFolder() throws {
        let m = try MountedLabstream("setfattr")
        try m.mount()
        let season = m.path("test/Shows/Show (2020)/Season 01")
        let set = try runProcess("/usr/bin/setfattr", ["-n", "user.labstream.pin", "-v", "1", season])
        #expect(set.code == 0, "\(set.stderr)")
        let bad = try runProcess("/usr/bin/setfattr", ["-n", "user.labstream.state", "-v", "complete", season])
        #expect(bad.code != 0)
        let wait = try m.cli(["pin", "--wait", season])
        #expect(wait.code == 0, "\(wait.stderr)")
        let get = try runProcess("/usr/bin/getfattr", ["-d", season])
        #expect(get.stdout.contains("user.labstream.pinned=\"1\"") && get.stdout.contains("user.labstream.state=\"unverified\""), "\(get.stdout)")
        for rel in ["test/Shows/Show (2020)/Season 01/Show (2020) - S01E01 - Pilot.mkv", "test/Shows/Show (2020)/Season 01/Show (2020) - S01E02 - Second.mp4"] {
            #expect(try sha256(m.path(rel)) == sha256(expectedTree(m.mediaDir)[rel]!))
        }
        // status --watch --json follows the season: read its first line, then stop it.
        let watch = Process()
        watch.executableURL = URL(fileURLWithPath: labstreamBinary)
        watch.arguments = ["status", "--watch", "--json", season]
        watch.environment = ProcessInfo.processInfo.environment.merging(m.env) { $1 }
        let out = Pipe()
        watch.standardOutput = out
        try watch.run()
        var line = Data()
        while !line.contains(10) {
            let chunk = out.fileHandleForReading.availableData
            if chunk.isEmpty { break }
            line.append(chunk)
        }
        watch.terminate()
        watch.waitUntilExit()
        let first = String(decoding: line.prefix { $0 != 10 }, as: UTF8.self)
        let object = try JSONSerialization.jsonObject(with: Data(first.utf8)) as? [String: Any]
        #expect(object?["state"] as? String == "unverified" && (object?["bytes_total"] as? Int ?? 0) > 0, "\(first)")
        #expect((object?["path"] as? String ?? "").hasPrefix(season))
        // Season 02 was not pinned: nothing of it was fetched.
        let status = try m.cli(["status", "--json", m.path("test/Shows/Show (2020)/Season 02")])
        #expect(status.stdout.contains("\"state\" : \"not-local\""), "\(status.stdout)")
        let unpin = try m.cli(["unpin", season])
        #expect(unpin.code == 0)
        let outside = try m.cli(["pin", "/tmp"])
        #expect(outside.code == 66)
        try m.unmount()
    }
}
