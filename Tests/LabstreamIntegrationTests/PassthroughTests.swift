import Foundation
import LabstreamCore
import LabstreamStore
import Testing

/// FUSE passthrough of complete files (Linux 6.9+): the kernel reads the local copy itself.
@Suite(.serialized) struct PassthroughTests {
    static let alpha = "test/Movies/Alpha (2001)/Alpha (2001).mkv"
    static let beta = "test/Movies/Beta (2002)/Beta (2002).mp4"

    /// What this machine's kernel and privileges allow, found independently of the daemon.
    static var kernelPassesThrough: Bool {
        var name = utsname()
        uname(&name)
        let release = withUnsafeBytes(of: &name.release) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
        let parts = release.split(whereSeparator: { !$0.isNumber }).prefix(2).compactMap { Int($0) }
        guard parts.count == 2, (parts[0], parts[1]) >= (6, 9), geteuid() == 0 else { return false }
        let config = (try? runProcess("/bin/zcat", ["/proc/config.gz"]))?.stdout ?? ""
        return config.contains("CONFIG_FUSE_PASSTHROUGH=y")
    }

    /// Reads all of `fd` while the daemon is stopped; nil if the read needed the daemon.
    static func readWithDaemonStopped(_ fd: Int32, size: Int, daemon: Int32) -> [UInt8]? {
        let done = DispatchSemaphore(value: 0)
        let result = LockedBox<[UInt8]>([])
        kill(daemon, SIGSTOP)
        Thread {
            var buffer = [UInt8](repeating: 0, count: size)
            let n = buffer.withUnsafeMutableBytes { b in (try? preadFully(fd, into: b, at: 0, context: "passthrough")) ?? 0 }
            result.set(Array(buffer[0..<n]))
            done.signal()
        }.start()
        let inTime = done.wait(timeout: .now() + 30) == .success
        kill(daemon, SIGCONT)
        if !inTime { done.wait() }
        return inTime ? result.get() : nil
    }

    @Test func aCompleteFileIsReadByTheKernelAloneAndKeepsItsVersionWhenTheCopyGoes() throws {
        let m = try MountedLabstream("passthrough")
        try m.mount()
        let source = try pread(path: m.mediaDir + "/alpha.mkv", offset: 0, length: 13 * MiB)
        let pin = try m.cli(["pin", "--wait", m.path(Self.alpha)])
        try #require(pin.code == 0, "\(pin.stderr)")
        guard Self.kernelPassesThrough else {
            // The kernel does not offer it, or registering is refused (logged at the first open).
            #expect(try pread(path: m.path(Self.alpha), offset: 0, length: 13 * MiB) == source)
            #expect(m.log.contains("complete files are read through the daemon"), "\(m.log)")
            return
        }
        #expect(m.log.contains("read by the kernel directly"), "\(m.log)")

        let fd = open(m.path(Self.alpha), O_RDONLY)
        try #require(fd >= 0)
        let requests = m.fixture.downloadRequests.count
        let direct = Self.readWithDaemonStopped(fd, size: source.count, daemon: m.daemonPid)
        #expect(direct.map { $0 == source } == true, "a complete, checked file was not read by the kernel alone")
        #expect(m.fixture.downloadRequests.count == requests)

        // Cancelling frees the local copy, but an open passthrough handle still reads its version
        // whole, never a file emptied under it.
        let cancel = try m.cli(["cancel", m.path(Self.alpha)])
        #expect(cancel.code == 0, "\(cancel.stderr)")
        let bytes = try m.cli(["status", "--json", m.path(Self.alpha)])
        #expect(bytes.stdout.contains("\"bytes_present\" : 0") || bytes.stdout.contains("\"bytes_present\":0"), "\(bytes.stdout)")
        var again = [UInt8](repeating: 0, count: source.count)
        let n = try again.withUnsafeMutableBytes { b in try preadFully(fd, into: b, at: 0, context: "after cancel") }
        #expect(n == source.count && again == source)
        close(fd)  // an open file keeps the mount, and so the daemon, alive

        // Opened afresh, the file reads correctly again (fetched anew, or from the same copy while
        // the kernel still holds it).
        #expect(try sha256(m.path(Self.alpha)) == sha256(m.mediaDir + "/alpha.mkv"))
        try m.unmount()
    }

