import Foundation
import LabstreamCore
import LabstreamFixture
import Testing

/// A data dir on a small tmpfs filled by something else: a pin parks for the full disk, a
/// person's retry is tried and says why it parked again, unpin and cancel still free space,
/// and the pin resumes by itself once room returns.
@Suite(.serialized) struct FullDiskTests {
    static let beta = "test/Movies/Beta (2002)/Beta (2002).mp4"
    static let gamma = "test/Movies/Gamma/Gamma.mkv"
    static let special = "test/Shows/Show (2020)/Season 00/Show (2020) - S00E01 - Special.mkv"

    func status(_ m: MountedLabstream, _ rel: String) throws -> [String: Any] {
        let json = try m.cli(["status", "--json", m.path(rel)])
        let rows = try JSONSerialization.jsonObject(with: Data(json.stdout.utf8)) as? [[String: Any]]
        return rows?.first ?? [:]
    }

    func state(_ m: MountedLabstream, _ rel: String) -> String? { (try? status(m, rel))?["state"] as? String }
    func present(_ m: MountedLabstream, _ rel: String) -> Int { (try? status(m, rel))?["bytes_present"] as? Int ?? -1 }

    func free(_ dir: String) -> Int64 {
        var st = statvfs()
        return statvfs(dir, &st) == 0 ? Int64(st.f_bavail) * Int64(st.f_frsize) : -1
    }

    /// Fills `dir`'s file system through `filler`, then gives `leave` bytes back.
    func fill(_ filler: String, leaving leave: Int) {
        let fd = open(filler, O_WRONLY | O_CREAT | O_APPEND, 0o600)
        let block = [UInt8](repeating: 1, count: 1 << 16)
        while block.withUnsafeBytes({ write(fd, $0.baseAddress, $0.count) }) > 0 {}
        var st = stat()
        fstat(fd, &st)
        if leave > 0 { ftruncate(fd, max(st.st_size - off_t(leave), 0)) }
        close(fd)
    }

    @Test(.enabled(if: geteuid() == 0, "a tmpfs needs root; CI runs as root"))
    func aFullDiskPauseLiftsByItselfAndUnpinAndCancelFreeSpace() throws {
        let scratch = Scratch("full-disk")
        let small = scratch.sub("small")
        let mount = try runProcess("/bin/mount", ["-t", "tmpfs", "-o", "size=80m", "tmpfs", small])
        try #require(mount.code == 0, "\(mount.stderr)")
        defer { _ = try? runProcess("/bin/umount", ["-l", small]) }
        try FileManager.default.createDirectory(atPath: small + "/data", withIntermediateDirectories: true)
        // min_free: an unpinned copy is evicted while the disk is under it.
        let m = try MountedLabstream("full-disk", cacheConfig: "min_free = 1M", dataDir: small + "/data")
        try m.mount()
        defer { stopDaemon(at: m.mountpoint, pid: m.daemonPid, env: m.env) }
        for rel in [Self.gamma, Self.special] {
            #expect(try m.cli(["pin", m.path(rel)]).code == 0)
            #expect(eventually { state(m, rel) == "unverified" || state(m, rel) == "complete" }, "\(rel): \(state(m, rel) ?? "nil")")
        }

        // Something else fills the disk: a pin parks for it.
        let filler = small + "/filler"
        fill(filler, leaving: 1 << 20)
        #expect(try m.cli(["pin", m.path(Self.beta)]).code == 0)
        #expect(eventually { state(m, Self.beta) == "paused" }, "\(state(m, Self.beta) ?? "nil")")
        #expect(try status(m, Self.beta)["reason"] as? String == "storage_full")

        // A person's retry is tried, and the answer says why it parked again.
        let retry = try m.cli(["retry", m.path(Self.beta)])
        #expect(retry.code == 75, "\(retry.code) \(retry.stdout) \(retry.stderr)")
        #expect(retry.stderr.contains("parked again") && retry.stderr.contains("disk is still full"), "\(retry.stderr)")
        #expect(m.log.contains("retry 1 files"), "the retry was not dispatched")
        let after = try status(m, Self.beta)
        #expect(after["state"] as? String == "paused" && after["reason"] as? String == "storage_full", "\(after)")
        // The same answer through the mount's attribute, the way a command of another data dir
        // (no control socket to this daemon) acts: the write returns once the file parked again.
        let elsewhere = ["LABSTREAM_CONFIG_DIR": m.configDir, "LABSTREAM_DATA_DIR": m.scratch.sub("elsewhere")]
        let viaAttribute = try runProcess(labstreamBinary, ["retry", m.path(Self.beta)], environment: elsewhere)
        #expect(viaAttribute.code == 75, "\(viaAttribute.code) \(viaAttribute.stdout) \(viaAttribute.stderr)")
        #expect(
            viaAttribute.stderr.contains("parked again") && viaAttribute.stderr.contains("disk is still full")
                && viaAttribute.stderr.contains("still to fetch"), "\(viaAttribute.stderr)")
        #expect(m.log.components(separatedBy: "retry 1 files").count == 3, "the attribute's retry was not dispatched")

