import CLinux
import Foundation
import LabstreamBackends
import LabstreamCore
import LabstreamDaemon
import LabstreamFS
import LabstreamFixture
import LabstreamStore
import LabstreamTestSupport
import Testing

/// Who may change what a mount holds (issue 43 item 1): the daemon's user, root and the members
/// of `[access] control_group`, the same on every way in — the daemon's typed API, an attribute
/// write, the control socket.
@Suite(.serialized) struct AccessTests {
    let beta = "test/Movies/Beta (2002)/Beta (2002).mp4"

    /// A whole daemon in-process against an emulated Jellyfin, with `control_group` set.
    /// Its log goes to `logFD`, which the caller closes after stopping it.
    func daemon(_ scratch: Scratch, controlGroup: String?, logFD: Int32) throws -> Daemon {
        let media = scratch.sub("media")
        let fixture = try ServerFixture(catalog: testCatalog(in: media), userName: "demo", password: "pw")
        let transport = InMemoryTransport(serving: fixture)
        let identity = ClientIdentity(device: "t", deviceId: "t")
        let url = "http://jellyfin.test:8096"
        let (_, _, login) = try MediaBrowserClient.login(url: url, user: "demo", password: "pw", identity: identity, transport: transport)
        let client = MediaBrowserClient(
            session: ServerSession(name: "test", url: url, userId: login.userId, token: login.token), identity: identity, transport: transport)
        let context = Context(configDir: scratch.sub("config"), dataDir: scratch.sub("data"))
        var config = LabstreamConfig()
        config.servers = [.init(name: "test", kind: .jellyfin, url: url, user: "demo")]
        config.playbackProbe = false
        config.controlGroup = controlGroup
        try context.saveConfig(config)
        return try Daemon(context: context, options: MountOptions(), log: Logger(fd: logFD), backends: { _, _ in [client] })
    }

    @Test func aChangeFromOutsideThePolicyIsRefusedOnEveryWayInAndChangesNothing() throws {
        let scratch = Scratch("access-api")
        let users = try #require(getgrnam("users")?.pointee.gr_gid, "Debian has a 'users' group")
        let logPath = scratch.path + "/daemon.log"
        let logFD = open(logPath, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0o600)
        defer { close(logFD) }
        let daemon = try daemon(scratch, controlGroup: "users", logFD: logFD)
        defer { daemon.stop() }
        let stranger = Caller(uid: 54321, gid: 54321, groups: [54321])
        let member = Caller(uid: 54322, gid: 54322, groups: [users])

        // The daemon's API: every change is refused with the policy's sentence; reading is not.
        for request in [DaemonRequest.perform(.pin(quality: nil), paths: [beta]), .perform(.queue(.cancel), paths: [beta]), .sync(server: nil, full: false)] {
            guard case .failure(let code, let message) = daemon.handle(request, from: stranger) else {
                Issue.record("\(request) was answered for a stranger")
                continue
            }
            #expect(code == ExitCode.noPerm && message.contains("group 'users'") && message.contains("usermod -aG users"), "\(message)")
        }
        guard case .statuses(let rows, _) = daemon.handle(.status(paths: [beta]), from: stranger) else { Issue.record("no status"); return }
        #expect(rows.first?.pinned == false)

        // An attribute write: EACCES, and the file stays as it was.
        let ino = try #require(daemon.fs.resolve(beta.split(separator: "/").map(String.init)))
        #expect(throws: LabstreamError.accessRefused(.init(code: .notInControlGroup, daemonUID: geteuid(), group: "users"))) {
            try daemon.fs.setxattr(ino, name: "user.labstream.pin", value: Array("1".utf8), caller: stranger)
        }
        #expect(try daemon.fs.getxattr(ino, name: "user.labstream.pinned") == "0")
        // Whom to ask is readable by anyone who reads the mount.
        #expect(try daemon.fs.getxattr(FilesystemEngine.rootInode, name: "user.labstream.access") == "uid=\(geteuid()) group=users")

