import Foundation
import LabstreamCore
import LabstreamDemo
import LabstreamFixture
import LabstreamStore
import Synchronization
import Testing

@testable import LabstreamCLI
@testable import LabstreamDaemon

@Suite struct ArgumentsTests {
    let spec = Arguments.Spec(valued: ["--url", "-o"], flags: ["--json", "-v"])

    @Test func optionsMayComeBeforeOrAfterPositionals() throws {
        let a = try Arguments.parse(["--url", "http://x", "add", "-o", "allow_other", "jellyfin", "--json", "NAME", "--url=http://y"], spec: spec)
        #expect(a.positionals == ["add", "jellyfin", "NAME"])
        #expect(a.value("--url") == "http://y")
        #expect(a.all("--url") == ["http://x", "http://y"])
        #expect(a.flag("--json") && !a.flag("-v"))
        #expect(try Arguments.parse(["--", "--json"], spec: spec).positionals == ["--json"])
    }

    @Test func badUsageIsExplained() {
        #expect(throws: UsageError("unknown option --nope")) { try Arguments.parse(["--nope"], spec: spec) }
        #expect(throws: UsageError("--url needs a value")) { try Arguments.parse(["--url"], spec: spec) }
        #expect(throws: UsageError("--json takes no value")) { try Arguments.parse(["--json=1"], spec: spec) }
    }
}

@Suite struct CLITests {
    struct Env {
        let scratch: Scratch
        var env: [String: String] { ["LABSTREAM_CONFIG_DIR": scratch.path + "/config", "LABSTREAM_DATA_DIR": scratch.path + "/data"] }
        func run(_ args: [String], stdin: String? = nil) throws -> ProcessResult {
            try runProcess(labstreamBinary, args, environment: env, stdin: stdin)
        }
    }

    @Test func theLogLevelFiltersTheDaemonsLog() throws {
        let m = try MountedLabstream("log-level")
        let bad = try m.cli(["mount", m.mountpoint, "--log-level", "loud"])
        #expect(bad.code == 64 && bad.stderr.contains("--log-level takes error, warning, info or debug"))
        let r = try m.cli(["mount", m.mountpoint, "--log-level", "warning"])
        try #require(r.code == 0, "\(r.stderr)")
        let pid = Int32(try String(contentsOfFile: m.dataDir + "/labstream.lock", encoding: .utf8).split(separator: "\n").first ?? "") ?? 0
        _ = try pread(path: m.path("test/Movies/Gamma/Gamma.mkv"), offset: 0, length: 4096)
        let quiet = try m.cli(["unmount", m.mountpoint])
        #expect(quiet.code == 0 && waitForExit(pid: pid))
        #expect(!m.log.contains(" info: ") && !m.log.contains(" debug: "), "\(m.log)")
        try m.mount()  // the default level: info lines appear
        try m.unmount()
        #expect(m.log.contains(" info: mounted "))
        #expect(!m.log.contains(m.fixture.accessToken))
    }

