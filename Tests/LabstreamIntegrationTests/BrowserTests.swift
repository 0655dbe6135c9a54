import Foundation
import LabstreamCore
import LabstreamDaemon
import LabstreamFixture
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
}