        // A member of the group may, through either way in.
        try daemon.fs.setxattr(ino, name: "user.labstream.pin", value: Array("1".utf8), caller: member)
        #expect(try daemon.fs.getxattr(ino, name: "user.labstream.pinned") == "1")
        guard case .performed = daemon.handle(.perform(.unpin, paths: [beta]), from: member) else { Issue.record("the member's unpin was refused"); return }
        #expect(try daemon.fs.getxattr(ino, name: "user.labstream.pinned") == "0")
        let log = String(decoding: (try? Data(contentsOf: URL(fileURLWithPath: logPath))) ?? Data(), as: UTF8.self)
        #expect(log.contains("control: refused a change from uid 54321: not_in_control_group"))
        #expect(log.contains("refused user.labstream.pin on inode \(ino) from uid 54321"))
    }

    func mode(_ path: String) -> (mode: UInt32, gid: UInt32)? {
        var st = stat()
        return stat(path, &st) == 0 ? (st.st_mode & 0o7777, st.st_gid) : nil
    }

    /// An index an earlier release left 0644 in a pre-created 0755 data dir (anyone could list
    /// what is stored): a daemon makes them its own, and what it writes after is born so.
    @Test func theIndexAndDataDirAreTheOwnersAlone() throws {
        let scratch = Scratch("access-modes")
        let data = scratch.sub("data")
        let layout = DataLayout(root: data)
        _ = try OfflineIndex(path: layout.indexPath)
        for path in [data, layout.indexPath, layout.indexPath + "-wal", layout.indexPath + "-shm"] where FileManager.default.fileExists(atPath: path) {
            chmod(path, path == data ? 0o755 : 0o644)
        }
        let daemon = try daemon(scratch, controlGroup: nil, logFD: 2)
        #expect(mode(data)?.mode == 0o700)
        for suffix in ["", "-wal", "-shm"] { #expect(mode(layout.indexPath + suffix)?.mode == 0o600, "index.sqlite\(suffix)") }
        #expect(mode(ControlChannel.path(layout))?.mode == 0o600)
        daemon.stop()
        #expect(mode(layout.indexBackupPath)?.mode == 0o600)
    }

    /// With a control group, its members may enter the data dir and connect to the socket, and
    /// nothing more; the index stays the owner's.
    @Test(.enabled(if: geteuid() == 0, "giving a file to a group this user is not in needs root; CI runs as root"))
    func theControlGroupReachesTheSocketAndNothingElse() throws {
        let scratch = Scratch("access-group-modes")
        let users = try #require(getgrnam("users")?.pointee.gr_gid, "Debian has a 'users' group")
        let daemon = try daemon(scratch, controlGroup: "users", logFD: 2)
        defer { daemon.stop() }
        let layout = daemon.context.layout
        #expect(mode(layout.root).map { [$0.mode, $0.gid] } == [0o710, users])
        #expect(mode(ControlChannel.path(layout)).map { [$0.mode, $0.gid] } == [0o660, users])
        #expect(mode(layout.indexPath)?.mode == 0o600)
    }

    /// A control group named in labstream.conf after the mount takes effect at SIGHUP
    /// (`reconfigure`), with the socket's and data dir's modes.
    @Test func aSIGHUPTakesANewControlGroup() throws {
        let scratch = Scratch("access-hup")
        let users = try #require(getgrnam("users")?.pointee.gr_gid, "Debian has a 'users' group")
        let daemon = try daemon(scratch, controlGroup: nil, logFD: 2)
        defer { daemon.stop() }
        let member = Caller(uid: 54322, gid: 54322, groups: [users])
        guard case .failure(let code, _) = daemon.handle(.perform(.pin(quality: nil), paths: [beta]), from: member) else {
            Issue.record("a change was allowed with no control group")
            return
        }
        #expect(code == ExitCode.noPerm)
        var config = try daemon.context.loadConfig()
        config.controlGroup = "users"
        try daemon.context.saveConfig(config)
        daemon.reconfigure()
        guard case .performed = daemon.handle(.perform(.pin(quality: nil), paths: [beta]), from: member) else {
            Issue.record("the new control group's member was refused")
            return
        }
        if geteuid() == 0 {
            #expect(mode(ControlChannel.path(daemon.context.layout)).map { [$0.mode, $0.gid] } == [0o660, users])
            #expect(mode(daemon.context.layout.root)?.mode == 0o710)
        }
    }

    @Test func aControlGroupTheSystemDoesNotKnowStopsTheMountSayingSo() throws {
        let scratch = Scratch("access-nogroup")
        #expect(getgrnam("labstream-no-such-group") == nil)
        do {
            _ = try daemon(scratch, controlGroup: "labstream-no-such-group", logFD: 2)
            Issue.record("the daemon started with an unknown control group")
        } catch let error as CLIError {
            #expect(error.code == ExitCode.config && error.message.contains("groupadd labstream-no-such-group"), "\(error.message)")
        }
    }
}

