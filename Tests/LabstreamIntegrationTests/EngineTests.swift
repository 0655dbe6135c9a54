import Foundation
import LabstreamBackends
import LabstreamCore
import LabstreamEngine
import LabstreamFS
import LabstreamFixture
import LabstreamHTTP
import LabstreamStore
import Testing

/// The filesystem engine and transfers against the fixture over loopback, without a mount.
final class EngineRig: @unchecked Sendable {
    let scratch: Scratch
    let fixture: ServerFixture
    let media: String
    let tree: [TreeFile]
    let client: MediaBrowserClient
    let layout: DataLayout
    var index: OfflineIndex
    var fs: FilesystemEngine
    static let sizes = TransferSizes(readChunk: 1 << 20, segmentSize: 4 << 20, readAheadInitial: 1 << 20, readAheadMax: 8 << 20)
    /// Fast retries so fault tests do not sleep through real backoff.
    static let settings = TransferEngine.Settings(
        sizes: sizes, readTimeout: 10, retry: RetryPolicy(maxAttempts: 3, baseDelay: 0.05, maxDelay: 0.2),
        checkpointBytes: 1 << 20, budget: StorageBudget(minFree: 0), playbackProbe: false)
    var transfers: TransferEngine { fs.transfers }

    let tune: @Sendable (inout TransferEngine.Settings) -> Void

    init(_ name: String, dataDir: String? = nil, tune: @escaping @Sendable (inout TransferEngine.Settings) -> Void = { _ in }) throws {
        self.tune = tune
        scratch = Scratch(name)
        media = scratch.sub("media")
        fixture = try ServerFixture(catalog: testCatalog(in: media), userName: "demo", password: "pw")
        try fixture.start()
        let identity = ClientIdentity(device: "t", deviceId: "t")
        let transport = CurlTransport(options: .init(connectTimeout: 2, stallTimeout: 3))
        let (_, _, login) = try MediaBrowserClient.login(url: fixture.baseURL, user: "demo", password: "pw", identity: identity, transport: transport)
        client = MediaBrowserClient(
            session: ServerSession(name: "test", url: fixture.baseURL, userId: login.userId, token: login.token),
            identity: identity, transport: transport)
        let libraries = try client.fetchCatalog { _ in }
        tree = TreeBuilder.build(server: "test", libraries: libraries)
        layout = DataLayout(root: dataDir ?? scratch.sub("data"))
        index = try OfflineIndex(path: layout.indexPath)
        try index.replaceCatalog(
            server: .init(name: "test", type: "jellyfin", url: fixture.baseURL, serverId: nil, lastSync: nil),
            libraries: libraries, tree: tree, now: 1)
        fs = Self.makeEngine(index: index, layout: layout, files: tree, client: client, tune: tune)
        fixture.clearLog()
    }

    static func makeEngine(
        index: OfflineIndex, layout: DataLayout, files: [TreeFile], client: MediaBrowserClient,
        tune: (inout TransferEngine.Settings) -> Void = { _ in }
    ) -> FilesystemEngine {
        var settings = settings
        tune(&settings)
        let transfers = TransferEngine(index: index, layout: layout, settings: settings, log: { _ in })
        transfers.setBackend(client)
        let fs = FilesystemEngine(transfers: transfers, files: files, ownership: .init(uid: 0, gid: 0), sizes: sizes)
        transfers.startBackgroundFill()
        return fs
    }

    /// Waits (on change notifications, not sleeps) until `done` holds; false after `timeout`.
    func waitUntil(timeout: Double = 30, _ done: () throws -> Bool) rethrows -> Bool {
        let deadline = Date().addingTimeInterval(timeout)
        var seen = 0
        while try !done() {
            guard Date() < deadline else { return false }
            seen = transfers.waitForChange(after: seen, timeout: deadline.timeIntervalSinceNow)
        }
        return true
    }

    func pin(_ rel: String, _ on: Bool = true) throws {
        let ino = try #require(fs.resolve(rel.split(separator: "/").map(String.init)))
        try fs.setxattr(ino, name: "user.labstream.pin", value: Array((on ? "1" : "0").utf8))
    }

    /// The row's state once it stops moving: complete-pending-validation, failed or paused.
    func settled(_ rel: String) throws -> DownloadRow? {
        var row: DownloadRow?
        let tree = try file(rel).tree
        _ = try waitUntil {
            row = transfers.row(for: tree)  // live: a full disk may keep the index from recording it
            guard let r = row else { return false }
            return r.present.contains(ByteRange(0, r.total)) || r.status == .failed || r.status == .paused
        }
        return row
    }

    func partialPath(_ rel: String) throws -> String {
        layout.absolute(layout.partialRelativePath(for: try file(rel).tree.key))
    }

