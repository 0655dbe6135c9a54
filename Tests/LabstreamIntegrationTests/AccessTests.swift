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