/// The policy on a real `allow_other` mount, tried as `nobody` (issue 43: `setfattr … cancel`
/// and `labstream cancel` by any local user emptied the owner's pinned copies).
@Suite(.serialized) struct SharedMountAccessTests {
    let alpha = "test/Movies/Alpha (2001)/Alpha (2001).mkv"
    let beta = "test/Movies/Beta (2002)/Beta (2002).mp4"

    /// `argv` run as `nobody` (runuser: its groups from the group database).
    func asNobody(_ argv: [String], env: [String: String] = [:]) throws -> ProcessResult {
        try runProcess("/usr/sbin/runuser", ["-u", "nobody", "--", "/usr/bin/env"] + env.map { "\($0)=\($1)" } + argv)
    }

    func attribute(_ path: String, _ name: String) -> String? {
        var buffer = [UInt8](repeating: 0, count: 4096)
        let n = getxattr(path, "user.labstream." + name, &buffer, buffer.count)
        return n >= 0 ? String(decoding: buffer[0..<n], as: UTF8.self) : nil
    }

    /// A mount the house can read: `allow_other`, and a way down to it (mkdtemp's 0700 scratch
    /// folder opened to traversal only).
    func sharedMount(_ name: String, controlGroup: String? = nil) throws -> MountedLabstream {
        let m = try MountedLabstream(name)
        #expect(chmod(m.scratch.path, 0o711) == 0)
        if let controlGroup {
            let path = m.configDir + "/labstream.conf"
            try (try String(contentsOfFile: path, encoding: .utf8) + "\n[access]\ncontrol_group = \(controlGroup)\n").write(
                toFile: path, atomically: true, encoding: .utf8)
        }
        try m.mount(options: "allow_other")
        return m
    }

    @Test(.enabled(if: geteuid() == 0, "runs commands as nobody; CI runs as root"))
    func anotherUserReadsButChangesNothing() throws {
        let m = try sharedMount("access-nobody")
        defer { _ = try? m.unmount() }
        let pin = try m.cli(["pin", "--wait", m.path(alpha)])
        try #require(pin.code == 0, "\(pin.stderr)")
        let stateBefore = attribute(m.path(alpha), "state")

        // setfattr, as the issue tried it: refused, and the pinned copy stays whole.
        let cancel = try asNobody(["/usr/bin/setfattr", "-n", "user.labstream.action", "-v", "cancel", m.path(alpha)])
        #expect(cancel.code != 0 && cancel.stderr.contains("Permission denied"), "\(cancel.code) \(cancel.stderr)")
        let unpin = try asNobody(["/usr/bin/setfattr", "-n", "user.labstream.pin", "-v", "0", m.path(alpha)])
        #expect(unpin.code != 0 && unpin.stderr.contains("Permission denied"), "\(unpin.stderr)")
        let pinBeta = try asNobody(["/usr/bin/setfattr", "-n", "user.labstream.pin", "-v", "1", m.path(beta)])
        #expect(pinBeta.code != 0 && pinBeta.stderr.contains("Permission denied"), "\(pinBeta.stderr)")
        #expect(attribute(m.path(alpha), "pinned") == "1" && attribute(m.path(alpha), "state") == stateBefore)
        #expect(
            attribute(m.path(alpha), "bytes").map { $0.split(separator: "/").count == 2 && $0.split(separator: "/")[0] == $0.split(separator: "/")[1] } == true)
        #expect(attribute(m.path(beta), "pinned") == "0")

