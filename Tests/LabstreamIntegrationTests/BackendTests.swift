import Foundation
import LabstreamBackends
import LabstreamCore
import LabstreamDemo
import LabstreamFixture
import LabstreamHTTP
import LabstreamStore
import Testing

@Suite struct BackendTests {
    let identity = ClientIdentity(device: "test", deviceId: "test-device")

    func startFixture(_ scratch: Scratch, movies: Int = 0) throws -> ServerFixture {
        var catalog = testCatalog(in: scratch.sub("media"))
        for i in 0..<movies {
            let f = scratch.path + "/media/extra\(i).mkv"
            writeRandomFile(f, size: 1000 + i, seed: UInt64(100 + i))
            catalog.movies.append(.init(title: "Extra \(i)", year: 2000 + i, file: f, container: "mkv"))
        }
        let fixture = try ServerFixture(catalog: catalog, userName: "demo", password: "pw")
        try fixture.start()
        return fixture
    }

    /// The index's row for the fixture as server "test".
    func serverRow(_ fixture: ServerFixture) -> OfflineIndex.ServerRow {
        .init(name: "test", type: "jellyfin", url: fixture.baseURL, serverId: nil, lastSync: nil)
    }

    func client(_ fixture: ServerFixture, pageSize: Int = 200) throws -> MediaBrowserClient {
        let (_, _, login) = try MediaBrowserClient.login(url: fixture.baseURL, user: "demo", password: "pw", identity: identity, transport: CurlTransport())
        return MediaBrowserClient(
            session: ServerSession(name: "test", url: fixture.baseURL, userId: login.userId, token: login.token),
            identity: identity, transport: CurlTransport(), pageSize: pageSize)
    }

