import Foundation
import LabstreamBackends
import LabstreamCore
import LabstreamDaemon
import LabstreamFixture
import LabstreamHTTP
import LabstreamStore
import Synchronization
import Testing

@Suite struct CatalogSyncTests {
    /// A backend's refresh as the sync sees it: each change it applies is noted (its library and
    /// how many items it carried), then passed on.
    struct NotingChanges: IncrementalCatalog {
        let inner: MediaBrowserClient
        final class Noted: Sendable { let changes = Mutex<[(library: String, items: Int)]>([]) }
        let noted = Noted()

        var serverName: String { inner.serverName }
        var kind: BackendKind { inner.kind }
        var transport: any HTTPTransport { inner.transport }
        var reachabilityProbes: (public: HTTPRequest, signedIn: HTTPRequest) { inner.reachabilityProbes }
        func checkReachability() -> Reachability { inner.checkReachability() }
        func rangeRequest(for file: TreeFile, range: ByteRange, validator: Validator?) -> HTTPRequest {
            inner.rangeRequest(for: file, range: range, validator: validator)
        }
        func fetchCatalog(progress: (String) -> Void, stash: (any DetailsStash)?) throws(LabstreamError) -> [LibraryCatalog] {
            try inner.fetchCatalog(progress: progress, stash: stash)
        }
        func fetchChanges(
            since: Int64, known: CatalogOutline, progress: (String) -> Void, stash: (any DetailsStash)?,
            apply: (LibraryCatalog) throws(LabstreamError) -> Void
        ) throws(LabstreamError) -> Bool {
            try inner.fetchChanges(since: since, known: known, progress: progress, stash: stash) { (change: LibraryCatalog) throws(LabstreamError) in
                noted.changes.withLock { $0.append((change.id, change.items.count)) }
                try apply(change)
            }
        }
    }

    /// A server-wide metadata refresh (every item saved anew, every file with a new tag) read by
    /// an incremental sync: the changes arrive and are applied a page at a time (never more
    /// than a page in one go, each changed item once), and the index ends as a first sync of the
    /// server as it now is leaves it: the same tree, the same rows, every item's details.
    @Test func aSyncWhereEverythingChangedIsAppliedPageByPageAndMatchesAFirstSync() throws {
        let scratch = Scratch("everything-changed")
        var catalog = testCatalog(in: scratch.sub("media"))
        for i in catalog.movies.indices { catalog.movies[i].details.plot = "Plot \(i)" }
        for i in catalog.series[0].episodes.indices { catalog.series[0].episodes[i].details.plot = "Episode plot \(i)" }
        let fixture = try ServerFixture(catalog: catalog, userName: "demo", password: "pw")
        try fixture.start()
        defer { fixture.stop() }
        let identity = ClientIdentity(device: "test", deviceId: "test-device")
        let (_, _, login) = try MediaBrowserClient.login(url: fixture.baseURL, user: "demo", password: "pw", identity: identity, transport: CurlTransport())
        let pageSize = 2
        let client = MediaBrowserClient(
            session: ServerSession(name: "test", url: fixture.baseURL, userId: login.userId, token: login.token),
            identity: identity, transport: CurlTransport(), pageSize: pageSize)
        let backend = NotingChanges(inner: client)
        let server = LabstreamConfig.Server(name: "test", kind: .jellyfin, url: fixture.baseURL, user: "demo")
        let log = Logger(fd: open("/dev/null", O_WRONLY))
        let refreshed = try OfflineIndex(path: scratch.path + "/refreshed.sqlite")
        _ = try CatalogSync.run(backend, server: server, index: refreshed, log: log)
        let before = try refreshed.treeFiles()

        let saved = fixture.touchAll()
        fixture.clearLog()
        let outcome = try CatalogSync.run(backend, server: server, index: refreshed, log: log, incremental: true)
        #expect(outcome.changed)
        // Read as changes (the saved-since listing), not as a whole read.
        #expect(fixture.requestLog.contains { $0.query["minDateLastSaved"] != nil })
        #expect(!fixture.requestLog.contains { $0.path.hasSuffix("/Seasons") })
        let pages = backend.noted.changes.withLock { $0 }.filter { $0.items > 0 }
        let episodes = catalog.series[0].episodes.count
        #expect(pages.allSatisfy { $0.items <= pageSize })
        #expect(pages.reduce(0) { $0 + $1.items } == catalog.movies.count + episodes)
        #expect(pages.count == (catalog.movies.count + pageSize - 1) / pageSize + (episodes + pageSize - 1) / pageSize)
        #expect(saved >= catalog.movies.count + episodes)

        let first = try OfflineIndex(path: scratch.path + "/first.sqlite")
        _ = try CatalogSync.run(client, server: server, index: first, log: log)
        func paths(_ files: [TreeFile]) -> [String: TreeFile] {
            Dictionary(uniqueKeysWithValues: files.map { ($0.path.joined(separator: "/"), $0) })
        }
        let after = paths(try refreshed.treeFiles())
        #expect(after == paths(try first.treeFiles()))
        #expect(try refreshed.catalog(server: "test") == first.catalog(server: "test"))
        // Every file has its new tag, and every film and episode kept (or was given) its details.
        #expect(after.values.allSatisfy { file in !before.contains { $0.key == file.key && $0.etag == file.etag } })
        let items = try refreshed.catalog(server: "test").flatMap(\.items)
        #expect(items.count == catalog.movies.count + episodes && items.allSatisfy { $0.details?.plot?.isEmpty == false })
    }
}
