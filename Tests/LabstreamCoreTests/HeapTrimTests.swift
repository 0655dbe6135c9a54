import LabstreamCore
import Testing

@Suite struct HeapTrimTests {
    @Test func theHeapIsTrimmedOnceABurstIsOverNotDuringItNorAfterAFewRequests() {
        var policy = HeapTrimPolicy(burst: 100)
        // A few requests now and then: never worth a pass over the heap.
        #expect(![30, 0, 20, 0, 49, 0].map { policy.tick(served: $0) }.contains(true))
        // The 100th request came: the next quiet tick trims, and only that one.
        #expect(!policy.tick(served: 1))
        #expect(policy.tick(served: 0))
        #expect(!policy.tick(served: 0))
        // A long burst: nothing while it lasts, one trim after.
        #expect([5000, 5000, 5000, 0, 0].map { policy.tick(served: $0) } == [false, false, false, true, false])
    }
}