    /// Simulates a daemon restart: a new index connection and engines over the same data dir.
    func restart() throws {
        index = try OfflineIndex(path: layout.indexPath)
        fs = Self.makeEngine(index: index, layout: layout, files: try index.treeFiles(), client: client, tune: tune)
    }

    /// A catalog refresh as the daemon makes it: the server's catalog into the index, the
    /// index's tree (a kept copy's shown version) into the engines.
    func sync(now: Int64 = 2) throws {
        let libraries = try client.fetchCatalog { _ in }
        try index.replaceCatalog(
            server: .init(name: "test", type: "jellyfin", url: fixture.baseURL, serverId: nil, lastSync: nil),
            libraries: libraries, tree: TreeBuilder.build(server: "test", libraries: libraries), now: now)
        fs.reload(files: try index.treeFiles())
    }

    func file(_ rel: String) throws -> (ino: UInt64, tree: TreeFile, source: String) {
        let components = rel.split(separator: "/").map(String.init)
        let ino = try #require(fs.resolve(components))
        let tree = try #require(self.tree.first { $0.path == components })
        return (ino, tree, expectedTree(media)[rel]!)
    }

    func read(_ rel: String, offset: Int, length: Int) throws -> [UInt8] {
        let f = try file(rel)
        let h = try fs.open(f.ino, writeRequested: false)
        defer { fs.release(handle: h) }
        return try fs.read(handle: h, offset: Int64(offset), size: length)
    }

    /// Reads, then waits until the fetches behind the read have finished and committed: a read
    /// returns as soon as its bytes are in the partial, before they are durable.
    func readAndSettle(_ rel: String, offset: Int, length: Int) throws -> [UInt8] {
        let bytes = try read(rel, offset: offset, length: length)
        let tree = try file(rel).tree
        _ = try waitUntil { transfers.inFlight(tree).isEmpty }
        return bytes
    }

    func source(_ rel: String, offset: Int, length: Int) throws -> [UInt8] {
        try pread(path: expectedTree(media)[rel]!, offset: offset, length: length)
    }

    deinit {
        transfers.stop()
        fixture.stop()
    }
}

@Suite struct EngineTests {
    let alpha = "test/Movies/Alpha (2001)/Alpha (2001).mkv"