        // Full to the last byte: unpin records itself (the copy is then evicted for min_free),
        // and cancel frees its bytes.
        fill(filler, leaving: 0)
        #expect(free(small) < 64 << 10)
        let gammaBytes = present(m, Self.gamma)
        #expect(gammaBytes > 0)
        let unpin = try m.cli(["unpin", m.path(Self.gamma)])
        #expect(unpin.code == 0, "\(unpin.code) \(unpin.stderr)")
        #expect(eventually { present(m, Self.gamma) == 0 }, "\(present(m, Self.gamma))")
        #expect(try status(m, Self.gamma)["pinned"] as? Bool == false)
        fill(filler, leaving: 0)
        #expect(present(m, Self.special) > 0)
        let cancel = try m.cli(["cancel", m.path(Self.special)])
        #expect(cancel.code == 0, "\(cancel.code) \(cancel.stderr)")
        #expect(present(m, Self.special) == 0)
        #expect(free(small) > 0)

        // Room returns: the parked pin resumes by itself and completes, byte for byte.
        #expect(state(m, Self.beta) == "paused")
        unlink(filler)
        let resumed = eventually(timeout: 60) { state(m, Self.beta) == "unverified" || state(m, Self.beta) == "complete" }
        #expect(resumed, "\(state(m, Self.beta) ?? "nil") \(m.log.suffix(3000))")
        #expect(try sha256(m.path(Self.beta)) == sha256(expectedTree(m.mediaDir)[Self.beta]!))
        #expect(m.log.contains("has room again; resuming"))
        try m.unmount()
    }
}

/// A copy at another quality: a live copy has no size until its stream ends, so it starts only
/// with room for what `CopyRoom` expects it to take, parked like any pin; it still resumes by
/// itself once room returns. Resuming or retrying its original reaches it.
@Suite(.serialized) struct FullDiskCopyTests {
    let disk = FullDiskTests()
    let live = LiveForwardTests()
    static let original = LiveForwardTests.original

    /// The clip, its runtime said by the server (6 s): a 2 Mbit/s copy of it is about 1 500 000 bytes.
    static func timedClip(_ dir: String) -> FixtureCatalog {
        var catalog = LiveForwardTests.clipCatalog(dir)
        catalog.movies[0].details = .init(runtimeSeconds: 6)
        return catalog
    }

    func waitsForRoom(_ m: MountedLabstream) -> Int { m.log.components(separatedBy: "live copy of \(Self.original) waits for room").count - 1 }

