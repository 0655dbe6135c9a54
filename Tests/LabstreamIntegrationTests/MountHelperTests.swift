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
                if FileManager.default.fileExists(atPath: link) { continue }  // an installed copy: use it
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

    @Test(.enabled(if: geteuid() == 0, "mount(8) and /sbin need root; CI runs as root"))
    func mountThroughAnFstabLineAndThroughMountFuse3() throws {
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

    /// Issue 5's whole story: install into a DESTDIR, mount from an fstab line through the
    /// helper, read the attributes, pin a season with setfattr, follow it in --json, stop through
    /// the unit's ExecStop, and find no secret anywhere.
    @Test(.enabled(if: geteuid() == 0, "installing the mount helper needs root; CI runs as root"))
    func aHomeServerFromInstallToStop() throws {
        let installed = try Installed()
        defer { _ = installed }
        let m = try MountedLabstream("story")
        let dest = m.scratch.path + "/root"
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent().path
        let install = try runProcess("/usr/bin/make", ["-C", root, "install", "DESTDIR=\(dest)", "PREFIX=/usr/local", "INSTALL_BIN=\(labstreamBinary)"])
        try #require(install.code == 0, "\(install.stderr)")
        let binary = dest + "/usr/local/bin/labstream"
        // The playback probe runs in its helper, which must sit beside labstream.
        #expect(FileManager.default.isExecutableFile(atPath: dest + "/usr/local/bin/labstream-probe"))

        let fstab = m.scratch.path + "/fstab"
        try "labstream \(m.mountpoint) labstream config=\(m.configDir),data=\(m.dataDir),_netdev,nofail 0 0\n".write(
            toFile: fstab, atomically: true, encoding: .utf8)
        let mounted = try runProcess("/bin/mount", ["-T", fstab, m.mountpoint])
        try #require(mounted.code == 0, "\(mounted.stderr)")
        let pid = try mountedPid(m)

        let season = m.path("test/Shows/Show (2020)/Season 01")
        let dump = try runProcess("/usr/bin/getfattr", ["-d", season + "/Show (2020) - S01E01 - Pilot.mkv"])
        #expect(dump.stdout.contains("user.labstream.state=\"not-local\"") && dump.stdout.contains("user.labstream.server=\"test\""), "\(dump.stdout)")
        #expect(try runProcess("/usr/bin/setfattr", ["-n", "user.labstream.pin", "-v", "1", season]).code == 0)
        let wait = try runProcess(binary, ["pin", "--wait", "--json", season], environment: m.env)
        #expect(wait.code == 0, "\(wait.stderr)")
        let last = try #require(wait.stdout.split(separator: "\n").last)
        let progress = try #require(try JSONSerialization.jsonObject(with: Data(last.utf8)) as? [String: Any])
        #expect(progress["files"] as? Int == 2 && progress["done"] as? Int == 2 && progress["failed"] as? Int == 0, "\(last)")

        // The unit template's ExecStop, with its binary as installed and %f the mountpoint.
        let unit = try String(contentsOfFile: dest + "/usr/local/lib/systemd/system/labstream@.service", encoding: .utf8)
        let stop = try #require(unit.split(separator: "\n").first { $0.hasPrefix("ExecStop=") }).dropFirst("ExecStop=".count)
        let words = stop.split(separator: " ").map { String($0).replacingOccurrences(of: "%f", with: m.mountpoint) }
        let stopped = try runProcess(words[0] == "/usr/local/bin/labstream" ? binary : words[0], Array(words.dropFirst()), environment: m.env)
        #expect(stopped.code == 0, "\(stopped.stderr)")
        #expect(waitForExit(pid: pid))
        #expect(!UnmountCheck.isMounted(m.mountpoint))

        for file in [m.dataDir, m.configDir].flatMap({ dir in
            (FileManager.default.enumerator(atPath: dir)?.allObjects as? [String] ?? []).map { dir + "/" + $0 }
        }) where !file.hasSuffix("/credentials") {
            var isDir: ObjCBool = false
            guard FileManager.default.fileExists(atPath: file, isDirectory: &isDir), !isDir.boolValue,
                let data = FileManager.default.contents(atPath: file)
            else { continue }
            #expect(data.range(of: Data(m.fixture.accessToken.utf8)) == nil && data.range(of: Data("secret-pass".utf8)) == nil, "\(file)")
        }
    }
}

enum UnmountCheck {
    /// util-linux's mountpoint(1) (Foundation reads /proc files only partly).
    static func isMounted(_ path: String) -> Bool { ((try? runProcess("/bin/mountpoint", ["-q", path]))?.code ?? 1) == 0 }
}