    @Test func badMountpointsAreRefusedWithWhatToDo() throws {
        let m = try MountedLabstream("bad-mountpoints")
        let full = m.scratch.sub("full")
        FileManager.default.createFile(atPath: full + "/keep.txt", contents: Data("mine".utf8))
        let r1 = try m.cli(["mount", full])
        #expect(
            r1.code == 64 && r1.stderr == "labstream: the mountpoint \(full) is not empty (1 entry); mounting would hide them: give an empty directory\n",
            "\(r1.stderr)")
        #expect(FileManager.default.contents(atPath: full + "/keep.txt") == Data("mine".utf8))
        let file = full + "/keep.txt"
        let r2 = try m.cli(["mount", file])
        #expect(r2.code == 64 && r2.stderr == "labstream: the mountpoint \(file) is not a directory; give an empty directory\n", "\(r2.stderr)")
        let missing = m.scratch.path + "/nope"
        let r3 = try m.cli(["mount", missing])
        #expect(r3.code == 66 && r3.stderr == "labstream: the mountpoint \(missing) does not exist; create it with: mkdir -p \(missing)\n", "\(r3.stderr)")
        try m.mount()
        let r4 = try m.cli(["mount", m.mountpoint])
        #expect(
            r4.code != 0 && r4.stderr.contains("\(m.mountpoint) is already a Labstream mount; unmount it first with: labstream unmount \(m.mountpoint)")
                || r4.stderr.contains("in use"), "\(r4.stderr)")
        try m.unmount()
    }

    @Test func helpAndUsageErrors() throws {
        let e = Env(scratch: Scratch("cli-help"))
        let help = try e.run(["--help"])
        #expect(help.code == 0 && help.stdout.hasPrefix("labstream 0.1.0 — mount your home media servers"))
        #expect(help.stdout.contains("labstream server add jellyfin|emby NAME --url URL --user USER --password-stdin"))
        #expect(help.stdout.contains("labstream server add plex NAME --pin"))
        let none = try e.run([])
        #expect(none.code == 64)
        let unknown = try e.run(["frobnicate"])
        #expect(unknown.code == 64 && unknown.stderr == "labstream: unknown command 'frobnicate'\nRun `labstream --help` for usage.\n")
        // Global options go anywhere, before the command too (as --help and labstream(1) say).
        for leading in [["--config-dir", e.scratch.sub("other-config")], ["-v"], ["--log-level", "debug"], ["--data-dir", e.scratch.sub("d2")]] {
            let r = try e.run(leading + ["status"])
            #expect(r.code == 0 && r.stdout.contains("Nothing is stored locally yet."), "\(leading): \(r.code) \(r.stderr)")
        }
        #expect(try e.run(["--config-dir", e.scratch.sub("c3")]).code == 64)
        let loud = try e.run(["status", "--log-level", "loud"])
        #expect(loud.code == 64 && loud.stderr.contains("--log-level takes error, warning, info or debug"), "\(loud.stderr)")
        // Read-only commands create nothing in the data directory.
        let untouched = e.scratch.path + "/never-created"
        #expect(try e.run(["server", "list", "--data-dir", untouched]).code == 0)
        #expect(try e.run(["status", "--data-dir", untouched]).code == 0)
        #expect(!FileManager.default.fileExists(atPath: untouched))
        let badOption = try e.run(["status", "--frob"])
        #expect(badOption.code == 64 && badOption.stderr.contains("unknown option --frob"))
        let rw = try e.run(["mount", e.scratch.sub("m"), "-o", "rw"])
        #expect(rw.code == 64 && rw.stderr.contains("read-only"))
        let missing = try e.run(["mount", e.scratch.path + "/does-not-exist"])
        #expect(missing.code == 66 && missing.stderr.contains("mkdir -p"))
        let noServers = try e.run(["mount", e.scratch.sub("m2"), "--foreground"])
        #expect(noServers.code == 78 && noServers.stderr.contains("labstream server add"), "\(noServers.code) \(noServers.stderr)")
        let daemonNoServers = try e.run(["mount", e.scratch.sub("m3")])
        #expect(daemonNoServers.code == 78 && daemonNoServers.stderr.contains("no servers are configured"), "\(daemonNoServers.stderr)")
    }

    @Test func serverAddListRemoveKeepsTheTokenPrivate() throws {
        let e = Env(scratch: Scratch("cli-server"))
        let fixture = try ServerFixture(catalog: testCatalog(in: e.scratch.sub("media")), userName: "demo", password: "pw")
        try fixture.start()
        defer { fixture.stop() }

        let wrong = try e.run(["server", "add", "jellyfin", "home", "--url", fixture.baseURL, "--user", "demo", "--password-stdin"], stdin: "bad\n")
        #expect(wrong.code == 77 && wrong.stderr.contains("wrong user name or password"))
        #expect(!FileManager.default.fileExists(atPath: e.scratch.path + "/config/credentials"))

        let add = try e.run(["server", "add", "--password-stdin", "jellyfin", "home", "--user", "demo", "--url", fixture.baseURL], stdin: "pw\n")
        #expect(add.code == 0, "\(add.stderr)")
        let credentials = e.scratch.path + "/config/credentials"
        let mode = try FileManager.default.attributesOfItem(atPath: credentials)[.posixPermissions] as? Int
        #expect(mode == 0o600)
        #expect(try String(contentsOfFile: credentials, encoding: .utf8).contains(fixture.accessToken))
        let conf = try String(contentsOfFile: e.scratch.path + "/config/labstream.conf", encoding: .utf8)
        #expect(conf.contains("[server \"home\"]") && conf.contains("type = jellyfin") && !conf.contains(fixture.accessToken) && !conf.contains("pw"))
        #expect(!add.stdout.contains(fixture.accessToken) && !add.stderr.contains(fixture.accessToken))

        let list = try e.run(["server", "list", "--json"])
        let rows = try JSONSerialization.jsonObject(with: Data(list.stdout.utf8)) as? [[String: Any]]
        #expect(rows?.first?["name"] as? String == "home" && rows?.first?["has_credentials"] as? Bool == true)
        #expect(rows?.first?["reachability"] as? String == "not mounted")
        #expect(!list.stdout.contains(fixture.accessToken) && list.stdout.contains("http://") && !list.stdout.contains("\\/"), "\(list.stdout)")

        let sync = try e.run(["sync", "home"])
        #expect(sync.code == 0 && sync.stdout.hasSuffix("home: 10 files\n"), "\(sync.stderr)")
        // With no daemon the command's own output, not a daemon's stamped log line.
        #expect(!sync.stderr.contains("labstream[") && !sync.stderr.contains(" info: "), "\(sync.stderr)")
        // Piped, a long sync reports each step on its own line before the total.
        #expect(sync.stdout.contains("home: Shows: Show (1/1)\n") && sync.stdout.contains("home: Movies: 6 items\n"), "\(sync.stdout)")

        // A credential file others can read is refused with the fix.
        chmod(credentials, 0o644)
        let refused = try e.run(["sync"])
        #expect(refused.code == 77 && refused.stderr.contains("chmod 600 \(credentials)"), "\(refused.stderr)")
        chmod(credentials, 0o600)

        // A token can be adopted instead of a password.
        let token = try e.run(["server", "add", "jellyfin", "other", "--url", fixture.baseURL, "--token-stdin"], stdin: fixture.accessToken)
        #expect(token.code == 0, "\(token.stderr)")

        let remove = try e.run(["server", "remove", "home"])
        // It never downloaded anything: no word of files staying paused.
        #expect(remove.code == 0 && remove.stdout.hasPrefix("Removed home.") && !remove.stdout.contains("paused"), "\(remove.stdout)")
        #expect(!(try String(contentsOfFile: credentials, encoding: .utf8)).contains("[server \"home\"]"))
        let again = try e.run(["server", "remove", "home"])
        #expect(again.code == 66)
    }

    /// A bad argument is said first, before anything about the path or what it holds (`monitor
    /// add … --mode weekly` on a monitored series said "is monitored already").
    @Test func monitorArgumentsAreCheckedBeforeThePath() throws {
        let e = Env(scratch: Scratch("cli-monitor-args"))
        let nowhere = e.scratch.path + "/not-a-mount"
        for args in [["add", nowhere, "--mode", "weekly"], ["set", nowhere, "--mode", "weekly"]] {
            let r = try e.run(["monitor"] + args)
            #expect(r.code == 64 && r.stderr.contains("--mode takes all, future, latest-season"), "\(args): \(r.code) \(r.stderr)")
        }
        let size = try e.run(["monitor", "set", nowhere, "--max-storage", "lots"])
        #expect(size.code == 64 && size.stderr.contains("--max-storage takes a size"), "\(size.code) \(size.stderr)")
        let noMode = try e.run(["monitor", "add", nowhere])
        #expect(noMode.code == 64 && noMode.stderr.contains("monitor add needs --mode"), "\(noMode.code) \(noMode.stderr)")
        // Good arguments: then the path is looked at.
        let path = try e.run(["monitor", "add", nowhere, "--mode", "all"])
        #expect(path.code == 66 && path.stderr.contains("not inside a live Labstream mount"), "\(path.code) \(path.stderr)")
    }

    @Test func unreachableAndWrongServersGiveClearErrors() throws {
        let e = Env(scratch: Scratch("cli-bad"))
        let gone = try e.run(["server", "add", "jellyfin", "x", "--url", "http://127.0.0.1:1", "--user", "a", "--password-stdin"], stdin: "b")
        #expect(gone.code == 69 && gone.stderr.contains("unavailable"), "\(gone.stderr)")
        let web = try HTTPServer { _ in .json("{\"hello\":\"world\"}") }
        defer { web.stop() }
        let notJellyfin = try e.run(["server", "add", "jellyfin", "x", "--url", web.baseURL, "--user", "a", "--password-stdin"], stdin: "b")
        #expect(notJellyfin.code == 76 && notJellyfin.stderr.contains("does not look like a Jellyfin server"), "\(notJellyfin.stderr)")
        let creds = try e.run(["server", "add", "jellyfin", "x", "--url", "http://user:pw@host", "--user", "a", "--password-stdin"], stdin: "b")
        #expect(creds.code == 64)
        let badName = try e.run(["server", "add", "jellyfin", "../x", "--url", "http://h", "--user", "a", "--password-stdin"], stdin: "b")
        #expect(badName.code == 64)
    }
}

