import Foundation
import LabstreamCore
import LabstreamFixture
import LabstreamStore
import Testing

/// The index fails closed and stays where it is; the data directory can move.
@Suite(.serialized) struct IndexRobustnessTests {
    func bytes(_ path: String) -> Data? { FileManager.default.contents(atPath: path) }

    @Test(arguments: ["truncated", "random"])
    func aDamagedIndexIsRefusedByNameAndLeftAlone(damage: String) throws {
        let m = try MountedLabstream("index-\(damage)")
        try m.mount()
        _ = try pread(path: m.path("test/Movies/Gamma/Gamma.mkv"), offset: 0, length: 4096)
        try m.unmount()
        let index = m.dataDir + "/index.sqlite"
        let original = try #require(bytes(index))
        let damaged: Data
        if damage == "truncated" {
            damaged = original.prefix(original.count / 2 + 100)
        } else {
            var rng = SeededRandom(seed: 9)
            damaged = Data(rng.bytes(original.count))
        }
        // A clean shutdown leaves everything in the file itself.
        #expect(((try? FileManager.default.attributesOfItem(atPath: index + "-wal")[.size] as? Int) ?? 0) == 0)
        try damaged.write(to: URL(fileURLWithPath: index))

        let r = try m.cli(["mount", m.mountpoint])
        #expect(r.code != 0)
        #expect(r.stderr.contains(index) && (r.stderr.contains("Move it aside") || r.stderr.contains("move it aside")), "\(r.stderr)")
        #expect(bytes(index) == damaged)   // never reset, never rewritten
        let status = try m.cli(["status"])
        #expect(status.code != 0 && status.stderr.contains(index), "\(status.stderr)")
        #expect(bytes(index) == damaged)
        #expect(!FileManager.default.fileExists(atPath: m.path("test")))
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
            "\(error)".contains("says schema \(OfflineIndex.schemaVersion) but lacks table quarantine") && "\(error)".contains(path) && "\(error)".contains("Move it aside")
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
        m.fixture.stop()   // every byte must now come from the moved copy

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
}
