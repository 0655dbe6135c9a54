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
        close(root)  // an open descriptor keeps the mount busy: the unmount would wait for it
        try m.unmount()
    }

    /// A Samba share of the mount, read as the house reads it: a guest (smbd serves it as
    /// `nobody`) gets the film's bytes only when the mount was made with `allow_other`.
    @Test(.enabled(if: geteuid() == 0, "smbd switches to the guest account only as root; CI runs as root"))
    func aSambaShareOfTheMountServesTheBytesWithAllowOther() throws {
        let smbd = "/usr/sbin/smbd", smbclient = "/usr/bin/smbclient"
        try #require(
            FileManager.default.isExecutableFile(atPath: smbd) && FileManager.default.isExecutableFile(atPath: smbclient),
            "Samba is missing: scripts/deps.sh installs samba and smbclient")
        let m = try MountedLabstream("samba")
        let expected = expectedTree(m.mediaDir)
        // The guest walks down to the share through the scratch folder (mkdtemp makes it 0700).
        #expect(chmod(m.scratch.path, 0o711) == 0)
        let samba = m.scratch.sub("samba")
        let port = try freeLoopbackPort()
        let config = Self.sambaConfig(share: m.mountpoint, state: samba, port: port)
        try config.write(toFile: samba + "/smb.conf", atomically: true, encoding: .utf8)
        let server = Process()
        server.executableURL = URL(fileURLWithPath: smbd)
        server.arguments = ["--foreground", "--no-process-group", "--debug-stdout", "-s", samba + "/smb.conf"]
        FileManager.default.createFile(atPath: samba + "/smbd.out", contents: nil)
        server.standardOutput = FileHandle(forWritingAtPath: samba + "/smbd.out")
        server.standardError = server.standardOutput
        // smbd takes a socket on its standard input for an inetd connection and serves only that.
        server.standardInput = FileHandle(forReadingAtPath: "/dev/null")
        try server.run()
        defer { if server.isRunning { server.terminate(); server.waitUntilExit() } }
        #expect(
            eventually { canConnect(port: port) },
            "smbd did not listen on \(port): \((try? String(contentsOfFile: samba + "/smbd.out", encoding: .utf8)) ?? "")")

        func get(_ rel: String) throws -> (ProcessResult, [UInt8]?) {
            let out = samba + "/got-" + UUID().uuidString
            let r = try runProcess(smbclient, ["//127.0.0.1/media", "-p", "\(port)", "-N", "-c", "get \"\(rel)\" \"\(out)\""])
            return (r, (try? Data(contentsOf: URL(fileURLWithPath: out))).map { [UInt8]($0) })
        }
        let want = try [UInt8](Data(contentsOf: URL(fileURLWithPath: expected[alpha]!)))

        // Without allow_other the kernel lets only the mount's owner in: the guest gets nothing.
        try m.mount()
        let refused = try get(alpha)
        let said = refused.0.stdout + refused.0.stderr
        #expect(refused.1 == nil && said.contains("NT_STATUS_ACCESS_DENIED"), "\(said)")
        try m.unmount()

        try m.mount(options: "allow_other")
        let listing = try runProcess(smbclient, ["//127.0.0.1/media", "-p", "\(port)", "-N", "-c", "cd \"\(movies)\"; ls"])
        #expect(listing.code == 0 && listing.stdout.contains("Alpha (2001)"), "\(listing.stdout) \(listing.stderr)")
        let read = try get(alpha)
        #expect(read.0.code == 0 && read.1 == want, "\(read.0.stdout) \(read.0.stderr)")
        server.terminate()
        server.waitUntilExit()
        try m.unmount()
    }

    /// A private smbd: its own state folders and port on loopback, one read-only guest share
    /// (the example in mountpoints/smb.conf.example, made runnable without root's /var).
    static func sambaConfig(share: String, state: String, port: Int) -> String {
        let example = (try? String(contentsOfFile: DocsTests.root + "/mountpoints/smb.conf.example", encoding: .utf8)) ?? ""
        let shareSection = example.components(separatedBy: "\n[media]\n").last.map { "[media]\n" + $0 } ?? ""
        return """
            [global]
              server role = standalone server
              map to guest = Bad User
              guest account = nobody
              smb ports = \(port)
              interfaces = lo
              bind interfaces only = yes
              private dir = \(state)
              lock directory = \(state)
              state directory = \(state)
              cache directory = \(state)
              pid directory = \(state)
              ncalrpc dir = \(state)/ncalrpc
              log file = \(state)/log.%m
              load printers = no
              printing = bsd
              printcap name = /dev/null
              disable spoolss = yes

            """ + shareSection.replacingOccurrences(of: "/srv/media", with: share)
    }
}

/// A loopback TCP port nothing listens on now (the kernel's pick for port 0).
func freeLoopbackPort() throws -> Int {
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    defer { close(fd) }
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_addr.s_addr = inet_addr("127.0.0.1")
    var length = socklen_t(MemoryLayout<sockaddr_in>.size)
    let rc = withUnsafeMutablePointer(to: &address) { p in
        p.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, length) == 0 && getsockname(fd, $0, &length) == 0 }
    }
    guard rc else { throw SyscallError(function: "bind", context: "127.0.0.1:0", code: errno) }
    return Int(UInt16(bigEndian: address.sin_port))
}

/// Whether something accepts connections on loopback `port`.
func canConnect(port: Int) -> Bool {
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    defer { close(fd) }
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_port = UInt16(port).bigEndian
    address.sin_addr.s_addr = inet_addr("127.0.0.1")
    return withUnsafePointer(to: &address) { p in
        p.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0 }
    }
}
