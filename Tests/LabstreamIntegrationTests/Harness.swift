import CLinux
import Foundation
import LabstreamCore
import LabstreamFixture
import Testing

/// A fresh directory under /tmp for one test.
final class Scratch: @unchecked Sendable {
    let path: String

    init(_ name: String) {
        var template = Array("/tmp/labstream-test-\(name)-XXXXXX".utf8CString)
        path = template.withUnsafeMutableBufferPointer { String(cString: mkdtemp($0.baseAddress!)) }
    }

    func sub(_ name: String) -> String {
        let p = path + "/" + name
        try? FileManager.default.createDirectory(atPath: p, withIntermediateDirectories: true)
        return p
    }

    deinit { try? FileManager.default.removeItem(atPath: path) }
}

/// Deterministic pseudo-random bytes, different per seed.
func writeRandomFile(_ path: String, size: Int, seed: UInt64) {
    var rng = SeededRandom(seed: seed)
    _ = FileManager.default.createFile(atPath: path, contents: Data(rng.bytes(size)))
}

let MiB = 1 << 20

/// A test library: movies and a two-season show with a special, hostile and duplicate titles.
func testCatalog(in dir: String) -> FixtureCatalog {
    func file(_ name: String, _ size: Int, _ seed: UInt64) -> String {
        let p = dir + "/" + name
        writeRandomFile(p, size: size, seed: seed)
        return p
    }
    return FixtureCatalog(
        movies: [
            .init(title: "Alpha", year: 2001, file: file("alpha.mkv", 12 * MiB + 37, 1), container: "mkv"),
            .init(title: "Beta", year: 2002, file: file("beta.mp4", 3 * MiB, 2), container: "mp4"),
            .init(title: "Gamma", year: nil, file: file("gamma.mkv", 700 * 1024, 3), container: "mkv"),
            .init(title: "../x", year: 1999, file: file("hostile.mkv", 4096, 4), container: "mkv"),
            .init(title: "Twin", year: 2010, file: file("twin1.mkv", 5000, 5), container: "mkv"),
            .init(title: "Twin", year: 2010, file: file("twin2.mkv", 6000, 6), container: "mkv")
        ],
        series: [
            .init(
                name: "Show", year: 2020,
                episodes: [
                    .init(season: 1, number: 1, title: "Pilot", file: file("s1e1.mkv", 2 * MiB + 1, 7), container: "mkv"),
                    .init(season: 1, number: 2, title: "Second", file: file("s1e2.mp4", 2 * MiB, 8), container: "mp4"),
                    .init(season: 2, number: 1, title: "Return", file: file("s2e1.mkv", MiB, 9), container: "mkv"),
                    .init(season: 0, number: 1, title: "Special", file: file("s0e1.mkv", 300_000, 10), container: "mkv")
                ])
        ])
}

/// The tree the test catalog must produce under server "test", relative path → source file.
func expectedTree(_ dir: String) -> [String: String] {
    [
        "test/Movies/Alpha (2001)/Alpha (2001).mkv": dir + "/alpha.mkv",
        "test/Movies/Beta (2002)/Beta (2002).mp4": dir + "/beta.mp4",
        "test/Movies/Gamma/Gamma.mkv": dir + "/gamma.mkv",
        "test/Movies/_x (1999)/_x (1999).mkv": dir + "/hostile.mkv",
        "test/Shows/Show (2020)/Season 01/Show (2020) - S01E01 - Pilot.mkv": dir + "/s1e1.mkv",
        "test/Shows/Show (2020)/Season 01/Show (2020) - S01E02 - Second.mp4": dir + "/s1e2.mp4",
        "test/Shows/Show (2020)/Season 02/Show (2020) - S02E01 - Return.mkv": dir + "/s2e1.mkv",
        "test/Shows/Show (2020)/Season 00/Show (2020) - S00E01 - Special.mkv": dir + "/s0e1.mkv"
    ]
}

struct ProcessResult {
    var code: Int32
    var stdout: String
    var stderr: String
}

/// The built `labstream` binary (make test builds it before running the tests).
let labstreamBinary: String = {
    if let env = ProcessInfo.processInfo.environment["LABSTREAM_BIN"] { return env }
    let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
    return root.appendingPathComponent(".build/debug/labstream").path
}()

