import CLinux
import Foundation
import LabstreamCore
import LabstreamDemo
import LabstreamFixture
import LabstreamStore
import Testing

@testable import LabstreamCLI
@testable import LabstreamDaemon

/// The mount with its server down: at start, mid-session, and coming back.
@Suite(.serialized) struct OfflineTests {
    let alpha = "test/Movies/Alpha (2001)/Alpha (2001).mkv"
    let beta = "test/Movies/Beta (2002)/Beta (2002).mp4"

    @Test func theMountKeepsWorkingWithTheServerDownAndResumesWhenItReturns() throws {
        let m = try MountedLabstream("offline", cacheConfig: "segment_size = 1M")
        let expected = expectedTree(m.mediaDir)
        try m.mount()
        #expect(try sha256(m.path(beta)) == sha256(expected[beta]!))  // beta fully local
        _ = try pread(path: m.path(alpha), offset: 0, length: 4096)  // alpha partly

        m.fixture.stop()
        // Restart the daemon while the server is down: it mounts from the index.
        try m.unmount()
        try m.mount()
        let listing = try runProcess("/bin/ls", ["-R", m.mountpoint])
        #expect(listing.code == 0 && listing.stdout.contains("Gamma.mkv"))
        #expect(try sha256(m.path(beta)) == sha256(expected[beta]!))
        #expect(try pread(path: m.path(alpha), offset: 0, length: 4096) == pread(path: expected[alpha]!, offset: 0, length: 4096))
        let started = Date()
        #expect(throws: SyscallError.self) { _ = try pread(path: m.path(alpha), offset: 9 * MiB, length: 4096) }
        #expect(Date().timeIntervalSince(started) < 2, "a read of missing bytes must fail within 2 s")
        let again = Date()
        #expect(throws: SyscallError.self) { _ = try pread(path: m.path(alpha), offset: 10 * MiB, length: 4096) }
        #expect(Date().timeIntervalSince(again) < 2)
        #expect(StatusCommandProbe.reachability(m.path("test")) == "offline")
        let status = try m.cli(["status"])
        #expect(status.stdout.contains("server test: offline"), "\(status.stdout)")
        // A file that is not here says why a read of it fails.
        let gamma = try m.cli(["status", m.path("test/Movies/Gamma/Gamma.mkv")])
        #expect(gamma.stdout.hasPrefix("not-local") && gamma.stdout.contains("(server offline)"), "\(gamma.stdout)")
        let list = try m.cli(["server", "list", "--json"])
        #expect(list.stdout.contains("\"reachability\" : \"offline\""), "\(list.stdout)")
        // A library Labstream cannot place is named with why, from the index (offline too).
        #expect(list.stdout.contains("\"library\" : \"Live TV\"") && list.stdout.contains("not files"), "\(list.stdout)")
        #expect(try m.cli(["server", "list"]).stdout.contains("  left out: Live TV (live TV channels are streams, not files)"))
        // One log line for the file, not one per read.
        #expect(m.log.components(separatedBy: "reads of bytes not stored locally fail").count - 1 == 1, "\(m.log)")
        // The start-up sync failed and the tree, unchanged, was not rebuilt after it.
        let sinceRestart = String(m.log[m.log.range(of: "mounted ", options: .backwards)!.lowerBound...])
        #expect(sinceRestart.contains("Serving its last known catalog from the index"), "\(sinceRestart)")
        #expect(!sinceRestart.contains("catalog reloaded"), "\(sinceRestart)")
        // Nor after a `labstream sync` that fails: the old catalog stays, and so does the tree.
        let failedSync = try m.cli(["sync"])
        #expect(failedSync.code != 0, "\(failedSync.stdout) \(failedSync.stderr)")
        let sinceSync = String(m.log[m.log.range(of: "mounted ", options: .backwards)!.lowerBound...])
        #expect(!sinceSync.contains("catalog reloaded"), "\(sinceSync)")

        // Pin while offline: it waits, paused; the server comes back and it finishes by itself.
        let pin = try m.cli(["pin", m.path(alpha)])
        #expect(pin.code == 0)
        try m.fixture.restart()
        let wait = try m.cli(["pin", "--wait", m.path(alpha)])
        #expect(wait.code == 0, "\(wait.stderr)")
        #expect(try sha256(m.path(alpha)) == sha256(expected[alpha]!))
        #expect(StatusCommandProbe.reachability(m.path("test")) == "online")
        try m.unmount()
    }

