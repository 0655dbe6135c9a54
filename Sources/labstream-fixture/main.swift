import Foundation
import LabstreamCore
import LabstreamFixture
import LabstreamTestSupport

#if canImport(Glibc)
    import Glibc
#endif

/// `labstream-fixture DIR`: a development helper for benchmarks and manual testing (built with
/// the package, never installed). Serves every regular file in DIR as a movie, and every file in
/// `DIR/Shows/NAME/` named `…SnnEmm…` as that episode of series NAME, from the Jellyfin fixture
/// (user demo, password demo) on loopback, each with the metadata a real library has (a plot,
/// genres, provider ids); prints its URL on the first line, and links `DIR/.by-id/ID` to each
/// movie and episode so that a real web server (nginx in `make bench`) can answer `/Items/ID/Download`
/// itself. SIGUSR1 saves every item anew, as a server-wide metadata refresh does (new dates and
/// tags), then prints `touched N`. Runs until SIGINT or SIGTERM.
///
/// `labstream-fixture --silo DIR` serves the same library from the Silo fixture (`/api/v2`, user
/// demo, password demo, 200 cards a page) instead; SIGUSR1 then prints `requests N versions V
/// seasons S` (what was asked since the last such line) instead of touching anything.
enum FixtureCommand {
    static func run(_ argv: [String]) throws -> Int32 {
        let silo = argv.first == "--silo"
        let rest = silo ? Array(argv.dropFirst()) : argv
        guard rest.count == 1, !rest[0].hasPrefix("-") else {
            FileHandle.standardError.write(Data("usage: labstream-fixture [--silo] DIR\n".utf8))
            return 64
        }
        let dir = rest[0]
        // Blocked before any thread starts, so that every thread leaves them to sigwait.
        var signals = sigset_t()
        sigemptyset(&signals)
        for s in [SIGINT, SIGTERM, SIGUSR1] { sigaddset(&signals, s) }
        pthread_sigmask(SIG_BLOCK, &signals, nil)
        let names = try FileManager.default.contentsOfDirectory(atPath: dir).filter { !$0.hasPrefix(".") }.sorted()
        let movies: [FixtureCatalog.Movie] = names.compactMap { name in
            var isDir: ObjCBool = false
            guard FileManager.default.fileExists(atPath: dir + "/" + name, isDirectory: &isDir), !isDir.boolValue else { return nil }
            let stem = name.split(separator: ".").dropLast().joined(separator: ".")
            return .init(
                title: stem.isEmpty ? name : stem, year: nil, file: dir + "/" + name, container: String(name.split(separator: ".").last ?? "bin"),
                details: details(name))
        }
        let catalog = FixtureCatalog(movies: movies, series: try series(in: dir + "/Shows"))
        if silo { return serveSilo(catalog, signals: &signals) }
        let fixture = try ServerFixture(catalog: catalog, userName: "demo", password: "demo")
        let links = dir + "/.by-id"
        try? FileManager.default.createDirectory(atPath: links, withIntermediateDirectories: true)
        let ids = fixture.itemIdsByFile
        for (file, id) in ids {
            try? FileManager.default.removeItem(atPath: links + "/" + id)
            try FileManager.default.createSymbolicLink(atPath: links + "/" + id, withDestinationPath: file)
        }
        FileHandle.standardOutput.write(Data((try fixture.start() + "\n").utf8))
        var signal: Int32 = 0
        while sigwait(&signals, &signal) == 0, signal == SIGUSR1 {
            FileHandle.standardOutput.write(Data("touched \(fixture.touchAll())\n".utf8))
        }
        fixture.stop()
        return 0
    }

    static func serveSilo(_ catalog: FixtureCatalog, signals: inout sigset_t) -> Int32 {
        var configuration = SiloFixture.Configuration()
        configuration.username = "demo"
        configuration.password = "demo"
        configuration.catalogPageSize = 200
        let fixture = SiloFixture(catalog: catalog, configuration: configuration)
        do {
            FileHandle.standardOutput.write(Data((try fixture.start() + "\n").utf8))
        } catch {
            FileHandle.standardError.write(Data("labstream-fixture: \(error)\n".utf8))
            return 1
        }
        var signal: Int32 = 0
        while sigwait(&signals, &signal) == 0, signal == SIGUSR1 {
            let log = fixture.requestLog
            fixture.clearRequestLog()
            let versions = log.filter { $0.path.hasSuffix("/versions") }.count, seasons = log.filter { $0.path.hasSuffix("/seasons") }.count
            FileHandle.standardOutput.write(Data("requests \(log.count) versions \(versions) seasons \(seasons)\n".utf8))
        }
        fixture.stop()
        return 0
    }

    /// About what a scraped film or episode carries: a plot of a few sentences, genres, a studio,
    /// ratings and provider ids.
    static func details(_ name: String) -> FixtureCatalog.Details {
        let n = name.utf8.reduce(0) { ($0 &* 31 &+ Int($1)) % 100_000 }
        return FixtureCatalog.Details(
            plot: "When \(name) begins, nobody in the quiet town expects the storm that follows. Over one long summer, old friends, "
                + "rivals and strangers are drawn together by a secret buried for decades, and each must decide what they are willing "
                + "to lose to keep it. A story of loyalty, memory and the price of the truth.",
            genres: ["Drama", "Mystery"], studios: ["Fixture Pictures"], rating: 7.1, contentRating: "PG-13", premiered: "2001-05-04",
            runtimeSeconds: 6000, imdb: "tt\(1_000_000 + n)", tmdb: "\(n)")
    }

    /// `SHOWS/NAME/…SnnEmm….ext` → series NAME with those episodes (none when SHOWS is absent).
    static func series(in shows: String) throws -> [FixtureCatalog.Series] {
        guard let names = try? FileManager.default.contentsOfDirectory(atPath: shows) else { return [] }
        return try names.filter { !$0.hasPrefix(".") }.sorted().map { show in
            let episodes = try FileManager.default.contentsOfDirectory(atPath: shows + "/" + show).sorted().compactMap { file -> FixtureCatalog.Episode? in
                let upper = file.uppercased()
                guard let s = upper.range(of: "S"), let e = upper.range(of: "E", range: s.upperBound..<upper.endIndex),
                    let season = Int(upper[s.upperBound..<e.lowerBound]),
                    let number = Int(upper[e.upperBound...].prefix { $0.isNumber })
                else { return nil }
                return .init(
                    season: season, number: number, title: "Episode \(number)", file: shows + "/" + show + "/" + file,
                    container: String(file.split(separator: ".").last ?? "bin"), details: details(file))
            }
            return .init(name: show, year: 2010, episodes: episodes, details: details(show))
        }
    }
}

do {
    exit(try FixtureCommand.run(Array(CommandLine.arguments.dropFirst())))
} catch {
    FileHandle.standardError.write(Data("labstream-fixture: \(error)\n".utf8))
    exit(1)
}