    @Test(.enabled(if: geteuid() == 0, "a tmpfs needs root; CI runs as root"))
    func aLiveCopyWaitsForRoomBeforeItStreamsAndResumesByItself() throws {
        let scratch = Scratch("full-disk-copy")
        let small = scratch.sub("small")
        let mount = try runProcess("/bin/mount", ["-t", "tmpfs", "-o", "size=80m", "tmpfs", small])
        try #require(mount.code == 0, "\(mount.stderr)")
        defer { _ = try? runProcess("/bin/umount", ["-l", small]) }
        try FileManager.default.createDirectory(atPath: small + "/data", withIntermediateDirectories: true)
        let m = try MountedLabstream(
            "full-disk-copy", catalog: LiveForwardTests.clipCatalog, cacheConfig: "min_free = 1M\nside_assets = off", dataDir: small + "/data")
        try m.mount()
        defer { stopDaemon(at: m.mountpoint, pid: m.daemonPid, env: m.env) }

        // The disk is all but full: with no runtime said, the copy's estimate is a first segment,
        // which does not fit over min_free, and it parks before the server is asked for a stream.
        let filler = small + "/filler"
        disk.fill(filler, leaving: 640 << 10)
        #expect(try m.cli(["pin", "--quality", "2mbps", m.path(Self.original)]).code == 0)
        #expect(eventually { (try? live.copyRow(m))?.pauseCause == .storageFull }, "\(String(describing: try? live.copyRow(m))) \(m.log.suffix(2000))")
        #expect(try live.copyRow(m).reason == .storageFull)
        #expect(waitsForRoom(m) == 1, "\(m.log.suffix(2000))")
        #expect(m.fixture.streamRequests.isEmpty)

        // A person's resume of the original reaches its copy and is tried once despite the
        // estimate: the stream fills the disk and the copy parks again, its bytes freed (every
        // try starts from byte 0).
        let resume = try m.cli(["resume", m.path(Self.original)])
        #expect(resume.code == 0, "\(resume.stderr)")
        #expect(
            eventually { m.log.contains("live copy of \(Self.original): the cache's disk is full") && (try? live.copyRow(m))?.pauseCause == .storageFull },
            "\(m.log.suffix(2000))")
        let parked = try live.copyRow(m)
        #expect(parked.status == .paused && parked.reason == .storageFull)
        #expect(!FileManager.default.fileExists(atPath: m.dataDir + "/" + parked.partialPath))
        #expect(m.fixture.streamRequests.count == 1)