/// CLI commands reach the daemon over its private control socket, and act on the index
/// directly when no daemon runs.
@Suite(.serialized) struct ControlChannelTests {
    @Test func theControlSocketIsPrivateAndCarriesPinsAndStatus() throws {
        let m = try MountedLabstream("control")
        try m.mount()
        let socketPath = m.dataDir + "/control.sock"
        var st = stat()
        #expect(lstat(socketPath, &st) == 0)
        #expect(st.st_mode & S_IFMT == S_IFSOCK && st.st_mode & 0o777 == 0o600 && st.st_uid == geteuid())
        let rel = "test/Movies/Gamma/Gamma.mkv"
        let pin = try m.cli(["pin", "--wait", m.path(rel)])
        #expect(pin.code == 0, "\(pin.stderr)")
        #expect(m.log.contains("control: pin=1 on 1 paths"))  // it went over the socket, not through setfattr
        let status = try m.cli(["status", "--json", m.path("test/Movies")])
        let rows = try #require(try JSONSerialization.jsonObject(with: Data(status.stdout.utf8)) as? [[String: Any]])
        let gamma = try #require(rows.first { ($0["path"] as? String) == m.path(rel) })
        #expect(gamma["state"] as? String == "unverified" && (gamma["bytes_present"] as? Int) == 700 * 1024)
        #expect(rows.count == 6)
        let outside = try m.cli(["pin", m.scratch.path])
        #expect(outside.code == 66, "\(outside.stderr)")
        try m.unmount()
        #expect(lstat(socketPath, &st) != 0)  // removed at shutdown
    }

