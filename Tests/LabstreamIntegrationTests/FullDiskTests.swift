import Foundation
import LabstreamCore
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