        // Room returns, and nobody says `resume` again: the copy starts again and completes.
        unlink(filler)
        let finished = eventually(timeout: 60) { [.complete, .unverified].contains((try? live.copyRow(m))?.status) }
        #expect(finished, "\(String(describing: try? live.copyRow(m))) \(m.log.suffix(3000))")
        #expect(m.fixture.streamRequests.count == 2)
        #expect(m.log.contains("has room again; resuming"))
        #expect(m.log.components(separatedBy: "resume 1 files").count == 2)
        #expect(FileManager.default.fileExists(atPath: m.path(LiveForwardTests.copy)))
        try m.unmount()
    }

    /// The budget holds a live copy by its estimate (the server's bitrate over the runtime it
    /// says), before any stream, and a person's retry of the original does not pass a budget they
    /// set; raising it with SIGHUP starts the copy.
    @Test func aLiveCopyOverTheBudgetByItsEstimateWaitsWithoutAStream() throws {
        let m = try MountedLabstream("budget-copy", catalog: Self.timedClip, cacheConfig: "max_size = 1M\nside_assets = off")
        try m.mount()
        defer { stopDaemon(at: m.mountpoint, pid: m.daemonPid, env: m.env) }
        #expect(try m.cli(["pin", "--quality", "2mbps", m.path(Self.original)]).code == 0)
        #expect(eventually { (try? live.copyRow(m))?.pauseCause == .overBudget }, "\(String(describing: try? live.copyRow(m))) \(m.log.suffix(2000))")
        // 2 000 000 bit/s over 6 s is 1 500 000 bytes: over 1 MiB by the rest.
        #expect(try live.copyRow(m).reason == .overBudget(need: 1_500_000 - (1 << 20), server: nil))
        let status = try m.cli(["status", m.path(Self.original)])
        #expect(status.stdout.contains("2mbps copy: paused") && status.stdout.contains("max_size"), "\(status.stdout)")

        let retry = try m.cli(["retry", m.path(Self.original)])
        #expect(retry.code == 0, "\(retry.stderr)")
        #expect(
            eventually { waitsForRoom(m) == 2 && (try? live.copyRow(m))?.pauseCause == .overBudget }, "the retry did not reach the copy: \(m.log.suffix(2000))")
        #expect(m.fixture.streamRequests.isEmpty)

        let conf = m.configDir + "/labstream.conf"
        let text = try String(contentsOfFile: conf, encoding: .utf8)
        try #require(text.contains("max_size = 1M"))
        try text.replacingOccurrences(of: "max_size = 1M", with: "max_size = 64M").write(toFile: conf, atomically: true, encoding: .utf8)
        #expect(kill(m.daemonPid, SIGHUP) == 0)
        let finished = eventually(timeout: 60) { [.complete, .unverified].contains((try? live.copyRow(m))?.status) }
        #expect(finished, "\(String(describing: try? live.copyRow(m))) \(m.log.suffix(3000))")
        #expect(m.fixture.streamRequests.count == 1)
        #expect(FileManager.default.fileExists(atPath: m.path(LiveForwardTests.copy)))
    }

    /// Pausing the original pauses its live copy on the wire (its stream is dropped), and
    /// resuming the original starts the copy again: a copy has no path of its own until whole.
    @Test func pausingAndResumingTheOriginalReachesItsLiveCopy() throws {
        let m = try MountedLabstream("pause-copy", catalog: LiveForwardTests.clipCatalog, cacheConfig: "side_assets = off")
        try m.mount()
        defer { stopDaemon(at: m.mountpoint, pid: m.daemonPid, env: m.env) }
        // The stream's answer waits (its query names the bitrate; the request to stop the
        // encoding does not) while the pause is given.
        m.fixture.holdRequests(withQueryKey: "videoBitRate")
        defer { m.fixture.holdRequests(withQueryKey: nil) }
        #expect(try m.cli(["pin", "--quality", "2mbps", m.path(Self.original)]).code == 0)
        #expect(eventually { m.fixture.streamRequests.count == 1 && (try? live.copyRow(m))?.status == .downloading })

        let pause = try m.cli(["pause", m.path(Self.original)])
        #expect(pause.code == 0, "\(pause.stderr)")
        var row = try live.copyRow(m)
        #expect(row.status == .paused && row.pauseCause == .user && row.reason == .pausedByUser, "\(row)")
        m.fixture.holdRequests(withQueryKey: nil)
        #expect(eventually { m.log.contains("live copy of \(Self.original) cancelled") }, "\(m.log.suffix(2000))")
        row = try live.copyRow(m)
        #expect(row.status == .paused && row.pauseCause == .user, "\(row)")
        #expect(m.fixture.streamRequests.count == 1)

        let resume = try m.cli(["resume", m.path(Self.original)])
        #expect(resume.code == 0, "\(resume.stderr)")
        let finished = eventually(timeout: 60) { [.complete, .unverified].contains((try? live.copyRow(m))?.status) }
        #expect(finished, "\(String(describing: try? live.copyRow(m))) \(m.log.suffix(3000))")
        #expect(m.fixture.streamRequests.count == 2)
        #expect(FileManager.default.fileExists(atPath: m.path(LiveForwardTests.copy)))
    }
}

/// The storage budget and the free-space floor on a real small disk: reads evict unpinned
/// copies before they fail, fail with ENOSPC (never a pause) when nothing is left to evict,
/// and pinned fills keep `min_free` without a hidden headroom.
@Suite(.serialized) struct BudgetTests {
    static let alpha = "test/Movies/Alpha (2001)/Alpha (2001).mkv"
    static let pilot = "test/Shows/Show (2020)/Season 01/Show (2020) - S01E01 - Pilot.mkv"
    static let second = "test/Shows/Show (2020)/Season 01/Show (2020) - S01E02 - Second.mp4"
    static let back = "test/Shows/Show (2020)/Season 02/Show (2020) - S02E01 - Return.mkv"
    let disk = FullDiskTests()

