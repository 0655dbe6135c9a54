import LabstreamCore
import Testing

@Suite struct FreeSpaceWatchTests {
    @Test func looksAgainWithBackoffUpToItsCap() {
        let watch = FreeSpaceWatch(firstDelay: 5, maxDelay: 60)
        #expect((0...5).map { watch.delay(afterFruitless: $0) } == [5, 10, 20, 40, 60, 60])
        #expect(watch.delay(afterFruitless: 10_000) == 60)  // no overflow however long it waits
    }

    @Test func resumesInQueueOrderWhatFitsTogether() {
        // 100 free, 10 kept: the first (50) fits, the second (60) no longer does beside it, the
        // third (30) still does.
        #expect(FreeSpaceWatch.resumable(remaining: [50, 60, 30], free: 100, headroom: 10) == [0, 2])
        #expect(FreeSpaceWatch.resumable(remaining: [91], free: 100, headroom: 10).isEmpty)
        #expect(FreeSpaceWatch.resumable(remaining: [90], free: 100, headroom: 10) == [0])
        // A disk below its headroom resumes nothing, not even an empty remainder's neighbour.
        #expect(FreeSpaceWatch.resumable(remaining: [1, 2], free: 5, headroom: 10).isEmpty)
    }
}