/// Runs a program to completion, capturing its output.
func runProcess(_ executable: String, _ args: [String], environment: [String: String] = [:], stdin: String? = nil) throws -> ProcessResult {
    let p = Process()
    p.executableURL = URL(fileURLWithPath: executable)
    p.arguments = args
    var env = ProcessInfo.processInfo.environment
    for (k, v) in environment { env[k] = v }
    p.environment = env
    let out = Pipe(), err = Pipe(), input = Pipe()
    p.standardOutput = out
    p.standardError = err
    p.standardInput = input
    try p.run()
    if let stdin { input.fileHandleForWriting.write(Data(stdin.utf8)) }
    try input.fileHandleForWriting.close()
    // Read both pipes at once so neither can fill up and stall the child.
    let stderrData = LockedBox(Data())
    let group = DispatchGroup()
    group.enter()
    DispatchQueue.global().async {
        stderrData.set(err.fileHandleForReading.readDataToEndOfFile())
        group.leave()
    }
    let stdoutData = out.fileHandleForReading.readDataToEndOfFile()
    group.wait()
    p.waitUntilExit()
    return ProcessResult(
        code: p.terminationStatus, stdout: String(decoding: stdoutData, as: UTF8.self),
        stderr: String(decoding: stderrData.get(), as: UTF8.self))
}

final class LockedBox<T>: @unchecked Sendable {
    private var value: T
    private let lock = NSLock()
    init(_ v: T) { value = v }
    func set(_ v: T) { lock.lock(); value = v; lock.unlock() }
    func get() -> T { lock.lock(); defer { lock.unlock() }; return value }
    func update(_ body: (inout T) -> Void) { lock.lock(); body(&value); lock.unlock() }
}

/// Relative paths of the regular files below `root`.
func filesBelow(_ root: String) -> [String] {
    var out: [String] = []
    let walker = FileManager.default.enumerator(atPath: root)
    while let rel = walker?.nextObject() as? String {
        var dir: ObjCBool = false
        if FileManager.default.fileExists(atPath: root + "/" + rel, isDirectory: &dir), !dir.boolValue, !isGenerated(rel) { out.append(rel) }
    }
    return out.sorted()
}

/// The `.nfo` files Labstream makes beside the media (the media tests look past them).
func isGenerated(_ name: String) -> Bool { name.hasSuffix(".nfo") }

/// Waits for a condition another process brings about (a daemon, a fixture) — with a deadline,
/// checking every 20 ms; false if it never held.
func eventually(timeout: Double = 30, _ condition: () -> Bool) -> Bool {
    let deadline = Date().addingTimeInterval(timeout)
    while !condition() {
        if Date() > deadline { return false }
        usleep(20_000)
    }
    return true
}

/// Blocks until process `pid` has exited (any process, via a pidfd). Returns false on timeout.
func waitForExit(pid: Int32, timeoutMs: Int32 = 20_000) -> Bool {
    let fd = CLinux_pidfd_open(pid)
    if fd < 0 { return errno == ESRCH }
    defer { close(fd) }
    var p = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
    return poll(&p, 1, timeoutMs) == 1
}

/// A Labstream daemon mounted over a fixture server, driven only through the CLI.
final class MountedLabstream: @unchecked Sendable {
    let scratch: Scratch
    let fixture: ServerFixture
    /// plex.tv, for a Plex fixture (the PIN flow and server discovery go through it).
    let plexTV: PlexTVFixture?
    let mediaDir: String
    let configDir: String
    let dataDir: String
    let mountpoint: String
    private(set) var daemonPid: Int32 = 0

    var env: [String: String] { ["LABSTREAM_CONFIG_DIR": configDir, "LABSTREAM_DATA_DIR": dataDir] }

    /// Test media is random bytes, which the playback probe rightly rejects: it is off unless
    /// a test asks for it. `dataDir`: a data dir of the test's own (a small file system).
    init(
        _ name: String, kind: ServerFixture.Kind = .jellyfin, catalog: ((String) -> FixtureCatalog)? = nil,
        cacheConfig: String? = nil, probe: Bool = false, dataDir: String? = nil
    ) throws {
        scratch = Scratch(name)
        mediaDir = scratch.sub("media")
        configDir = scratch.sub("config")
        self.dataDir = dataDir ?? scratch.sub("data")
        mountpoint = scratch.sub("mnt")
        fixture = try ServerFixture(kind: kind, catalog: (catalog ?? testCatalog)(mediaDir), userName: "demo", password: "secret-pass")
        try fixture.start()
        plexTV = kind == .plex ? PlexTVFixture(server: fixture) : nil
        try plexTV?.start()
        plexTV?.approve(onPoll: 2)
        try addServer("test", fixture, plexTV: plexTV)
        let cache = [cacheConfig, probe ? nil : "playback_probe = no"].compactMap { $0 }.joined(separator: "\n")
        if !cache.isEmpty {
            let path = configDir + "/labstream.conf"
            let text = try String(contentsOfFile: path, encoding: .utf8) + "\n[cache]\n" + cache + "\n"
            try text.write(toFile: path, atomically: true, encoding: .utf8)
        }
    }

