import Foundation
import LabstreamCore
import LabstreamFixture
import LabstreamStore
import Testing

/// One copy for one file reached through two servers (issue 41 item 4): Jellyfin and Plex
/// pointed at the same disk. A file pinned through both is stored once (one inode, counted once
/// by `du` over the mount and by `max_size`), the second server asked only for confirming
/// ranges; letting go of one path keeps the bytes for the other; a file the servers describe
/// alike but whose bytes differ is stored twice.
@Suite(.serialized) struct SharedCopyTests {
    static let alpha = "Movies/Alpha (2001)/Alpha (2001).mkv"
    static let beta = "Movies/Beta (2002)/Beta (2002).mp4"
    static let gamma = "Movies/Gamma/Gamma.mkv"

    static func catalog(_ dir: String) -> FixtureCatalog {
        var catalog = testCatalog(in: dir)
        catalog.movies[0].details = .init(imdb: "tt0000001", tmdb: "11")
        catalog.movies[1].details = .init(imdb: "tt0000002", tmdb: "22")
        return catalog
    }

    /// Plex's view of the same disk, but its Beta is another file of the same size.
    static func plexCatalog(_ dir: String) -> FixtureCatalog {
        var catalog = Self.catalog(dir)
        let other = dir + "/beta-other.mp4"
        writeRandomFile(other, size: 3 * MiB, seed: 99)
        catalog.movies[1].file = other
        return catalog
    }

    func row(_ m: MountedLabstream, _ rel: String) -> [String: Any]? {
        guard let out = try? m.cli(["status", "--json", m.path(rel)]).stdout,
            let rows = try? JSONSerialization.jsonObject(with: Data(out.utf8)) as? [[String: Any]]
        else { return nil }
        return rows.first
    }

    func whole(_ m: MountedLabstream, _ rel: String) -> Bool { ["complete", "unverified"].contains(row(m, rel)?["state"] as? String ?? "") }

    /// The stored partials of `size` bytes (a freed one keeps its size, but holds nothing): their
    /// inodes and how many names each has.
    func partials(_ m: MountedLabstream, size: Int) -> [UInt64: Int] {
        var out: [UInt64: Int] = [:]
        for name in (try? FileManager.default.contentsOfDirectory(atPath: m.dataDir + "/partials")) ?? [] where name.hasSuffix(".part") {
            var st = stat()
            guard stat(m.dataDir + "/partials/" + name, &st) == 0, st.st_size == size, Int(st.st_blocks) * 512 >= size else { continue }
            out[UInt64(st.st_ino), default: 0] += 1
        }
        return out
    }

    func blocks(_ path: String) -> Int64 {
        var st = stat()
        return stat(path, &st) == 0 ? Int64(st.st_blocks) * 512 : -1
    }

    func bytesAsked(_ requests: [LoggedRequest]) -> Int64 {
        requests.reduce(Int64(0)) { sum, r in
            let parts = (r.range ?? "").dropFirst("bytes=".count).split(separator: "-").compactMap { Int64($0) }
            return sum + (parts.count == 2 ? parts[1] - parts[0] + 1 : 1 << 40)
        }
    }

    /// A Plex server on the same media as `m`'s Jellyfin, added as `plex` (signed in through plex.tv).
    static func addPlex(to m: MountedLabstream) throws -> (ServerFixture, PlexTVFixture) {
        let plex = try ServerFixture(kind: .plex, catalog: plexCatalog(m.mediaDir), userName: "demo", password: "secret-pass")
        try plex.start()
        let tv = PlexTVFixture(server: plex)
        try tv.start()
        tv.approve(onPoll: 1)
        do { try m.addServer("plex", plex, plexTV: tv) } catch {
            plex.stop()
            tv.stop()
            throw error
        }
        return (plex, tv)
    }