    /// `-o ro` makes the kernel mount itself read-only: attribute writes through the mount answer
    /// EROFS before they reach the daemon, `labstream pin` still pins over the control socket,
    /// and a pin that can only go through the mount (no daemon in this data dir) says why not.
    @Test func aReadOnlyMountPinsThroughTheControlSocketOnly() throws {
        let m = try MountedLabstream("control-ro")
        try m.mount(options: "ro")
        defer { _ = try? m.unmount() }
        var fs = statvfs()
        #expect(statvfs(m.mountpoint, &fs) == 0 && fs.f_flag & UInt(ST_RDONLY) != 0)
        let rel = "test/Movies/Gamma/Gamma.mkv"
        let refused = try runProcess("/usr/bin/setfattr", ["-n", "user.labstream.pin", "-v", "1", m.path(rel)])
        #expect(refused.code != 0 && refused.stderr.contains("Read-only file system"), "\(refused.stderr)")
        let before = try m.cli(["status", "--json", m.path(rel)])
        let rows = try #require(try JSONSerialization.jsonObject(with: Data(before.stdout.utf8)) as? [[String: Any]])
        #expect(rows.first?["pinned"] as? Bool == false)
        let pin = try m.cli(["pin", "--wait", m.path(rel)])
        #expect(pin.code == 0, "\(pin.stderr)")
        #expect(m.log.contains("control: pin=1 on 1 paths"))
        #expect(FileManager.default.contents(atPath: m.path(rel)) == FileManager.default.contents(atPath: expectedTree(m.mediaDir)[rel]!))
        let elsewhere = [
            "LABSTREAM_CONFIG_DIR": m.scratch.sub("other-config"), "LABSTREAM_DATA_DIR": m.scratch.sub("other-data")
        ]
        let through = try runProcess(labstreamBinary, ["pin", m.path("test/Movies/Beta (2002)")], environment: elsewhere)
        #expect(through.code == 77 && through.stderr.contains("mounted with -o ro"), "\(through.code) \(through.stderr)")
    }

