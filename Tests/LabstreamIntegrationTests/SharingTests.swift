import CLinux
import Foundation
import LabstreamCore
import Testing

/// The mount shared with the house: the kernel NFS server names files by handle
/// (`name_to_handle_at`) and opens them by handle after its client comes back, across a daemon
/// restart; Samba reads the mount as another user through `allow_other`.
@Suite(.serialized) struct SharingTests {
    let alpha = "test/Movies/Alpha (2001)/Alpha (2001).mkv"
    let movies = "test/Movies"

    /// A file handle as the kernel hands it out: `struct file_handle` with room for 128 bytes.
    struct Handle {
        var bytes = [UInt8](repeating: 0, count: 8 + 128)
        init(_ path: String) throws {
            bytes.withUnsafeMutableBytes { $0.storeBytes(of: UInt32(128), as: UInt32.self) }
            var mountId: Int32 = 0
            let rc = bytes.withUnsafeMutableBytes { CLinux_name_to_handle(path, $0.baseAddress, &mountId) }
            guard rc == 0 else { throw SyscallError(function: "name_to_handle_at", context: path, code: errno) }
        }
        /// Opens what the handle names below the mount `mountFd` belongs to.
        func open(_ mountFd: Int32, flags: Int32) -> (fd: Int32, errno: Int32) {
            var copy = bytes
            let fd = copy.withUnsafeMutableBytes { CLinux_open_by_handle(mountFd, $0.baseAddress, flags) }
            return (fd, fd < 0 ? errno : 0)
        }
    }

    func readAll(_ fd: Int32) -> [UInt8] {
        var out: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 1 << 20)
        while true {
            let n = buffer.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress, $0.count) }
            if n <= 0 { return out }
            out += buffer[0..<n]
        }
    }

    /// What nfsd does with a client's handle once the daemon restarted (a reboot of the home
    /// server, an upgrade): the kernel no longer knows the node, asks the new daemon for it by
    /// number, and the file opens with the same bytes. Opening by handle needs root, as nfsd has.
    @Test(.enabled(if: geteuid() == 0, "open_by_handle_at needs CAP_DAC_READ_SEARCH; CI runs as root"))
    func fileHandlesStayValidAcrossADaemonRestart() throws {
        let m = try MountedLabstream("nfs-handles")
        let expected = expectedTree(m.mediaDir)
        let want = try [UInt8](Data(contentsOf: URL(fileURLWithPath: expected[alpha]!)))
        try m.mount()
        let file = try Handle(m.path(alpha))
        let folder = try Handle(m.path(movies))
        try m.unmount()
        try m.mount()
        let root = Glibc.open(m.mountpoint, O_RDONLY | O_DIRECTORY)
        #expect(root >= 0)
        let opened = file.open(root, flags: O_RDONLY)
        #expect(opened.fd >= 0, "open_by_handle_at of the film after a restart: \(String(cString: strerror(opened.errno)))")
        if opened.fd >= 0 {
            #expect(readAll(opened.fd) == want)
            close(opened.fd)
        }
        let dir = folder.open(root, flags: O_RDONLY | O_DIRECTORY)
        #expect(dir.fd >= 0, "open_by_handle_at of the folder after a restart: \(String(cString: strerror(dir.errno)))")
        if dir.fd >= 0 { close(dir.fd) }
        close(root)   // an open descriptor keeps the mount busy: the unmount would wait for it
        try m.unmount()
    }
}