    @Test func aFileOnTwoServersIsStoredOnceAndOutlivesEitherPath() throws {
        // Alpha twice would be 24 MiB and more: over this budget. Once, with Beta stored twice
        // (its bytes differ) and Gamma, it is 19 MiB.
        let m = try MountedLabstream("shared", catalog: Self.catalog, cacheConfig: "side_assets = off\nmax_size = 24M")
        let (plex, tv) = try Self.addPlex(to: m)
        defer { plex.stop(); tv.stop() }
        try m.mount()
        defer { stopDaemon(at: m.mountpoint, pid: m.daemonPid, env: m.env) }
        let alphaSize = 12 * MiB + 37
        let source = try Data(contentsOf: URL(fileURLWithPath: m.mediaDir + "/alpha.mkv"))

        #expect(try m.cli(["pin", m.path("test/" + Self.alpha)]).code == 0)
        #expect(eventually { whole(m, "test/" + Self.alpha) }, "\(String(describing: row(m, "test/" + Self.alpha)))")
        plex.clearLog()
        #expect(try m.cli(["pin", m.path("plex/" + Self.alpha)]).code == 0)
        #expect(eventually { whole(m, "plex/" + Self.alpha) }, "\(String(describing: row(m, "plex/" + Self.alpha)))")
        let shared = try #require(row(m, "plex/" + Self.alpha))
        #expect(shared["reason"] as? String == "shared_copy" && shared["pinned"] as? Bool == true, "\(shared)")
        #expect(try m.cli(["status", m.path("plex/" + Self.alpha)]).stdout.contains("one copy with test/Movies/Alpha (2001)"))
        // Plex was asked only for the confirming ranges.
        let asked = plex.downloadRequests
        #expect(!asked.isEmpty && asked.allSatisfy { $0.range != nil } && bytesAsked(asked) <= AdoptionProbe.budget, "\(asked)")
        // One file on disk under two names; `du` over the mount counts it under one path.
        #expect(partials(m, size: alphaSize) == [partials(m, size: alphaSize).keys.first ?? 0: 2], "\(partials(m, size: alphaSize))")
        let counted = [blocks(m.path("test/" + Self.alpha)), blocks(m.path("plex/" + Self.alpha))]
        #expect(counted.contains(0) && counted.contains { $0 >= alphaSize }, "\(counted)")
        #expect(try Data(contentsOf: URL(fileURLWithPath: m.path("plex/" + Self.alpha))) == source)
        #expect(plex.downloadRequests.count == asked.count)  // read from the stored copy

        // Beta: the same size and provider ids on both, other bytes on Plex: stored twice.
        for server in ["test", "plex"] {
            #expect(try m.cli(["pin", m.path(server + "/" + Self.beta)]).code == 0)
            #expect(eventually { whole(m, server + "/" + Self.beta) }, "\(server): \(String(describing: row(m, server + "/" + Self.beta)))")
        }
        #expect(row(m, "plex/" + Self.beta)?["reason"] as? String != "shared_copy")
        #expect(partials(m, size: 3 * MiB).count == 2)
        #expect(try sha256(m.path("plex/" + Self.beta)) == sha256(m.mediaDir + "/beta-other.mp4"))
        // The budget counts Alpha once: Gamma still fits under 24M.
        #expect(try m.cli(["pin", m.path("test/" + Self.gamma)]).code == 0)
        #expect(eventually { whole(m, "test/" + Self.gamma) }, "\(String(describing: row(m, "test/" + Self.gamma)))")

        // Letting go of the first path (unpin, then its bytes freed) keeps them for Plex's.
        #expect(try m.cli(["unpin", m.path("test/" + Self.alpha)]).code == 0)
        #expect(try m.cli(["cancel", m.path("test/" + Self.alpha)]).code == 0)
        #expect(eventually { (row(m, "test/" + Self.alpha)?["bytes_present"] as? Int) == 0 })
        #expect(partials(m, size: alphaSize).values.sorted() == [1], "\(partials(m, size: alphaSize))")
        let before = plex.downloadRequests.count
        #expect(try Data(contentsOf: URL(fileURLWithPath: m.path("plex/" + Self.alpha))) == source)
        #expect(plex.downloadRequests.count == before)
        #expect(blocks(m.path("plex/" + Self.alpha)) >= alphaSize)

        // Pinned again through Jellyfin, it shares Plex's copy; removing Plex keeps it.
        m.fixture.clearLog()
        #expect(try m.cli(["pin", m.path("test/" + Self.alpha)]).code == 0)
        #expect(eventually { whole(m, "test/" + Self.alpha) })
        #expect(bytesAsked(m.fixture.downloadRequests) <= AdoptionProbe.budget, "\(m.fixture.downloadRequests)")
        let remove = try m.cli(["server", "remove", "plex", "--delete-files"])
        #expect(remove.code == 0, "\(remove.stderr)")
        #expect(eventually { !FileManager.default.fileExists(atPath: m.path("plex")) })
        #expect(try Data(contentsOf: URL(fileURLWithPath: m.path("test/" + Self.alpha))) == source)
        #expect(partials(m, size: alphaSize).values.sorted() == [1])
        try m.unmount()
    }

