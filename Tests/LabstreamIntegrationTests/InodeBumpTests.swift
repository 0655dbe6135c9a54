import LabstreamCore
import Testing

@testable import LabstreamFS

/// A path whose number another path had first keeps the next free one across rebuilds (the
/// builder writes a path out only for such a number).
@Suite struct InodeBumpTests {
    func file(_ path: String) -> TreeFile {
        TreeFile(path: path.split(separator: "/").map(String.init), key: FileKey(server: "s", itemId: path, sourceId: path), size: 1, modified: 0, etag: nil)
    }

    @Test func aBumpedNumberIsKeptAndATakenOneIsSkipped() {
        let paths = ["s/M/a.mkv", "s/M/b.mkv", "s/N/c.mkv"]
        var before = InodeTable(files: paths.map(file))
        #expect(before.bumped.isEmpty)
        before.bumped["s/M/b.mkv"] = 12_345
        before.bumpedNumbers = [12_345, InodeTable.stableIno("s/N/c.mkv")]
        let after = InodeTable(files: paths.map(file), previous: before)
        let numbers = after.inodeOfPath
        #expect(numbers["s/M/b.mkv"] == 12_345)
        #expect(numbers["s/N/c.mkv"] == InodeTable.stableIno("s/N/c.mkv") + 1 && after.bumped["s/N/c.mkv"] == numbers["s/N/c.mkv"])
        #expect(numbers["s/M/a.mkv"] == InodeTable.stableIno("s/M/a.mkv"))
        #expect(after.resolve(["s", "M", "b.mkv"])?.ino == 12_345 && after.resolve(["s", "N", "c.mkv"])?.ino == numbers["s/N/c.mkv"])
    }
}
