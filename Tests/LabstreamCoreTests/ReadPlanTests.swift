import LabstreamCore
import Testing

@Suite struct ReadPlanTests {
    let MiB: Int64 = 1 << 20
    var sizes: TransferSizes { TransferSizes(readChunk: MiB, segmentSize: 4 * MiB, readAheadInitial: MiB, readAheadMax: 8 * MiB) }

    @Test func smallReadIsWidenedToOneChunk() {
        let plan = ReadPlanner.plan(
            demand: ByteRange(offset: 100, length: 4096), total: 100 * MiB,
            present: RangeSet(), inFlight: RangeSet(), sizes: sizes)
        #expect(plan == [ByteRange(0, MiB)])
    }

    @Test func tailReadFetchesOnlyTheTail() {
        let total = 20 * MiB + 12345
        let plan = ReadPlanner.plan(
            demand: ByteRange(total - MiB, total), total: total,
            present: RangeSet(), inFlight: RangeSet(), sizes: sizes)
        #expect(plan == [ByteRange(19 * MiB, total)])
        #expect(plan.allSatisfy { $0.lower >= total - 2 * MiB })
    }

    @Test func presentAndInFlightBytesAreNotRequestedAgain() {
        let present = RangeSet([ByteRange(0, 2 * MiB)])
        let inFlight = RangeSet([ByteRange(3 * MiB, 4 * MiB)])
        let plan = ReadPlanner.plan(
            demand: ByteRange(MiB, 5 * MiB), total: 100 * MiB,
            present: present, inFlight: inFlight, sizes: sizes)
        #expect(plan == [ByteRange(2 * MiB, 3 * MiB), ByteRange(4 * MiB, 5 * MiB)])
    }

    @Test func largeDemandIsSplitIntoSegments() {
        let plan = ReadPlanner.plan(
            demand: ByteRange(0, 10 * MiB), total: 100 * MiB,
            present: RangeSet(), inFlight: RangeSet(), sizes: sizes)
        #expect(plan == [ByteRange(0, 4 * MiB), ByteRange(4 * MiB, 8 * MiB), ByteRange(8 * MiB, 10 * MiB)])
    }

    @Test func demandBeyondTheEndIsClipped() {
        #expect(ReadPlanner.plan(demand: ByteRange(200, 300), total: 100, present: RangeSet(), inFlight: RangeSet(), sizes: sizes) == [])
        #expect(ReadPlanner.plan(demand: ByteRange(50, 300), total: 100, present: RangeSet(), inFlight: RangeSet(), sizes: sizes) == [ByteRange(0, 100)])
    }

    @Test func readAheadGrowsWithTheRunAndResetsOnSeek() {
        var policy = ReadAheadPolicy(sizes: sizes)
        let k128: Int64 = 128 << 10
        #expect(policy.observe(read: ByteRange(0, k128), total: 100 * MiB) == nil)  // first read: no history
        let a = policy.observe(read: ByteRange(k128, 2 * k128), total: 100 * MiB)
        #expect(a == ByteRange(2 * k128, 2 * k128 + MiB))
        // Eight kernel reads in (1 MiB read), the window has not grown: it follows bytes, not reads.
        for i in 2..<8 { _ = policy.observe(read: ByteRange(Int64(i) * k128, Int64(i + 1) * k128), total: 100 * MiB) }
        #expect(policy.window == MiB)
        // Half of the run: 6 MiB read, 3 MiB ahead.
        #expect(policy.observe(read: ByteRange(MiB, 6 * MiB), total: 100 * MiB) == ByteRange(6 * MiB, 9 * MiB))
        _ = policy.observe(read: ByteRange(6 * MiB, 40 * MiB), total: 100 * MiB)
        #expect(policy.window == 8 * MiB)  // capped
        #expect(policy.observe(read: ByteRange(50 * MiB, 50 * MiB + k128), total: 100 * MiB) == nil)  // a seek
        #expect(policy.window == MiB)
        #expect(policy.runStart == 50 * MiB)
        let end = policy.observe(read: ByteRange(50 * MiB + k128, 100 * MiB), total: 100 * MiB)
        #expect(end == nil)  // nothing past EOF
    }

