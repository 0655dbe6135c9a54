import LabstreamCore
import Testing

@Suite struct HeapTrimTests {
    @Test func theHeapIsTrimmedOnceABurstIsOverNotDuringItNorAfterAFewRequests() {
        var policy = HeapTrimPolicy(burst: 100)
        func ticks(_ served: [Int]) -> [Bool] {
            var out: [Bool] = []
            for n in served { out.append(policy.tick(served: n)) }
            return out
        }
        // A few requests now and then: never worth a pass over the heap.
        #expect(ticks([30, 0, 20, 0, 49, 0]) == [false, false, false, false, false, false])
        // The 100th request came: the next quiet tick trims, and only that one.
        #expect(ticks([1, 0, 0]) == [false, true, false])
        // A long burst: nothing while it lasts, one trim after.
        #expect(ticks([5000, 5000, 5000, 0, 0]) == [false, false, false, true, false])
    }
}
