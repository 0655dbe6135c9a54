import Foundation
import LabstreamCore
import LabstreamDaemon
import Testing

/// The status page in a real browser: Debian's headless Chromium driven by selenium
/// (Tests/browser/status_page.py; `make deps` installs them) against a real daemon whose
/// server is emulated, its transfers slowed so progress can be watched.
@Suite struct BrowserTests {
    static let script = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().appendingPathComponent("browser/status_page.py")
        .path

    @Test func thePageSignsInShowsProgressAndPins() throws {
        for tool in ["/usr/bin/chromium", "/usr/bin/chromedriver"] {
            try #require(access(tool, X_OK) == 0, "\(tool) is missing: run `make deps` (chromium, chromium-driver, python3-selenium)")
        }
        let d = try HTTPDaemon("browser", http: "127.0.0.1:0") { config in
            // 12 MiB at 1 MiB/s, one file at a time: the first takes seconds, a second one waits.
            config.rateLimit = 1 << 20
            config.maxConcurrentFiles = 1
        }
        defer { d.stop() }
        let alpha = "test/Movies/Alpha (2001)/Alpha (2001).mkv"
        let pilot = "test/Shows/Show (2020)/Season 01/Show (2020) - S01E01 - Pilot.mkv"
        guard case .performed = d.daemon.handle(.perform(.pin(quality: nil), paths: [alpha])) else { Issue.record("not pinned"); return }
        let shot = d.scratch.path + "/status-page.png"
        let run = try runProcess(
            "/usr/bin/python3",
            [
                Self.script, "--url", "http://\(d.address)/", "--token-file", d.context.dataDir + "/http.token",
                "--downloading", alpha, "--to-pin", pilot, "--search", "show pilot", "--screenshot",
                ProcessInfo.processInfo.environment["LABSTREAM_SCREENSHOT"] ?? shot
            ])
        #expect(run.code == 0, "\(run.stdout)\n\(run.stderr)")
        #expect(run.stdout.contains("ok: the pinned file completes") && run.stdout.contains("ok: usable at phone width"), "\(run.stdout)")
        // What the browser pressed reached the daemon.
        let pinned = d.daemon.fs.statuses(below: try #require(d.daemon.fs.resolve(pilot.split(separator: "/").map(String.init))), named: pilot)
        #expect(pinned.first?.pinned == true)
        #expect(!run.stdout.contains(d.token) && !run.stderr.contains(d.token))
    }
}