    /// A complete, probed file stays playable with the server gone: it hashes like its source,
    /// a re-probe through the mount still proves it, and mpv itself plays it from the mount.
    @Test func completeFilesProbeAsPlayableOffline() throws {
        let m = try MountedLabstream(
            "offline-probe",
            catalog: { dir in
                let clip = dir + "/clip.mkv"
                try? DemoMedia.generate(path: clip, seconds: 4, size: "320x240")
                return FixtureCatalog(movies: [.init(title: "Clip", year: 2020, file: clip, container: "mkv")], series: [])
            }, probe: true)
        try m.mount()
        let clip = "test/Movies/Clip (2020)/Clip (2020).mkv"
        let pin = try m.cli(["pin", "--wait", m.path(clip)])
        #expect(pin.code == 0, "\(pin.stderr)")
        #expect(StatusCommandXattr.get(m.path(clip), "state") == "complete")
        m.fixture.stop()
        try m.unmount()
        try m.mount()  // restarted with the server down
        #expect(StatusCommandProbe.reachability(m.path("test")) == "offline")
        #expect(try sha256(m.path(clip)) == sha256(m.mediaDir + "/clip.mkv"))
        let verify = try m.cli(["verify", m.path(clip)])
        #expect(verify.code == 0)
        let deadline = Date().addingTimeInterval(30)
        let probed = { m.log.components(separatedBy: "probe of test/Movies/Clip (2020)/Clip (2020).mkv: complete").count - 1 }
        while probed() < 2 && Date() < deadline { usleep(50_000) }  // the first probe, then verify's
        #expect(probed() >= 2, "\(m.log)")
        #expect(StatusCommandXattr.get(m.path(clip), "state") == "complete")
        let mpv = try runProcess("/usr/bin/mpv", ["--no-config", "--really-quiet", "--vo=null", "--ao=null", "--untimed", "--frames=30", m.path(clip)])
        #expect(mpv.code == 0, "\(mpv.stderr)")
        try m.unmount()
    }

    @Test func offlineViewLocalShowsOnlyWhatIsStored() throws {
        let m = try MountedLabstream("offline-local")
        try m.mount()
        _ = try pread(path: m.path(beta), offset: 0, length: 10)
        try m.unmount()
        m.fixture.stop()
        let r = try m.cli(["mount", m.mountpoint, "-o", "offline_view=local"])
        try #require(r.code == 0, "\(r.stderr)")
        let lock = try String(contentsOfFile: m.dataDir + "/labstream.lock", encoding: .utf8)
        let pid = Int32(lock.split(separator: "\n").first ?? "") ?? 0
        var files = Set<String>()
        let walker = FileManager.default.enumerator(atPath: m.mountpoint)
        while let rel = walker?.nextObject() as? String { files.insert(rel) }
        // The film's .nfo shows with its folder: it is always here.
        #expect(
            files == ["test", "test/Movies", "test/Movies/Beta (2002)", "test/Movies/Beta (2002)/Beta (2002).mp4", "test/Movies/Beta (2002)/Beta (2002).nfo"],
            "\(files)")
        let bad = try m.cli(["mount", m.scratch.sub("other"), "-o", "offline_view=some"])
        #expect(bad.code == 64)
        #expect(try m.cli(["unmount", m.mountpoint]).code == 0)
        #expect(waitForExit(pid: pid))
    }
}

enum StatusCommandProbe {
    static func reachability(_ path: String) -> String? {
        var buffer = [UInt8](repeating: 0, count: 64)
        let n = getxattr(path, "user.labstream.reachability", &buffer, buffer.count)
        return n > 0 ? String(decoding: buffer[0..<n], as: UTF8.self) : nil
    }
}