    /// `labstream server add` the way a user would for each kind: Jellyfin with a password,
    /// Emby by its bare URL (Labstream finds `/emby`), Plex through the PIN flow.
    func addServer(_ name: String, _ server: ServerFixture, plexTV: PlexTVFixture?) throws {
        let add: ProcessResult
        switch server.kind {
        case .plex:
            add = try cli(["server", "add", "plex", name, "--pin", "--plex-tv-url", plexTV!.baseURL])
        case .jellyfin, .emby:
            add = try cli(["server", "add", server.kind.rawValue, name, "--url", server.baseURL, "--user", "demo", "--password-stdin"], stdin: "secret-pass\n")
        }
        try #require(add.code == 0, "server add \(server.kind) failed: \(add.stderr)")
    }

    func cli(_ args: [String], stdin: String? = nil) throws -> ProcessResult {
        try runProcess(labstreamBinary, args, environment: env, stdin: stdin)
    }

    /// `labstream mount [-o options]` (daemonised): returns once the mount is live.
    func mount(options: String? = nil) throws {
        daemonPid = try mountDaemon(at: mountpoint, dataDir: dataDir, options: options, cli: cli)
    }

    /// `labstream unmount` and wait until the daemon process is gone.
    func unmount() throws { try unmountDaemon(at: mountpoint, pid: daemonPid, cli: cli) }

    func path(_ relative: String) -> String { mountpoint + "/" + relative }

    var log: String { (try? String(contentsOfFile: dataDir + "/labstream.log", encoding: .utf8)) ?? "" }

    deinit {
        stopDaemon(at: mountpoint, pid: daemonPid, env: env)
        fixture.stop()
        plexTV?.stop()
    }
}

/// `labstream mount MOUNTPOINT` (daemonised) through `cli`; the daemon's pid once the mount is live.
func mountDaemon(
    at mountpoint: String, dataDir: String, options: String? = nil,
    cli: ([String], String?) throws -> ProcessResult
) throws -> Int32 {
    let r = try cli(["mount", mountpoint] + (options.map { ["-o", $0] } ?? []), nil)
    try #require(r.code == 0, "mount failed (\(r.code)): \(r.stderr)")
    let lock = try String(contentsOfFile: dataDir + "/labstream.lock", encoding: .utf8)
    let pid = Int32(lock.split(separator: "\n").first ?? "") ?? 0
    try #require(pid > 0)
    return pid
}

/// `labstream unmount MOUNTPOINT` through `cli`, and wait until the daemon is gone.
func unmountDaemon(at mountpoint: String, pid: Int32, cli: ([String], String?) throws -> ProcessResult) throws {
    let r = try cli(["unmount", mountpoint], nil)
    #expect(r.code == 0, "unmount failed: \(r.stderr)")
    #expect(waitForExit(pid: pid), "daemon \(pid) still running after unmount")
}

/// A test's daemon left running (a failed test): unmounted, waited for.
func stopDaemon(at mountpoint: String, pid: Int32, env: [String: String]) {
    guard pid > 0 && kill(pid, 0) == 0 else { return }
    _ = try? runProcess(labstreamBinary, ["unmount", mountpoint], environment: env)
    _ = waitForExit(pid: pid, timeoutMs: 5000)
}

/// Reads `length` bytes at `offset` with pread, as a player would.
func pread(path: String, offset: Int, length: Int) throws -> [UInt8] {
    let fd = open(path, O_RDONLY)
    guard fd >= 0 else { throw SyscallError(function: "open", context: path, code: errno) }
    defer { close(fd) }
    var buffer = [UInt8](repeating: 0, count: length)
    let n = try buffer.withUnsafeMutableBytes { b in try preadFully(fd, into: b, at: Int64(offset), context: path) }
    return Array(buffer[0..<n])
}

func sha256(_ path: String) throws -> String {
    let r = try runProcess("/usr/bin/sha256sum", [path])
    return String(r.stdout.split(separator: " ").first ?? "")
}
