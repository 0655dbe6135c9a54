import Dispatch
import Foundation
import Synchronization
import Testing

@testable import LabstreamEngine

/// Range fetches run on a bounded pool: never more at once than its size, a caller never waits to
/// queue one, and a reader's fetch goes before the fill's.
@Suite struct FetchPoolTests {
    @Test func atMostSizeRunAtOnceAndAReadersFetchGoesFirst() {
        let pool = FetchPool(size: 2)
        let running = Mutex((now: 0, most: 0))
        let started = Mutex<[String]>([])
        let release = DispatchSemaphore(value: 0), began = DispatchSemaphore(value: 0)
        let done = DispatchGroup()
        func job(_ name: String) -> FetchPool.Job {
            done.enter()
            return { _ in
                running.withLock {
                    $0.now += 1
                    $0.most = max($0.most, $0.now)
                }
                started.withLock { $0.append(name) }
                began.signal()
                release.wait()
                running.withLock { $0.now -= 1 }
                done.leave()
            }
        }
        pool.submit(background: true, job("fill 1"))
        pool.submit(background: true, job("fill 2"))
        began.wait()
        began.wait()
        // The pool is busy: these queue, and the submits return at once.
        pool.submit(background: true, job("fill 3"))
        pool.submit(background: false, job("read 1"))
        pool.submit(background: false, job("read 2"))
        #expect(pool.queued == 3)
        for _ in 0..<5 { release.signal() }
        done.wait()
        #expect(running.withLock { $0.most } == 2)
        #expect(started.withLock { $0 }.suffix(3).last == "fill 3", "\(started.withLock { $0 })")
    }

    /// Spare work (the next episode's prefetch) starts after every queued read and fill, and never
    /// takes the pool's last thread: with one thread busy in a pool of two it waits.
    @Test func spareWorkGoesLastAndLeavesAThread() {
        let pool = FetchPool(size: 2)
        let started = Mutex<[String]>([])
        let release = DispatchSemaphore(value: 0), began = DispatchSemaphore(value: 0)
        let done = DispatchGroup()
        func job(_ name: String) -> FetchPool.Job {
            done.enter()
            return { _ in
                started.withLock { $0.append(name) }
                began.signal()
                release.wait()
                done.leave()
            }
        }
        pool.submit(background: false, job("read 1"))
        began.wait()
        // One of two threads is busy: the spare job waits though the other is free.
        pool.submitSpare(job("spare"))
        pool.submit(background: true, job("fill"))
        began.wait()
        #expect(started.withLock { $0 } == ["read 1", "fill"])
        #expect(pool.queued == 1)
        release.signal()  // "read 1" ends
        release.signal()  // "fill" ends: one thread busy no more, the spare job may start
        began.wait()
        #expect(started.withLock { $0 }.last == "spare")
        release.signal()
        done.wait()
    }

    @Test func aFetchsCheckpointsRunOnItsOwnLaneInOrder() {
        let pool = FetchPool(size: 1)
        let order = Mutex<[Int]>([])
        let finished = DispatchSemaphore(value: 0)
        pool.submit(background: false) { lane in
            for i in 0..<3 { lane.run { order.withLock { $0.append(i) } } }
            lane.run { finished.signal() }
        }
        finished.wait()
        #expect(order.withLock { $0 } == [0, 1, 2])
    }
}