/// The usual boot order on a home server: the mount starts before the media server answers.
@Suite(.serialized) struct LateServerTests {
    @Test func aServerThatStartsAfterTheMountAppearsWithoutASync() throws {
        let m = try MountedLabstream("late-server")
        m.fixture.stop()
        try m.mount()
        #expect(try FileManager.default.contentsOfDirectory(atPath: m.mountpoint).isEmpty)
        // What is true: mounted, and the server does not answer (not "not mounted").
        let list = try m.cli(["server", "list"])
        #expect(list.stdout.contains("never synced\toffline"), "\(list.stdout)")
        try m.fixture.restart()
        #expect(eventually { FileManager.default.fileExists(atPath: m.path("test/Movies/Beta (2002)/Beta (2002).mp4")) }, "\(m.log)")
        let beta = "test/Movies/Beta (2002)/Beta (2002).mp4"
        #expect(try sha256(m.path(beta)) == sha256(expectedTree(m.mediaDir)[beta]!))
        #expect(try m.cli(["server", "list"]).stdout.contains("\tonline"))
        try m.unmount()
    }
}

@Suite(.serialized) struct ReconfigureTests {
    /// Waits for a condition the daemon makes true on its own schedule; false after `timeout`.
    @Test func serversAddedOrRemovedWhileMountedAppearAndGo() throws {
        let m = try MountedLabstream("reconfigure")
        try m.mount()
        let second = try ServerFixture(
            catalog: FixtureCatalog(
                movies: [.init(title: "Other", year: 1999, file: expectedTree(m.mediaDir)["test/Movies/Gamma/Gamma.mkv"]!, container: "mkv")], series: []),
            userName: "demo", password: "pw2")
        try second.start()
        defer { second.stop() }
        let add = try m.cli(["server", "add", "jellyfin", "second", "--url", second.baseURL, "--user", "demo", "--password-stdin"], stdin: "pw2")
        #expect(add.code == 0 && add.stdout.contains("appears under"), "\(add.stderr)")
        #expect(eventually { FileManager.default.fileExists(atPath: m.path("second/Movies/Other (1999)/Other (1999).mkv")) })
        #expect(FileManager.default.fileExists(atPath: m.path("test/Movies")))  // the first one stays
        #expect(eventually { second.eventSocketsOpen == 1 }, "\(m.log)")  // its event channel opens
        let sync = try m.cli(["sync", "second"])  // the daemon syncs a server added while mounted
        #expect(sync.code == 0 && sync.stdout.hasSuffix("second: 1 files\n"), "\(sync.stdout) \(sync.stderr)")
        let remove = try m.cli(["server", "remove", "second"])
        #expect(remove.code == 0)
        #expect(eventually { !FileManager.default.fileExists(atPath: m.path("second")) })
        // A removed server's event channel closes with it; the other's opens again.
        #expect(eventually { second.eventSocketsOpen == 0 && m.log.contains("events second: channel closed") }, "\(m.log)")
        #expect(eventually { m.fixture.eventSocketsOpen == 1 }, "\(m.log)")
        try m.unmount()
    }
}

