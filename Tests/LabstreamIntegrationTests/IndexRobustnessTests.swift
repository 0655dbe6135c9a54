import Foundation
import LabstreamCore
import LabstreamFixture
import Testing

@testable import LabstreamStore

/// The index fails closed and stays where it is; the data directory can move.
@Suite(.serialized) struct IndexRobustnessTests {
    func bytes(_ path: String) -> Data? { FileManager.default.contents(atPath: path) }

    /// A damaged or deleted index loses no stored byte: the mount refuses a damaged one by name
    /// and points at `labstream repair`, which moves it aside and restores the last backup; a
    /// deleted one is replaced by the backup at the next mount. The pinned copy comes back
    /// complete and is read with the server gone.
    @Test(arguments: ["truncated", "random", "deleted"])
    func aDamagedIndexIsRefusedByNameAndRepairedFromItsBackup(damage: String) throws {
        let m = try MountedLabstream("index-\(damage)")
        try m.mount()
        let pinned = "test/Movies/Beta (2002)/Beta (2002).mp4"
        #expect(try m.cli(["pin", "--wait", m.path(pinned)]).code == 0)
        _ = try pread(path: m.path("test/Movies/Gamma/Gamma.mkv"), offset: 0, length: 4096)
        try m.unmount()
        let index = m.dataDir + "/index.sqlite"
        let partials = try FileManager.default.contentsOfDirectory(atPath: m.dataDir + "/partials").filter { $0.hasSuffix(".part") }.sorted()
        #expect(partials.count == 2)
        let original = try #require(bytes(index))
        // A clean shutdown leaves everything in the file itself, and a backup beside it.
        #expect(((try? FileManager.default.attributesOfItem(atPath: index + "-wal")[.size] as? Int) ?? 0) == 0)
        #expect(FileManager.default.fileExists(atPath: m.dataDir + "/index.backup.sqlite"))
        switch damage {
        case "truncated": try original.prefix(original.count / 2 + 100).write(to: URL(fileURLWithPath: index))
        case "random":
            var rng = SeededRandom(seed: 9)
            try Data(rng.bytes(original.count)).write(to: URL(fileURLWithPath: index))
        default: try FileManager.default.removeItem(atPath: index)
        }
        let damaged = bytes(index)
        m.fixture.stop()  // every stored byte must come back from the disk

        if damage != "deleted" {
            let r = try m.cli(["mount", m.mountpoint])
            #expect(r.code != 0)
            #expect(r.stderr.contains(index) && r.stderr.contains("labstream repair"), "\(r.stderr)")
            #expect(bytes(index) == damaged)  // never reset, never rewritten
            let status = try m.cli(["status"])
            #expect(status.code != 0 && status.stderr.contains(index), "\(status.stderr)")
            #expect(bytes(index) == damaged)
            #expect(!FileManager.default.fileExists(atPath: m.path("test")))
            let repair = try m.cli(["repair"])
            #expect(repair.code == 0 && repair.stdout.contains("restored the index from its backup"), "\(repair.stdout)\(repair.stderr)")
            let aside = try FileManager.default.contentsOfDirectory(atPath: m.dataDir).filter {
                $0.hasPrefix("index.sqlite.damaged-") && !$0.hasSuffix("-wal") && !$0.hasSuffix("-shm")
            }
            #expect(aside.count == 1 && bytes(m.dataDir + "/" + aside[0]) == damaged)
        }
        try m.mount()
        #expect(try FileManager.default.contentsOfDirectory(atPath: m.dataDir + "/partials").filter { $0.hasSuffix(".part") }.sorted() == partials)
        #expect(["complete", "unverified"].contains(StatusCommandXattr.get(m.path(pinned), "state") ?? ""))
        #expect(StatusCommandXattr.get(m.path(pinned), "pinned") == "1")
        #expect(try sha256(m.path(pinned)) == sha256(expectedTree(m.mediaDir)[pinned]!))
        try m.unmount()
    }

