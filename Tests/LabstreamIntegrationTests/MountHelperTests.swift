import Foundation
import LabstreamCore
import Testing

/// mount(8) and mount.fuse3 through the real helpers, with fstab-style options.
@Suite(.serialized) struct MountHelperTests {
    /// Links the built binary where mount(8) looks (it resets PATH), for the test's duration.
    final class Installed {
        var made: [String] = []
        init() throws {
            for (link, name) in [("/sbin/mount.labstream", "mount.labstream"), ("/usr/local/bin/labstream", "labstream")] {
                if FileManager.default.fileExists(atPath: link) { continue }   // an installed copy: use it
                try FileManager.default.createSymbolicLink(atPath: link, withDestinationPath: labstreamBinary)
                made.append(link)
                _ = name
            }
        }
        deinit { for link in made { try? FileManager.default.removeItem(atPath: link) } }
    }

    func mountedPid(_ m: MountedLabstream) throws -> Int32 {
        let lock = try String(contentsOfFile: m.dataDir + "/labstream.lock", encoding: .utf8)
        return Int32(lock.split(separator: "\n").first ?? "") ?? 0
    }

    @Test func mountThroughAnFstabLineAndThroughMountFuse3() throws {
        guard geteuid() == 0 else { return }   // mount(8) and /sbin need root; CI runs as root
        let installed = try Installed()
        defer { _ = installed }
        let m = try MountedLabstream("helper")
        let fstab = m.scratch.path + "/fstab"
        try "labstream \(m.mountpoint) labstream config=\(m.configDir),data=\(m.dataDir),_netdev,nofail,x-systemd.automount,umask=027 0 0\n"
            .write(toFile: fstab, atomically: true, encoding: .utf8)
        let mounted = try runProcess("/bin/mount", ["-T", fstab, m.mountpoint])
        #expect(mounted.code == 0, "\(mounted.stderr)")
        // It returned only once the mount answers.
        #expect(FileManager.default.fileExists(atPath: m.path("test/Movies/Beta (2002)/Beta (2002).mp4")))
        let attrs = try FileManager.default.attributesOfItem(atPath: m.path("test/Movies"))
        #expect((attrs[.posixPermissions] as? Int) == 0o550)
        let pid = try mountedPid(m)
        #expect(try runProcess("/bin/umount", [m.mountpoint]).code == 0)
        #expect(waitForExit(pid: pid))

        let viaFuse = try runProcess("/bin/mount", ["-t", "fuse.labstream", "labstream", m.mountpoint, "-o", "config=\(m.configDir),data=\(m.dataDir)"])
        #expect(viaFuse.code == 0, "\(viaFuse.stderr)")
        #expect(FileManager.default.fileExists(atPath: m.path("test/Shows")))
        let pid2 = try mountedPid(m)
        #expect(try m.cli(["unmount", m.mountpoint]).code == 0)
        #expect(waitForExit(pid: pid2))

        let bad = try runProcess("/bin/mount", ["-t", "labstream", "labstream", m.mountpoint, "-o", "config=\(m.configDir),frobnicate"])
        #expect(bad.code != 0 && bad.stderr.contains("unknown mount option 'frobnicate'"), "\(bad.stderr)")
    }
}