    /// The index lost (deleted, no backup) and rebuilt by `labstream repair` from the copies' own
    /// descriptions takes both names of a shared copy back and records again that they are one
    /// file: the budget and `du` over the mount count it once. Letting go of one name then keeps
    /// the bytes for the other, and the other's check: its recorded fingerprint is the file as it
    /// is after the name went, so it is not checked against its digests again.
    @Test func aRebuiltIndexCountsASharedCopyOnceAndLettingGoOfOneNameKeepsTheOthersCheck() throws {
        let m = try MountedLabstream("shared-rebuilt", catalog: Self.catalog, cacheConfig: "side_assets = off")
        let (plex, tv) = try Self.addPlex(to: m)
        defer { plex.stop(); tv.stop() }
        try m.mount()
        defer { stopDaemon(at: m.mountpoint, pid: m.daemonPid, env: m.env) }
        let alphaSize = 12 * MiB + 37
        let source = try Data(contentsOf: URL(fileURLWithPath: m.mediaDir + "/alpha.mkv"))
        for server in ["test", "plex"] {
            #expect(try m.cli(["pin", m.path(server + "/" + Self.alpha)]).code == 0)
            #expect(eventually { whole(m, server + "/" + Self.alpha) }, "\(server): \(String(describing: row(m, server + "/" + Self.alpha)))")
        }
        #expect(row(m, "plex/" + Self.alpha)?["reason"] as? String == "shared_copy")
        try m.unmount()

        for suffix in ["", "-wal", "-shm"] { unlink(m.dataDir + "/index.sqlite" + suffix) }
        unlink(OfflineIndex.backupPath(of: m.dataDir + "/index.sqlite"))
        let repair = try m.cli(["repair"])
        #expect(repair.code == 0 && repair.stdout.contains("recorded 2 stored copies as one file"), "\(repair.stdout) \(repair.stderr)")
        do {
            // What the budget takes off the per-server sums (`Room`): the file counted twice.
            let index = try OfflineIndex(path: m.dataDir + "/index.sqlite")
            #expect(index.storedBytesCountedTwice() == Int64(alphaSize))
            #expect(Set(index.sharedGroups().values).count == 1 && index.sharedGroups().count == 2, "\(index.sharedGroups())")
        }
        #expect(partials(m, size: alphaSize).values.sorted() == [2])

        try m.mount()
        #expect(eventually { whole(m, "plex/" + Self.alpha) && whole(m, "test/" + Self.alpha) })
        let counted = [blocks(m.path("test/" + Self.alpha)), blocks(m.path("plex/" + Self.alpha))]
        #expect(counted.contains(0) && counted.contains { $0 >= alphaSize }, "\(counted)")
        // Read whole under both names: each row's bytes are checked against its digests, and
        // its check (the file's fingerprint) recorded.
        plex.clearLog()
        m.fixture.clearLog()
        for server in ["test", "plex"] { #expect(try Data(contentsOf: URL(fileURLWithPath: m.path(server + "/" + Self.alpha))) == source) }
        #expect(plex.downloadRequests.isEmpty && m.fixture.downloadRequests.isEmpty)

        #expect(try m.cli(["cancel", m.path("test/" + Self.alpha)]).code == 0)
        #expect(eventually { (row(m, "test/" + Self.alpha)?["bytes_present"] as? Int) == 0 })
        #expect(partials(m, size: alphaSize).values.sorted() == [1], "\(partials(m, size: alphaSize))")
        #expect(try Data(contentsOf: URL(fileURLWithPath: m.path("plex/" + Self.alpha))) == source)
        #expect(plex.downloadRequests.isEmpty)
        #expect(blocks(m.path("plex/" + Self.alpha)) >= alphaSize)
        // The survivor's transfer, open since the read, saves its row: with the check carried over.
        #expect(try m.cli(["unpin", m.path("plex/" + Self.alpha)]).code == 0)
        try m.unmount()

        // The survivor's check names the file as it is now (one name fewer changed its ctime):
        // the next run trusts it without reading it against its digests.
        let index = try OfflineIndex(path: m.dataDir + "/index.sqlite")
        let survivor = try #require(try index.downloads().first { $0.key.server == "plex" && $0.total == Int64(alphaSize) })
        var st = stat()
        #expect(stat(m.dataDir + "/" + survivor.partialPath, &st) == 0 && st.st_nlink == 1)
        let now = "\(st.st_dev):\(st.st_ino):\(st.st_size):\(st.st_mtim.tv_sec).\(st.st_mtim.tv_nsec):\(st.st_ctim.tv_sec).\(st.st_ctim.tv_nsec)"
        #expect(survivor.checked == now, "recorded \(survivor.checked ?? "nothing"), the file is \(now)")
    }
}

/// A shared file's bytes never change under the other name: a write copies it first.
@Suite struct SharedPartialTests {
    @Test func aWriteIntoASharedFileGoesToACopyOfItsOwn() throws {
        let scratch = Scratch("shared-partial")
        let a = scratch.path + "/a.part", b = scratch.path + "/b.part"
        writeRandomFile(a, size: 3 * MiB + 5, seed: 7)
        let original = try Data(contentsOf: URL(fileURLWithPath: a))
        #expect(link(a, b) == 0)
        let partial = try PartialFile(path: b, size: Int64(original.count))
        #expect(partial.isShared)
        let reader = try #require(partial.openReadOnly())  // a descriptor of the shared file, as passthrough holds
        defer { close(reader) }
        let patch = [UInt8](repeating: 0xAB, count: 4096)
        try patch.withUnsafeBytes { try partial.write($0, at: 1 << 20) }
        // The other name, and a descriptor of the shared file, keep the old bytes whole.
        #expect(try Data(contentsOf: URL(fileURLWithPath: a)) == original)
        #expect(try pread(path: "/proc/self/fd/\(reader)", offset: 1 << 20, length: 4096) == Array(original[(1 << 20)..<((1 << 20) + 4096)]))
        // This name is a copy of its own: the old bytes, the write on top.
        var expected = original
        expected.replaceSubrange((1 << 20)..<((1 << 20) + 4096), with: patch)
        #expect(try Data(contentsOf: URL(fileURLWithPath: b)) == expected)
        #expect(!partial.isShared && OfflineIndex.fileGroup(ofPartial: a) != OfflineIndex.fileGroup(ofPartial: b))
    }
}
