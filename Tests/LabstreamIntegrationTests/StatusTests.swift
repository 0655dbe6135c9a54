import Foundation
import LabstreamCore
import LabstreamStore
import Testing

/// `status` gives one answer whichever way it is asked, and `pin --wait` says what holds it.
@Suite(.serialized) struct StatusTests {
    let alpha = "test/Movies/Alpha (2001)/Alpha (2001).mkv"
    let beta = "test/Movies/Beta (2002)/Beta (2002).mp4"

    func json(_ r: ProcessResult) throws -> [[String: Any]] {
        try #require(try JSONSerialization.jsonObject(with: Data(r.stdout.utf8)) as? [[String: Any]], "\(r.code) \(r.stdout) \(r.stderr)")
    }

    func same(_ a: [String: Any]?, _ b: [String: Any]?) -> Bool {
        guard let a, let b else { return false }
        func text(_ o: [String: Any]) -> String? {
            (try? JSONSerialization.data(withJSONObject: o, options: [.sortedKeys])).map { String(decoding: $0, as: UTF8.self) }
        }
        return text(a) != nil && text(a) == text(b)
    }

    @Test func statusSaysTheSameWhicheverWayItIsAsked() throws {
        let m = try MountedLabstream("status-one-model")
        try m.mount()
        #expect(try m.cli(["pin", "--wait", m.path(beta)]).code == 0)
        _ = try pread(path: m.path(alpha), offset: 0, length: 4096)

        let bare = try json(try m.cli(["status", "--json"]))
        let byPath = Dictionary(bare.map { ($0["path"] as? String ?? "", $0) }, uniquingKeysWith: { a, _ in a })
        let betaRow = byPath[m.path(beta)]
        #expect(betaRow?["state"] as? String == "unverified" && betaRow?["reason"] as? String == "probe_off", "\(bare)")
        #expect((betaRow?["message"] as? String)?.contains("probe is off") == true)
        #expect(byPath[m.path(alpha)]?["state"] as? String == "partial")
        // The file by itself, and inside its folder: the same object.
        #expect(same(try json(try m.cli(["status", "--json", m.path(beta)])).first, betaRow))
        let folder = try json(try m.cli(["status", "--json", m.path("test/Movies")]))
        #expect(same(folder.first { $0["path"] as? String == m.path(beta) }, betaRow))
        // Text: human sizes, a reason as a sentence.
        let text = try m.cli(["status"])
        #expect(text.stdout.contains("3.0 MiB of 3.0 MiB") && !text.stdout.contains("3145728"), "\(text.stdout)")
        #expect(text.stdout.contains("(all bytes present; the playback probe is off)"), "\(text.stdout)")

        // Cancelled: not local, both ways; bare status no longer lists it.
        #expect(try m.cli(["cancel", m.path(beta)]).code == 0)
        #expect(try json(try m.cli(["status", "--json", m.path(beta)])).first?["state"] as? String == "not-local")
        #expect(try json(try m.cli(["status", "--json"])).allSatisfy { $0["path"] as? String != m.path(beta) })
        try m.unmount()

        // No daemon: a catalog path is answered from the index, with what the mount said.
        let offline = try json(try m.cli(["status", "--json", alpha]))
        #expect(offline.count == 1 && offline.first?["state"] as? String == "partial" && offline.first?["path"] as? String == alpha, "\(offline)")
        #expect(offline.first?["bytes_present"] as? Int == byPath[m.path(alpha)]?["bytes_present"] as? Int)
        let unknown = try m.cli(["status", "test/Nope"])
        #expect(unknown.code == 66 && unknown.stderr.contains("not a catalog path"), "\(unknown.stderr)")
        // `pin --wait` with no daemon pins in the index, and says why it cannot wait.
        let wait = try m.cli(["pin", "--wait", "test/Movies/Gamma"])
        #expect(wait.code == 69 && wait.stderr.contains("nothing downloads until Labstream is mounted"), "\(wait.code) \(wait.stderr)")
        let gamma = try json(try m.cli(["status", "--json", "test/Movies/Gamma"]))
        #expect(gamma.first?["state"] as? String == "queued" && gamma.first?["pinned"] as? Bool == true, "\(gamma)")
    }

