import Foundation
import LabstreamCore
import LabstreamDemo
import LabstreamFixture
import Testing

/// Real FUSE mounts of the `labstream` daemon process over the fixture on loopback.
@Suite(.serialized) struct MountTests {
    /// A configured server without stored credentials is left out of the mount, and the mount
    /// command says so on the terminal, not only in the log.
    @Test func mountSaysWhichServerItLeftOut() throws {
        let m = try MountedLabstream("mount-skipped")
        let conf = m.configDir + "/labstream.conf"
        let text = try String(contentsOfFile: conf, encoding: .utf8)
        try (text + "\n[server \"ghost\"]\ntype = jellyfin\nurl = http://127.0.0.1:9\n").write(toFile: conf, atomically: true, encoding: .utf8)
        let r = try m.cli(["mount", m.mountpoint])
        #expect(r.code == 0 && r.stdout.contains("Mounted at"), "\(r.stdout)\(r.stderr)")
        #expect(r.stderr.contains("server ghost has no stored credentials and is not mounted"), "\(r.stderr)")
        _ = try m.cli(["unmount", m.mountpoint])
    }

    /// Unmounting while a player holds a file open: the command says who holds what and that it
    /// waits, and finishes once the file is closed.
    @Test func unmountWithAFileOpenSaysWhoAndFinishesWhenItCloses() throws {
        let m = try MountedLabstream("unmount-busy")
        try m.mount()
        let fd = open(m.path("test/Movies/Gamma/Gamma.mkv"), O_RDONLY)
        #expect(fd >= 0)
        let result = LockedBox<ProcessResult?>(nil)
        let unmount = Thread { result.set(try? m.cli(["unmount", m.mountpoint])) }
        unmount.start()
        #expect(eventually { UnmountProbe.mounted(m.mountpoint) == false })  // gone from the tree at once
        #expect(result.get() == nil)  // still waiting for the open file
        close(fd)
        #expect(eventually { result.get() != nil })
        let r = try #require(result.get() ?? nil)
        #expect(
            r.code == 0 && r.stdout.contains("pid \(getpid())") && r.stdout.contains("has 1 file open") && r.stdout.contains("Waiting"),
            "\(r.stdout)\(r.stderr)")
        #expect(waitForExit(pid: m.daemonPid))
    }

    @Test func theMountServesTheCatalogByteForByte() throws {
        let m = try MountedLabstream("mount")
        try m.mount()
        let expected = expectedTree(m.mediaDir)

        // ls -R shows exactly the catalog, with sizes before any byte is fetched.
        #expect(
            Set(filesBelow(m.mountpoint))
                == Set(expected.keys).union(["test/Movies/Twin (2010)/Twin (2010).mkv", "test/Movies/Twin (2010) (2)/Twin (2010) (2).mkv"]))
        let ls = try runProcess("/bin/ls", ["-lR", m.mountpoint])
        #expect(ls.code == 0 && ls.stdout.contains("12582949"))
        #expect(m.fixture.downloadRequests.isEmpty)
        // statfs counts the catalog's files (df -i; find(1) asks it at every walk).
        var fsStat = statvfs()
        #expect(
            statvfs(m.mountpoint, &fsStat) == 0 && Int(fsStat.f_files) == filesBelow(m.mountpoint).filter { !$0.hasSuffix(".nfo") }.count,
            "\(fsStat.f_files)")

        // A tail read of an uncached file asks only for the tail.
        let alpha = "test/Movies/Alpha (2001)/Alpha (2001).mkv"
        let size = 12 * MiB + 37
        #expect(try pread(path: m.path(alpha), offset: size - MiB, length: MiB) == pread(path: expected[alpha]!, offset: size - MiB, length: MiB))
        let tail = m.fixture.downloadRequests.compactMap(\.requestedRange)
        #expect(!tail.isEmpty && tail.allSatisfy { $0.lower >= Int64(size - 2 * MiB) }, "requested \(tail)")

        // 1 000 random reads from 4 threads match the source.
        let files = expected.keys.sorted()
        let mismatches = LockedBox(0)
        let group = DispatchGroup()
        for t in 0..<4 {
            group.enter()
            Thread {
                var rng = UInt64(t + 1) &* 0x9e3779b97f4a7c15
                for _ in 0..<250 {
                    rng = rng &* 6364136223846793005 &+ 1442695040888963407
                    let rel = files[Int(rng >> 33) % files.count]
                    let fileSize = (try? FileManager.default.attributesOfItem(atPath: expected[rel]!)[.size] as? Int) ?? 0
                    let offset = Int((rng >> 17) % UInt64(max(fileSize, 1)))
                    let length = 1 + Int((rng >> 5) % 200_000)
                    let got = try? pread(path: m.path(rel), offset: offset, length: length)
                    let want = try? pread(path: expected[rel]!, offset: offset, length: length)
                    if got == nil || got != want { mismatches.update { $0 += 1 } }
                }
                group.leave()
            }.start()
        }
        group.wait()
        #expect(mismatches.get() == 0)

        // Every file read through the mount hashes like its source.
        for (rel, source) in expected {
            #expect(try sha256(m.path(rel)) == sha256(source), "\(rel)")
        }

        // Writes are refused.
        #expect(open(m.path(alpha), O_WRONLY) == -1 && errno == EROFS)
        #expect(mkdir(m.path("test/new"), 0o755) == -1 && errno == EROFS)

        // Status through the live mount.
        let status = try m.cli(["status", "--json", m.path("test/Movies/Alpha (2001)")])
        #expect(status.code == 0, "\(status.stderr)")
        let rows = try JSONSerialization.jsonObject(with: Data(status.stdout.utf8)) as? [[String: Any]]
        let row = try #require(rows?.first)
        #expect(row["path"] as? String == m.path(alpha))
        #expect(row["state"] as? String == "unverified")
        #expect(row["bytes_present"] as? Int == size && row["bytes_total"] as? Int == size)
        let text = try m.cli(["status"])
        #expect(text.code == 0 && text.stdout.contains("Alpha (2001).mkv"))
        let outside = try m.cli(["status", "/tmp"])
        #expect(outside.code == 66 && outside.stderr.contains("not inside a live Labstream mount"))

        // A second daemon on the same data dir is refused, naming the holder.
        let other = m.scratch.sub("mnt2")
        let second = try m.cli(["mount", other])
        #expect(second.code == 75 && second.stderr.contains(m.mountpoint), "\(second.code) \(second.stderr)")

        try m.unmount()
        #expect(Set(filesBelow(m.mountpoint)).isEmpty)
        // No token anywhere but the credential store.
        for file in ["labstream.log", "index.sqlite", "index.sqlite-wal", "labstream.lock"] {
            let data = FileManager.default.contents(atPath: m.dataDir + "/" + file) ?? Data()
            #expect(!String(decoding: data, as: UTF8.self).contains(m.fixture.accessToken), "token found in \(file)")
        }
        let conf = try String(contentsOfFile: m.configDir + "/labstream.conf", encoding: .utf8)
        #expect(!conf.contains(m.fixture.accessToken))
    }

    @Test func aRestartedDaemonReusesThePresentRanges() throws {
        let m = try MountedLabstream("restart")
        let beta = "test/Movies/Beta (2002)/Beta (2002).mp4"
        let source = expectedTree(m.mediaDir)[beta]!
        try m.mount()
        #expect(try pread(path: m.path(beta), offset: 0, length: MiB + 100) == pread(path: source, offset: 0, length: MiB + 100))
        let first = m.fixture.downloadRequests.compactMap(\.requestedRange)
        try m.unmount()

        m.fixture.clearLog()
        try m.mount()
        #expect(try pread(path: m.path(beta), offset: 0, length: MiB + 100) == pread(path: source, offset: 0, length: MiB + 100))
        let again = m.fixture.downloadRequests.compactMap(\.requestedRange)
        #expect(again.allSatisfy { r in !first.contains { $0.overlaps(r) } }, "re-requested \(again) after \(first)")
        #expect(try sha256(m.path(beta)) == sha256(source))
        try m.unmount()
    }

    @Test func aReadWhoseFetchFailsReturnsEIOPromptly() throws {
        let m = try MountedLabstream("eio", cacheConfig: "fetch_timeout = 3\nconnect_timeout = 2")
        try m.mount()
        let alpha = "test/Movies/Alpha (2001)/Alpha (2001).mkv"
        _ = try pread(path: m.path(alpha), offset: 0, length: 4096)
        m.fixture.stop()  // the server vanishes
        let started = Date()
        #expect(throws: SyscallError.self) { _ = try pread(path: m.path(alpha), offset: 8 * MiB, length: 4096) }
        #expect(Date().timeIntervalSince(started) < 10)
        #expect(try pread(path: m.path(alpha), offset: 0, length: 4096) == pread(path: expectedTree(m.mediaDir)[alpha]!, offset: 0, length: 4096))
        try m.unmount()
    }

    /// A server that sends 256 KiB and then nothing (up, but stalled mid-body): the read fails
    /// with EIO once fetch_timeout has passed without a byte, not twice that (the kernel asks
    /// again at once for the page of a read-ahead that failed), and the log says the server
    /// stopped sending mid-body, not that there was no connection (the first read's connection
    /// is reused).
    @Test func aReadWhoseBodyStallsFailsWithinFetchTimeoutAndSaysWhere() throws {
        let m = try MountedLabstream("stall", cacheConfig: "fetch_timeout = 3\nconnect_timeout = 2")
        try m.mount()
        let alpha = "test/Movies/Alpha (2001)/Alpha (2001).mkv"
        _ = try pread(path: m.path(alpha), offset: 0, length: 4096)
        m.fixture.inject(.stallAfter(256 * 1024, 60), pathPrefix: "/Items/", times: nil)
        let started = Date()
        let demand = ByteRange(Int64(4 * MiB + 768 * 1024), Int64(4 * MiB + 772 * 1024))
        #expect(throws: SyscallError.self) { _ = try pread(path: m.path(alpha), offset: Int(demand.lower), length: Int(demand.count)) }
        let took = Date().timeIntervalSince(started)
        // Within the read's own limit, fetch_timeout + connect_timeout (the stall clock may take
        // a second to notice): one stalled fetch, whose failure also answers the kernel's
        // second read of the page.
        #expect(took < 3 + 2, "\(took) s")
        let asked = m.fixture.downloadRequests.filter { $0.requestedRange?.overlaps(demand) == true }
        #expect(asked.count == 1, "\(asked)")
        #expect(m.log.contains("the server stopped sending mid-body: it sent nothing for 3 s (fetch_timeout) after 262144 bytes"), "\(m.log)")
        #expect(!m.log.contains("no connection within"), "\(m.log)")
        m.fixture.clearFaults()
        #expect(try pread(path: m.path(alpha), offset: 4 * MiB, length: 4096) == pread(path: expectedTree(m.mediaDir)[alpha]!, offset: 4 * MiB, length: 4096))
        try m.unmount()
    }

    @Test func realClipsPlayAndArePlaybackCheckedThroughTheMount() throws {
        let m = try MountedLabstream(
            "probe",
            catalog: { dir in
                let clip = dir + "/clip.mkv", broken = dir + "/broken.mp4"
                try? DemoMedia.generate(path: clip, seconds: 4, size: "320x240")
                try? DemoMedia.generate(path: broken, seconds: 4, size: "320x240")
                // Same size, garbage from a third of the way to near the end.
                if var data = try? Data(contentsOf: URL(fileURLWithPath: broken)) {
                    let from = data.count / 3, to = data.count * 19 / 20
                    for i in from..<to { data[i] = UInt8(truncatingIfNeeded: i &* 2654435761 >> 13) }
                    try? data.write(to: URL(fileURLWithPath: broken))
                }
                return FixtureCatalog(
                    movies: [
                        .init(title: "Clip", year: 2024, file: clip, container: "mkv"),
                        .init(title: "Broken", year: 2024, file: broken, container: "mp4")
                    ], series: [])
            }, probe: true)
        try m.mount()
        let clip = m.path("test/Movies/Clip (2024)/Clip (2024).mkv")
        let probe = try runProcess("/usr/bin/ffprobe", ["-v", "error", "-show_entries", "format=duration:stream=codec_name", "-of", "csv=p=0", clip])
        #expect(probe.code == 0, "\(probe.stderr)")
        #expect(probe.stdout.contains("h264") && probe.stdout.contains("aac"))

        let wait = try m.cli(["pin", "--wait", m.path("test/Movies")])
        #expect(wait.code == 74, "\(wait.stdout) \(wait.stderr)")  // the broken one fails its check
        let status = try m.cli(["status", "--json", m.path("test/Movies")])
        let rows = try #require(try JSONSerialization.jsonObject(with: Data(status.stdout.utf8)) as? [[String: Any]])
        let byName = Dictionary(uniqueKeysWithValues: rows.map { (($0["path"] as? String ?? "").split(separator: "/").last.map(String.init) ?? "", $0) })
        #expect(byName["Clip (2024).mkv"]?["state"] as? String == "complete", "\(rows)")
        #expect(byName["Broken (2024).mp4"]?["state"] as? String == "failed", "\(rows) \(m.log)")
        #expect((byName["Broken (2024).mp4"]?["reason"] as? String ?? "").isEmpty == false)
        #expect(m.log.contains("probe of test/Movies/Clip (2024)/Clip (2024).mkv: complete"))
        // verify re-probes on demand.
        let verify = try m.cli(["verify", clip])
        #expect(verify.code == 0, "\(verify.stderr)")
        try m.unmount()
    }
}

enum UnmountProbe {
    /// Whether `path` is a mountpoint now (per /proc/self/mountinfo).
    static func mounted(_ path: String) -> Bool {
        let info = (try? String(contentsOfFile: "/proc/self/mountinfo", encoding: .utf8)) ?? ""
        return info.split(separator: "\n").contains { $0.split(separator: " ").count > 4 && $0.split(separator: " ")[4] == Substring(path) }
    }
}