/// The daemon's periodic refresh and `labstream sync` ask only for what changed
/// (`minDateLastSaved`); a removal shows in the library's item count, which sends them to read
/// everything; `sync --full` always does.
@Suite(.serialized) struct IncrementalRefreshTests {
    /// The full refresh runs once a day: a removal seen within seconds was seen by the count.
    @Test(arguments: [ServerFixture.Kind.jellyfin, .emby])
    func changesArriveIncrementallyAndRemovalsByTheLibrarysCount(kind: ServerFixture.Kind) throws {
        let m = try MountedLabstream("incremental-\(kind)", kind: kind, cacheConfig: "refresh_interval = 1")
        try m.mount()
        let alphaPath = "test/Movies/Alpha (2001)/Alpha (2001).mkv"
        let index = try OfflineIndex(path: m.dataDir + "/index.sqlite")
        func etag(_ path: String) -> String? { (try? index.treeFiles())?.first { $0.path.joined(separator: "/") == path }?.etag }
        let before = etag(alphaPath)
        let since = kind == .jellyfin ? "minDateLastSaved" : "MinDateLastSaved"
        m.fixture.clearLog()
        m.fixture.touch(itemId: try #require(m.fixture.itemId(forFile: m.mediaDir + "/alpha.mkv")))
        // Jellyfin's media source ETag follows the file; Emby's sources have none, its item's Etag does.
        #expect(eventually { etag(alphaPath) != before })
        #expect(eventually { m.log.contains("items changed since the last sync") })
        let incremental = m.fixture.requestLog.filter { $0.query[since] != nil }
        #expect(!incremental.isEmpty && incremental.allSatisfy { ISODate.epochSeconds($0.query[since]!) != nil })

        m.fixture.remove(itemId: try #require(m.fixture.itemId(forFile: m.mediaDir + "/gamma.mkv")))
        #expect(eventually { !FileManager.default.fileExists(atPath: m.path("test/Movies/Gamma/Gamma.mkv")) })
        try m.unmount()
    }

    @Test(arguments: [ServerFixture.Kind.jellyfin, .emby])
    func syncAsksForChangesAndFullReadsEverything(kind: ServerFixture.Kind) throws {
        let m = try MountedLabstream("sync-full-\(kind)", kind: kind)
        try m.mount()
        let since = kind == .jellyfin ? "minDateLastSaved" : "MinDateLastSaved"
        func asked(_ name: String) -> Bool { m.fixture.requestLog.contains { $0.query[name] != nil } }
        m.fixture.clearLog()
        let changes = try m.cli(["sync"])
        #expect(changes.code == 0 && changes.stdout.hasSuffix("test: 10 files\n"), "\(changes.stdout) \(changes.stderr)")
        #expect(asked(since) && m.log.contains("nothing changed since the last sync"))

        // Nothing's save date changes with a removal; the count tells.
        let gamma = "test/Movies/Gamma/Gamma.mkv"
        m.fixture.remove(itemId: try #require(m.fixture.itemId(forFile: m.mediaDir + "/gamma.mkv")))
        let removal = try m.cli(["sync"])
        #expect(
            removal.code == 0 && removal.stdout.contains("items on the server") && removal.stdout.hasSuffix("test: 9 files\n"),
            "\(removal.stdout) \(removal.stderr)")
        #expect(!FileManager.default.fileExists(atPath: m.path(gamma)))

        m.fixture.clearLog()
        let reloads = m.log.components(separatedBy: "catalog reloaded").count
        let full = try m.cli(["sync", "--full"])
        #expect(full.code == 0 && full.stdout.hasSuffix("test: 9 files\n"), "\(full.stdout) \(full.stderr)")
        #expect(!asked(since) && !m.fixture.requestLog.isEmpty)
        // The full read found every row as it was: the tree (and the kernel's caches of it) stays.
        #expect(m.log.components(separatedBy: "catalog reloaded").count == reloads, "\(m.log)")
        try m.unmount()
    }
}

/// A restarted daemon's start-up sync asks only for what changed while the last whole read is
/// under a day old (at 100 000 items a whole read is 40 s of both cores and 290 MiB at every
/// start), and reads everything once it is older.
@Suite(.serialized) struct StartUpSyncTests {
    @Test func aRestartAsksForChangesUntilAWholeReadIsDue() throws {
        let m = try MountedLabstream("startup-sync")
        try m.mount()  // no catalog yet: read whole before mounting
        try m.unmount()
        let index = try OfflineIndex(path: m.dataDir + "/index.sqlite")
        let first = try #require(try index.servers().first?.lastFullSync)
        #expect(abs(first - Int64(Date().timeIntervalSince1970)) < 600)
        func wholeReads() -> Int { m.log.components(separatedBy: " files in ").count - 1 }
        let readsBefore = wholeReads()

        m.fixture.clearLog()
        let reloads = m.log.components(separatedBy: "catalog reloaded").count
        try m.mount()
        #expect(eventually { m.log.components(separatedBy: "nothing changed since the last sync").count == 2 }, "\(m.log)")
        #expect(m.fixture.requestLog.contains { $0.query["minDateLastSaved"] != nil })
        try m.unmount()
        // Nothing changed: the tree (and the kernel's caches of it) was not rebuilt.
        #expect(m.log.components(separatedBy: "catalog reloaded").count == reloads, "\(m.log)")
        let kept = try index.servers().first?.lastFullSync
        #expect(wholeReads() == readsBefore && kept == first)

        // A day later (the index says so), the start-up sync reads everything.
        try index.db.exec("UPDATE servers SET last_full_sync = last_full_sync - \(FullRefreshPolicy.interval)")
        m.fixture.clearLog()
        try m.mount()
        #expect(eventually { wholeReads() == readsBefore + 1 }, "\(m.log)")
        #expect(!m.fixture.requestLog.contains { $0.query["minDateLastSaved"] != nil })
        let renewed = try index.servers().first?.lastFullSync ?? 0
        #expect(renewed > first - FullRefreshPolicy.interval)
        try m.unmount()
    }
}

/// A file whose media changed on the server keeps its complete old copy readable until the new
/// version is complete, then swaps in one step.
@Suite(.serialized) struct VersionSwapTests {
    /// The same size, new bytes: only the server's change signal tells (Jellyfin's media source
    /// ETag, Emby's item Etag).
    @Test(arguments: [ServerFixture.Kind.jellyfin, .emby])
    func theOldCopyServesUntilTheNewOneIsCompleteThenSwaps(kind: ServerFixture.Kind) throws {
        let m = try MountedLabstream("swap-\(kind)", kind: kind)
        try m.mount()
        let rel = "test/Movies/Beta (2002)/Beta (2002).mp4"
        let source = m.mediaDir + "/beta.mp4"
        #expect(try m.cli(["pin", "--wait", m.path(rel)]).code == 0)
        let oldHash = try sha256(source)
        let oldSize = 3 * MiB
        #expect(try sha256(m.path(rel)) == oldHash)

        // The server's file changes: new bytes, same size, new tag — but slowly, so that the
        // old copy is read while the new one is still arriving.
        writeRandomFile(source, size: 3 * MiB, seed: 4242)
        let newHash = try sha256(source)
        m.fixture.touch(itemId: try #require(m.fixture.itemId(forFile: source)))
        m.fixture.inject(.stall(1), pathPrefix: "/Items/", times: 1)
        m.fixture.clearLog()
        #expect(try m.cli(["sync"]).code == 0)
        let attrs = try FileManager.default.attributesOfItem(atPath: m.path(rel))
        #expect((attrs[.size] as? Int) == oldSize)
        #expect(try sha256(m.path(rel)) == oldHash)  // still the complete old copy

        #expect(eventually { m.log.contains("the new version replaced the old copy") })
        // The swap is logged before the daemon's tree reload shows the new version.
        #expect(eventually { (try? sha256(m.path(rel))) == newHash })
        #expect(m.log.contains("the new version replaced the old copy"))
        #expect(
            !m.fixture.downloadRequests.isEmpty && m.fixture.downloadRequests.allSatisfy { $0.path.contains(try! #require(m.fixture.itemId(forFile: source))) })
        #expect(StatusCommandXattr.get(m.path(rel), "pinned") == "1")
        // One partial file for Beta again: the old one is gone.
        let index = try OfflineIndex(path: m.dataDir + "/index.sqlite")
        let partials = try FileManager.default.contentsOfDirectory(atPath: m.dataDir + "/partials").filter { $0.hasSuffix(".part") }
        #expect(Set(try index.downloads().map { ($0.partialPath as NSString).lastPathComponent }).isSuperset(of: Set(partials)))
        #expect(try index.downloads().allSatisfy { NextVersion.base(of: $0.key) == nil })
        try m.unmount()
    }
}
