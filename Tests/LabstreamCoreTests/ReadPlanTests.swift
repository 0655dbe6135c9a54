import LabstreamCore
import Testing

@Suite struct ReadPlanTests {
    let MiB: Int64 = 1 << 20
    var sizes: TransferSizes { TransferSizes(readChunk: MiB, segmentSize: 4 * MiB, readAheadInitial: MiB, readAheadMax: 8 * MiB) }

    @Test func smallReadIsWidenedToOneChunk() {
        let plan = ReadPlanner.plan(demand: ByteRange(offset: 100, length: 4096), total: 100 * MiB,
                                    present: RangeSet(), inFlight: RangeSet(), sizes: sizes)
        #expect(plan == [ByteRange(0, MiB)])
    }

    @Test func tailReadFetchesOnlyTheTail() {
        let total = 20 * MiB + 12345
        let plan = ReadPlanner.plan(demand: ByteRange(total - MiB, total), total: total,
                                    present: RangeSet(), inFlight: RangeSet(), sizes: sizes)
        #expect(plan == [ByteRange(19 * MiB, total)])
        #expect(plan.allSatisfy { $0.lower >= total - 2 * MiB })
    }

    @Test func presentAndInFlightBytesAreNotRequestedAgain() {
        let present = RangeSet([ByteRange(0, 2 * MiB)])
        let inFlight = RangeSet([ByteRange(3 * MiB, 4 * MiB)])
        let plan = ReadPlanner.plan(demand: ByteRange(MiB, 5 * MiB), total: 100 * MiB,
                                    present: present, inFlight: inFlight, sizes: sizes)
        #expect(plan == [ByteRange(2 * MiB, 3 * MiB), ByteRange(4 * MiB, 5 * MiB)])
    }

    @Test func largeDemandIsSplitIntoSegments() {
        let plan = ReadPlanner.plan(demand: ByteRange(0, 10 * MiB), total: 100 * MiB,
                                    present: RangeSet(), inFlight: RangeSet(), sizes: sizes)
        #expect(plan == [ByteRange(0, 4 * MiB), ByteRange(4 * MiB, 8 * MiB), ByteRange(8 * MiB, 10 * MiB)])
    }

    @Test func demandBeyondTheEndIsClipped() {
        #expect(ReadPlanner.plan(demand: ByteRange(200, 300), total: 100, present: RangeSet(), inFlight: RangeSet(), sizes: sizes) == [])
        #expect(ReadPlanner.plan(demand: ByteRange(50, 300), total: 100, present: RangeSet(), inFlight: RangeSet(), sizes: sizes) == [ByteRange(0, 100)])
    }

    @Test func readAheadGrowsWhileSequentialAndResetsOnSeek() {
        var policy = ReadAheadPolicy(sizes: sizes)
        let k128: Int64 = 128 << 10
        #expect(policy.observe(read: ByteRange(0, k128), total: 100 * MiB) == nil)   // first read: no history
        let a = policy.observe(read: ByteRange(k128, 2 * k128), total: 100 * MiB)
        #expect(a == ByteRange(2 * k128, 2 * k128 + 2 * MiB))
        let b = policy.observe(read: ByteRange(2 * k128, 3 * k128), total: 100 * MiB)
        #expect(b?.count == 4 * MiB)
        for i in 3..<10 { _ = policy.observe(read: ByteRange(Int64(i) * k128, Int64(i + 1) * k128), total: 100 * MiB) }
        #expect(policy.window == 8 * MiB)                                               // capped
        #expect(policy.observe(read: ByteRange(50 * MiB, 50 * MiB + k128), total: 100 * MiB) == nil) // a seek
        #expect(policy.window == MiB)
        let end = policy.observe(read: ByteRange(50 * MiB + k128, 100 * MiB), total: 100 * MiB)
        #expect(end == nil)                                                             // nothing past EOF
    }
}