    /// Another user who could reach the socket (its directory and mode opened up on purpose)
    /// is still refused by the daemon's peer check: the access policy's refusal, which says
    /// whom to ask.
    @Test(.enabled(if: geteuid() == 0, "needs root (setpriv to another uid); CI runs as root"))
    func theDaemonRefusesAnotherUsersRequests() throws {
        let m = try MountedLabstream("control-uid")
        try m.mount()
        defer { _ = try? m.unmount() }
        for path in [m.scratch.path, m.dataDir, m.dataDir + "/labstream.lock", m.dataDir + "/control.sock", m.configDir] {
            chmod(path, path.hasSuffix(".lock") ? 0o644 : (path.hasSuffix(".sock") ? 0o666 : 0o755))
        }
        let r = try runProcess(
            "/usr/bin/setpriv",
            [
                "--reuid=65534", "--regid=65534", "--clear-groups", labstreamBinary,
                "status", "--json", m.path("test/Movies")
            ], environment: m.env)
        #expect(
            r.code == 77 && r.stderr.contains("is for root only") && r.stderr.contains("control_group"), "\(r.code) \(r.stderr) \(r.stdout)")
        #expect(m.log.contains("control: refused a connection from uid 65534: no_control_group"))
    }

    @Test func syncWhileMountedRunsInTheDaemonAndTheTreeFollowsAtOnce() throws {
        let m = try MountedLabstream("control-sync")
        try m.mount()
        let twin = "test/Movies/Gamma/Gamma.mkv"
        #expect(FileManager.default.fileExists(atPath: m.path(twin)))
        m.fixture.remove(itemId: try #require(m.fixture.itemId(forFile: m.mediaDir + "/gamma.mkv")))
        let sync = try m.cli(["sync"])
        #expect(
            sync.code == 0 && sync.stdout.hasSuffix("test: 9 files\n") && sync.stdout.contains("test: Shows: Show (1/1)\n"), "\(sync.stdout) \(sync.stderr)")
        // The daemon synced and reloaded before answering: the file is gone now, not eventually.
        #expect(!FileManager.default.fileExists(atPath: m.path(twin)))
        #expect(m.log.contains("info: sync test: 9 files"))
        try m.unmount()
    }

    /// On a terminal (script(1) gives it one), pin --wait draws a bar per file and the total,
    /// redrawn in place (cursor up, lines cleared), never by clearing the whole screen.
    @Test func pinWaitDrawsPerFileBarsOnATerminal() throws {
        let m = try MountedLabstream("pin-tty")
        try m.mount()
        let season = m.path("test/Shows/Show (2020)/Season 01")
        let command = ([labstreamBinary, "pin", "--wait", season]).map { "'" + $0.replacingOccurrences(of: "'", with: "'\\''") + "'" }.joined(separator: " ")
        let r = try runProcess("/usr/bin/script", ["-qec", command, "/dev/null"], environment: m.env)
        #expect(r.code == 0, "\(r.stdout)")
        #expect(r.stdout.contains("[####################] 100%"), "\(r.stdout)")
        #expect(r.stdout.contains("Show (2020) - S01E01 - Pilot.mkv") && r.stdout.contains("Show (2020) - S01E02 - Second.mp4"))
        #expect(r.stdout.contains("files done: 2 of 2"), "\(r.stdout.debugDescription)")
        #expect(r.stdout.contains("\u{1B}[2K") && !r.stdout.contains("\u{1B}[2J") && !r.stdout.contains("\u{1B}[H"), "\(r.stdout.debugDescription)")
        try m.unmount()
    }

    /// A source listed without a size gets it from the server (a one-byte ranged request, or
    /// the length of a whole-file answer that ignored the range) and reads like any other,
    /// instead of showing as an empty file.
    @Test(arguments: [false, true])
    func aSourceWithoutASizeLearnsItFromTheServer(rangeIgnored: Bool) throws {
        let m = try MountedLabstream("sizeless")
        let gamma = try #require(m.fixture.itemId(forFile: m.mediaDir + "/gamma.mkv"))
        m.fixture.hideSize(of: gamma)
        if rangeIgnored { m.fixture.inject(.ignoreRange, pathPrefix: "/Items/\(gamma)/Download", times: 1) }
        let sync = try m.cli(["sync"])
        #expect(sync.code == 0, "\(sync.stderr)")
        #expect(m.fixture.downloadRequests.contains { $0.path.contains(gamma) && $0.range == "bytes=0-0" })
        try m.mount()
        let rel = "test/Movies/Gamma/Gamma.mkv"
        #expect((try FileManager.default.attributesOfItem(atPath: m.path(rel))[.size] as? Int) == 700 * 1024)
        #expect(try sha256(m.path(rel)) == sha256(m.mediaDir + "/gamma.mkv"))
        try m.unmount()
    }

    /// A file whose size nobody says (none in the listing, `Content-Range: …/*`) is fetched by
    /// one open-ended request through the segment train; a dropped connection resumes from the
    /// bytes already committed with `bytes=N-`; when the body ends its size is known, the tree
    /// shows it and the bytes are the server's. A longer file left at its partial's path (an
    /// earlier version's) is no part of it.
    @Test func aFileOfUnknownSizeIsFetchedOpenEndedAndResumes() throws {
        let m = try MountedLabstream("open-ended")
        let alpha = try #require(m.fixture.itemId(forFile: m.mediaDir + "/alpha.mkv"))
        m.fixture.hideSizeAndTotal(of: alpha)
        try m.mount()
        let key = try #require(try OfflineIndex(path: m.dataDir + "/index.sqlite").treeFiles().first { $0.key.itemId == alpha }?.key)
        let partial = m.dataDir + "/" + DataLayout(root: m.dataDir).partialRelativePath(for: key)
        try FileManager.default.createDirectory(atPath: m.dataDir + "/partials", withIntermediateDirectories: true)
        try Data(repeating: 0x5A, count: 16 * MiB).write(to: URL(fileURLWithPath: partial))
        m.fixture.inject(.dropAfter(Int64(5 * MiB)), pathPrefix: "/Items/\(alpha)/Download", times: 1)
        let rel = "test/Movies/Alpha (2001)/Alpha (2001).mkv"
        #expect((try FileManager.default.attributesOfItem(atPath: m.path(rel))[.size] as? Int) == 0)  // not known yet
        let pin = try m.cli(["pin", "--wait", m.path(rel)])
        #expect(pin.code == 0, "\(pin.stdout) \(pin.stderr)")

        let fetches = m.fixture.downloadRequests.filter { $0.path.contains(alpha) && $0.range != "bytes=0-0" }
        try #require(fetches.count == 2, "\(fetches.map { "\($0.range ?? "-") \($0.bytesSent)" })")
        #expect(fetches[0].range == "bytes=0-" && fetches[0].bytesSent == Int64(5 * MiB))
        #expect(fetches[1].range == "bytes=\(5 * MiB)-", "\(fetches[1].range ?? "-")")  // resumed, nothing fetched twice
        #expect(eventually { (try? FileManager.default.attributesOfItem(atPath: m.path(rel))[.size] as? Int) == 12 * MiB + 37 })
        #expect(try sha256(m.path(rel)) == sha256(m.mediaDir + "/alpha.mkv"))
        #expect(try FileManager.default.attributesOfItem(atPath: partial)[.size] as? Int == 12 * MiB + 37)
        try m.unmount()
        // The learned size is the catalog's now, across a restart.
        let index = try OfflineIndex(path: m.dataDir + "/index.sqlite")
        #expect(try index.treeFiles().first { $0.path.joined(separator: "/") == rel }?.size == Int64(12 * MiB + 37))
    }

    /// A pause stops an open-ended fill at its next checkpoint, keeping what arrived (its size is
    /// unknown, so "all bytes present" cannot be what stops it); a resume goes on from there.
    @Test func aFileOfUnknownSizeCanBePausedAndResumed() throws {
        let m = try MountedLabstream("open-ended-pause")
        let alpha = try #require(m.fixture.itemId(forFile: m.mediaDir + "/alpha.mkv"))
        m.fixture.hideSizeAndTotal(of: alpha)
        try m.mount()
        let rel = "test/Movies/Alpha (2001)/Alpha (2001).mkv"
        let index = try OfflineIndex(path: m.dataDir + "/index.sqlite")
        let key = try #require(try index.treeFiles().first { $0.key.itemId == alpha }?.key)
        func committed() -> Int64 { (try? index.download(key))??.present.byteCount ?? 0 }
        // The body stalls after 5 MiB, long enough to pause it mid-way.
        m.fixture.inject(.stallAfter(Int64(5 * MiB), 3), pathPrefix: "/Items/\(alpha)/Download", times: 1)
        #expect(try m.cli(["pin", m.path(rel)]).code == 0)
        #expect(eventually { committed() >= Int64(2 * MiB) })
        let pause = try m.cli(["pause", m.path(rel)])
        #expect(pause.code == 0, "\(pause.stderr)")
        #expect(eventually { m.log.contains("paused by user at byte") }, "\(m.log)")
        let kept = committed()
        #expect(kept > 0 && kept < Int64(12 * MiB + 37))
        #expect(try index.download(key)?.status == .paused)

        m.fixture.clearLog()
        #expect(try m.cli(["resume", m.path(rel)]).code == 0)
        let pin = try m.cli(["pin", "--wait", m.path(rel)])
        #expect(pin.code == 0, "\(pin.stdout) \(pin.stderr)")
        let fetches = m.fixture.downloadRequests.filter { $0.path.contains(alpha) && $0.range != "bytes=0-0" }
        #expect(fetches.first?.range == "bytes=\(kept)-", "\(fetches.map { $0.range ?? "-" })")
        #expect(try sha256(m.path(rel)) == sha256(m.mediaDir + "/alpha.mkv"))
        try m.unmount()
    }

    /// A file paused while `pin --wait` follows it will not move again until the user acts: the
    /// wait ends (75) and says how to go on, instead of waiting forever.
    @Test func pinWaitEndsWhenItsFileIsPausedAndSaysHowToGoOn() throws {
        let m = try MountedLabstream("pin-wait-held")
        let alpha = try #require(m.fixture.itemId(forFile: m.mediaDir + "/alpha.mkv"))
        try m.mount()
        let rel = "test/Movies/Alpha (2001)/Alpha (2001).mkv"
        let index = try OfflineIndex(path: m.dataDir + "/index.sqlite")
        let key = try #require(try index.treeFiles().first { $0.key.itemId == alpha }?.key)
        m.fixture.inject(.stallAfter(Int64(3 * MiB), 8), pathPrefix: "/Items/\(alpha)/Download", times: 4)
        // `timeout` bounds the old behaviour (waiting forever) so that it fails instead of hanging.
        let wait = LockedBox<ProcessResult?>(nil)
        let ended = DispatchSemaphore(value: 0)
        DispatchQueue.global().async {
            wait.set(try? runProcess("/usr/bin/timeout", ["60", labstreamBinary, "pin", "--wait", m.path(rel)], environment: m.env))
            ended.signal()
        }
        #expect(eventually { ((try? index.download(key))??.present.byteCount ?? 0) >= Int64(2 * MiB) })
        #expect(try m.cli(["pause", m.path(rel)]).code == 0)
        _ = ended.wait(timeout: .now() + 90)
        let r = try #require(wait.get())
        #expect(r.code == 75, "\(r.code) \(r.stdout) \(r.stderr)")
        #expect(r.stderr.contains("is paused (paused by user)") && r.stderr.contains("labstream resume \(m.path(rel))"), "\(r.stderr)")
        // The cause travels beside the sentence: the file's attribute and `status --json` say it.
        #expect(StatusCommandXattr.get(m.path(rel), "pause_cause") == PauseCause.user.rawValue)
        let json = try m.cli(["status", "--json", m.path(rel)])
        let rows = try #require(try JSONSerialization.jsonObject(with: Data(json.stdout.utf8)) as? [[String: Any]], "\(json.stdout)")
        #expect(rows.first?["state"] as? String == "paused" && rows.first?["reason"] as? String == "paused_by_user", "\(json.stdout)")
        try m.unmount()
    }

    @Test func withNoDaemonAPinGoesToTheIndexAndSaysSo() throws {
        let m = try MountedLabstream("control-offline")
        try m.mount()
        try m.unmount()
        let rel = "test/Movies/Gamma/Gamma.mkv"
        let pin = try m.cli(["pin", rel])
        #expect(
            pin.code == 0 && pin.stdout == "No daemon is running: pinned 1 files in the index; they download when Labstream next mounts.\n",
            "\(pin.stdout) \(pin.stderr)")
        let unknown = try m.cli(["pin", "test/Movies/Nope"])
        #expect(unknown.code == 66 && unknown.stderr.contains("is not a catalog path"), "\(unknown.stderr)")
        let quality = try m.cli(["pin", "--quality", "2mbps", rel])
        #expect(quality.code == 69 && quality.stderr.contains("needs it"), "\(quality.stderr)")
        m.fixture.clearLog()
        try m.mount()  // the pin is picked up by itself: nothing else asks for the file
        let deadline = Date().addingTimeInterval(30)
        while StatusCommandXattr.get(m.path(rel), "state") != "unverified" && Date() < deadline { usleep(50_000) }
        #expect(StatusCommandXattr.get(m.path(rel), "state") == "unverified")
        #expect(!m.fixture.downloadRequests.isEmpty)
        try m.unmount()
    }
}

