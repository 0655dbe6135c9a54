import LabstreamCore
import Testing

@Suite struct PlaybackWatchTests {
    let MiB: Int64 = 1 << 20

    /// A player reads on from where it was: once the run covers the minimum it is playing.
    @Test func aSustainedSequentialReadIsPlayback() {
        var watch = PlaybackWatch(minimumRun: 16 * MiB)
        var became: [Int64] = []
        var offset: Int64 = 0
        while offset < 40 * MiB {
            if watch.observe(read: ByteRange(offset, offset + (128 << 10)), total: 1 << 30, now: 0) { became.append(offset) }
            offset += 128 << 10
        }
        #expect(became == [16 * MiB - (128 << 10)])  // told once, at the read that crossed it
        #expect(watch.playing)
    }

    /// A scanner reads a head and a tail (and a little more of the head): no run is long enough.
    @Test func aScannersHeadAndTailReadsAreNot() {
        var watch = PlaybackWatch(minimumRun: 16 * MiB)
        let total: Int64 = 2 << 30
        var any = false
        for read in [ByteRange(0, MiB), ByteRange(MiB, 3 * MiB), ByteRange(total - MiB, total), ByteRange(3 * MiB, 5 * MiB), ByteRange(total - 64 << 10, total)]
        {
            any = watch.observe(read: read, total: total, now: 0) || any
        }
        #expect(!any && !watch.playing)
    }

    /// Jumping about never adds up to a run, however many bytes are read.
    @Test func readsThatSeekStartANewRun() {
        var watch = PlaybackWatch(minimumRun: 16 * MiB)
        for i in 0..<100 { _ = watch.observe(read: ByteRange(Int64(i) * 10 * MiB, Int64(i) * 10 * MiB + 4 * MiB), total: 1 << 40, now: 0) }
        #expect(!watch.playing)
    }

    /// A short file needs half of itself read in a run.
    @Test func aShortFileNeedsHalfOfItself() {
        var watch = PlaybackWatch(minimumRun: 16 * MiB)
        #expect(watch.runNeeded(total: 10 * MiB) == 5 * MiB)
        let early = watch.observe(read: ByteRange(0, 4 * MiB), total: 10 * MiB, now: 0)
        let half = watch.observe(read: ByteRange(4 * MiB, 5 * MiB), total: 10 * MiB, now: 0)
        #expect(!early && half)
    }

    /// Playback stops when reads stop for a while, not at a seek.
    @Test func playbackStopsWhenReadsStop() {
        var watch = PlaybackWatch(minimumRun: MiB)
        #expect(!watch.stopped(now: 1000))  // never played
        _ = watch.observe(read: ByteRange(0, 2 * MiB), total: 100 * MiB, now: 10)
        _ = watch.observe(read: ByteRange(80 * MiB, 81 * MiB), total: 100 * MiB, now: 20)  // a seek
        #expect(watch.playing)
        #expect(!watch.stopped(now: 20 + PlaybackWatch.idleAfter))
        #expect(watch.stopped(now: 21 + PlaybackWatch.idleAfter))
    }
}

@Suite struct NextEpisodeTests {
    func ep(_ id: String, _ s: Int, _ e: Int) -> NextEpisode.Episode { .init(itemId: id, season: s, episode: e) }

    @Test func theNextIsBySeasonThenEpisode() {
        let all = [ep("s2e1", 2, 1), ep("s1e10", 1, 10), ep("s1e2", 1, 2), ep("s1e1", 1, 1), ep("s0e1", 0, 1)]
        #expect(NextEpisode.after(ep("s1e1", 1, 1), among: all)?.itemId == "s1e2")
        #expect(NextEpisode.after(ep("s1e2", 1, 2), among: all)?.itemId == "s1e10")
        #expect(NextEpisode.after(ep("s1e10", 1, 10), among: all)?.itemId == "s2e1")  // into the next season, not the special
        #expect(NextEpisode.after(ep("s2e1", 2, 1), among: all) == nil)  // the last
        #expect(NextEpisode.after(ep("s0e1", 0, 1), among: all + [ep("s0e2", 0, 2)])?.itemId == "s0e2")  // specials follow specials
        #expect(NextEpisode.after(ep("s0e1", 0, 1), among: all) == nil)
    }
}

@Suite struct EpisodePrefetchTests {
    let MiB: Int64 = 1 << 20

