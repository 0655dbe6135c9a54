import LabstreamCore
import Testing

@Suite struct HeapTrimTests {
    @Test func theHeapIsTrimmedOnceItsSlackGrewEnoughAndNoWalkIsUnderWay() {
        var policy = HeapTrimPolicy(worth: 100, slack: 500)
        func ticks(_ ticks: [(served: Int, slack: Int)]) -> [Bool] {
            ticks.map { policy.tick(served: $0.served, slack: $0.slack) }
        }
        // Little slack grown, however many requests: never worth a pass over the heap.
        #expect(ticks([(0, 500), (3000, 550), (0, 590), (0, 560)]) == [false, false, false, false])
        // A background pass left its pages behind before the first tick (no request at all): trimmed once.
        #expect(ticks([(0, 650), (0, 650)]) == [true, false])
        // The trim gave the pages back; a walk grows the slack as it goes: nothing while requests
        // come, one trim on the first quiet tick.
        #expect(ticks([(0, 480), (5000, 700), (5000, 900), (0, 900), (0, 480)]) == [false, false, false, true, false])
        // Slack counts from its lowest since the last trim, not from the last tick.
        #expect(ticks([(0, 520), (0, 550), (0, 570), (0, 590)]) == [false, false, false, true])
    }
}
