import LabstreamCore
import Testing

@Suite struct CopyRoomTests {
    let segment: Int64 = 16 << 20

    @Test func theServersEstimateIsTheRoomAwaited() {
        // 2 Mbit/s over 100 s: 25 000 000 bytes; a remux: the original's size.
        #expect(
            CopyRoom.needed(quality: .capped(megabitsPerSecond: 2), originalSize: 1 << 30, runtimeSeconds: 100, writtenWhenFull: nil, firstSegment: segment)
                == 25_000_000)
        #expect(CopyRoom.needed(quality: .remux, originalSize: 700 << 20, runtimeSeconds: nil, writtenWhenFull: nil, firstSegment: segment) == 700 << 20)
    }

    @Test func neverTheRoomItAlreadyFilled() {
        // An estimate under what it had written when the disk filled is wrong: a quarter more than that.
        #expect(
            CopyRoom.needed(
                quality: .capped(megabitsPerSecond: 1), originalSize: 1 << 30, runtimeSeconds: 8, writtenWhenFull: 8 << 20, firstSegment: segment)
                == 10 << 20)
        #expect(
            CopyRoom.needed(quality: .capped(megabitsPerSecond: 5), originalSize: 0, runtimeSeconds: nil, writtenWhenFull: 4 << 20, firstSegment: segment)
                == 5 << 20)
    }

    @Test func withNothingKnownRoomForItsFirstSegment() {
        #expect(
            CopyRoom.needed(quality: .capped(megabitsPerSecond: 5), originalSize: 0, runtimeSeconds: nil, writtenWhenFull: nil, firstSegment: segment)
                == segment)
        #expect(
            CopyRoom.needed(quality: .capped(megabitsPerSecond: 5), originalSize: 0, runtimeSeconds: 0, writtenWhenFull: 0, firstSegment: segment)
                == segment)
    }
}