    @Test func aCheckedCopyPassesThroughAtOnceAfterARestartUnlessItWasWrittenSince() throws {
        let m = try MountedLabstream("passthrough-restart")
        try m.mount()
        let alpha = try pread(path: m.mediaDir + "/alpha.mkv", offset: 0, length: 13 * MiB)
        let beta = try pread(path: m.mediaDir + "/beta.mp4", offset: 0, length: 4 * MiB)
        for rel in [Self.alpha, Self.beta] { try #require(try m.cli(["pin", "--wait", m.path(rel)]).code == 0) }
        try m.unmount()
        // While no daemon runs, one byte of Beta's local copy changes (same size).
        let index = try OfflineIndex(path: m.dataDir + "/index.sqlite")
        let betaKey = try #require(try index.treeFiles().first { $0.path.last == "Beta (2002).mp4" }?.key)
        let betaCopy = m.dataDir + "/" + (try #require(try index.download(betaKey)).partialPath)
        let fd = open(betaCopy, O_WRONLY)
        try #require(fd >= 0)
        var flipped = beta[MiB] ^ 0xFF
        #expect(pwrite(fd, &flipped, 1, off_t(MiB)) == 1)
        close(fd)

        try m.mount()
        m.fixture.clearLog()
        if Self.kernelPassesThrough {
            // Alpha is trusted without being read first: the kernel reads it with the daemon stopped.
            let alphaFd = open(m.path(Self.alpha), O_RDONLY)
            try #require(alphaFd >= 0)
            let direct = Self.readWithDaemonStopped(alphaFd, size: alpha.count, daemon: m.daemonPid)
            #expect(direct.map { $0 == alpha } == true, "the checked copy was not read by the kernel alone after the restart")
            close(alphaFd)
            #expect(m.fixture.downloadRequests.isEmpty)
        } else {
            #expect(try pread(path: m.path(Self.alpha), offset: 0, length: 13 * MiB) == alpha)
        }
        // Beta's copy changed since it was checked: it is read through the daemon, checked, and
        // the damaged segment fetched again; the reader never sees the changed byte.
        let betaRead = try pread(path: m.path(Self.beta), offset: 0, length: 4 * MiB)
        #expect(betaRead == beta ? true : false, "the reader got Beta's changed copy")
        #expect(m.fixture.downloadRequests.contains { $0.path.contains(betaKey.itemId) })
        try m.unmount()
    }

    @Test func aNewVersionOpensOnceTheOldVersionsDirectReaderHasClosed() throws {
        // The kernel gives an inode one backing file: while a handle reads the old version
        // directly, an open of the new version that swapped in must wait (EBUSY), and the old
        // handle goes on reading its version whole.
        let m = try MountedLabstream("passthrough-busy")
        try m.mount()
        let source = m.mediaDir + "/beta.mp4"
        let old = try pread(path: source, offset: 0, length: 4 * MiB)
        #expect(try m.cli(["pin", "--wait", m.path(Self.beta)]).code == 0)
        let first = open(m.path(Self.beta), O_RDONLY)
        try #require(first >= 0)

        writeRandomFile(source, size: old.count + 5000, seed: 77)
        let newHash = try sha256(source)
        m.fixture.touch(itemId: try #require(m.fixture.itemId(forFile: source)))
        #expect(try m.cli(["sync"]).code == 0)
        #expect(eventually { m.log.contains("the new version replaced the old copy") }, "\(m.log)")
        // The tree shows the new version once the daemon reloaded it after the sync; an open
        // before that is of the old version and shares the old backing file.
        #expect(eventually { (try? FileManager.default.attributesOfItem(atPath: m.path(Self.beta))[.size] as? Int) == old.count + 5000 })
        let second = open(m.path(Self.beta), O_RDONLY)
        let openError = errno
        if Self.kernelPassesThrough {
            #expect(second < 0 && openError == EBUSY, "\(second) \(String(cString: strerror(openError)))")
            var bytes = [UInt8](repeating: 0, count: old.count)
            let n = try bytes.withUnsafeMutableBytes { b in try preadFully(first, into: b, at: 0, context: "old version") }
            #expect(n == old.count && bytes == old)
        } else {
            #expect(second >= 0, "\(String(cString: strerror(openError)))")  // read through the daemon, nothing to wait for
        }
        if second >= 0 { close(second) }
        close(first)  // an open file keeps the mount, and so the daemon, alive

        // The close reaches the daemon after the kernel let go: the next opens succeed.
        #expect(
            eventually {
                let fd = open(m.path(Self.beta), O_RDONLY)
                if fd >= 0 { close(fd) }
                return fd >= 0
            })
        #expect(try sha256(m.path(Self.beta)) == newHash)
        try m.unmount()
    }

    @Test func aFileOpenWhileItCompletesCanStillBeOpenedAgain() throws {
        // The kernel refuses a passthrough open of an inode that another handle reads through the
        // daemon (EIO): while the first handle lasts, new opens go through the daemon too.
        let m = try MountedLabstream("passthrough-mixed")
        try m.mount()
        let source = try pread(path: m.mediaDir + "/beta.mp4", offset: 0, length: 4 * MiB)
        let first = open(m.path(Self.beta), O_RDONLY)
        try #require(first >= 0)
        let pinned = try m.cli(["pin", "--wait", m.path(Self.beta)])
        let second = open(m.path(Self.beta), O_RDONLY)
        let openError = errno
        for fd in [first, second] where fd >= 0 {
            var bytes = [UInt8](repeating: 0, count: source.count)
            let n = (try? bytes.withUnsafeMutableBytes { b in try preadFully(fd, into: b, at: 0, context: "beta") }) ?? -1
            #expect(n == source.count && bytes == source)
            close(fd)  // an open file keeps the mount, and so the daemon, alive
        }
        #expect(pinned.code == 0, "\(pinned.stderr)")
        #expect(second >= 0, "open of a file completed under an open handle failed: \(String(cString: strerror(openError)))")
        try m.unmount()
    }
}
