import Foundation
import LabstreamCore
import LabstreamFixture
import Testing

/// The next episode is ready (issue 42.2) and a player's start fetches little more than it reads
/// (42.1), on real mounts of the daemon over the fixture.
@Suite(.serialized) struct PrefetchTests {
    static let episode1Size = 20 * MiB
    static let episode2Size = 40 * MiB
    /// Episode 2's `moov`, at its end as encoders write it when they do not move it first.
    static let moovSize = 512 * 1024

    /// A series of two: episode 1 any bytes, episode 2 an MP4 whose index follows its `mdat`.
    static func series(in dir: String) -> FixtureCatalog {
        writeRandomFile(dir + "/e1.mkv", size: episode1Size, seed: 42)
        var rng = SeededRandom(seed: 43)
        var e2 = rng.bytes(episode2Size)
        func put(_ offset: Int, _ size: Int, _ type: String) {
            e2.replaceSubrange(offset..<offset + 8, with: withUnsafeBytes(of: UInt32(size).bigEndian, Array.init) + Array(type.utf8))
        }
        put(0, 16, "ftyp")
        put(16, episode2Size - 16 - moovSize, "mdat")
        put(episode2Size - moovSize, moovSize, "moov")
        FileManager.default.createFile(atPath: dir + "/e2.mp4", contents: Data(e2))
        return FixtureCatalog(
            movies: [],
            series: [
                .init(
                    name: "Serial", year: 2021,
                    episodes: [
                        .init(season: 1, number: 1, title: "One", file: dir + "/e1.mkv", container: "mkv"),
                        .init(season: 1, number: 2, title: "Two", file: dir + "/e2.mp4", container: "mp4")
                    ])
            ])
    }

    let e1 = "test/Shows/Serial (2021)/Season 01/Serial (2021) - S01E01 - One.mkv"
    let e2 = "test/Shows/Serial (2021)/Season 01/Serial (2021) - S01E02 - Two.mp4"

    /// Reads all of `path` from its start in 128 KiB reads, as a player does, on `fd`.
    func play(_ fd: Int32, size: Int) {
        var buffer = [UInt8](repeating: 0, count: 128 * 1024)
        var offset = 0
        while offset < size {
            let n = buffer.withUnsafeMutableBytes { Glibc.pread(fd, $0.baseAddress, $0.count, off_t(offset)) }
            guard n > 0 else { break }
            offset += n
        }
    }

    func served(_ m: MountedLabstream, _ itemId: String) -> [ByteRange] {
        m.fixture.downloadRequests.filter { $0.path.contains(itemId) }.compactMap(\.servedRange)
    }

    /// A scanner's head and tail reads of episode 1 prepare nothing; playing it fetches episode
    /// 2's header, its moov and more of its head, within the cap; then episode 2's start and
    /// index are read from stored bytes without a request.
    @Test func playingAnEpisodeFetchesTheStartAndIndexOfTheNext() throws {
        let m = try MountedLabstream("prefetch", catalog: Self.series)
        try m.mount()
        let e2Id = try #require(m.fixture.itemId(forFile: m.mediaDir + "/e2.mp4"))

        let scan = open(m.path(e1), O_RDONLY)
        try #require(scan >= 0)
        for offset in [0, 64 * 1024, Self.episode1Size - 64 * 1024, 128 * 1024] {
            var b = [UInt8](repeating: 0, count: 64 * 1024)
            _ = b.withUnsafeMutableBytes { Glibc.pread(scan, $0.baseAddress, $0.count, off_t(offset)) }
        }
        close(scan)
        // The decision is made in the read that makes a handle playing: none was.
        #expect(!m.log.contains("playing;"), "\(m.log)")
        #expect(served(m, e2Id).isEmpty)

        let fd = open(m.path(e1), O_RDONLY)
        try #require(fd >= 0)
        play(fd, size: Self.episode1Size)
        #expect(eventually { m.log.contains("fetched ahead") }, "\(m.log)")
        close(fd)
        #expect(m.log.components(separatedBy: "playing;").count == 2, "\(m.log)")  // once

        let got = RangeSet(served(m, e2Id))
        let moov = ByteRange(Int64(Self.episode2Size - Self.moovSize), Int64(Self.episode2Size))
        #expect(got.byteCount <= EpisodePrefetch.cap, "\(got)")
        #expect(got.contains(ByteRange(0, 8 * Int64(MiB))) && got.contains(moov), "\(got)")

        let asked = m.fixture.downloadRequests.count
        let source = m.mediaDir + "/e2.mp4"
        #expect(try pread(path: m.path(e2), offset: 0, length: 4 * MiB) == pread(path: source, offset: 0, length: 4 * MiB))
        #expect(
            try pread(path: m.path(e2), offset: Self.episode2Size - Self.moovSize, length: Self.moovSize)
                == pread(path: source, offset: Self.episode2Size - Self.moovSize, length: Self.moovSize))
        #expect(m.fixture.downloadRequests.count == asked, "\(m.fixture.downloadRequests.suffix(3).map(\.range))")
        try m.unmount()
    }

    /// Closing the episode being played while a piece of the next is on the wire (the fixture
    /// holds its answer) ends the prefetch there: nothing more of episode 2 is asked for.
    @Test func closingThePlayingEpisodeStopsThePrefetch() throws {
        let m = try MountedLabstream("prefetch-stop", catalog: Self.series)
        try m.mount()
        let e2Id = try #require(m.fixture.itemId(forFile: m.mediaDir + "/e2.mp4"))
        m.fixture.holdDownloads(matching: e2Id)
        defer { m.fixture.holdDownloads(matching: nil) }

        let fd = open(m.path(e1), O_RDONLY)
        try #require(fd >= 0)
        play(fd, size: Self.episode1Size)
        #expect(eventually { m.fixture.downloadRequests.contains { $0.path.contains(e2Id) } })
        close(fd)
        #expect(eventually { m.log.contains("(its file was closed)") }, "\(m.log)")
        m.fixture.holdDownloads(matching: nil)
        #expect(eventually { m.log.contains("stopped fetching ahead") }, "\(m.log)")
        #expect(m.log.contains("playback stopped"), "\(m.log)")
        #expect(m.fixture.downloadRequests.filter { $0.path.contains(e2Id) }.count == 1)
        #expect(!m.log.contains("fetched ahead"))
        try m.unmount()
    }

    /// A player's first reads (42.1): the first request is one read chunk, and reading 12 MiB from
    /// the start has at most half as much again asked for ahead (a read-ahead doubling at every
    /// kernel read had asked for 64 MiB).
    @Test func aPlayersStartAsksForLittleMoreThanItReads() throws {
        let m = try MountedLabstream("play-start", catalog: Self.series)
        try m.mount()
        let e2Id = try #require(m.fixture.itemId(forFile: m.mediaDir + "/e2.mp4"))
        let fd = open(m.path(e2), O_RDONLY)
        try #require(fd >= 0)
        play(fd, size: 12 * MiB)
        close(fd)
        // Stopped, the daemon has put on the wire every request its reads made (none waits).
        try m.unmount()
        let asked = m.fixture.downloadRequests.filter { $0.path.contains(e2Id) }.compactMap(\.requestedRange)
        #expect(asked.first.map { $0.count <= Int64(MiB) } == true, "\(asked)")
        #expect(RangeSet(asked).byteCount <= Int64(12 * MiB + 6 * MiB + MiB), "\(asked)")
    }
}