    /// A server that ignores the page offset answers the first page again: the walk stops when a
    /// page brings nothing new, without duplicates (it does not loop).
    @Test func aServerIgnoringPageOffsetsEndsTheWalk() throws {
        let scratch = Scratch("paging-ignored")
        let fixture = try startFixture(scratch, movies: 5)
        defer { fixture.stop() }
        fixture.ignorePageOffsets()
        let catalog = try client(fixture, pageSize: 2).fetchCatalog { _ in }
        let movies = try #require(catalog.first { $0.name == "Movies" })
        #expect(movies.items.count == 2 && Set(movies.items.map(\.id)).count == 2)
        // The first page's answer has the next two asked ahead (offsets 2 and 4); the walk waits
        // for both before it returns and asks nothing after.
        #expect(
            fixture.requestLog.filter { $0.path == "/Items" && $0.query["includeItemTypes"] == "Movie" }.compactMap { $0.query["startIndex"] }.sorted() == [
                "0", "2", "4"
            ])
    }

    /// A size probe to a server that ignores `Range` learns the size from the whole-file answer's
    /// `Content-Length` and reads no more of its body than the limit.
    @Test func aSizeProbeReadsOnlyTheBeginningOfAWholeFileAnswer() throws {
        let scratch = Scratch("size-probe")
        let fixture = try startFixture(scratch)
        defer { fixture.stop() }
        let backend = try client(fixture)
        let alpha = try #require(try backend.fetchCatalog { _ in }.flatMap(\.items).first { $0.title == "Alpha" }?.sources.first)
        let file = TreeFile(path: [], key: FileKey(server: "test", itemId: alpha.id, sourceId: alpha.id), size: 0, modified: 0, etag: nil)
        let size = try #require(alpha.size)
        #expect(try backend.transport.sizeOf(backend.rangeRequest(for: file, range: ByteRange(0, 1), validator: nil)) == (206, size))

        fixture.inject(.ignoreRange, pathPrefix: "/Items/", times: 2)
        #expect(try backend.transport.sizeOf(backend.rangeRequest(for: file, range: ByteRange(0, 1), validator: nil)) == (200, size))
        var request = backend.rangeRequest(for: file, range: ByteRange(0, 1), validator: nil)
        request.bodyLimit = 1000
        let cut = try backend.transport.send(request)
        #expect(cut.status == 200 && cut.body.count == 1000 && cut.header("Content-Length") == String(size))
    }

    @Test func catalogIsFetchedAcrossSeveralPages() throws {
        let scratch = Scratch("paging")
        let fixture = try startFixture(scratch, movies: 5)
        defer { fixture.stop() }
        let catalog = try client(fixture, pageSize: 2).fetchCatalog { _ in }
        let movies = try #require(catalog.first { $0.name == "Movies" })
        #expect(movies.items.count == 11)
        #expect(Set(movies.items.map(\.title)).isSuperset(of: ["Alpha", "Beta", "Extra 0", "Extra 4"]))
        let shows = try #require(catalog.first { $0.name == "Shows" })
        #expect(shows.items.count == 4)
        #expect(shows.items.allSatisfy { $0.seriesName == "Show" && $0.seriesYear == 2020 && $0.sources.count == 1 })
        // The music library is read too (issue 19); this fixture's holds no tracks.
        #expect(catalog.count == 4 && catalog.first { $0.name == "Music" }?.items.isEmpty == true)
        // Live TV is said, with why, and never walked.
        #expect(catalog.first { $0.name == "Live TV" }?.leftOut?.contains("not files") == true)
        #expect(!fixture.requestLog.contains { $0.query["parentId"] == catalog.first { $0.name == "Live TV" }?.id })
        #expect(fixture.requestLog.contains { $0.path == "/Items" && $0.query["includeItemTypes"] == "Audio" })
        let starts = fixture.requestLog.filter { $0.path == "/Items" && $0.query["includeItemTypes"] == "Movie" }.compactMap { $0.query["startIndex"] }
        // Each page once, none past the total (pages asked ahead may arrive in any order).
        #expect(starts.compactMap { Int($0) }.sorted() == [0, 2, 4, 6, 8, 10])
        // Every authenticated call used the Authorization header, never a legacy form.
        let authenticated = fixture.requestLog.filter { $0.path != "/System/Info/Public" && $0.path != "/Users/AuthenticateByName" }
        #expect(authenticated.allSatisfy { $0.authorized })
        #expect(fixture.requestLog.allSatisfy { $0.query["api_key"] == nil && $0.query["ApiKey"] == nil })
    }

    @Test func wrongPasswordIsAnAuthenticationError() throws {
        let scratch = Scratch("badpw")
        let fixture = try startFixture(scratch)
        defer { fixture.stop() }
        #expect(throws: LabstreamError.authenticationFailed("wrong user name or password for 'demo'")) {
            _ = try MediaBrowserClient.login(url: fixture.baseURL, user: "demo", password: "nope", identity: identity, transport: CurlTransport())
        }
    }

    @Test func unreachableServerIsUnavailable() throws {
        let scratch = Scratch("gone")
        let fixture = try startFixture(scratch)
        let url = fixture.baseURL
        fixture.stop()
        do {
            _ = try MediaBrowserClient.login(url: url, user: "demo", password: "pw", identity: identity, transport: CurlTransport())
            Issue.record("login to a stopped server succeeded")
        } catch {
            guard case .serverUnavailable = error else { Issue.record("expected serverUnavailable, got \(error)"); return }
        }
    }

    @Test func aServerThatIsNotJellyfinIsRecognised() throws {
        let server = try HTTPServer { _ in
            HTTPServer.Response(status: 200, headers: [("Content-Type", "text/html")], body: .bytes(Array("<html>It works!</html>".utf8)))
        }
        defer { server.stop() }
        do {
            _ = try MediaBrowserClient.login(url: server.baseURL, user: "a", password: "b", identity: identity, transport: CurlTransport())
            Issue.record("login to a plain web server succeeded")
        } catch {
            guard case .malformedResponse(let why) = error else { Issue.record("got \(error)"); return }
            #expect(why.contains("not valid JSON"))
        }
    }

    /// A restarting server's 503s and a 429 are waited out; a single 401 is re-checked against
    /// the current user and the sync goes on; a 401 that stands is a sign-in failure.
    @Test func aSyncRidesOutTransientAnswersAndReChecksA401() throws {
        let scratch = Scratch("sync-transient")
        let fixture = try startFixture(scratch)
        defer { fixture.stop() }
        let client = try client(fixture)
        let expected = try client.fetchCatalog { _ in }.flatMap(\.items).count
        fixture.inject(.status(503), pathPrefix: "/Items", times: 2)
        fixture.inject(.statusRetryAfter(429, "1"), pathPrefix: "/UserViews", times: 1)
        #expect(try client.fetchCatalog { _ in }.flatMap(\.items).count == expected)
        fixture.clearLog()
        fixture.inject(.status(401), pathPrefix: "/Items", times: 1)
        #expect(try client.fetchCatalog { _ in }.flatMap(\.items).count == expected)
        #expect(fixture.requestLog.contains { $0.path == "/Users/Me" })
        fixture.inject(.status(401), pathPrefix: "/Items", times: nil)
        #expect { _ = try client.fetchCatalog { _ in } } throws: {
            ($0 as? LabstreamError).map { if case .authenticationFailed = $0 { true } else { false } } ?? false
        }
    }

    @Test func malformedOrTruncatedJSONFailsTheSyncAndKeepsTheOldCatalog() throws {
        let scratch = Scratch("badjson")
        let fixture = try startFixture(scratch)
        defer { fixture.stop() }
        let client = try client(fixture)
        let index = try OfflineIndex(path: scratch.path + "/index.sqlite")
        let good = try client.fetchCatalog { _ in }
        let tree = TreeBuilder.build(server: "test", libraries: good)
        try index.replaceCatalog(
            server: serverRow(fixture),
            libraries: good, tree: tree, now: 1)
        for fault in [FixtureFault.malformedJSON, .truncatedJSON, .status(500)] {
            fixture.inject(fault, pathPrefix: "/Shows/", times: fault == .status(500) ? nil : 1)  // a 500 once is retried
            #expect(throws: LabstreamError.self) { _ = try client.fetchCatalog { _ in } }
            #expect(try index.treeFiles().count == tree.count)
            fixture.clearFaults()
        }
        // A failing write leaves the previous catalog too: a duplicate key aborts the transaction.
        let broken = TreeBuilder.build(server: "test", libraries: [LibraryCatalog(id: "L", name: "Movies", items: [])])
        try index.db.exec("CREATE TRIGGER fail BEFORE INSERT ON libraries BEGIN SELECT RAISE(ABORT, 'disk trouble'); END")
        #expect(throws: LabstreamError.self) {
            try index.replaceCatalog(
                server: .init(name: "test", type: "jellyfin", url: "x", serverId: nil, lastSync: nil),
                libraries: [LibraryCatalog(id: "L", name: "Movies", items: [])], tree: broken, now: 2)
        }
        #expect(try index.treeFiles().count == tree.count)
    }

    /// Details stashed as pages arrive (in a staging table of the index's connection, not in
    /// memory) are what the catalog is written with: the stored details are those of the catalog
    /// fetched whole, the fetched items come without them, a second staging of the same server
    /// at the same time keeps its own, and nothing stays staged after.
    @Test func stagedDetailsAreWrittenAsIfFetchedWhole() throws {
        let scratch = Scratch("staged-details")
        var catalog = testCatalog(in: scratch.sub("media"))
        for i in catalog.movies.indices {
            catalog.movies[i].details.plot = "Plot \(i) <with> & marks"
            catalog.movies[i].details.genres = ["Drama", "Genre \(i)"]
        }
        let fixture = try ServerFixture(catalog: catalog, userName: "demo", password: "pw")
        try fixture.start()
        defer { fixture.stop() }
        let client = try client(fixture, pageSize: 2)
        let whole = try client.fetchCatalog { _ in }
        #expect(whole.flatMap(\.items).contains { $0.details?.orNil != nil })
        let index = try OfflineIndex(path: scratch.path + "/index.sqlite")
        let staged = try StagedDetails(index: index, server: "test")
        let other = try StagedDetails(index: index, server: "test")
        _ = try client.fetchCatalog(progress: { _ in }, stash: other)
        let stashed = try client.fetchCatalog(progress: { _ in }, stash: staged)
        #expect(stashed.flatMap(\.items).allSatisfy { $0.details == nil })
        try other.finish()
        other.discard()
        try staged.finish()
        try index.replaceCatalog(
            server: serverRow(fixture),
            libraries: stashed, tree: TreeBuilder.build(server: "test", libraries: stashed), now: 1, staged: staged)
        staged.discard()
        func details(_ libraries: [LibraryCatalog]) -> [String: ItemDetails] {
            Dictionary(uniqueKeysWithValues: libraries.flatMap(\.items).compactMap { item in item.details?.orNil.map { (item.id, $0) } })
        }
        let stored = try index.catalog(server: "test")
        #expect(!details(whole).isEmpty && details(stored) == details(whole))
        #expect(try index.db.query("SELECT count(*) FROM temp.staged_details") == [[.int(0)]])
    }

    /// A catalog written again as it was changes no row and says so; a changed size, a removed
    /// item and a renamed library each say changed, and the next identical write says not.
    @Test func rewritingAnUnchangedCatalogSaysNothingChanged() throws {
        let scratch = Scratch("unchanged-catalog")
        let fixture = try startFixture(scratch)
        defer { fixture.stop() }
        let client = try client(fixture)
        let index = try OfflineIndex(path: scratch.path + "/index.sqlite")
        func write(_ libraries: [LibraryCatalog], now: Int64) throws -> Bool {
            try index.replaceCatalog(
                server: serverRow(fixture),
                libraries: libraries, tree: TreeBuilder.build(server: "test", libraries: libraries), now: now)
        }
        let catalog = try client.fetchCatalog { _ in }
        let movies = try #require(catalog.firstIndex { $0.name == "Movies" && !$0.items.isEmpty })
        #expect(try write(catalog, now: 1))
        #expect(try !write(catalog, now: 2))
        #expect(try !write(try client.fetchCatalog { _ in }, now: 3))
        var resized = catalog
        resized[movies].items[0].sources[0].size = (resized[movies].items[0].sources[0].size ?? 0) + 1
        #expect(try write(resized, now: 4))
        #expect(try !write(resized, now: 5))
        var fewer = resized
        fewer[movies].items.removeLast()
        #expect(try write(fewer, now: 6))
        var renamed = fewer
        renamed[movies].name += " (renamed)"
        #expect(try write(renamed, now: 7))
        #expect(try !write(renamed, now: 8))
        #expect(try index.treeFiles().count == TreeBuilder.build(server: "test", libraries: renamed).count)
    }

    @Test func tokenAdoptionFindsTheUser() throws {
        let scratch = Scratch("token")
        let fixture = try startFixture(scratch)
        defer { fixture.stop() }
        let (_, _, userId) = try MediaBrowserClient.adoptToken(
            url: fixture.baseURL, user: nil, token: fixture.accessToken, identity: identity, transport: CurlTransport())
        #expect(userId == fixture.userId)
        #expect(throws: LabstreamError.authenticationFailed("the token was not accepted")) {
            _ = try MediaBrowserClient.adoptToken(url: fixture.baseURL, user: nil, token: "bogus", identity: identity, transport: CurlTransport())
        }
    }
}
