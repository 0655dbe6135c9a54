import Foundation
import LabstreamCore
import LabstreamDaemon
import Testing

@Suite struct LogRotationTests {
    /// `thread-line-padding` lines of varied lengths: a cut line no longer matches its own length.
    static func line(_ thread: Int, _ n: Int) -> String {
        let pad = String(repeating: "x", count: 20 + (thread * 37 + n * 11) % 90)
        return "t\(thread) n\(n) \(pad) len\(pad.count)\n"
    }

    static func whole(_ line: Substring) -> (thread: Int, n: Int)? {
        let parts = line.split(separator: " ")
        guard parts.count == 4, parts[0].hasPrefix("t"), parts[1].hasPrefix("n"), let t = Int(parts[0].dropFirst()),
            let n = Int(parts[1].dropFirst()), parts[3] == "len\(parts[2].count)", Self.line(t, n).dropLast() == line
        else { return nil }
        return (t, n)
    }

    func files(_ path: String) -> [String] {
        ([path] + (1...10).map { "\(path).\($0)" }).filter { FileManager.default.fileExists(atPath: $0) }
    }

    /// Threads write at once through one file: every line lands whole in exactly one file, no
    /// file passes the cap, and only `files` rotated files are kept; the oldest lines go first.
    @Test func linesFromManyThreadsRotateWholeAndTheFilesAreBounded() throws {
        let scratch = Scratch("log-rotation")
        let path = scratch.path + "/labstream.log"
        let cap: Int64 = 4096
        let log = RotatingLogFile(path: path, rotation: LogRotation(maxSize: cap, files: 3), standardStreams: false)
        func write(threads: Int, lines: Range<Int>) {
            DispatchQueue.concurrentPerform(iterations: threads) { t in
                for n in lines { log.write(Self.line(t, n)) }
            }
        }
        func read() throws -> [String: [Substring]] {
            var out: [String: [Substring]] = [:]
            for f in files(path) {
                let text = try String(contentsOfFile: f, encoding: .utf8)
                #expect(Int64(text.utf8.count) <= cap, "\(f) has \(text.utf8.count) bytes")
                #expect(text.hasSuffix("\n"))
                out[f] = text.split(separator: "\n")
            }
            return out
        }

        // 4 × 30 lines of under 150 bytes (about 10 KB) fit in the four files: every one of them
        // is there once, though the first file was rotated twice.
        write(threads: 4, lines: 0..<30)
        var kept = try read()
        #expect(files(path) == [path, path + ".1", path + ".2"])
        var seen: [String: Int] = [:]
        for line in kept.values.joined() {
            let id = try #require(Self.whole(line), "a cut or mixed line: \(line)")
            seen["\(id.thread)/\(id.n)", default: 0] += 1
        }
        #expect(seen.count == 120 && seen.values.allSatisfy { $0 == 1 })

        // Many more: still four files, every line whole, each thread's kept lines its latest ones
        // with no gap (the oldest file went, nothing in between).
        write(threads: 4, lines: 30..<1000)
        kept = try read()
        #expect(files(path).count == 4)
        var byThread: [Int: [Int]] = [:]
        for line in kept.values.joined() {
            let id = try #require(Self.whole(line), "a cut or mixed line: \(line)")
            byThread[id.thread, default: []].append(id.n)
        }
        for (t, ns) in byThread {
            let sorted = ns.sorted()
            #expect(sorted.last == 999, "thread \(t)")
            #expect(sorted == Array(sorted.first!...999), "thread \(t) lost a line between its first kept and its last")
        }

        // A line longer than the cap is never cut: it gets a file of its own.
        let long = String(repeating: "y", count: 6000) + "\n"
        log.write(long)
        log.write("after\n")
        #expect(try String(contentsOfFile: path + ".1", encoding: .utf8) == long)
        #expect(try String(contentsOfFile: path, encoding: .utf8) == "after\n")
    }

    /// The daemonised daemon keeps `labstream.log` under labstream.conf's cap with its settings'
    /// number of rotated files.
    @Test func theDaemonRotatesItsLogBySettings() throws {
        let m = try MountedLabstream("log-rotation-daemon")
        let conf = m.configDir + "/labstream.conf"
        try (try String(contentsOfFile: conf, encoding: .utf8) + "\n[daemon]\nlog_max_size = 4K\nlog_files = 2\n")
            .write(toFile: conf, atomically: true, encoding: .utf8)
        let r = try m.cli(["mount", m.mountpoint, "-v"])
        try #require(r.code == 0, "\(r.stderr)")
        let pid = Int32(try String(contentsOfFile: m.dataDir + "/labstream.lock", encoding: .utf8).split(separator: "\n").first ?? "") ?? 0
        defer { stopDaemon(at: m.mountpoint, pid: pid, env: m.env) }
        let path = m.dataDir + "/labstream.log"
        var syncs = 0
        while !FileManager.default.fileExists(atPath: path + ".2") && syncs < 200 {
            #expect(try m.cli(["sync", "--full"]).code == 0)
            syncs += 1
        }
        // Past the point where a third rotated file would have been made.
        for _ in 0..<syncs { #expect(try m.cli(["sync", "--full"]).code == 0) }
        let u = try m.cli(["unmount", m.mountpoint])
        #expect(u.code == 0 && waitForExit(pid: pid))
        #expect(files(path) == [path, path + ".1", path + ".2"])
        for f in files(path) {
            let text = try String(contentsOfFile: f, encoding: .utf8)
            #expect(text.utf8.count <= 4096 && text.hasSuffix("\n"))
            for line in text.split(separator: "\n") {
                #expect(line.hasPrefix("20") && line.contains(" labstream[\(pid)] "), "not a whole log line in \(f): \(line)")
            }
        }
        #expect(try String(contentsOfFile: path, encoding: .utf8).contains("info: unmounted "))
    }
}
