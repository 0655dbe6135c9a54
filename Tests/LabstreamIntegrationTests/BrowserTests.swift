import Foundation
import LabstreamCore
import LabstreamDaemon
import LabstreamFixture
import Testing

/// The status page in a real browser: Debian's headless Chromium driven by selenium
/// (Tests/browser/status_page.py; `make deps` installs them) against a real daemon whose
/// server is emulated, its transfers slowed so progress can be watched.
/// One browser at a time: three Chromiums and daemons at once on a loaded two-core machine only slow each other.
@Suite(.serialized) struct BrowserTests {
    static let script = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().appendingPathComponent("browser/status_page.py")
        .path

    @Test func thePageSignsInShowsProgressAndPins() throws {
        try Self.requireBrowser()
        // Two films of 20 MiB at 1 MiB/s, one file at a time: the first takes long enough for the
        // page to pin the second, see it wait behind and press its First button; then the second
        // is fetched before the rest of the first.
        let d = try HTTPDaemon(
            "browser", http: "127.0.0.1:0",
            catalog: { dir in
                FixtureCatalog(
                    movies: [("Nimbus", UInt64(1)), ("Orchid", UInt64(2))].map { (title: String, seed: UInt64) -> FixtureCatalog.Movie in
                        writeRandomFile(dir + "/\(title).mkv", size: 20 * MiB, seed: seed)
                        return .init(title: title, year: 2020, file: dir + "/\(title).mkv", container: "mkv")
                    }, series: [])
            }
        ) { config in
            config.rateLimit = 1 << 20
            config.maxConcurrentFiles = 1
        }
        defer { d.stop() }
        // The fill takes pinned files in the index's order (server, item, source; item ids are
        // the emulator's, new each run): the page pins the first film in that order, then the
        // other, which waits its turn (`queued`).
        func rank(_ f: TreeFile) -> [UInt8] { Array(f.key.itemId.utf8) + [0] + Array(f.key.sourceId.utf8) }
        let media = try d.daemon.index.treeFiles().filter { !isGenerated($0.path.last ?? "") }
        let order = media.sorted { rank($0).lexicographicallyPrecedes(rank($1)) }
        try #require(order.count == 2)
        let first = order[0].path.joined(separator: "/"), toPin = order[1].path.joined(separator: "/")
        func words(_ path: String) -> String { String((path.split(separator: "/").last ?? "").prefix(6)) }
        let shot = d.scratch.path + "/status-page.png"
        let run = try runProcess(
            "/usr/bin/python3",
            [
                Self.script, "--url", "http://\(d.address)/", "--token-file", d.context.dataDir + "/http.token",
                "--downloading", first, "--to-pin", toPin, "--search-downloading", words(first), "--search-to-pin", words(toPin), "--screenshot",
                ProcessInfo.processInfo.environment["LABSTREAM_SCREENSHOT"] ?? shot
            ])
        #expect(run.code == 0, "\(run.stdout)\n\(run.stderr)")
        #expect(run.stdout.contains("ok: First puts the queued file in front"), "\(run.stdout)")
        #expect(run.stdout.contains("ok: the pinned file completes") && run.stdout.contains("ok: usable at phone width"), "\(run.stdout)")
        // What the browser pressed reached the daemon.
        let pinned = d.daemon.fs.statuses(below: try #require(d.daemon.fs.resolve(toPin.split(separator: "/").map(String.init))), named: toPin)
        #expect(pinned.first?.pinned == true)
        #expect(!run.stdout.contains(d.token) && !run.stderr.contains(d.token))
    }

    static func requireBrowser() throws {
        for tool in ["/usr/bin/chromium", "/usr/bin/chromedriver"] {
            try #require(access(tool, X_OK) == 0, "\(tool) is missing: run `make deps` (chromium, chromium-driver, python3-selenium)")
        }
    }

    static let alpha = "test/Movies/Alpha (2001)/Alpha (2001).mkv"
    static let beta = "test/Movies/Beta (2002)/Beta (2002).mp4"
    static let gamma = "test/Movies/Gamma/Gamma.mkv"
    static let show = "test/Shows/Show (2020)"
    static let latest = "test/Shows/Show (2020)/Season 02/Show (2020) - S02E01 - Return.mkv"

    func status(_ d: HTTPDaemon, _ path: String) throws -> FileStatus? {
        d.daemon.fs.statuses(below: try #require(d.daemon.fs.resolve(path.split(separator: "/").map(String.init))), named: path).first
    }

    /// Every control a file or series has on the page, pressed in the browser, and its effect
    /// read back from the daemon: Verify of a stored copy damaged on disk (found failed) and
    /// Retry of it (fetched again), Pause and Resume of a download, Retry of a pin over
    /// `max_size` (the page shows the daemon's "parked again" answer), and a series monitored
    /// from the search's results, then no longer.
    @Test func theControlsOfAFileAndASeriesActOnTheDaemon() throws {
        try Self.requireBrowser()
        // Gamma (0.7 MiB) is stored first; Alpha (12 MiB) at 1 MiB/s can be paused on its way;
        // with both stored, Beta (3 MiB) does not fit in 14.5 MiB, and the latest season's
        // episode (1 MiB) does.
        let d = try HTTPDaemon(
            "browser-controls", http: "127.0.0.1:0",
            configure: { config in
                config.rateLimit = 1 << 20
                config.maxConcurrentFiles = 1
                config.maxCacheSize = 29 * Int64(MiB) / 2
                config.sideAssets = .off
            })
        defer { d.stop() }
        // Gamma stored (followed on the change counter), then cut short on disk behind the
        // daemon's back: only a new check can tell.
        try #require(try exchange(port: d.port, request("POST", "/api/pin", token: d.token, json: #"{"paths":["\#(Self.gamma)"]}"#)).status == 200)
        var change = 0
        var state = ""
        let query = "/api/status?path=" + (Self.gamma.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? "")
        for _ in 0..<30 where state != "unverified" {
            let answer = try exchange(port: d.port, request("GET", query + "&after=\(change)&wait=5", token: d.token)).json
            change = answer["change"] as? Int ?? change
            state = (answer["files"] as? [[String: Any]])?.first?["state"] as? String ?? ""
        }
        try #require(state == "unverified")
        let gamma = try #require(try d.daemon.index.treeFiles().first { $0.path.joined(separator: "/") == Self.gamma })
        let stored = try #require(try d.daemon.index.download(gamma.key))
        try #require(truncate(d.context.layout.absolute(stored.partialPath), off_t(stored.total / 2)) == 0)
        let run = try runProcess(
            "/usr/bin/python3",
            [
                Self.script, "--scenario", "controls", "--url", "http://\(d.address)/", "--token-file", d.context.dataDir + "/http.token",
                "--damaged", Self.gamma, "--to-pause", Self.alpha, "--search-to-pause", "alpha", "--over-budget", Self.beta, "--search-over-budget", "beta",
                "--series", Self.show, "--search-series", "show (2020)", "--series-episode", Self.latest, "--screenshot",
                ProcessInfo.processInfo.environment["LABSTREAM_SCREENSHOT_CONTROLS"] ?? d.scratch.path + "/controls.png"
            ])
        #expect(run.code == 0, "\(run.stdout)\n\(run.stderr)")
        #expect(run.stdout.contains("ok: stop monitoring it") && run.stdout.contains("ok: usable at phone width"), "\(run.stdout)")
        // What the browser pressed went through the daemon's own commands, each once at least.
        for command in ["action=pause", "action=resume", "action=verify", "action=retry", "monitor=latest-season", "monitor=off"] {
            #expect(d.log.contains("control: \(command) on 1 paths"), "\(command) never reached the daemon")
        }
        // The damaged copy was fetched again whole.
        let refetched = try status(d, Self.gamma)
        #expect([.complete, .unverified].contains(refetched?.state) && refetched?.present == gamma.size, "\(String(describing: refetched))")
        let copy = d.context.layout.absolute(try #require(try d.daemon.index.download(gamma.key)).partialPath)
        #expect(try sha256(copy) == sha256(d.scratch.path + "/media/gamma.mkv"))
        let alpha = try status(d, Self.alpha)
        #expect(alpha?.pinned == true && [.complete, .unverified].contains(alpha?.state), "\(String(describing: alpha))")
        let beta = try status(d, Self.beta)
        #expect(beta?.state == .paused && beta?.pauseCause == .overBudget, "\(String(describing: beta))")
        // The monitor pinned its episode; stopping it left the episode pinned and no monitor.
        #expect(try status(d, Self.latest)?.pinned == true)
        #expect(try d.daemon.index.monitors().isEmpty)
        #expect(!run.stdout.contains(d.token) && !run.stderr.contains(d.token))
    }

    /// A server's troubles in words: its sign-in refused (the emulated server answers 401 to the
    /// stored token; the daemon finds out on a pin's first request), its event channel lost, and
    /// then the server not answering at all.
    @Test func aServersTroublesAreSaidInWords() throws {
        try Self.requireBrowser()
        let d = try HTTPDaemon("browser-trouble", http: "127.0.0.1:0", configure: { config in config.sideAssets = .off })
        defer { d.stop() }
        // The public info still answers: the server is there, it refuses the sign-in.
        for prefix in ["/Users", "/Items", "/Videos"] { d.fixture.inject(.status(401), pathPrefix: prefix, times: nil) }
        // As a mount would: the refresh and the event channel start.
        d.daemon.mounted()
        let pin = try exchange(port: d.port, request("POST", "/api/pin", token: d.token, json: #"{"paths":["\#(Self.gamma)"]}"#))
        try #require(pin.status == 200, "\(pin.text)")
        // Followed on the daemon's change counter, never a clock.
        var change = 0
        func followUntil(_ wanted: String) throws {
            var reachability = ""
            for _ in 0..<30 where reachability != wanted {
                let answer = try exchange(port: d.port, request("GET", "/api/status?after=\(change)&wait=5", token: d.token)).json
                change = answer["change"] as? Int ?? change
                reachability = (answer["servers"] as? [[String: Any]])?.first?["reachability"] as? String ?? ""
            }
            try #require(reachability == wanted, "\(d.log.suffix(2000))")
        }
        func page(_ reachability: String) throws -> ProcessResult {
            try runProcess(
                "/usr/bin/python3",
                [
                    Self.script, "--scenario", "trouble", "--url", "http://\(d.address)/", "--token-file", d.context.dataDir + "/http.token",
                    "--server", "test", "--refused-file", Self.gamma, "--reachability", reachability
                ])
        }
        try followUntil("auth-failed")
        let run = try page("auth-failed")
        #expect(run.code == 0, "\(run.stdout)\n\(run.stderr)")
        #expect(run.stdout.contains("ok: a refused sign-in is said in words"), "\(run.stdout)")
        #expect(run.stdout.contains("ok: a lost event channel is said in words"), "\(run.stdout)")
        // Then the server stops answering at all (its public info too): the next probe says so.
        d.fixture.clearFaults()
        d.fixture.inject(.status(503), pathPrefix: "/System", times: nil)
        try followUntil("offline")
        let away = try page("offline")
        #expect(away.code == 0, "\(away.stdout)\n\(away.stderr)")
        #expect(away.stdout.contains("ok: a server that does not answer is said in words"), "\(away.stdout)")
        #expect(!(run.stdout + run.stderr + away.stdout + away.stderr).contains(d.token))
    }
}
