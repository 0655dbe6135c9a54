import LabstreamCore
import LabstreamFixture
import Testing

@Suite struct RangeSetTests {
    @Test func insertCoalescesOverlappingAndAdjacentRanges() {
        var s = RangeSet()
        s.insert(ByteRange(10, 20))
        s.insert(ByteRange(30, 40))
        s.insert(ByteRange(20, 25))  // adjacent to the first
        #expect(s.ranges == [ByteRange(10, 25), ByteRange(30, 40)])
        s.insert(ByteRange(24, 31))  // bridges both
        #expect(s.ranges == [ByteRange(10, 40)])
        s.insert(ByteRange(0, 5))
        s.insert(ByteRange(50, 50))  // empty: ignored
        #expect(s.ranges == [ByteRange(0, 5), ByteRange(10, 40)])
        #expect(s.byteCount == 35)
    }

    @Test func removeSplitsRanges() {
        var s = RangeSet([ByteRange(0, 100)])
        s.remove(ByteRange(40, 60))
        #expect(s.ranges == [ByteRange(0, 40), ByteRange(60, 100)])
        s.remove(ByteRange(0, 40))
        #expect(s.ranges == [ByteRange(60, 100)])
    }

    @Test func containsAndMissing() {
        let s = RangeSet([ByteRange(0, 10), ByteRange(20, 30)])
        #expect(s.contains(ByteRange(2, 8)))
        #expect(!s.contains(ByteRange(5, 25)))
        #expect(s.contains(ByteRange(7, 7)))
        #expect(s.missing(in: ByteRange(0, 40)) == [ByteRange(10, 20), ByteRange(30, 40)])
        #expect(s.missing(in: ByteRange(5, 9)) == [])
        #expect(s.missing(in: ByteRange(12, 25)) == [ByteRange(12, 20)])
        #expect(s.contiguousLength(from: 5) == 5)
        #expect(s.contiguousLength(from: 15) == 0)
    }

    @Test func intersection() {
        let s = RangeSet([ByteRange(0, 10), ByteRange(20, 30)])
        #expect(s.intersection(ByteRange(5, 25)).ranges == [ByteRange(5, 10), ByteRange(20, 25)])
    }

    @Test func serializationRoundTripsAndRejectsGarbage() {
        let s = RangeSet([ByteRange(0, 1_048_576), ByteRange(5_000_000, 6_000_000)])
        #expect(RangeSet(serialized: s.serialized) == s)
        #expect(RangeSet(serialized: "") == RangeSet())
        #expect(RangeSet(serialized: "5-3") == nil)
        #expect(RangeSet(serialized: "a-b") == nil)
        #expect(RangeSet(serialized: "-1-4") == nil)
    }

    @Test func randomisedAgainstABitmapModel() {
        var rng = SeededRandom(seed: 42)
        for _ in 0..<200 {
            var set = RangeSet()
            var model = [Bool](repeating: false, count: 256)
            for _ in 0..<12 {
                let a = Int64(rng.next() % 256), b = Int64(rng.next() % 256)
                let r = ByteRange(min(a, b), max(a, b))
                if rng.next() % 3 == 0 {
                    set.remove(r)
                    for i in r.lower..<r.upper { model[Int(i)] = false }
                } else {
                    set.insert(r)
                    for i in r.lower..<r.upper { model[Int(i)] = true }
                }
            }
            #expect(set.byteCount == Int64(model.filter { $0 }.count))
            for (i, present) in model.enumerated() {
                #expect(set.contains(ByteRange(Int64(i), Int64(i + 1))) == present)
            }
            for (x, y) in zip(set.ranges, set.ranges.dropFirst()) { #expect(x.upper < y.lower) }
        }
    }
}
