import Foundation
import LabstreamBackends
import LabstreamCore
import LabstreamDemo
import LabstreamFixture
import LabstreamHTTP
import Testing

/// `make demo`'s command, as the README's first line runs it.
@Suite(.serialized) struct DemoTests {
    /// The embedded server's generated library is mounted in the foreground and reads byte for
    /// byte; Ctrl-C unmounts and ends the command. A demo profile's index it cannot use (one
    /// left by an older build) is moved aside with its bytes, not deleted, and a fresh one made.
    @Test func theDemoMountsItsLibraryAndCtrlCEndsIt() throws {
        let scratch = Scratch("demo")
        let data = scratch.sub("data"), mountpoint = scratch.sub("mnt")
        // Short clips made here, so the demo does not spend a minute making its own.
        let catalog = try DemoMedia.ensure(in: data + "/demo/media", seconds: 2) { _ in }
        try FileManager.default.createDirectory(atPath: data + "/demo/data", withIntermediateDirectories: true)
        let leftover = Data("not an index of this Labstream".utf8)
        try leftover.write(to: URL(fileURLWithPath: data + "/demo/data/index.sqlite"))

        let demo = Process()
        demo.executableURL = URL(fileURLWithPath: labstreamBinary)
        demo.arguments = ["demo", mountpoint]
        demo.environment = ProcessInfo.processInfo.environment.merging(
            ["LABSTREAM_DATA_DIR": data, "LABSTREAM_CONFIG_DIR": scratch.sub("config")]) { _, new in new }
        let output = Pipe()
        demo.standardOutput = output
        demo.standardError = output
        try demo.run()
        defer { if demo.isRunning { demo.interrupt(); demo.waitUntilExit() } }

        let movie = try #require(catalog.movies.first)
        let shown = mountpoint + "/demo/Movies/\(movie.title) (\(movie.year!))/\(movie.title) (\(movie.year!)).\(movie.container)"
        #expect(eventually(timeout: 60) { FileManager.default.fileExists(atPath: shown) })
        #expect(try sha256(shown) == sha256(movie.file))
        let episodes = try FileManager.default.subpathsOfDirectory(atPath: mountpoint + "/demo/Shows").filter { $0.hasSuffix(".mkv") || $0.hasSuffix(".mp4") }
        #expect(episodes.count == catalog.series.first?.episodes.count)
        // And its music: an album of two discs, a single; a track plays as it is.
        let music = Set(try FileManager.default.subpathsOfDirectory(atPath: mountpoint + "/demo/Music").filter { $0.hasSuffix(".flac") })
        #expect(
            music == [
                "Oscillator/Test Tones (2022)/1-01 - A 440.flac", "Oscillator/Test Tones (2022)/1-02 - E 330.flac",
                "Oscillator/Test Tones (2022)/2-01 - Low C.flac", "Oscillator/Singles/Sweep.flac"
            ], "\(music)")
        let track = mountpoint + "/demo/Music/Oscillator/Test Tones (2022)/1-01 - A 440.flac"
        #expect(try runProcess("/usr/bin/mpv", ["--vo=null", "--ao=null", "--length=1", track]).code == 0)
        let aside = try FileManager.default.contentsOfDirectory(atPath: data + "/demo/data").filter { $0.hasPrefix("index.sqlite.unusable-") }
        #expect(aside.count == 1)
        #expect(FileManager.default.contents(atPath: data + "/demo/data/" + (aside.first ?? "")) == leftover)

