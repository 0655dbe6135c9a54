import Foundation
import LabstreamFixture
import Testing

/// One open file never sees two versions: the file changes on the server (same size, new bytes,
/// new validator or part key) between two reads of one handle.
@Suite(.serialized) struct HandleVersionTests {
    @Test(arguments: [ServerFixture.Kind.jellyfin, .emby, .plex])
    func aHandleOpenedOnTheOldVersionNeverReadsTheNewOne(kind: ServerFixture.Kind) throws {
        let m = try MountedLabstream("handle-version-\(kind)", kind: kind)
        try m.mount()
        let rel = "test/Movies/Alpha (2001)/Alpha (2001).mkv"
        let source = m.mediaDir + "/alpha.mkv"
        let size = 12 * MiB + 37
        let old = try pread(path: source, offset: 0, length: size)

        let fd = open(m.path(rel), O_RDONLY)
        #expect(fd >= 0)
        var seen = try readSome(fd, at: 0, count: 100_000)
        #expect((seen == Array(old[0..<100_000])) as Bool)

        writeRandomFile(source, size: size, seed: 777)
        let new = try pread(path: source, offset: 0, length: size)
        m.fixture.touch(itemId: try #require(m.fixture.itemId(forFile: source)))

        // Read on to the end: whatever is returned is the old version's; the read that would
        // cross into the new one fails.
        var failure: Int32 = 0
        while seen.count < size {
            do {
                let chunk = try readSome(fd, at: seen.count, count: 128 * 1024)
                if chunk.isEmpty { break }
                seen += chunk
            } catch let e as POSIXErrorBox {
                failure = e.code
                break
            }
        }
        #expect(failure == ESTALE, "\(kind): a read through the old handle should fail with ESTALE, not \(String(cString: strerror(failure)))")
        // (A Bool: printing two 12 MiB arrays on failure would take minutes.)
        let onlyOld = seen == Array(old[0..<min(seen.count, old.count)])
        #expect(onlyOld, "\(kind): the handle returned bytes of the new version after the old one's")
        // Later reads through the same handle fail too; none returns new bytes.
        #expect(throws: POSIXErrorBox.self) { _ = try readSome(fd, at: seen.count, count: 4096) }
        close(fd)

        // Before any sync, a new open reads the new version (Plex: the old part key answers 404,
        // and the item's metadata names the part's new one).
        let newBeforeSync = try pread(path: m.path(rel), offset: 0, length: size) == new
        #expect(newBeforeSync, "\(kind): \(m.log)")
        // Whatever met the change is said once, not once per read.
        let said = m.log.split(separator: "\n").compactMap { line in line.range(of: "info: ").map { String(line[$0.upperBound...]) } }
        #expect(Set(said).count == said.count, "\(kind): \(m.log)")

        // After a sync, a new open reads the new version from its first byte to its last.
        #expect(try m.cli(["sync"]).code == 0)
        let wholeNew = try pread(path: m.path(rel), offset: 0, length: size) == new
        #expect(wholeNew, "\(kind)")
        try m.unmount()
    }
}

struct POSIXErrorBox: Error { var code: Int32 }

/// One `pread` through an open descriptor.
func readSome(_ fd: Int32, at offset: Int, count: Int) throws -> [UInt8] {
    var buffer = [UInt8](repeating: 0, count: count)
    let n = buffer.withUnsafeMutableBytes { pread(fd, $0.baseAddress, count, off_t(offset)) }
    if n < 0 { throw POSIXErrorBox(code: errno) }
    return Array(buffer[0..<n])
}