    /// After `kill -9` of the daemon nothing moves: `status` says no daemon is running, and a
    /// file it was downloading shows as waiting for the next mount (it said "downloading 32%").
    @Test func statusAfterTheDaemonWasKilledSaysItIsNotRunning() throws {
        let big = "test/Movies/Big (2024)/Big (2024).mkv"
        let m = try MountedLabstream("status-killed") { dir in
            var c = testCatalog(in: dir)
            writeRandomFile(dir + "/big.mkv", size: 64 * MiB, seed: 78)
            c.movies.append(.init(title: "Big", year: 2024, file: dir + "/big.mkv", container: "mkv"))
            return c
        }
        try m.mount()
        // The dead mount a killed daemon leaves is cleared whatever happens here.
        defer { _ = try? m.cli(["unmount", m.mountpoint]) }
        let pid = m.daemonPid, fixture = m.fixture
        let killed = LockedBox(false)
        // Killed once its second range is asked for: the file is well under way by then.
        fixture.onDownloadRequest { _ in
            if !killed.get() && fixture.downloadRequests.count >= 2 {
                killed.set(true)
                kill(pid, SIGKILL)
            }
        }
        #expect(try m.cli(["pin", m.path(big)]).code == 0)
        #expect(waitForExit(pid: pid, timeoutMs: 60_000), "the daemon was never killed")
        fixture.onDownloadRequest(nil)
        let index = try OfflineIndex(path: m.dataDir + "/index.sqlite")
        let key = try #require(try index.treeFiles().first { $0.path.last == "Big (2024).mkv" }?.key)
        #expect(try index.download(key)?.status == .downloading, "the index still says downloading, as the killed daemon left it")
        let text = try m.cli(["status"])
        #expect(text.code == 0 && text.stdout.contains("The Labstream daemon is not running"), "\(text.stdout)")
        #expect(text.stdout.contains("labstream mount \(m.mountpoint)") && !text.stdout.contains("downloading"), "\(text.stdout)")
        let row = try json(try m.cli(["status", "--json"])).first { ($0["path"] as? String)?.hasSuffix("Big (2024).mkv") == true }
        #expect(row?["state"] as? String == "queued" && row?["reason"] as? String == "daemon_not_running", "\(row ?? [:])")
        #expect((row?["message"] as? String)?.contains("the daemon is not running") == true, "\(row ?? [:])")
        let cleared = try m.cli(["unmount", m.mountpoint])
        #expect(cleared.code == 0, "\(cleared.stderr)")
    }

    /// `du` adds up what is really on disk: a file not here takes no blocks, a pinned one its
    /// size, a cancelled one none again (the kernel is told each time, not left with its cache).
    @Test func duCountsTheBytesStoredNotTheFileSizes() throws {
        let m = try MountedLabstream("status-du")
        try m.mount()
        func blocks(_ rel: String) -> Int64 {
            var st = stat()
            return stat(m.path(rel), &st) == 0 ? Int64(st.st_blocks) * 512 : -1
        }
        #expect(blocks(beta) == 0)
        #expect(try m.cli(["pin", "--wait", m.path(beta)]).code == 0)
        #expect(eventually { blocks(beta) >= 3 * Int64(MiB) }, "\(blocks(beta))")
        let du = try runProcess("/usr/bin/du", ["-B1", "-s", m.path("test/Movies")])
        let counted = Int64(du.stdout.split(separator: "\t").first ?? "") ?? -1
        #expect(counted >= 3 * Int64(MiB) && counted < 4 * Int64(MiB), "\(du.stdout)")  // not the 15 MiB of the folder's sizes
        #expect(try m.cli(["cancel", m.path(beta)]).code == 0)
        #expect(eventually { blocks(beta) == 0 }, "\(blocks(beta))")
        try m.unmount()
    }

    /// A server answering 503: the wait's JSON names the file and why, and it ends by itself
    /// once the server is back.
    @Test func pinWaitSaysWhatHoldsIt() throws {
        let m = try MountedLabstream("status-wait-reason")
        try m.mount()
        m.fixture.inject(.status(503), pathPrefix: "/Items/", times: nil)
        let p = Process()
        p.executableURL = URL(fileURLWithPath: "/usr/bin/timeout")
        p.arguments = ["120", labstreamBinary, "pin", "--wait", "--json", m.path(beta)]
        p.environment = ProcessInfo.processInfo.environment.merging(m.env) { $1 }
        let out = Pipe()
        p.standardOutput = out
        try p.run()
        var pending = Data()
        var sawReason = false
        var lines: [String] = []
        while true {
            let chunk = out.fileHandleForReading.availableData
            if chunk.isEmpty { break }
            pending.append(chunk)
            while let newline = pending.firstIndex(of: 10) {
                let line = String(decoding: pending[pending.startIndex..<newline], as: UTF8.self)
                pending.removeSubrange(pending.startIndex...newline)
                lines.append(line)
                let object = try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any]
                let waiting = (object?["waiting"] as? [[String: Any]])?.first
                if !sawReason, waiting?["reason"] as? String == "server_unavailable", (waiting?["message"] as? String)?.contains("HTTP 503") == true,
                    waiting?["path"] as? String == m.path(beta)
                {
                    sawReason = true
                    m.fixture.clearFaults()  // the server is back
                }
            }
        }
        p.waitUntilExit()
        #expect(sawReason, "\(lines)")
        #expect(p.terminationStatus == 0 && lines.last?.contains("\"done\":1") == true, "\(p.terminationStatus) \(lines.suffix(3))")
        m.fixture.clearFaults()
        try m.unmount()
    }
}