@Suite(.serialized) struct PinInterruptTests {
    /// Ctrl-C during `pin --wait` ends the wait, says the download goes on and how to follow it;
    /// the file stays pinned.
    @Test func ctrlCDuringPinWaitSaysTheDownloadGoesOn() throws {
        let m = try MountedLabstream("pin-interrupt")
        try m.mount()
        m.fixture.inject(.stall(20), pathPrefix: "/Items/", times: nil)
        let path = m.path("test/Movies/Alpha (2001)/Alpha (2001).mkv")
        let p = Process()
        p.executableURL = URL(fileURLWithPath: labstreamBinary)
        p.arguments = ["pin", "--wait", path]
        p.environment = ProcessInfo.processInfo.environment.merging(m.env) { $1 }
        let err = Pipe()
        p.standardError = err
        p.standardOutput = FileHandle.nullDevice
        try p.run()
        #expect(eventually { !m.fixture.downloadRequests.isEmpty })
        kill(p.processIdentifier, SIGINT)
        p.waitUntilExit()
        let stderr = String(decoding: err.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        #expect(
            p.terminationStatus == 130 && stderr.contains("the download goes on in the background") && stderr.contains("labstream status --watch"),
            "\(p.terminationStatus) \(stderr)")
        #expect(StatusCommandXattr.get(path, "pinned") == "1")
        m.fixture.clearFaults()
        try m.unmount()
    }
}

