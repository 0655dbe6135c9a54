import LabstreamCore
import Testing

@Suite struct SegmentTrainTests {
    let S: Int64 = 16 << 20

    @Test func pinnedFillQueuesAHeadAndOneLookAhead() {
        let plan = SegmentTrainPlanner.plan(.init(durable: RangeSet(), total: 100 * (1 << 20), fillInBackground: true, segmentSize: S))
        #expect(plan == [.closed(ByteRange(0, S)), .closed(ByteRange(S, 2 * S))])
    }

    @Test func fillResumesFromTheDurableCheckpointAndSkipsWhatIsInFlight() {
        let durable = RangeSet([ByteRange(0, S + 100)])
        let plan = SegmentTrainPlanner.plan(
            .init(
                durable: durable, total: 5 * S, inFlight: [ByteRange(2 * S, 3 * S)],
                fillInBackground: true, segmentSize: S))
        // The rest of the partly present segment, then nothing more: two are in flight.
        #expect(plan == [.closed(ByteRange(S + 100, 2 * S))])
    }

    @Test func readerDemandsComeFirstAndAreNeverCapped() {
        let plan = SegmentTrainPlanner.plan(
            .init(
                durable: RangeSet(), total: 10 * S, inFlight: [ByteRange(0, S), ByteRange(S, 2 * S)],
                readerWants: [ByteRange(9 * S, 9 * S + 4096)], fillInBackground: true, segmentSize: S))
        #expect(plan == [.closed(ByteRange(9 * S, 9 * S + 4096))])
    }

    @Test func unpinnedFilesFetchOnlyWhatReadersWant() {
        let plan = SegmentTrainPlanner.plan(
            .init(
                durable: RangeSet(), total: 10 * S, readerWants: [ByteRange(0, 4096)],
                fillInBackground: false, segmentSize: S))
        #expect(plan == [.closed(ByteRange(0, 4096))])
    }

    @Test func theLastSegmentIsShortAndACompleteFileNeedsNothing() {
        let total = 2 * S + 5
        let plan = SegmentTrainPlanner.plan(.init(durable: RangeSet([ByteRange(0, 2 * S)]), total: total, fillInBackground: true, segmentSize: S))
        #expect(plan == [.closed(ByteRange(2 * S, total))])
        #expect(SegmentTrainPlanner.plan(.init(durable: RangeSet([ByteRange(0, total)]), total: total, fillInBackground: true, segmentSize: S)).isEmpty)
    }

    @Test func unknownTotalFallsBackToOneOpenEndedRequest() {
        let input = SegmentTrainPlanner.Input(durable: RangeSet([ByteRange(0, 500)]), total: nil, fillInBackground: true, segmentSize: S)
        #expect(SegmentTrainPlanner.plan(input) == [.openEnded(from: 500)])
        var busy = input
        busy.inFlight = [ByteRange(500, 501)]
        #expect(SegmentTrainPlanner.plan(busy).isEmpty)
    }
}

@Suite struct AssemblyPolicyTests {
    let a = AttemptID(3)

    @Test func exactBodiesOfTheCurrentAttemptCommitEvenOutOfOrder() {
        let durable = RangeSet([ByteRange(0, 100)])
        #expect(
            AssemblyPolicy.decide(.init(planned: ByteRange(100, 200), received: 100, attempt: a), durable: durable, currentAttempt: a, total: 1000)
                == .commit(ByteRange(100, 200)))
        // Finished ahead of a gap: committed at its own offset (the sparse file holds it).
        #expect(
            AssemblyPolicy.decide(.init(planned: ByteRange(500, 600), received: 100, attempt: a), durable: durable, currentAttempt: a, total: 1000)
                == .commit(ByteRange(500, 600)))
    }

    @Test func staleShortBehindOrMisalignedBodiesAreDiscarded() {
        let durable = RangeSet([ByteRange(0, 100)])
        func decide(_ r: ByteRange, _ n: Int64, _ at: AttemptID = AttemptID(3)) -> AssemblyPolicy.Decision {
            AssemblyPolicy.decide(.init(planned: r, received: n, attempt: at), durable: durable, currentAttempt: a, total: 1000)
        }
        for d in [
            decide(ByteRange(100, 200), 100, AttemptID(2)), decide(ByteRange(100, 200), 99), decide(ByteRange(0, 50), 50),
            decide(ByteRange(50, 150), 100), decide(ByteRange(900, 1100), 200)
        ] {
            if case .commit = d { Issue.record("committed \(d)") }
        }
    }
}

@Suite struct RetryPolicyTests {
    let policy = RetryPolicy()

    @Test func exponentialBackoffWithJitterUpToTheCap() {
        let long = RetryPolicy(maxAttempts: 10)
        #expect(long.decide(.transientTransport, failures: 1, now: 0, random: 1) == .retry(after: 1))
        #expect(long.decide(.transientTransport, failures: 2, now: 0, random: 1) == .retry(after: 2))
        #expect(long.decide(.transientTransport, failures: 3, now: 0, random: 0) == .retry(after: 2))  // half of 4
        #expect(long.decide(.status(503, retryAfter: nil), failures: 8, now: 0, random: 1) == .retry(after: 60))
        #expect(long.decide(.status(503, retryAfter: nil), failures: 9, now: 0, random: 0.5) == .retry(after: 45))
    }

