import Foundation
import LabstreamCore
import LabstreamDaemon
import LabstreamStore

/// One daemon per data dir: an flock'd file naming the holder's pid and mountpoint.
final class DaemonLock {
    let fd: Int32

    struct Holder {
        var pid: Int32
        var mountpoint: String
    }

    private init(fd: Int32) { self.fd = fd }

    static func acquire(_ layout: DataLayout, mountpoint: String) throws(CLIError) -> DaemonLock {
        do { try makeDirectories(layout.root) } catch { throw CLIError(error) }
        let fd = open(layout.lockPath, O_RDWR | O_CREAT | O_CLOEXEC, 0o600)
        guard fd >= 0 else { throw CLIError(ExitCode.cantCreate, "cannot create the lock file \(layout.lockPath): \(String(cString: strerror(errno)))") }
        if flock(fd, LOCK_EX | LOCK_NB) != 0 {
            close(fd)
            let holder = read(layout)
            throw CLIError(
                ExitCode.tempFail,
                "the data dir \(layout.root) is in use by the Labstream daemon (pid \(holder?.pid ?? 0)) mounted at \(holder?.mountpoint ?? "an unknown mountpoint"); unmount it first or use another --data-dir"
            )
        }
        let text = "\(getpid())\n\(mountpoint)\n"
        ftruncate(fd, 0)
        _ = Array(text.utf8).withUnsafeBytes { pwrite(fd, $0.baseAddress, $0.count, 0) }
        return DaemonLock(fd: fd)
    }

    /// The live holder of the lock, or nil when no daemon holds it.
    static func holder(_ layout: DataLayout) -> Holder? {
        let fd = open(layout.lockPath, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        if flock(fd, LOCK_SH | LOCK_NB) == 0 {
            flock(fd, LOCK_UN)
            return nil
        }
        return read(layout)
    }

    static func read(_ layout: DataLayout) -> Holder? {
        guard let data = FileManager.default.contents(atPath: layout.lockPath) else { return nil }
        let lines = String(decoding: data, as: UTF8.self).split(separator: "\n").map(String.init)
        guard lines.count >= 2, let pid = Int32(lines[0]) else { return nil }
        return Holder(pid: pid, mountpoint: lines[1])
    }

    func release() {
        ftruncate(fd, 0)
        flock(fd, LOCK_UN)
        close(fd)
    }
}
