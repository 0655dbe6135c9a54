import LabstreamCore
import Testing

@Suite struct FreeSpaceWatchTests {
    @Test func looksAgainWithBackoffUpToItsCap() {
        let watch = FreeSpaceWatch(firstDelay: 5, maxDelay: 60)
        #expect((0...5).map { watch.delay(afterFruitless: $0) } == [5, 10, 20, 40, 60, 60])
        #expect(watch.delay(afterFruitless: 10_000) == 60)  // no overflow however long it waits
    }
}