    @Test func treeMatchesTheCatalogWithSizesBeforeAnyFetch() throws {
        let rig = try EngineRig("tree")
        for (rel, source) in expectedTree(rig.media) {
            let f = try rig.file(rel)
            let attrs = try rig.fs.getattr(f.ino)
            let size = try FileManager.default.attributesOfItem(atPath: source)[.size] as! Int
            #expect(attrs.size == Int64(size) && !attrs.isDirectory && attrs.mode & 0o222 == 0)
        }
        let twins = try rig.fs.readdir(try #require(rig.fs.resolve(["test", "Movies"]))).map(\.name).filter { $0.hasPrefix("Twin") }
        #expect(twins == ["Twin (2010)", "Twin (2010) (2)"])
        #expect(rig.fixture.downloadRequests.isEmpty)
        #expect(throws: LabstreamError.readOnly) { _ = try rig.fs.open(try rig.file(alpha).ino, writeRequested: true) }
        #expect(throws: LabstreamError.notFound("nope")) { _ = try rig.fs.lookup(parent: InodeTable.rootIno, name: "nope") }
    }

    /// An NFS client's file handle names an inode: the same path has the same number in a table
    /// built afresh (a restarted daemon), whatever order the files come in, and the kernel can
    /// find a node and its parent by number ("." and "..").
    @Test func inodeNumbersSurviveARestartAndNodesAreFoundByNumber() throws {
        func file(_ path: String) -> TreeFile {
            TreeFile(
                path: path.split(separator: "/").map(String.init), key: FileKey(server: "s", itemId: path, sourceId: path), size: 1, modified: 0, etag: nil)
        }
        let paths = (0..<2000).map { "s/Movies/Film \($0) (2000)/Film \($0) (2000).mkv" } + ["s/Shows/A/Season 01/A - S01E01.mkv"]
        let first = InodeTable(files: paths.map(file))
        let restarted = InodeTable(files: paths.reversed().map(file))
        let numbers = first.inodeOfPath
        #expect(first.inodeOfPath.count == paths.count + 2000 + 5)
        #expect(first.inodeOfPath == restarted.inodeOfPath)
        #expect(Set(first.inodeOfPath.values).count == first.inodeOfPath.count && !first.inodeOfPath.values.contains(InodeTable.rootIno))
        // A rebuild keeps the numbers and gives a new path its own.
        let grown = InodeTable(files: (paths + ["s/Movies/New (2024)/New (2024).mkv"]).map(file), previous: first)
        let grownNumbers = grown.inodeOfPath
        #expect(paths.allSatisfy { grownNumbers[$0] == numbers[$0] })
        #expect(grownNumbers["s/Movies/New (2024)/New (2024).mkv"] == InodeTable.stableIno("s/Movies/New (2024)/New (2024).mkv"))
        // Every path is found by name (a folder's names are searched, sorted), and a name that
        // is not there is not.
        #expect(paths.allSatisfy { first.resolve($0.split(separator: "/").map(String.init))?.ino == numbers[$0] })
        #expect(first.resolve(["s", "Movies", "Film 2000 (2000)"]) == nil && first.resolve(["s", "Movies", "A"]) == nil)
        let movies0 = try #require(first.resolve(["s", "Movies"]))
        #expect(first.children(of: movies0.ino).map(\.name) == paths.dropLast().map { String($0.split(separator: "/")[2]) }.sorted())
        // statfs's file count is kept as the table is built: a clashing name is not counted twice.
        #expect(first.fileCount == paths.count && grown.fileCount == paths.count + 1)
        #expect(InodeTable(files: (paths + [paths[0]]).map(file)).fileCount == paths.count)
        // The builder takes each path's folders from the path before it: any order makes the same
        // table, and a file named as a folder of the path before it (or below a file) is refused.
        let interleaved = paths.enumerated().sorted { ($0.offset % 7, $0.offset) < ($1.offset % 7, $1.offset) }.map(\.element)
        #expect(InodeTable(files: interleaved.map(file)).inodeOfPath == numbers)
        let clash = InodeTable(files: [paths[0], "s/Movies/Film 0 (2000)", paths[0] + "/x", "s/Movies/B/b.mkv"].map(file))
        #expect(clash.fileCount == 2 && clash.resolve(["s", "Movies", "B", "b.mkv"]) != nil)

        let rig = try EngineRig("dots")
        let movies = try #require(rig.fs.resolve(["test", "Movies"]))
        let test = try #require(rig.fs.resolve(["test"]))
        #expect(try rig.fs.lookup(parent: movies, name: ".").ino == movies)
        #expect(try rig.fs.lookup(parent: movies, name: "..").ino == test)
        #expect(try rig.fs.lookup(parent: InodeTable.rootIno, name: "..").ino == InodeTable.rootIno)
        let film = try rig.file(alpha).ino
        #expect(try rig.fs.lookup(parent: film, name: ".").ino == film)
        #expect(throws: LabstreamError.self) { _ = try rig.fs.lookup(parent: film, name: "..") }
    }

    @Test func readsMatchTheSourceAndRereadsMakeNoRequest() throws {
        let rig = try EngineRig("reads")
        #expect(try rig.read(alpha, offset: 5000, length: 70_000) == rig.source(alpha, offset: 5000, length: 70_000))
        let after = rig.fixture.downloadRequests.count
        #expect(after == 1)
        #expect(try rig.read(alpha, offset: 6000, length: 1000) == rig.source(alpha, offset: 6000, length: 1000))
        #expect(rig.fixture.downloadRequests.count == after)
        // The last bytes of an odd-sized file, and a read past the end.
        let size = 12 * MiB + 37
        #expect(try rig.read(alpha, offset: size - 100, length: 4096) == rig.source(alpha, offset: size - 100, length: 100))
        #expect(try rig.read(alpha, offset: size + 10, length: 4096).isEmpty)
        _ = try rig.readAndSettle(alpha, offset: 0, length: 1)  // the fetches behind these reads are committed
        let row = try #require(try rig.index.download(try rig.file(alpha).tree.key))
        #expect(row.present.contains(ByteRange(0, Int64(MiB))))
        #expect(row.validator != nil)
        #expect(rig.fixture.downloadRequests.allSatisfy { $0.ifRange == nil || $0.ifRange == row.validator?.headerValue })
    }

    /// A read is answered once its bytes are in the partial from an answer carrying the file's
    /// validator, before they are synced and committed: a body that stalls after its first
    /// 300 000 bytes still serves a read inside them; they are committed when the body ends.
    @Test func aReadIsServedBeforeItsBytesAreCommitted() throws {
        let rig = try EngineRig("early")
        // A pause well inside the rig's 3 s stall timeout: the body resumes rather than being
        // given up as stalled (the transport times a stall from the last byte, to the second).
        rig.fixture.inject(.stallAfter(300_000, 1.5), pathPrefix: "/Items/", times: 1)
        #expect(try rig.read(alpha, offset: 1000, length: 4096) == rig.source(alpha, offset: 1000, length: 4096))
        let key = try rig.file(alpha).tree.key
        #expect(try rig.index.download(key)?.present.isEmpty ?? true)  // the body is still stalled
        #expect(rig.fixture.downloadRequests.count == 1 && (rig.fixture.downloadRequests.first?.bytesSent ?? 0) <= 300_000)
        _ = try rig.readAndSettle(alpha, offset: 1000, length: 4096)
        #expect(try rig.index.download(key)?.present.contains(ByteRange(0, Int64(MiB))) == true)
        #expect(rig.fixture.downloadRequests.count == 1)
    }

    /// Stopping ends a body on the wire at its next chunk and commits what had arrived, so bytes
    /// a reader was already served survive a clean shutdown; the rest never arrived.
    @Test func stoppingKeepsWhatArrived() throws {
        let rig = try EngineRig("stop-keeps")
        rig.fixture.inject(.stallAfter(300_000, 1), pathPrefix: "/Items/", times: 1)
        #expect(try rig.read(alpha, offset: 1000, length: 4096) == rig.source(alpha, offset: 1000, length: 4096))
        rig.transfers.stop()
        // A prefix holding at least what the reader was served, and nothing past the stall.
        let row = try #require(try rig.index.download(try rig.file(alpha).tree.key))
        let kept = try #require(row.present.ranges.first)
        #expect(row.present.ranges.count == 1 && kept.lower == 0 && kept.upper >= 5096 && kept.upper <= 300_000, "\(row.present)")
        #expect(try pread(path: rig.partialPath(alpha), offset: 0, length: Int(kept.upper)) == rig.source(alpha, offset: 0, length: Int(kept.upper)))
    }

    @Test func concurrentReadersShareOneFetch() throws {
        let rig = try EngineRig("shared")
        let results = LockedBox<[[UInt8]]>([])
        let group = DispatchGroup()
        for i in 0..<8 {
            group.enter()
            Thread {
                let bytes = (try? rig.read(self.alpha, offset: 1000 * i, length: 4096)) ?? []
                results.update { $0.append(bytes) }
                group.leave()
            }.start()
        }
        group.wait()
        #expect(results.get().count == 8 && results.get().allSatisfy { $0.count == 4096 })
        #expect(rig.fixture.downloadRequests.count == 1)
        #expect(rig.fixture.downloadRequests.first?.range == "bytes=0-1048575")
    }

    @Test func aSequentialReaderGetsReadAhead() throws {
        let rig = try EngineRig("readahead")
        let f = try rig.file(alpha)
        let h = try rig.fs.open(f.ino, writeRequested: false)
        defer { rig.fs.release(handle: h) }
        let step = 128 * 1024
        for i in 0..<24 {  // 3 MiB in kernel-sized reads
            #expect(try rig.fs.read(handle: h, offset: Int64(i * step), size: step) == rig.source(alpha, offset: i * step, length: step))
        }
        // Read-ahead asks for bytes beyond anything read so far (3 MiB), without duplicates. Its
        // window is half the run, at least 1 MiB, topped up on the fetch pool: the last top-up may
        // land after the last read returns, and may have been made before the run reached 3 MiB.
        #expect(eventually { rig.fixture.downloadRequests.compactMap(\.requestedRange).contains { $0.upper > Int64(3 * MiB) + 1 } })
        let ranges = rig.fixture.downloadRequests.compactMap(\.requestedRange)
        for (i, a) in ranges.enumerated() { for b in ranges[(i + 1)...] { #expect(!a.overlaps(b)) } }
    }

    @Test func aTailReadFetchesOnlyTheTail() throws {
        let rig = try EngineRig("tail")
        let size = 12 * MiB + 37
        #expect(try rig.read(alpha, offset: size - MiB, length: MiB) == rig.source(alpha, offset: size - MiB, length: MiB))
        let ranges = rig.fixture.downloadRequests.compactMap(\.requestedRange)
        #expect(!ranges.isEmpty)
        #expect(ranges.allSatisfy { $0.lower >= Int64(size - 2 * MiB) }, "requested \(ranges)")
        #expect(ranges.reduce(0) { $0 + $1.count } <= Int64(2 * MiB))
    }

    /// A connection dropped mid-body: the read is retried and returns the right bytes; what
    /// arrived before the drop was kept (committed) and is not asked for again.
    @Test func aDroppedConnectionIsRetriedAndKeepsTheGoodBytes() throws {
        let rig = try EngineRig("drop")
        _ = try rig.readAndSettle(alpha, offset: 0, length: 4096)
        rig.fixture.inject(.dropAfter(100_000), pathPrefix: "/Items/", times: 1)
        rig.fixture.clearLog()
        #expect(try rig.read(alpha, offset: 5 * MiB + 200_000, length: 4096) == rig.source(alpha, offset: 5 * MiB + 200_000, length: 4096))
        let row = try #require(try rig.index.download(try rig.file(alpha).tree.key))
        let arrived = ByteRange(Int64(5 * MiB), Int64(5 * MiB + 100_000))
        #expect(row.present.contains(arrived))
        #expect(try pread(path: rig.partialPath(alpha), offset: 5 * MiB, length: 100_000) == rig.source(alpha, offset: 5 * MiB, length: 100_000))
        let ranges = rig.fixture.downloadRequests.compactMap(\.requestedRange)
        #expect(ranges.first?.lower == arrived.lower && ranges.dropFirst().allSatisfy { !$0.overlaps(arrived) }, "\(ranges)")
    }

    @Test(arguments: [FixtureFault.wrongContentRange, .status(404), .status(500)])
    func aBadRangeResponseWritesNothing(fault: FixtureFault) throws {
        let rig = try EngineRig("badrange")
        rig.fixture.inject(fault, pathPrefix: "/Items/", times: nil)
        let offset = 0
        #expect(throws: LabstreamError.self) { _ = try rig.read(self.alpha, offset: offset, length: 4096) }
        let f = try rig.file(alpha)
        #expect(try rig.index.download(f.tree.key)?.present.isEmpty ?? true)
        // Nothing reached the partial: that megabyte is still a hole of zeros.
        let partial = rig.layout.absolute(rig.layout.partialRelativePath(for: f.tree.key))
        #expect(try pread(path: partial, offset: offset, length: MiB).allSatisfy { $0 == 0 })
    }

    /// A player would rather wait than fail: a read that meets transient answers (503, a 429
    /// with its Retry-After, a 401 while the sign-in still holds) is retried with backoff
    /// within the read timeout, and returns the right bytes.
    @Test(arguments: [FixtureFault.status(503), .statusRetryAfter(429, "1"), .status(401), .dropAfter(1000)])
    func aReadRidesOutTransientAnswers(fault: FixtureFault) throws {
        let rig = try EngineRig("read-transient")
        rig.fixture.inject(fault, pathPrefix: "/Items/", times: fault == .status(401) ? 1 : 2)  // a 401 is re-checked once
        let started = Date()
        #expect(try rig.read(alpha, offset: 3 * MiB, length: 4096) == rig.source(alpha, offset: 3 * MiB, length: 4096))
        if case .statusRetryAfter = fault { #expect(Date().timeIntervalSince(started) >= 1.9) }  // Retry-After honoured
        #expect(rig.fixture.downloadRequests.count >= (fault == .status(401) ? 2 : 3))
    }

    /// A server that ignores `Range` (the Jellyfin and Emby specs document only a 200 for a
    /// download): its 200 to a request from 5 MiB is not written; a new attempt fetches the whole
    /// file in one request from byte 0, the waiting read is served from it, and so is every
    /// later read, with no further request.
    @Test func aServerThatIgnoresRangeIsReadAsOneWholeFileStream() throws {
        let rig = try EngineRig("no-range")
        rig.fixture.inject(.ignoreRange, pathPrefix: "/Items/", times: nil)
        #expect(try rig.read(alpha, offset: 5 * MiB, length: 4096) == rig.source(alpha, offset: 5 * MiB, length: 4096))
        let f = try rig.file(alpha)
        let requests = rig.fixture.downloadRequests.compactMap(\.requestedRange)
        #expect(
            requests.first?.lower == Int64(5 * MiB) && requests.dropFirst().allSatisfy { $0 == ByteRange(0, f.tree.size) },
            "\(requests)")
        #expect(try rig.read(alpha, offset: 11 * MiB, length: 4096) == rig.source(alpha, offset: 11 * MiB, length: 4096))
        #expect(try rig.read(alpha, offset: 1, length: 4096) == rig.source(alpha, offset: 1, length: 4096))
        #expect(rig.fixture.downloadRequests.count == 2)
        #expect(eventually { (try? rig.index.download(f.tree.key)).flatMap { $0 }.map { $0.present == RangeSet([ByteRange(0, f.tree.size)]) } ?? false })
        #expect(try rig.index.download(f.tree.key)?.attempt == AttemptID(2))
        #expect(try sha256(rig.partialPath(alpha)) == sha256(expectedTree(rig.media)[alpha]!))
    }

    @Test func aFileThatChangedOnTheServerIsStaleAndStartsOver() throws {
        let rig = try EngineRig("changed")
        _ = try rig.readAndSettle(alpha, offset: 0, length: 4096)
        let f = try rig.file(alpha)
        let before = try #require(try rig.index.download(f.tree.key))
        rig.fixture.touch(itemId: f.tree.key.sourceId)
        #expect(throws: LabstreamError.self) { _ = try rig.read(self.alpha, offset: 6 * MiB, length: 4096) }
        let after = try #require(try rig.index.download(f.tree.key))
        #expect(after.attempt == before.attempt.next)
        #expect(after.present.isEmpty && after.validator == nil)
        #expect(try rig.read(alpha, offset: 0, length: 4096) == rig.source(alpha, offset: 0, length: 4096))
    }

    /// A file changed on the server under a reader: its handle gets ESTALE and fetches nothing
    /// of the new version (neither the bytes asked for nor read-ahead, however long the player
    /// keeps reading); bytes of the new version fetched once (by a handle opened after the
    /// change) survive the sync that brings its catalog version, and are never fetched again.
    @Test func aChangedFileIsFetchedOnceNotForStaleHandlesNorAgainAfterTheSync() throws {
        let rig = try EngineRig("changed-once")
        let f = try rig.file(alpha)
        let step = 128 * 1024
        let old = try rig.fs.open(f.ino, writeRequested: false)
        defer { rig.fs.release(handle: old) }
        for i in 0..<8 { _ = try rig.fs.read(handle: old, offset: Int64(i * step), size: step) }  // read-ahead grows
        _ = try rig.waitUntil { rig.transfers.inFlight(f.tree).isEmpty }
        let stored = try #require(try rig.index.download(f.tree.key))
        let oldValidator = try #require(stored.validator?.headerValue)
        // Bytes of the old version still here are the handle's; past them it meets the change.
        let firstMissing = Int(stored.present.contiguousLength(from: 0)) / step + 1
        writeRandomFile(f.source, size: 12 * MiB + 37, seed: 4711)
        rig.fixture.touch(itemId: try #require(rig.fixture.itemId(forFile: f.source)))
        rig.fixture.clearLog()
        try #require(firstMissing * step < 12 * MiB - 16 * step, "\(stored.present)")
        for i in firstMissing..<(12 * MiB / step) {
            #expect(throws: LabstreamError.self) { _ = try rig.fs.read(handle: old, offset: Int64(i * step), size: step) }
        }
        _ = try rig.waitUntil { rig.transfers.inFlight(f.tree).isEmpty }
        // The request that met the change, and nothing of the new version.
        let forStale = rig.fixture.downloadRequests.filter { $0.ifRange != oldValidator }
        #expect(forStale.isEmpty, "\(forStale.map { ($0.range ?? "", $0.bytesSent) })")

        // A handle opened now (before any sync) reads the new version; the sync keeps those bytes.
        let fresh = try rig.fs.open(f.ino, writeRequested: false)
        var first: [UInt8] = []
        while first.count < 3 * MiB { first += try rig.fs.read(handle: fresh, offset: Int64(first.count), size: step) }
        #expect(try first == rig.source(alpha, offset: 0, length: 3 * MiB))
        rig.fs.release(handle: fresh)
        _ = try rig.waitUntil { rig.transfers.inFlight(f.tree).isEmpty }
        let fetched = RangeSet(rig.fixture.downloadRequests.filter { $0.ifRange != oldValidator }.compactMap(\.servedRange))
        #expect(fetched.contains(ByteRange(0, Int64(3 * MiB))), "\(fetched)")
        try rig.sync()
        rig.fixture.clearLog()
        let after = try rig.fs.open(f.ino, writeRequested: false)
        defer { rig.fs.release(handle: after) }
        var whole: [UInt8] = []
        while whole.count < 12 * MiB + 37 { whole += try rig.fs.read(handle: after, offset: Int64(whole.count), size: MiB) }
        #expect(try whole == rig.source(alpha, offset: 0, length: 12 * MiB + 37))
        let again = rig.fixture.downloadRequests.compactMap(\.requestedRange)
        #expect(!again.isEmpty && again.allSatisfy { r in !fetched.ranges.contains { $0.overlaps(r) } }, "fetched again: \(again) after \(fetched)")
    }

    @Test func presentRangesSurviveARestart() throws {
        let rig = try EngineRig("restart")
        _ = try rig.readAndSettle(alpha, offset: 0, length: 3 * MiB)
        let fetched = rig.fixture.downloadRequests.count
        try rig.restart()
        #expect(try rig.read(alpha, offset: 0, length: 3 * MiB) == rig.source(alpha, offset: 0, length: 3 * MiB))
        #expect(rig.fixture.downloadRequests.count == fetched)
    }

    /// A directory is read in chunks from one listing taken at opendir: a reload in between
    /// (a catalog refresh) cannot shift offsets under a reader, and the listing is freed after.
    @Test func aDirectoryIsListedFromOneSnapshot() throws {
        let rig = try EngineRig("listing")
        let movies = try #require(rig.fs.resolve(["test", "Movies"]))
        let handle = try rig.fs.openDirectory(movies)
        let before = try #require(rig.fs.listing(handle)).map(\.name)
        #expect(before.contains("Alpha (2001)") && before.first == ".")
        // Without a handle (the kernel opening directories itself) the listing is shared until a reload.
        #expect(try rig.fs.listing(ofDirectory: movies).map(\.name) == before)
        rig.fs.reload(files: try rig.index.treeFiles().filter { !$0.path.joined(separator: "/").contains("Alpha") })
        #expect(try rig.fs.readdir(movies).map(\.name).contains("Alpha (2001)") == false)
        #expect(try rig.fs.listing(ofDirectory: movies).map(\.name).contains("Alpha (2001)") == false)
        #expect(rig.fs.listing(handle)?.map(\.name) == before)
        rig.fs.releaseDirectory(handle)
        #expect(rig.fs.listing(handle) == nil)
    }

    /// A library's quality wins over its server's: a movie pinned with setfattr -v 1 queues a
    /// 2 Mbit/s copy, an episode of another library its original.
    @Test func aLibrarysQualityDecidesWhatAPinFetches() throws {
        let rig = try EngineRig("library-quality") { $0.qualities = ["test/Movies": .capped(megabitsPerSecond: 2)] }
        rig.transfers.stop()  // only what the pin queues is looked at here
        let movie = try rig.file(alpha), episode = try rig.file("test/Shows/Show (2020)/Season 01/Show (2020) - S01E01 - Pilot.mkv")
        try rig.fs.setxattr(movie.ino, name: "user.labstream.pin", value: Array("1".utf8))
        try rig.fs.setxattr(episode.ino, name: "user.labstream.pin", value: Array("1".utf8))
        #expect(try rig.index.derivedCopies(of: movie.tree.key).map(\.key) == [DerivedCopy.key(of: movie.tree.key, quality: .capped(megabitsPerSecond: 2))])
        #expect(try rig.index.download(movie.tree.key)?.pinned != true)
        #expect(try rig.index.derivedCopies(of: episode.tree.key).isEmpty)
        #expect(try rig.index.download(episode.tree.key)?.pinned == true)
    }

    @Test func xattrsDescribeFilesAndFolders() throws {
        let rig = try EngineRig("xattr")
        let f = try rig.file(alpha)
        #expect(try rig.fs.getxattr(f.ino, name: "user.labstream.state") == "not-local")
        _ = try rig.readAndSettle(alpha, offset: 0, length: 10)
        #expect(try rig.fs.getxattr(f.ino, name: "user.labstream.state") == "partial")
        #expect(try rig.fs.getxattr(f.ino, name: "user.labstream.bytes") == "\(MiB)/\(12 * MiB + 37)")
        #expect(try rig.fs.getxattr(f.ino, name: "user.labstream.item_id") == f.tree.key.itemId)
        let movies = try #require(rig.fs.resolve(["test", "Movies"]))
        #expect(try rig.fs.getxattr(movies, name: "user.labstream.state") == "partial")
        #expect(throws: LabstreamError.noAttribute) { _ = try rig.fs.getxattr(f.ino, name: "user.other") }
        #expect(throws: LabstreamError.unsupportedAttributeWrite("user.labstream.state")) {
            try rig.fs.setxattr(f.ino, name: "user.labstream.state", value: Array("1".utf8))
        }
        let all = try rig.fs.xattrs(f.ino).map(\.1).joined()
        #expect(!all.contains(rig.fixture.accessToken) && !all.contains("http"))
        // A whole file read makes the row complete-pending-validation.
        let gamma = "test/Movies/Gamma/Gamma.mkv"
        _ = try rig.readAndSettle(gamma, offset: 0, length: 700 * 1024)
        let g = try rig.file(gamma)
        #expect(try rig.fs.getxattr(g.ino, name: "user.labstream.state") == "unverified")
        #expect(try rig.index.download(g.tree.key)?.awaitingValidation == true)
    }

    /// The read that makes a handle playing (`PlaybackWatch`: a run of half this 2 MiB episode)
    /// returns while another thread holds the index's one connection: which episode is next, an
    /// index query, is looked up on the fetch pool, not on the read. Once the index is free, the
    /// next episode's start is fetched ahead.
    @Test func theReadThatStartsPlaybackDoesNotWaitForTheIndex() throws {
        let rig = try EngineRig("playing-index")
        let pilot = "test/Shows/Show (2020)/Season 01/Show (2020) - S01E01 - Pilot.mkv"
        let second = try rig.file("test/Shows/Show (2020)/Season 01/Show (2020) - S01E02 - Second.mp4").tree
        let piece = 256 * 1024
        // All of it stored first, a piece per handle: no handle reads a run long enough to play.
        for offset in stride(from: 0, to: 2 * MiB + 1, by: piece) { _ = try rig.readAndSettle(pilot, offset: offset, length: piece) }
        let h = try rig.fs.open(try rig.file(pilot).ino, writeRequested: false)
        defer { rig.fs.release(handle: h) }
        for offset in stride(from: 0, to: MiB - piece, by: piece) {
            #expect(try rig.fs.read(handle: h, offset: Int64(offset), size: piece) == rig.source(pilot, offset: offset, length: piece))
        }
        let asked = rig.fixture.downloadRequests.count
        let held = DispatchSemaphore(value: 0), letGo = DispatchSemaphore(value: 0), returned = DispatchSemaphore(value: 0)
        Thread {
            rig.index.db.withConnection { _ in
                held.signal()
                letGo.wait()
            }
        }.start()
        held.wait()
        let crossing = LockedBox<[UInt8]?>(nil)
        Thread {
            crossing.set(try? rig.fs.read(handle: h, offset: Int64(MiB - piece), size: piece))
            returned.signal()
        }.start()
        // A bound on a failure (the read waiting for the index), not a timing measured.
        let returnedWhileHeld = returned.wait(timeout: .now() + 20) == .success
        let askedWhileHeld = rig.fixture.downloadRequests.count
        letGo.signal()
        if !returnedWhileHeld { returned.wait() }
        #expect(returnedWhileHeld, "the read that started playback waited for the index")
        #expect(try crossing.get() == rig.source(pilot, offset: MiB - piece, length: piece))
        #expect(askedWhileHeld == asked)
        #expect(try rig.waitUntil { rig.transfers.row(for: second)?.present.contains(ByteRange(0, Int64(MiB))) == true })
    }
}

@Suite struct CatalogRefreshTests {
    @Test func itemsRemovedOnTheServerStayWhileStoredLocally() throws {
        let rig = try EngineRig("orphans")
        let beta = "test/Movies/Beta (2002)/Beta (2002).mp4", gamma = "test/Movies/Gamma/Gamma.mkv",
            pilot = "test/Shows/Show (2020)/Season 01/Show (2020) - S01E01 - Pilot.mkv"
        _ = try rig.readAndSettle(beta, offset: 0, length: 3 * MiB)  // whole
        _ = try rig.readAndSettle(gamma, offset: 0, length: 10)  // partly
        for rel in [beta, gamma, pilot] { rig.fixture.remove(itemId: try rig.file(rel).tree.key.itemId) }
        let libraries = try rig.client.fetchCatalog { _ in }
        try rig.index.replaceCatalog(
            server: .init(name: "test", type: "jellyfin", url: rig.fixture.baseURL, serverId: nil, lastSync: nil),
            libraries: libraries, tree: TreeBuilder.build(server: "test", libraries: libraries), now: 2)
        let files = try rig.index.treeFiles()
        let byPath = Dictionary(uniqueKeysWithValues: files.map { ($0.path.joined(separator: "/"), $0) })
        #expect(byPath[beta]?.orphaned == true && byPath[gamma]?.orphaned == true)
        #expect(byPath[pilot] == nil)  // nothing local: gone
        #expect(byPath["test/Movies/Alpha (2001)/Alpha (2001).mkv"]?.orphaned == false)
        rig.fs.reload(files: files)
        #expect(try rig.read(beta, offset: 0, length: 4096) == rig.source(beta, offset: 0, length: 4096))  // still plays
        let ino = try #require(rig.fs.resolve(beta.split(separator: "/").map(String.init)))
        // It says what is kept and the command that removes it.
        let kept = try rig.fs.getxattr(ino, name: "user.labstream.reason")
        #expect(kept.hasPrefix("orphaned") && kept.contains("kept until you remove it with `labstream cancel`"), "\(kept)")
        // Removing the local copy lets the next refresh forget it; until then it says nothing is kept.
        try rig.fs.setxattr(ino, name: "user.labstream.action", value: Array("cancel".utf8))
        let gone = try rig.fs.getxattr(ino, name: "user.labstream.reason")
        #expect(gone.hasPrefix("orphaned") && gone.contains("nothing of it is kept") && !gone.contains("is kept until"), "\(gone)")
        let status = rig.fs.statuses(below: ino, named: beta)
        #expect(status.first?.present == 0 && status.first?.reason == .orphaned(kept: false) && status.first?.reason?.sentence == gone, "\(status)")
        #expect(StatusReason.code(status.first?.reason, state: .notLocal) == .orphaned)
        try rig.index.replaceCatalog(
            server: .init(name: "test", type: "jellyfin", url: rig.fixture.baseURL, serverId: nil, lastSync: nil),
            libraries: libraries, tree: TreeBuilder.build(server: "test", libraries: libraries), now: 3)
        #expect(try rig.index.treeFiles().contains { $0.path.joined(separator: "/") == beta } == false)
    }
}