    @Test(.enabled(if: geteuid() == 0, "a tmpfs needs root; CI runs as root"))
    func readsEvictOrFailWithENOSPCAndPinsKeepMinFree() throws {
        let scratch = Scratch("budget-disk")
        let small = scratch.sub("small")
        let mount = try runProcess("/bin/mount", ["-t", "tmpfs", "-o", "size=80m", "tmpfs", small])
        try #require(mount.code == 0, "\(mount.stderr)")
        defer { _ = try? runProcess("/bin/umount", ["-l", small]) }
        try FileManager.default.createDirectory(atPath: small + "/data", withIntermediateDirectories: true)
        let m = try MountedLabstream("budget-disk", cacheConfig: "min_free = 2M\nside_assets = off", dataDir: small + "/data")
        try m.mount()
        defer { stopDaemon(at: m.mountpoint, pid: m.daemonPid, env: m.env) }
        let expected = expectedTree(m.mediaDir)
        // Three unpinned copies read on demand (5 MiB).
        for rel in [Self.pilot, Self.second, Self.back] { #expect(try sha256(m.path(rel)) == sha256(expected[rel]!)) }

        // 3 MiB free, 2 MiB kept: reading a 3 MiB film takes room from the unpinned copies.
        let filler = small + "/filler"
        disk.fill(filler, leaving: 3 << 20)
        #expect(try sha256(m.path(FullDiskTests.beta)) == sha256(expected[FullDiskTests.beta]!))
        let left = [Self.pilot, Self.second, Self.back].map { disk.present(m, $0) }
        #expect(left.contains(0), "nothing was evicted: \(left)")
        #expect(m.log.contains("to stay within the cache limits"))
        #expect(disk.state(m, FullDiskTests.beta) != "paused")

        // Nothing left to evict for a 12 MiB film: the read fails with ENOSPC, says so in the
        // log, and leaves the film partial, not paused.
        disk.fill(filler, leaving: 5 << 19)
        let fd = open(m.path(Self.alpha), O_RDONLY)
        try #require(fd >= 0)
        var buffer = [UInt8](repeating: 0, count: 1 << 20)
        var offset = 0
        var failure: Int32 = 0
        while true {
            let n = buffer.withUnsafeMutableBytes { Glibc.pread(fd, $0.baseAddress, $0.count, off_t(offset)) }
            if n < 0 { failure = errno; break }
            if n == 0 { break }
            offset += n
        }
        close(fd)
        #expect(failure == ENOSPC, "read \(offset) bytes, errno \(failure)")
        #expect(offset < 12 << 20)
        #expect(m.log.contains("failed (ENOSPC)"), "\(m.log.suffix(2000))")
        #expect(disk.state(m, Self.alpha) != "paused", "\(disk.state(m, Self.alpha) ?? "nil")")
        #expect(disk.free(small) >= 1 << 20, "the floor was not kept: \(disk.free(small))")

        // A pinned fill keeps min_free and nothing more: 2 MiB fits 5 MiB free beside the 2 MiB
        // floor (the old hidden 64 MiB headroom parked it); the next 2 MiB no longer does.
        for rel in [Self.alpha, FullDiskTests.beta, Self.pilot, Self.second, Self.back] { _ = try m.cli(["cancel", m.path(rel)]) }
        unlink(filler)
        disk.fill(filler, leaving: 5 << 20)
        #expect(try m.cli(["pin", m.path(Self.second)]).code == 0)
        #expect(eventually { ["complete", "unverified"].contains(disk.state(m, Self.second) ?? "") }, "\(disk.state(m, Self.second) ?? "nil")")
        #expect(try m.cli(["pin", m.path(Self.pilot)]).code == 0)
        #expect(eventually { disk.state(m, Self.pilot) == "paused" }, "\(disk.state(m, Self.pilot) ?? "nil")")
        #expect(try disk.status(m, Self.pilot)["reason"] as? String == "storage_full")
        #expect(disk.free(small) >= 2 << 20, "min_free was not kept: \(disk.free(small))")
        unlink(filler)
        #expect(eventually(timeout: 60) { ["complete", "unverified"].contains(disk.state(m, Self.pilot) ?? "") })
        try m.unmount()
    }

    /// A pin over `max_size` parks with its own cause and what it needs, and goes on by itself
    /// once another file is unpinned (whose copy is then evicted for it).
    @Test func aPinOverTheBudgetWaitsAndResumesWhenRoomReturns() throws {
        let m = try MountedLabstream("budget-cap", cacheConfig: "max_size = 4M\nside_assets = off")
        try m.mount()
        defer { stopDaemon(at: m.mountpoint, pid: m.daemonPid, env: m.env) }
        let beta = FullDiskTests.beta
        #expect(try m.cli(["pin", m.path(beta)]).code == 0)
        #expect(eventually { ["complete", "unverified"].contains(disk.state(m, beta) ?? "") }, "\(disk.state(m, beta) ?? "nil")")
        #expect(try m.cli(["pin", m.path(Self.pilot)]).code == 0)
        #expect(eventually { disk.state(m, Self.pilot) == "paused" }, "\(disk.state(m, Self.pilot) ?? "nil")")
        let parked = try disk.status(m, Self.pilot)
        #expect(parked["reason"] as? String == "over_budget", "\(parked)")
        #expect((parked["message"] as? String ?? "").contains("needs 1.0 MiB more room"), "\(parked)")
        #expect(disk.present(m, Self.pilot) == 0)
        // A person's resume is checked against the budget, and says why it parked again.
        let resume = try m.cli(["resume", m.path(Self.pilot)])
        #expect(resume.code == 75 && resume.stderr.contains("over the storage budget"), "\(resume.code) \(resume.stderr)")
        let text = try m.cli(["status", m.path(Self.pilot)]).stdout
        #expect(text.contains("over the storage budget (max_size)"), "\(text)")

        #expect(try m.cli(["unpin", m.path(beta)]).code == 0)
        let resumed = eventually(timeout: 60) { ["complete", "unverified"].contains(disk.state(m, Self.pilot) ?? "") }
        #expect(resumed, "\(disk.state(m, Self.pilot) ?? "nil") \(m.log.suffix(2000))")
        #expect(try sha256(m.path(Self.pilot)) == sha256(expectedTree(m.mediaDir)[Self.pilot]!))
        #expect(disk.present(m, beta) == 0, "the unpinned copy was not evicted for the budget")
        try m.unmount()
    }

    /// A raised `max_size` reaches the running daemon at SIGHUP: a pin parked over the budget
    /// goes on and completes without a remount.
    @Test func aSIGHUPWithARaisedBudgetResumesAParkedPin() throws {
        let m = try MountedLabstream("budget-hup", cacheConfig: "max_size = 4M\nside_assets = off")
        try m.mount()
        defer { stopDaemon(at: m.mountpoint, pid: m.daemonPid, env: m.env) }
        let beta = FullDiskTests.beta
        #expect(try m.cli(["pin", m.path(beta)]).code == 0)
        #expect(eventually { ["complete", "unverified"].contains(disk.state(m, beta) ?? "") }, "\(disk.state(m, beta) ?? "nil")")
        #expect(try m.cli(["pin", m.path(Self.pilot)]).code == 0)
        #expect(eventually { disk.state(m, Self.pilot) == "paused" }, "\(disk.state(m, Self.pilot) ?? "nil")")
        #expect(try disk.status(m, Self.pilot)["reason"] as? String == "over_budget")
        // A read the budget refuses (the disk has room) fails with ENOSPC in the budget's words.
        let fd = open(m.path(Self.alpha), O_RDONLY)
        try #require(fd >= 0)
        var buffer = [UInt8](repeating: 0, count: 1 << 20)
        var offset = 0
        var failure: Int32 = 0
        while true {
            let n = buffer.withUnsafeMutableBytes { Glibc.pread(fd, $0.baseAddress, $0.count, off_t(offset)) }
            if n < 0 { failure = errno; break }
            if n == 0 { break }
            offset += n
        }
        close(fd)
        #expect(failure == ENOSPC, "read \(offset) bytes, errno \(failure)")
        let refusal = m.log.components(separatedBy: "\n").last { $0.contains("failed (ENOSPC)") } ?? ""
        #expect(refusal.contains("the storage budget is full, not the disk") && refusal.contains("over max_size (4.0 MiB)"), "\(refusal)")
        #expect(refusal.contains("Raise that max_size in labstream.conf") && !refusal.contains("the disk is full"), "\(refusal)")

        let conf = m.configDir + "/labstream.conf"
        let text = try String(contentsOfFile: conf, encoding: .utf8)
        try #require(text.contains("max_size = 4M"))
        try text.replacingOccurrences(of: "max_size = 4M", with: "max_size = 64M").write(toFile: conf, atomically: true, encoding: .utf8)
        #expect(kill(m.daemonPid, SIGHUP) == 0)
        let resumed = eventually(timeout: 60) { ["complete", "unverified"].contains(disk.state(m, Self.pilot) ?? "") }
        #expect(resumed, "\(disk.state(m, Self.pilot) ?? "nil") \(m.log.suffix(2000))")
        #expect(try sha256(m.path(Self.pilot)) == sha256(expectedTree(m.mediaDir)[Self.pilot]!))
        // Nothing was evicted to make the room: the budget itself grew.
        #expect(["complete", "unverified"].contains(disk.state(m, beta) ?? ""), "\(disk.state(m, beta) ?? "nil")")
        #expect(m.log.contains("storage budget: max_size \(64 << 20)"), "\(m.log.suffix(2000))")
        try m.unmount()
    }

    /// A server's own `max_size`, under a global one with room to spare, is what parks its pin
    /// (naming the server) on a real mount while another server's pins fill; raising it at
    /// SIGHUP lets the pin go on.
    @Test func aServersOwnBudgetParksItsPinUnderARoomierGlobalOne() throws {
        let m = try MountedLabstream("budget-server", cacheConfig: "max_size = 64M\nside_assets = off")
        let other = try ServerFixture(kind: .jellyfin, catalog: testCatalog(in: m.scratch.sub("other-media")), userName: "demo", password: "secret-pass")
        try other.start()
        defer { other.stop() }
        try m.addServer("other", other, plexTV: nil)
        let conf = m.configDir + "/labstream.conf"
        let header = "[server \"test\"]"
        let text = try String(contentsOfFile: conf, encoding: .utf8)
        try #require(text.contains(header))
        try text.replacingOccurrences(of: header, with: header + "\nmax_size = 4M").write(toFile: conf, atomically: true, encoding: .utf8)
        try m.mount()
        defer { stopDaemon(at: m.mountpoint, pid: m.daemonPid, env: m.env) }
        let beta = FullDiskTests.beta
        #expect(try m.cli(["pin", m.path(beta)]).code == 0)
        #expect(eventually { ["complete", "unverified"].contains(disk.state(m, beta) ?? "") }, "\(disk.state(m, beta) ?? "nil")")
        #expect(try m.cli(["pin", m.path(Self.pilot)]).code == 0)
        #expect(eventually { disk.state(m, Self.pilot) == "paused" }, "\(disk.state(m, Self.pilot) ?? "nil")")
        let parked = try disk.status(m, Self.pilot)
        #expect(parked["reason"] as? String == "over_budget", "\(parked)")
        #expect((parked["message"] as? String ?? "").contains("over server test's storage budget"), "\(parked)")
        #expect((parked["message"] as? String ?? "").contains("raise max_size in labstream.conf and send the daemon SIGHUP"), "\(parked)")
        #expect(disk.present(m, Self.pilot) == 0)
        // The pinned copy of the same server is kept: the cap parks, it does not evict pins.
        #expect(["complete", "unverified"].contains(disk.state(m, beta) ?? ""))
        // The other server's pins, 5 MiB together, are not held by test's cap.
        let theirs = [beta, Self.pilot].map { "other/" + $0.dropFirst("test/".count) }
        for rel in theirs {
            #expect(try m.cli(["pin", m.path(rel)]).code == 0)
            #expect(eventually { ["complete", "unverified"].contains(disk.state(m, rel) ?? "") }, "\(rel): \(disk.state(m, rel) ?? "nil")")
        }
        #expect(disk.state(m, Self.pilot) == "paused")

        let now = try String(contentsOfFile: conf, encoding: .utf8)
        try now.replacingOccurrences(of: header + "\nmax_size = 4M", with: header + "\nmax_size = 32M").write(toFile: conf, atomically: true, encoding: .utf8)
        #expect(kill(m.daemonPid, SIGHUP) == 0)
        let resumed = eventually(timeout: 60) { ["complete", "unverified"].contains(disk.state(m, Self.pilot) ?? "") }
        #expect(resumed, "\(disk.state(m, Self.pilot) ?? "nil") \(m.log.suffix(2000))")
        #expect(m.log.contains("test max_size \(32 << 20)"), "\(m.log.suffix(2000))")
        try m.unmount()
    }
}
