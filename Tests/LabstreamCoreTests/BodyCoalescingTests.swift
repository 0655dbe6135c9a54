import LabstreamCore
import Testing

@Suite struct BodyCoalescingTests {
    let unit = BodyCoalescing.unit

    @Test func piecesWaitUntilAUnitIsGatheredOrACheckpointIsDue() {
        #expect(!BodyCoalescing.mustWrite(pending: ByteRange(0, 16 << 10), checkpointDue: false, readable: RangeSet(), waiting: []))
        #expect(BodyCoalescing.mustWrite(pending: ByteRange(0, unit), checkpointDue: false, readable: RangeSet(), waiting: []))
        #expect(BodyCoalescing.mustWrite(pending: ByteRange(0, 16 << 10), checkpointDue: true, readable: RangeSet(), waiting: []))
        #expect(!BodyCoalescing.mustWrite(pending: ByteRange(5, 5), checkpointDue: true, readable: RangeSet(), waiting: [ByteRange(0, 5)]))
    }

    @Test func aReaderWhoseDemandTheyCompleteIsNeverKeptWaiting() {
        let pending = ByteRange(0, 128 << 10)
        // The demand ends inside what was gathered.
        #expect(BodyCoalescing.mustWrite(pending: pending, checkpointDue: false, readable: RangeSet(), waiting: [ByteRange(64 << 10, 128 << 10)]))
        // The demand needs bytes still to come: holding on costs this reader nothing.
        #expect(!BodyCoalescing.mustWrite(pending: pending, checkpointDue: false, readable: RangeSet(), waiting: [ByteRange(64 << 10, 256 << 10)]))
        // …unless another body already brought the rest.
        #expect(
            BodyCoalescing.mustWrite(
                pending: pending, checkpointDue: false, readable: RangeSet([ByteRange(128 << 10, 256 << 10)]),
                waiting: [ByteRange(64 << 10, 256 << 10)]))
        // A demand elsewhere in the file is not this body's business.
        #expect(!BodyCoalescing.mustWrite(pending: pending, checkpointDue: false, readable: RangeSet(), waiting: [ByteRange(1 << 30, (1 << 30) + 10)]))
    }
}
