import LabstreamCore
import Testing

@Suite struct ProbeParallelismTests {
    @Test func probesRunOnePerProcessorUpToFour() {
        #expect([0, 1, 2, 3, 8, 64].map { ProbeParallelism.count(processors: $0) } == [1, 1, 2, 3, 4, 4])
    }
}
