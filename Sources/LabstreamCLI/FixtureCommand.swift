import Foundation
import LabstreamCore
import LabstreamFixture

/// `labstream fixture DIR`: a development helper for benchmarks and manual testing. Serves every
/// regular file in DIR as a movie from the Jellyfin fixture (user demo, password demo) on
/// loopback, prints its URL on the first line, and links `DIR/.by-id/ID` to each file so that
/// a real web server (nginx in `make bench`) can answer `/Items/ID/Download` itself.
enum FixtureCommand {
    static let spec = Arguments.Spec(valued: Context.globalValued, flags: Context.globalFlags)

    static func run(_ argv: [String]) throws -> Int32 {
        let args = try Arguments.parse(argv, spec: spec)
        guard args.positionals.count == 1 else { throw UsageError("usage: labstream fixture DIR") }
        let dir = args.positionals[0]
        let names = try FileManager.default.contentsOfDirectory(atPath: dir).filter { !$0.hasPrefix(".") }.sorted()
        let movies: [FixtureCatalog.Movie] = names.compactMap { name in
            var isDir: ObjCBool = false
            guard FileManager.default.fileExists(atPath: dir + "/" + name, isDirectory: &isDir), !isDir.boolValue else { return nil }
            let stem = name.split(separator: ".").dropLast().joined(separator: ".")
            return .init(title: stem.isEmpty ? name : stem, year: nil, file: dir + "/" + name, container: String(name.split(separator: ".").last ?? "bin"))
        }
        let fixture = try ServerFixture(catalog: FixtureCatalog(movies: movies, series: []), userName: "demo", password: "demo")
        let links = dir + "/.by-id"
        try? FileManager.default.createDirectory(atPath: links, withIntermediateDirectories: true)
        for m in movies {
            guard let id = fixture.itemId(forFile: m.file) else { continue }
            try? FileManager.default.removeItem(atPath: links + "/" + id)
            try FileManager.default.createSymbolicLink(atPath: links + "/" + id, withDestinationPath: m.file)
        }
        let set = Daemon.blockSignals()
        printOut(try fixture.start())
        var signal: Int32 = 0
        var wanted = set
        sigwait(&wanted, &signal)
        fixture.stop()
        return ExitCode.ok
    }
}