    /// With no index and no backup at all, every stored copy describes itself (its sidecar):
    /// a fresh index takes each back whose bytes still match, pinned as it was, with nothing
    /// fetched again. A file nothing describes is set aside, deleted only by
    /// `labstream orphans --purge`.
    @Test func aFreshIndexTakesBackEveryStoredCopyAndDeletesNothing() throws {
        let m = try MountedLabstream("index-fresh")
        try m.mount()
        let gamma = "test/Movies/Gamma/Gamma.mkv", alpha = "test/Movies/Alpha (2001)/Alpha (2001).mkv"
        #expect(try m.cli(["pin", "--wait", m.path(gamma)]).code == 0)
        _ = try pread(path: m.path(alpha), offset: 0, length: 4096)
        try m.unmount()
        let stray = "0123456789abcdef0123456789abcdef.part"
        writeRandomFile(m.dataDir + "/partials/" + stray, size: 1000, seed: 5)
        // Alpha's stored bytes are damaged behind Labstream's back: its sidecar's digest no
        // longer matches, so it is not taken back (set aside instead) and is fetched again.
        let alphaPartial = try #require(
            try OfflineIndex(path: m.dataDir + "/index.sqlite").downloads()
                .first { $0.key.itemId == m.fixture.itemId(forFile: m.mediaDir + "/alpha.mkv") }?.partialPath)
        let fd = open(m.dataDir + "/" + alphaPartial, O_WRONLY)
        _ = [UInt8(0x5A)].withUnsafeBytes { pwrite(fd, $0.baseAddress, 1, 100) }
        close(fd)
        for name in ["index.sqlite", "index.backup.sqlite"] { try FileManager.default.removeItem(atPath: m.dataDir + "/" + name) }
        m.fixture.clearLog()
        try m.mount()
        #expect(m.log.contains("took back"), "\(m.log)")
        #expect(StatusCommandXattr.get(m.path(gamma), "pinned") == "1")
        #expect(try sha256(m.path(gamma)) == sha256(expectedTree(m.mediaDir)[gamma]!))
        #expect(
            !m.fixture.downloadRequests.contains { !$0.path.contains(m.fixture.itemId(forFile: m.mediaDir + "/alpha.mkv")!) },
            "\(m.fixture.downloadRequests.map(\.path))")  // gamma is not fetched again
        #expect(try pread(path: m.path(alpha), offset: 0, length: 4096) == pread(path: expectedTree(m.mediaDir)[alpha]!, offset: 0, length: 4096))
        try m.unmount()
        let orphans = try FileManager.default.contentsOfDirectory(atPath: m.dataDir + "/orphans").filter { $0.hasSuffix(".part") }
        #expect(Set(orphans) == [stray, (alphaPartial as NSString).lastPathComponent] && m.log.contains("set \(stray) aside"), "\(orphans)")
        let list = try m.cli(["orphans"])
        #expect(list.code == 0 && list.stdout.contains(stray), "\(list.stdout)")
        let purge = try m.cli(["orphans", "--purge"])
        #expect(purge.code == 0 && purge.stdout.contains("deleted"), "\(purge.stdout)")
        #expect(try FileManager.default.contentsOfDirectory(atPath: m.dataDir + "/orphans").isEmpty)
    }

    /// Statements are kept prepared between uses (a sync runs the same few 100 000 times): one
    /// used again after its table changed shape reads the new shape; more distinct statements
    /// than are kept still answer right; and a kept statement holds no read open, so another
    /// connection can write and checkpoint the log to nothing between uses.
    @Test func keptStatementsFollowTheSchemaAndHoldNothingOpen() throws {
        let scratch = Scratch("kept-statements")
        let path = scratch.path + "/kept.sqlite"
        let db = try SQLiteDatabase(path: path)
        try db.exec("PRAGMA journal_mode=WAL")
        try db.exec("CREATE TABLE t(a INTEGER)")
        try db.run("INSERT INTO t(a) VALUES(?)", [.int(1)])
        #expect(try db.query("SELECT * FROM t") == [[.int(1)]])
        try db.exec("ALTER TABLE t ADD COLUMN b TEXT")
        try db.run("UPDATE t SET b = ?", [.text("x")])
        #expect(try db.query("SELECT * FROM t") == [[.int(1), .text("x")]])
        for i in 0..<200 { #expect(try db.query("SELECT a + \(i) FROM t") == [[.int(Int64(1 + i))]]) }
        #expect(try db.query("SELECT * FROM t") == [[.int(1), .text("x")]])
        let other = try SQLiteDatabase(path: path)
        try other.run("INSERT INTO t(a, b) VALUES(2, 'y')")
        #expect(try other.query("PRAGMA wal_checkpoint(TRUNCATE)").first?.first == .int(0))
        #expect(try db.query("SELECT count(*) FROM t") == [[.int(2)]])
    }

    /// Rows read as they are stepped to give what whole queries give: integers as integers,
    /// text (any length, not only ASCII) as text, NULL as nothing, a real as its text; a read
    /// that stops with an error leaves no statement holding the log open.
    @Test func rowsReadAsSteppedMatchWholeQueries() throws {
        let scratch = Scratch("rows-stepped")
        let path = scratch.path + "/rows.sqlite"
        let db = try SQLiteDatabase(path: path)
        try db.exec("PRAGMA journal_mode=WAL")
        try db.exec("CREATE TABLE t(a INTEGER, b TEXT, c REAL)")
        let long = String(repeating: "Ünïcødé film – ", count: 20)
        try db.run("INSERT INTO t VALUES(?, ?, 1.5)", [.int(-7), .text(long)])
        try db.run("INSERT INTO t VALUES(NULL, 'short', NULL)")
        #expect(try db.query("SELECT a, b, c FROM t ORDER BY rowid") == [[.int(-7), .text(long), .text("1.5")], [.null, .text("short"), .null]])
        var seen: [String] = []
        try db.withConnection { c in
            try c.forEachRow("SELECT a, b, c FROM t WHERE b <> ? ORDER BY rowid", [.text("none")]) { r in
                #expect(r.count == 3)
                #expect(r.text(0) == nil && r.int(1) == nil)
                seen.append("\(r.int(0).map(String.init) ?? "-") \(r.text(1) ?? "-") \(r.text(2) ?? "-")")
            }
        }
        #expect(seen == ["-7 \(long) 1.5", "- short -"])
        #expect(throws: SQLiteError.self) {
            try db.withConnection { c in
                try c.forEachRow("SELECT a FROM t") { (_: borrowing Row) throws(SQLiteError) in throw SQLiteError(code: 1, message: "stop") }
            }
        }
        let other = try SQLiteDatabase(path: path)
        try other.run("INSERT INTO t(a) VALUES(3)")
        #expect(try other.query("PRAGMA wal_checkpoint(TRUNCATE)").first?.first == .int(0))
    }

    /// A stored tree path is split at its slashes (empty parts dropped), and a part that is the
    /// previous path's at the same place is that string, not a copy: the files of one folder
    /// hold its name once.
    @Test func treePathsShareTheirFoldersNames() {
        func split(_ path: String, _ previous: [String] = []) -> [String] {
            var path = path
            return path.withUTF8 { OfflineIndex.components($0, reusing: previous) }
        }
        #expect(split("") == [])
        #expect(split("a//b/") == ["a", "b"])
        let folder = "A Folder Whose Name Is Longer Than Fifteen Bytes"
        let first = split("srv/Films/\(folder)/one.mkv")
        let second = split("srv/Films/\(folder)/two.mkv", first)
        #expect(second == ["srv", "Films", folder, "two.mkv"])
        func storage(_ s: String) -> UnsafeRawPointer? { s.utf8.withContiguousStorageIfAvailable { UnsafeRawPointer($0.baseAddress) } ?? nil }
        #expect(storage(first[2]) != nil && storage(first[2]) == storage(second[2]))
        #expect(split("srv/Series/\(folder)x/one.mkv", first)[2] == folder + "x")
    }

    /// An index that claims the current schema but lacks part of it (a development build's) is
    /// refused by name, saying what is missing, and left as it was.
    @Test func anIndexMissingPartOfItsSchemaIsRefusedAndLeftAlone() throws {
        let scratch = Scratch("index-shape")
        let path = scratch.path + "/index.sqlite"
        _ = try OfflineIndex(path: path)
        try SQLiteDatabase(path: path).exec("DROP TABLE quarantine")
        let before = try #require(bytes(path))
        #expect {
            _ = try OfflineIndex(path: path)
        } throws: { error in
            "\(error)".contains("says schema \(OfflineIndex.schemaVersion) but lacks table quarantine") && "\(error)".contains(path)
                && "\(error)".contains("labstream repair")
        }
        #expect(bytes(path) == before)
    }

    @Test func theDataDirectoryCanBeMoved() throws {
        let m = try MountedLabstream("move-data")
        try m.mount()
        let rel = "test/Movies/Beta (2002)/Beta (2002).mp4"
        let pin = try m.cli(["pin", "--wait", m.path(rel)])
        try #require(pin.code == 0, "\(pin.stderr)")
        try m.unmount()
        m.fixture.stop()  // every byte must now come from the moved copy

        let moved = m.scratch.path + "/moved-data"
        try FileManager.default.moveItem(atPath: m.dataDir, toPath: moved)
        let r = try m.cli(["mount", m.mountpoint, "--data-dir", moved])
        try #require(r.code == 0, "\(r.stderr)")
        defer { _ = try? m.cli(["unmount", m.mountpoint, "--data-dir", moved]) }
        #expect(try sha256(m.path(rel)) == sha256(expectedTree(m.mediaDir)[rel]!))
        let index = try OfflineIndex(path: moved + "/index.sqlite")
        let paths = try index.downloads().map(\.partialPath)
        #expect(!paths.isEmpty && paths.allSatisfy { !$0.hasPrefix("/") && !$0.contains(m.dataDir) })
        let unmount = try m.cli(["unmount", m.mountpoint, "--data-dir", moved])
        #expect(unmount.code == 0)
    }

    /// The per-server sums a budget is measured against on every read follow every save (growth,
    /// a copy of another kind, a cancel to nothing), and agree with a walk of every row after a
    /// fresh open.
    @Test func storedBytesPerServerFollowEverySave() throws {
        let scratch = Scratch("stored-sums")
        let layout = DataLayout(root: scratch.sub("data"))
        _ = scratch.sub("data/partials")
        let index = try OfflineIndex(path: layout.indexPath)
        func file(_ server: String, _ item: String) -> TreeFile {
            TreeFile(path: [server, "Movies", item], key: FileKey(server: server, itemId: item, sourceId: "m"), size: 1000, modified: 1, etag: nil)
        }
        #expect(index.storedBytesByServer().isEmpty)
        var a = try #require(try index.setPinned(true, files: [file("x", "a")], layout: layout, now: 1).first)
        var b = try #require(try index.setPinned(true, files: [file("y", "b")], layout: layout, now: 1).first)
        a.present = RangeSet([ByteRange(0, 300)])
        b.present = RangeSet([ByteRange(0, 1000)])
        #expect(try index.saveDownload(a, now: 2) && index.saveDownload(b, now: 2))
        #expect(index.storedBytesByServer() == ["x": 300, "y": 1000])
        a.present = RangeSet([ByteRange(0, 700)])
        #expect(try index.saveDownload(a, now: 3))
        #expect(index.storedBytesByServer() == ["x": 700, "y": 1000])
        b.present = RangeSet()
        #expect(try index.saveDownload(b, now: 4))
        #expect(index.storedBytesByServer() == ["x": 700])
        let reopened = try OfflineIndex(path: layout.indexPath)
        #expect(reopened.storedBytesByServer() == ["x": 700])
    }
}