        demo.interrupt()  // Ctrl-C
        demo.waitUntilExit()
        let said = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        #expect(demo.terminationStatus == 0, "\(said)")
        #expect(said.contains("it was moved to") && said.contains("Press Ctrl-C"), "\(said)")
        #expect(!FileManager.default.fileExists(atPath: shown))  // unmounted
    }

    /// The demo's own server, asked with the requests Labstream's Jellyfin client builds: a
    /// sign-in, the library, and ranges as Jellyfin's spec and RFC 9110 answer them.
    @Test func theDemoServerAnswersTheJellyfinClientsRequests() throws {
        let scratch = Scratch("demo-server")
        let file = scratch.path + "/film.mkv"
        let bytes = (0..<10_000).map { UInt8($0 % 251) }
        try Data(bytes).write(to: URL(fileURLWithPath: file))
        let show = DemoLibrary.Series(
            name: "Show", year: 2020,
            episodes: [
                .init(season: 1, number: 1, title: "One", file: file, container: "mkv"), .init(season: 2, number: 1, title: "Two", file: file, container: "mkv")
            ])
        let server = DemoServer(
            library: DemoLibrary(movies: [.init(title: "Film", year: 2001, file: file, container: "mkv")], series: [show]), user: "demo", password: "demo")
        let url = try server.start()
        defer { server.stop() }
        let transport = CurlTransport()
        let requests = MediaBrowserRequests(flavor: .jellyfin, baseURL: url, identity: ClientIdentity(device: "test", deviceId: "t-1"))
        #expect(try MediaBrowserDecode.publicInfo(transport.call(requests.publicInfo()).body).version == "10.11.11")
        #expect(try transport.call(requests.authenticate(user: "demo", password: "wrong")).status == 401)
        let login = try MediaBrowserDecode.login(transport.call(requests.authenticate(user: "demo", password: "demo")).body)
        #expect(try transport.call(requests.userViews(userId: login.userId, token: "not-the-token")).status == 401)
        let views = try MediaBrowserDecode.views(transport.call(requests.userViews(userId: login.userId, token: login.token)).body)
        #expect(views.map(\.collectionType) == ["movies", "tvshows", "music"])
        let movies = try #require(views.first)
        let page = try MediaBrowserDecode.page(
            transport.call(requests.items(userId: login.userId, parentId: movies.id, types: "Movie", startIndex: 0, limit: 100, token: login.token)).body,
            "/Items")
        let film = try #require(page.items.first.flatMap { MediaBrowserDecode.item($0) })
        #expect(page.total == 1 && film.title == "Film" && film.year == 2001 && film.sources.first?.size == 10_000)
        // Nothing was saved since a later sync: an incremental refresh finds no change.
        let later = try transport.call(
            requests.items(
                userId: login.userId, parentId: movies.id, types: "Movie", startIndex: 0, limit: 100, token: login.token, savedSince: "2030-01-01T00:00:00Z"))
        #expect(try MediaBrowserDecode.page(later.body, "/Items").total == 0)

        let range = try transport.call(requests.download(itemId: film.id, range: ByteRange(100, 200), validator: nil, token: login.token))
        #expect(range.status == 206 && range.headers["content-range"] == "bytes 100-199/10000" && range.body == Array(bytes[100..<200]))
        let tag = try #require(range.headers["etag"])
        let same = try transport.call(requests.download(itemId: film.id, range: ByteRange(9_990, 10_000), validator: .etag(tag), token: login.token))
        #expect(same.status == 206 && same.body == Array(bytes[9_990...]))
        // Another version named in If-Range: the whole file, not a range of something else.
        let other = try transport.call(requests.download(itemId: film.id, range: ByteRange(0, 10), validator: .etag("\"old\""), token: login.token))
        #expect(other.status == 200 && other.body == bytes)
        let past = try transport.call(requests.download(itemId: film.id, range: ByteRange(20_000, 20_010), validator: nil, token: login.token))
        #expect(past.status == 416 && past.headers["content-range"] == "bytes */10000")
        #expect(try transport.call(requests.download(itemId: "no-such-item", range: ByteRange(0, 1), validator: nil, token: login.token)).status == 404)
        // The spec's optional userId (the token's user) and ids filter; one season's episodes; 404 for no such series.
        func get(_ path: String) throws -> HTTPResponse {
            var r = requests.userViews(userId: login.userId, token: login.token)
            r.url = url + path
            return try transport.call(r)
        }
        #expect(try MediaBrowserDecode.page(get("/Items?parentId=\(movies.id)&recursive=true&ids=\(film.id)").body, "/Items").total == 1)
        #expect(try MediaBrowserDecode.page(get("/Items?parentId=\(movies.id)&recursive=true&ids=nothing").body, "/Items").total == 0)
        #expect(try get("/Items?userId=someone-else").status == 404)
        let seriesId = try #require(
            MediaBrowserDecode.page(get("/Items?includeItemTypes=Series&recursive=true").body, "/Items").items.first?["Id"].string)
        let (seasons, _) = try MediaBrowserDecode.seasons(get("/Shows/\(seriesId)/Seasons").body)
        let second = try #require(seasons.first { $0.value == 2 }?.key)
        let episodes = try MediaBrowserDecode.page(get("/Shows/\(seriesId)/Episodes?seasonId=\(second)").body, "/Shows/{id}/Episodes").items
        #expect(episodes.map { $0["Name"].string } == ["Two"])
        #expect(
            try MediaBrowserDecode.page(get("/Shows/\(seriesId)/Episodes?season=1").body, "/Shows/{id}/Episodes").items.map { $0["Name"].string } == ["One"])
        #expect(try get("/Shows/no-such-series/Episodes").status == 404)
        #expect(range.headers["content-type"] == "video/x-matroska")

        // The last N bytes; a range this server does not serve (backwards, several) is the whole file.
        func ranged(_ spec: String) throws -> HTTPResponse {
            var r = requests.download(itemId: film.id, range: ByteRange(0, 1), validator: nil, token: login.token)
            r.headers = r.headers.filter { $0.name != "Range" } + [HTTPRequest.Header("Range", spec)]
            return try transport.call(r)
        }
        let tail = try ranged("bytes=-10")
        #expect(tail.status == 206 && tail.headers["content-range"] == "bytes 9990-9999/10000" && tail.body == Array(bytes[9_990...]))
        #expect(try ranged("bytes=5-3").status == 200 && ranged("bytes=0-1,5-6").body == bytes)
        #expect(tag.hasPrefix("\"") && tag.hasSuffix("\""))  // a strong entity tag, quoted
    }

    /// `labstream` carries the demo's small server, not the test emulators and their fault hooks.
    @Test func theShippedBinaryCarriesNoEmulator() throws {
        let binary = try #require(FileManager.default.contents(atPath: labstreamBinary))
        for name in ["ServerFixture", "FixtureFault", "PlexDownloadQueue", "SiloFixture"] {
            #expect(binary.range(of: Data(name.utf8)) == nil, "\(name) is linked into labstream")
        }
        #expect(binary.range(of: Data("DemoServer".utf8)) != nil)
    }
}