    @Test func givesUpAfterThreeAttemptsAndOnNonTransientFailures() {
        #expect(policy.decide(.transientTransport, failures: 2, now: 0, random: 1) == .retry(after: 2))
        #expect(policy.decide(.transientTransport, failures: 3, now: 0, random: 1) == .giveUp)
        for f in [RetryPolicy.Failure.status(404, retryAfter: nil), .status(403, retryAfter: nil), .status(401, retryAfter: nil), .validation, .localFile] {
            #expect(policy.decide(f, failures: 1, now: 0, random: 0) == .giveUp)
        }
        for code in [408, 429, 500, 502, 503, 504] {
            #expect(policy.decide(.status(code, retryAfter: nil), failures: 1, now: 0, random: 1) == .retry(after: 1))
        }
    }

    /// A pinned download (and a read within its timeout) waits out transient failures however
    /// many; only permanent ones end it.
    @Test func persistentRetriesTransientFailuresForeverWithTheCappedDelay() {
        #expect(policy.decide(.status(503, retryAfter: nil), failures: 50, now: 0, random: 1, persistent: true) == .retry(after: 60))
        #expect(policy.decide(.transientTransport, failures: 3, now: 0, random: 1, persistent: true) == .retry(after: 4))
        for f in [RetryPolicy.Failure.status(404, retryAfter: nil), .status(400, retryAfter: nil), .validation, .localFile] {
            #expect(policy.decide(f, failures: 1, now: 0, random: 0, persistent: true) == .giveUp)
            #expect(!RetryPolicy.isTransient(f))
        }
        #expect(StatusReason.waitingForServer(.serverUnavailable("HTTP 503"), retryIn: 3.2).sentence == "server unavailable: HTTP 503, next try in 4 s")
    }

    @Test func retryAfterInSecondsOrAsADateIsHonouredUpToADay() {
        #expect(policy.decide(.status(429, retryAfter: "2"), failures: 1, now: 0, random: 0) == .retry(after: 2))
        let now = Double(HTTPDate.epochSeconds("Wed, 21 Oct 2015 07:28:00 GMT")!)
        #expect(policy.decide(.status(503, retryAfter: "Wed, 21 Oct 2015 07:30:00 GMT"), failures: 1, now: now, random: 0) == .retry(after: 120))
        #expect(policy.decide(.status(503, retryAfter: "999999999"), failures: 1, now: 0, random: 0) == .retry(after: 86_400))
        #expect(policy.decide(.status(503, retryAfter: "soon"), failures: 1, now: 0, random: 1) == .retry(after: 1))
        #expect(HTTPDate.epochSeconds("Sun, 06 Nov 1994 08:49:37 GMT") == 784_111_777)
    }
}

@Suite struct EvictionPolicyTests {
    func c(_ id: String, _ bytes: Int64, _ use: Int64, pinned: Bool = false, open: Bool = false, busy: Bool = false) -> EvictionPolicy.Candidate {
        .init(key: FileKey(server: "s", itemId: id, sourceId: id), bytes: bytes, lastUse: use, pinned: pinned, open: open, inTransfer: busy)
    }

    @Test func leastRecentlyUsedGoFirstUntilUnderTheCap() {
        let all = [c("new", 40, 300), c("old", 30, 100), c("mid", 30, 200)]
        let keys = EvictionPolicy.choose(all, used: 100, free: 1000, limits: .init(maxSize: 50)).map(\.itemId)
        #expect(keys == ["old", "mid"])
    }

    @Test func pinnedOpenAndBusyFilesAreNeverEvicted() {
        let all = [c("pinned", 50, 1, pinned: true), c("open", 50, 2, open: true), c("busy", 50, 3, busy: true), c("free", 10, 4)]
        #expect(EvictionPolicy.choose(all, used: 160, free: 0, limits: .init(maxSize: 10, minFree: 100)).map(\.itemId) == ["free"])
    }

    @Test func minFreeAloneTriggersAndNothingHappensWithinLimits() {
        let all = [c("a", 10, 1), c("b", 10, 2)]
        #expect(EvictionPolicy.choose(all, used: 20, free: 95, limits: .init(minFree: 100)).map(\.itemId) == ["a"])
        #expect(EvictionPolicy.choose(all, used: 20, free: 500, limits: .init(maxSize: 100, minFree: 100)).isEmpty)
        #expect(EvictionPolicy.choose(all, used: 20, free: 0, limits: .init()).isEmpty)
    }
}

@Suite struct ReachabilityTests {
    @Test func backoffDoublesToTheCap() {
        let p = ReachabilityPolicy()
        #expect([1, 2, 3, 4, 7, 8].map(p.nextProbe(after:)) == [1, 2, 4, 8, 60, 60])
        #expect(p.nextProbe(after: 0) == 60)
    }

    @Test func probeResultsMapToStates() {
        #expect(ReachabilityPolicy.state(probeStatus: nil, authStatus: nil) == .offline)
        #expect(ReachabilityPolicy.state(probeStatus: 503, authStatus: nil) == .offline)
        #expect(ReachabilityPolicy.state(probeStatus: 200, authStatus: 401) == .authFailed)
        #expect(ReachabilityPolicy.state(probeStatus: 200, authStatus: 200) == .online)
    }
}

@Suite struct CleanupAnswerTests {
    @Test func aPermanentRefusalEndsTheIntentATransientOneKeepsIt() {
        for status in [200, 204, 404] { #expect(CleanupAnswer.of(status: status) == .done) }
        for status in [nil, 408, 429, 500, 502, 503, 504] as [Int?] { #expect(CleanupAnswer.of(status: status) == .again, "\(String(describing: status))") }
        for status in [400, 401, 403, 405, 501] { #expect(CleanupAnswer.of(status: status) == .refused, "\(status)") }
    }
}