/// Syncs of one server run one at a time (two at once each held a whole catalog); syncs of
/// different servers do not wait for each other.
@Suite struct KeyedGateTests {
    @Test func oneBodyPerKeyAtATime() {
        let gate = KeyedGate()
        let inside = Atomic<Int>(0)
        let overlapped = Atomic<Bool>(false)
        let done = DispatchGroup()
        for _ in 0..<4 {
            done.enter()
            Thread {
                for _ in 0..<200 {
                    gate.run("home") {
                        if inside.add(1, ordering: .sequentiallyConsistent).newValue > 1 { overlapped.store(true, ordering: .sequentiallyConsistent) }
                        var spin = 0
                        for i in 0..<2000 { spin &+= i }  // stay inside a little
                        _ = spin
                        inside.subtract(1, ordering: .sequentiallyConsistent)
                    }
                }
                done.leave()
            }.start()
        }
        done.wait()
        let sawTwo = overlapped.load(ordering: .sequentiallyConsistent)
        #expect(!sawTwo)
    }

    @Test func differentKeysDoNotWait() {
        let gate = KeyedGate()
        let otherRan = DispatchSemaphore(value: 0)
        // The body of "home" waits for the body of "den": a gate that held "den" back would
        // never let it run (the wait's timeout turns that into a failure, not a hang).
        let ranTogether = gate.run("home") { () -> Bool in
            Thread { gate.run("den") { _ = otherRan.signal() } }.start()
            return otherRan.wait(timeout: .now() + 30) == .success
        }
        #expect(ranTogether)
    }
}
