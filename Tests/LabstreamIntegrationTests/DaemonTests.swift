import CLinux
import Foundation
import LabstreamBackends
import LabstreamCore
import LabstreamDaemon
import LabstreamFixture
import LabstreamTestSupport
import Testing

/// The whole daemon in-process, against an emulated Jellyfin answered in memory: its first sync,
/// its typed API (status, commands, sync) and its control socket, with no mount and no network.
@Suite struct DaemonTests {
    let beta = "test/Movies/Beta (2002)/Beta (2002).mp4"

    @Test func aDaemonStartedInProcessSyncsAndAnswersItsTypedAPI() throws {
        let scratch = Scratch("daemon")
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
        try context.saveConfig(config)
        let logPath = scratch.path + "/daemon.log"
        let logFD = open(logPath, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0o600)
        defer { close(logFD) }
        let daemon = try Daemon(context: context, options: MountOptions(), log: Logger(fd: logFD), backends: { _, _ in [client] })
        defer { daemon.stop() }

        // The server had no catalog: the daemon synced it before anything could ask.
        let catalog = try daemon.index.treeFiles().count
        #expect(catalog > 0 && daemon.fs.fileCount >= catalog)
        guard case .statuses(let before, let change) = daemon.handle(.status(paths: ["test/Movies"])) else { Issue.record("no statuses"); return }
        #expect(!before.isEmpty && before.allSatisfy { $0.state == .notLocal && !$0.pinned })

        // A pin through the API downloads the file; a follower waits on changes, not on a clock.
        guard case .performed(let files, _) = daemon.handle(.perform(.pin(quality: nil), paths: [beta])) else { Issue.record("not performed"); return }
        #expect(files == 1)
        var seen = change
        var settled: FileStatus?
        let deadline = Date().addingTimeInterval(30)
        while Date() < deadline {
            guard case .statuses(let now, let next) = daemon.handle(.status(paths: [beta], after: seen, wait: 5)) else { break }
            seen = next
            if let f = now.first, f.state == .unverified || f.state == .complete || f.state == .failed {
                settled = f
                break
            }
        }
        #expect(settled?.state == .unverified && settled?.pinned == true && settled?.present == settled?.total, "\(String(describing: settled))")
        #expect(String(decoding: (try? Data(contentsOf: URL(fileURLWithPath: logPath))) ?? Data(), as: UTF8.self).contains("control: pin=1 on 1 paths"))

        // The control socket carries the same typed answer.
        let overSocket = try ControlChannel.send(context.layout, .status(paths: [beta]))
        #expect(overSocket != nil && overSocket?.withoutChange == daemon.handle(.status(paths: [beta])).withoutChange)

        // A sync asked of the daemon goes through its scheduler: nothing changed, then a removal.
        guard case .synced(let unchanged) = daemon.handle(.sync(server: nil, full: false)) else { Issue.record("no sync"); return }
        #expect(unchanged == [.succeeded("test", files: catalog, changed: false)])
        fixture.remove(itemId: try #require(fixture.itemId(forFile: media + "/gamma.mkv")))
        guard case .synced(let changed) = daemon.handle(.sync(server: "test", full: true)) else { Issue.record("no sync"); return }
        #expect(changed.first?.changed == true && changed.first?.files == catalog - 1)
        #expect(daemon.fs.resolve(["test", "Movies", "Gamma", "Gamma.mkv"]) == nil)  // the tree followed before the answer

        // What cannot be done says why, with the code the CLI exits with.
        #expect(
            daemon.handle(.status(paths: ["test/Nowhere"]))
                == .failure(
                    code: ExitCode.noInput,
                    message: "test/Nowhere is not in the mounted catalog, nor a stored copy of a removed server (`labstream orphans` lists those)"))
        guard case .failure(let code, let message) = daemon.handle(.sync(server: "nope", full: false)) else { Issue.record("synced nothing"); return }
        #expect(code == ExitCode.noInput && message.contains("no server named 'nope'"))
        guard case .failure(let refused, _) = daemon.handle(.perform(.queue(.pause), paths: ["test/Movies/Nope.mkv"])) else { return }
        #expect(refused == ExitCode.noInput)
    }
}

extension DaemonResponse {
    /// A status answer with its change counter left out (it moves with every commit).
    var withoutChange: DaemonResponse {
        if case .statuses(let entries, _) = self { return .statuses(entries: entries, change: 0) }
        return self
    }
}