    /// A player's start (mpv's first frames read about 12 MiB in kernel reads): what is asked for
    /// stays within the bytes read and half as much again, where a window doubling at every
    /// read had 64 MiB asked for.
    @Test func aPlayersStartAsksForLittleMoreThanItReads() {
        let sizes = TransferSizes.default
        let total: Int64 = 77 * MiB
        var policy = ReadAheadPolicy(sizes: sizes)
        var requested = RangeSet()
        var offset: Int64 = 0
        while offset < 12 * MiB {
            let read = ByteRange(offset, offset + (128 << 10))
            for piece in ReadPlanner.plan(demand: read, total: total, present: RangeSet(), inFlight: requested, sizes: sizes) { requested.insert(piece) }
            if let window = policy.observe(read: read, total: total) {
                for piece in ReadPlanner.readAhead(
                    window: window, total: total, present: RangeSet(), inFlight: requested, segmentSize: sizes.segmentSize,
                    minimumPiece: max(sizes.readChunk, window.count / 2))
                {
                    requested.insert(piece)
                }
            }
            offset = read.upper
        }
        #expect(requested.byteCount <= 12 * MiB + 6 * MiB + sizes.readChunk, "\(requested.byteCount >> 20) MiB asked for")
    }
}

@Suite struct ReadAheadToppingTests {
    /// A sequential reader in 128 KiB kernel reads over 1 GiB: the read-ahead stays ahead of it
    /// in a few large requests, never one per kernel read.
    @Test func aStreamBecomesFewLargeRequests() {
        let sizes = TransferSizes.default
        let total: Int64 = 1 << 30
        var policy = ReadAheadPolicy(sizes: sizes)
        var requested = RangeSet()
        var requests: [ByteRange] = []
        var offset: Int64 = 0
        while offset < total {
            let read = ByteRange(offset, min(offset + (128 << 10), total))
            // Demand first (what is not already asked for), as the engine does.
            for piece in ReadPlanner.plan(demand: read, total: total, present: RangeSet(), inFlight: requested, sizes: sizes) {
                requests.append(piece)
                requested.insert(piece)
            }
            if let window = policy.observe(read: read, total: total) {
                for piece in ReadPlanner.readAhead(
                    window: window, total: total, present: RangeSet(), inFlight: requested,
                    segmentSize: sizes.segmentSize, minimumPiece: max(sizes.readChunk, window.count / 2))
                {
                    requests.append(piece)
                    requested.insert(piece)
                }
            }
            // The reader never waits on a gap it did not ask for.
            #expect(requested.contains(read))
            offset = read.upper
        }
        #expect(requested.contains(ByteRange(0, total)))
        #expect(requests.count < 100, "\(requests.count) requests")
        let small = requests.dropLast().filter { $0.count < sizes.readChunk }
        #expect(small.isEmpty, "\(small.prefix(5)) of \(requests.count): \(requests.prefix(12))")
    }

    @Test func aSmallTailGapWaitsButTheFileEndDoesNot() {
        let window = ByteRange(10 << 20, 20 << 20)
        let inFlight = RangeSet([ByteRange(0, (20 << 20) - (128 << 10))])
        #expect(
            ReadPlanner.readAhead(
                window: window, total: 1 << 30, present: RangeSet(), inFlight: inFlight,
                segmentSize: 16 << 20, minimumPiece: 5 << 20
            ).isEmpty)
        #expect(
            ReadPlanner.readAhead(
                window: window, total: 20 << 20, present: RangeSet(), inFlight: inFlight,
                segmentSize: 16 << 20, minimumPiece: 5 << 20) == [ByteRange((20 << 20) - (128 << 10), 20 << 20)])
        // A hole inside the window is fetched whatever its size.
        let holed = RangeSet([ByteRange(0, 12 << 20), ByteRange((12 << 20) + 4096, 20 << 20)])
        #expect(
            ReadPlanner.readAhead(
                window: window, total: 1 << 30, present: RangeSet(), inFlight: holed,
                segmentSize: 16 << 20, minimumPiece: 5 << 20) == [ByteRange(12 << 20, (12 << 20) + 4096)])
    }
}