    /// An MP4 as encoders write it without moving the index first: ftyp, a long mdat, then moov.
    func mp4(mdat: Int64) -> [UInt8] {
        func box(_ type: String, _ size: UInt32) -> [UInt8] { withUnsafeBytes(of: size.bigEndian, Array.init) + Array(type.utf8) }
        return box("ftyp", 16) + Array("isom".utf8) + [0, 0, 2, 0] + box("mdat", UInt32(mdat)) + [UInt8](repeating: 7, count: 64)
    }

    /// A Matroska head: the EBML header, a Segment of unknown size, a SeekHead naming Info at 4096
    /// and Cues at `cues` (both from the Segment's data start), then a Void.
    func mkv(cues: UInt32) -> (bytes: [UInt8], segmentStart: Int64) {
        let header: [UInt8] = [0x1A, 0x45, 0xDF, 0xA3, 0x84, 0x42, 0x86, 0x81, 0x01]
        let segment: [UInt8] = [0x18, 0x53, 0x80, 0x67, 0x01, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF]
        func seek(_ id: [UInt8], _ position: UInt32) -> [UInt8] {
            let body = [0x53, 0xAB, 0x84] + id + [0x53, 0xAC, 0x84] + withUnsafeBytes(of: position.bigEndian, Array.init)
            return [0x4D, 0xBB, 0x80 | UInt8(body.count)] + body
        }
        let seeks = seek([0x15, 0x49, 0xA9, 0x66], 4096) + seek([0x1C, 0x53, 0xBB, 0x6B], cues)
        let seekHead = [0x11, 0x4D, 0x9B, 0x74, 0x80 | UInt8(seeks.count)] + seeks
        return (header + segment + seekHead + [0xEC, 0x82, 0, 0], Int64(header.count + segment.count))
    }

    @Test func anMP4sMoovAfterItsMdatIsTheIndex() {
        let total = 100 * MiB
        let head = mp4(mdat: total - 16 - MiB)
        #expect(ContainerIndex.locate(header: head, total: total) == ByteRange(total - MiB, total))
        // A moov written first is found in the header itself.
        let fast: [UInt8] = [0, 0, 0, 16] + Array("ftypisom".utf8) + [0, 0, 2, 0] + [0, 0, 0, 40] + Array("moov".utf8) + [UInt8](repeating: 0, count: 32)
        #expect(ContainerIndex.locate(header: fast, total: total) == ByteRange(16, 56))
    }

    @Test func aMatroskaSeekHeadPlacesItsCues() {
        let (head, start) = mkv(cues: 90_000_000)
        #expect(ContainerIndex.locate(header: head, total: 100 * MiB) == ByteRange(start + 90_000_000, 100 * MiB))
        // Cues the SeekHead places past the file's end are no index.
        #expect(ContainerIndex.locate(header: mkv(cues: 200_000_000).bytes, total: 100 * MiB) == nil)
    }

    @Test func otherBytesHaveNoIndex() {
        #expect(ContainerIndex.locate(header: [UInt8](repeating: 0x55, count: 4096), total: 100 * MiB) == nil)
        #expect(ContainerIndex.locate(header: Array(mp4(mdat: 50 * MiB).prefix(20)), total: 100 * MiB) == nil)  // cut in its boxes
    }

    /// Header first, then the index, then the head, all within the cap.
    @Test func thePlanIsTheHeaderTheIndexAndTheHeadWithinTheCap() {
        let total = 500 * MiB
        #expect(EpisodePrefetch.plan(total: total, header: nil) == [ByteRange(0, MiB)])
        let plan = EpisodePrefetch.plan(total: total, header: mp4(mdat: total - 16 - 2 * MiB))
        #expect(plan == [ByteRange(0, MiB), ByteRange(total - 2 * MiB, total), ByteRange(MiB, 14 * MiB)])
        #expect(plan.reduce(0) { $0 + $1.count } <= EpisodePrefetch.cap)
        // A large index is cut to its share of the cap; the head gets the rest.
        let big = EpisodePrefetch.plan(total: total, header: mp4(mdat: total - 16 - 100 * MiB))
        #expect(big[1] == ByteRange(total - 100 * MiB, total - 100 * MiB + 4 * MiB))
        #expect(big.reduce(0) { $0 + $1.count } == EpisodePrefetch.cap)
        // No index known: the head alone.
        #expect(EpisodePrefetch.plan(total: total, header: [UInt8](repeating: 1, count: 64)) == [ByteRange(0, MiB), ByteRange(MiB, 16 * MiB)])
        // A small file: all of it, once.
        #expect(EpisodePrefetch.plan(total: 3 * MiB, header: [UInt8](repeating: 1, count: 64)) == [ByteRange(0, MiB), ByteRange(MiB, 3 * MiB)])
    }
}