        // `labstream cancel`, with the owner's data dir or its own: refused, saying whom to ask.
        for env in [m.env, ["HOME": "/nonexistent"]] {
            let refused = try asNobody([labstreamBinary, "cancel", m.path(alpha)], env: env)
            #expect(
                refused.code == ExitCode.noPerm && refused.stderr.contains("was left as it was")
                    && refused.stderr.contains("is for root only") && refused.stderr.contains("control_group"),
                "\(refused.code) \(refused.stderr)")
        }
        #expect(attribute(m.path(alpha), "pinned") == "1" && attribute(m.path(alpha), "state") == stateBefore)
        #expect(m.log.contains("refused user.labstream.action on inode") && m.log.contains("from uid 65534: no_control_group"))

        // Reading is the mount's business: allow_other lets nobody read the bytes and the status.
        let expected = expectedTree(m.mediaDir)
        let read = try asNobody(["/usr/bin/sha256sum", m.path(alpha)])
        let want = try sha256(expected[alpha]!)
        #expect(read.code == 0 && read.stdout.hasPrefix(want), "\(read.stderr)")
        let status = try asNobody([labstreamBinary, "status", m.path(beta)], env: m.env)
        #expect(status.code == 0 && status.stdout.contains("not-local"), "\(status.stdout) \(status.stderr)")
        #expect(try asNobody(["/usr/bin/getfattr", "-n", "user.labstream.access", m.mountpoint]).stdout.contains("uid=0"))

        // What the index holds is not: the data dir and index files are the owner's alone.
        for path in [m.dataDir + "/index.sqlite", m.dataDir + "/index.sqlite-wal", m.dataDir + "/index.sqlite-shm"] {
            var st = stat()
            #expect(stat(path, &st) == 0 && st.st_mode & 0o077 == 0, "\(path) is \(String(st.st_mode & 0o777, radix: 8))")
        }
        let listing = try asNobody([labstreamBinary, "status"], env: m.env)
        #expect(!listing.stdout.contains("Alpha"), "\(listing.stdout)")
        #expect(try m.cli(["status"]).stdout.contains("Alpha"))
    }

    @Test(.enabled(if: geteuid() == 0, "creates a group and runs commands as nobody; CI runs as root"))
    func aMemberOfTheControlGroupMayChange() throws {
        // A group of the test's own, nobody a supplementary member of it (what fuse_req_getgroups
        // and the group database must both find), removed afterwards.
        let group = "lstest\(getpid() % 100_000)"
        _ = try runProcess("/usr/sbin/groupdel", [group])
        let added = try runProcess("/usr/sbin/groupadd", ["-U", "nobody", group])
        try #require(added.code == 0, "groupadd: \(added.stderr)")
        defer { _ = try? runProcess("/usr/sbin/groupdel", [group]) }
        let m = try sharedMount("access-member", controlGroup: group)
        defer { _ = try? m.unmount() }

        // Through the mount's attribute.
        let pin = try asNobody(["/usr/bin/setfattr", "-n", "user.labstream.pin", "-v", "1", m.path(beta)])
        #expect(pin.code == 0, "\(pin.stderr)")
        #expect(attribute(m.path(beta), "pinned") == "1")
        // Through the control socket: the data dir, lock and socket let the group reach it.
        let unpin = try asNobody([labstreamBinary, "unpin", m.path(beta)], env: m.env)
        #expect(unpin.code == 0, "\(unpin.stderr)")
        #expect(attribute(m.path(beta), "pinned") == "0")
        #expect(m.log.contains("control: pin=0 on 1 paths"), "\(m.log)")
        #expect(try asNobody(["/usr/bin/getfattr", "-n", "user.labstream.access", m.mountpoint]).stdout.contains("group=\(group)"))
    }
}
