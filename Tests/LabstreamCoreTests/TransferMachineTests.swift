import LabstreamCore
import Testing

/// Every transition of one file's transfer state (`TransferMachine`), the odd ones too: a pause
/// while a request is on the wire, a cancel during a commit, a stale attempt's bytes arriving.
@Suite struct TransferMachineTests {
    static let mib: Int64 = 1 << 20
    static let v1 = Validator.etag("\"v1\""), v2 = Validator.etag("\"v2\"")

    static func row(total: Int64 = 4 * mib, pinned: Bool = false, status: DownloadStatus = .partial) -> DownloadRow {
        DownloadRow(
            key: FileKey(server: "home", itemId: "i", sourceId: "s"), status: status, attempt: AttemptID(1), validator: nil,
            total: total, present: RangeSet(), partialPath: "p", pinned: pinned)
    }

    static func fetching(_ ranges: [ByteRange], pinned: Bool = false, background: Bool = false) -> TransferMachine {
        var m = TransferMachine(row: row(pinned: pinned, status: pinned ? .queued : .partial))
        _ = m.dispatch(ranges, background: background, refusal: nil)
        return m
    }

    struct NotRecorded: Error { let start: TransferMachine.CommitStart }

    static func recording(_ m: inout TransferMachine, _ piece: ByteRange, validator: Validator? = v1) throws -> TransferMachine.Commit {
        let start = m.beginCommit(piece, validator: validator, attempt: m.row.attempt)
        guard case .record(let commit) = start else { throw NotRecorded(start: start) }
        return commit
    }

    // MARK: Fetches

    @Test func aDispatchPutsItsRangesOnTheWireForTheCurrentAttempt() {
        var m = TransferMachine(row: Self.row())
        let a = ByteRange(0, Self.mib), b = ByteRange(Self.mib, 2 * Self.mib)
        #expect(m.dispatch([], background: false, refusal: nil) == .none)
        #expect(m.dispatch([a], background: false, refusal: nil) == .fetch([a], attempt: AttemptID(1), generation: 0, validator: nil))
        #expect(m.dispatch([b], background: true, refusal: nil) == .fetch([b], attempt: AttemptID(1), generation: 0, validator: nil))
        #expect(m.requests == [a, b] && m.fillRequests == [b] && m.inFlight.contains(ByteRange(0, 2 * Self.mib)))
        #expect(!m.isIdle)
    }

    @Test func aDispatchWithNoServerFailsEachRangeForTheReadersWaiting() {
        var m = TransferMachine(row: Self.row())
        let a = ByteRange(0, Self.mib)
        #expect(m.dispatch([a], background: false, refusal: .serverUnavailable("gone")) == .refused)
        #expect(m.requests.isEmpty)
        #expect(m.failure(after: 0, overlapping: a)?.error == .serverUnavailable("gone"))
        #expect(m.failure(after: m.sequence, overlapping: a) == nil)
    }

    @Test func aServerIgnoringRangeIsReadThroughOneWholeFileStream() {
        var m = Self.fetching([ByteRange(Self.mib, 2 * Self.mib)])
        let ignored = FetchFailure(error: .fetchFailed("200 for a range"), kind: .validation, rangeIgnored: true)
        let end = m.finished(ByteRange(Self.mib, 2 * Self.mib), attempt: AttemptID(1), generation: 0, background: false, ending: .failed(ignored), now: 0)
        #expect(end == .ignoresRange(ignored.error.userMessage) && m.ignoresRange)
        // Said once: a second such answer changes nothing.
        _ = m.dispatch([ByteRange(0, 1)], background: false, refusal: nil)
        #expect(m.requests == [ByteRange(0, 4 * Self.mib)])
        #expect(m.finished(ByteRange(0, 4 * Self.mib), attempt: AttemptID(1), generation: 0, background: false, ending: .failed(ignored), now: 0) == .done)
        // While the stream runs, readers wait for it instead of asking for their bytes.
        _ = m.dispatch([ByteRange(0, 4 * Self.mib)], background: false, refusal: nil)
        #expect(m.dispatch([ByteRange(2 * Self.mib, 3 * Self.mib)], background: false, refusal: nil) == .none)
    }

    // MARK: Writes

    @Test func theFirstAnswerPinsTheValidatorAndOnlyItsBytesAreServed() {
        var m = Self.fetching([ByteRange(0, 2 * Self.mib)])
        m.readerArrived(ByteRange(0, 4096))
        #expect(m.wrote(ByteRange(0, 8192), attempt: AttemptID(1), validator: Self.v1, servable: nil) == .written(servable: true, wake: true))
        #expect(m.row.validator == Self.v1 && m.attempt.readable.contains(ByteRange(0, 8192)))
        // No reader inside these: nobody is woken.
        #expect(m.wrote(ByteRange(8192, 16384), attempt: AttemptID(1), validator: Self.v1, servable: true) == .written(servable: true, wake: false))
        // Another answer, of another version: its bytes are not served.
        #expect(
            m.wrote(ByteRange(Self.mib, Self.mib + 8192), attempt: AttemptID(1), validator: Self.v2, servable: nil) == .written(servable: false, wake: false))
        #expect(!m.attempt.readable.contains(ByteRange(Self.mib, Self.mib + 1)))
        m.readerLeft(ByteRange(0, 4096))
        #expect(m.waiting.isEmpty)
    }

    @Test func aStaleAttemptsBytesArrivingAreNeitherServedNorCommitted() {
        var m = Self.fetching([ByteRange(0, Self.mib)])
        m.begin(m.row.nextAttempt(reason: nil))  // the file changed on the server
        #expect(m.wrote(ByteRange(0, 8192), attempt: AttemptID(1), validator: Self.v1, servable: nil) == .stale)
        #expect(m.wrote(ByteRange(0, 8192), attempt: AttemptID(1), validator: Self.v1, servable: true) == .written(servable: true, wake: false))
        #expect(m.attempt.readable.isEmpty)
        guard case .discard(_, let current) = m.beginCommit(ByteRange(0, Self.mib), validator: Self.v1, attempt: AttemptID(1)) else {
            Issue.record("a stale attempt's piece was not discarded")
            return
        }
        #expect(!current && m.row.present.isEmpty && m.mayChangeRow)
        // Its fetch's failure is no failure of the new attempt.
        let end = m.finished(
            ByteRange(0, Self.mib), attempt: AttemptID(1), generation: 0, background: false, ending: .failed(.transport(.fetchFailed("x"))), now: 0)
        #expect(end == .done && m.failure(after: 0, overlapping: ByteRange(0, Self.mib)) == nil && m.requests.isEmpty)
    }

    // MARK: Commits

    @Test func oneCommitAtATimeAndTheRowWaitsForIt() throws {
        var m = Self.fetching([ByteRange(0, 2 * Self.mib)])
        let first = ByteRange(0, Self.mib), second = ByteRange(Self.mib, 2 * Self.mib)
        _ = m.wrote(first, attempt: AttemptID(1), validator: Self.v1, servable: nil)
        let commit = try Self.recording(&m, first)
        #expect(commit.row.present.contains(first) && commit.verified.contains(first))
        #expect(!m.mayChangeRow)
        #expect(m.beginCommit(second, validator: Self.v1, attempt: AttemptID(1)) == .wait)
        // Not yet landed: the bytes are readable as written, not present.
        #expect(!m.row.present.contains(first) && m.attempt.readable.contains(first))
        var recorded = commit.row
        recorded.apply(.bytesCommitted)
        #expect(m.landed(commit, .recorded(recorded)) == .recorded(awaitingValidation: false))
        #expect(m.mayChangeRow && m.row.present.contains(first) && m.attempt.verified.contains(first) && m.attempt.written.isEmpty)
        // Landing twice changes nothing.
        #expect(m.landed(commit, .recorded(recorded)) == .stale)
        guard case .record = m.beginCommit(second, validator: Self.v1, attempt: AttemptID(1)) else {
            Issue.record("the second commit did not start once the first landed")
            return
        }
    }

    @Test func aCommitOfBytesAlreadyPresentOrOfAnotherVersionIsNotRecorded() throws {
        var m = Self.fetching([ByteRange(0, Self.mib)])
        let commit = try Self.recording(&m, ByteRange(0, Self.mib))
        _ = m.landed(commit, .recorded(commit.row))
        guard case .discard(_, current: true) = m.beginCommit(ByteRange(0, Self.mib), validator: Self.v1, attempt: AttemptID(1)) else {
            Issue.record("bytes already present were committed again")
            return
        }
        #expect(
            m.beginCommit(ByteRange(Self.mib, 2 * Self.mib), validator: Self.v2, attempt: AttemptID(1))
                == .changedValidator(pinned: Self.v1, got: Self.v2))
        #expect(m.mayChangeRow)
    }

    @Test func aCancelDuringACommitLeavesTheCommitNothingToLand() throws {
        var m = Self.fetching([ByteRange(0, Self.mib)], pinned: true)
        let commit = try Self.recording(&m, ByteRange(0, Self.mib))
        var cancelled = m.row
        cancelled.pinned = false
        m.begin(cancelled.nextAttempt(reason: .said("cancelled")))  // a new attempt does not wait
        #expect(m.mayChangeRow && m.row.attempt == AttemptID(2))
        #expect(m.landed(commit, .recorded(commit.row)) == .stale)
        #expect(m.row.attempt == AttemptID(2) && m.row.present.isEmpty && !m.row.pinned && m.attempt.verified.isEmpty)
        // The new attempt commits at once.
        guard case .record = m.beginCommit(ByteRange(0, Self.mib), validator: Self.v1, attempt: AttemptID(2)) else {
            Issue.record("the new attempt's commit waited for the old one")
            return
        }
    }

    @Test func aFailedCommitGivesTheTokenBackAndFailsItsBytes() throws {
        var m = Self.fetching([ByteRange(0, Self.mib)])
        let commit = try Self.recording(&m, ByteRange(0, Self.mib))
        #expect(m.landed(commit, .failed(.noSpace("index"))) == .failed(.noSpace("index")))
        #expect(m.mayChangeRow && m.row.present.isEmpty)
        #expect(m.failure(after: 0, overlapping: ByteRange(0, 1))?.kind == .localFile)
    }

    @Test func theLastCommitSaysTheCopyAwaitsItsCheck() throws {
        var m = Self.fetching([ByteRange(0, 4 * Self.mib)])
        let commit = try Self.recording(&m, ByteRange(0, 4 * Self.mib))
        var recorded = commit.row
        recorded.apply(.allBytesPresent)
        recorded.awaitingValidation = true
        #expect(m.landed(commit, .recorded(recorded)) == .recorded(awaitingValidation: true))
        #expect(m.row.status == .unverified)
    }

    // MARK: A fetch's end

    @Test func anAnswerThatBroughtNothingUsableIsAFailureOfItsRange() {
        var m = Self.fetching([ByteRange(0, Self.mib)])
        #expect(m.finished(ByteRange(0, Self.mib), attempt: AttemptID(1), generation: 0, background: false, ending: .succeeded, now: 0) == .done)
        #expect(m.failure(after: 0, overlapping: ByteRange(0, 1))?.error == .fetchFailed("the response could not be used"))
        #expect(m.isIdle)
    }

    @Test func aPauseWhileARequestIsOnTheWireHolds() {
        var m = Self.fetching([ByteRange(0, Self.mib)], pinned: true, background: true)
        var paused = m.row
        #expect(paused.apply(.transferStarted) && paused.apply(.interrupted))
        m.row = paused
        let end = m.finished(
            ByteRange(0, Self.mib), attempt: AttemptID(1), generation: 0, background: true, ending: .failed(.transport(.fetchFailed("reset"))), now: 0)
        #expect(end == .failed(.transport(.fetchFailed("reset")), next: .nothing))
        #expect(m.row.pauseCause == .user)
    }

    @Test func aFailureOfAFetchFromBeforeAResumeCannotFailTheFreshDispatch() {
        var m = Self.fetching([ByteRange(0, Self.mib)], pinned: true, background: true)
        _ = m.failedAgain()
        m.startOver(fresh: true)
        #expect(m.generation == 1 && m.consecutiveFailures == 0)
        let failure = FetchFailure.transport(.fetchFailed("reset"))
        #expect(
            m.finished(ByteRange(0, Self.mib), attempt: AttemptID(1), generation: 0, background: true, ending: .failed(failure), now: 0)
                == .failed(failure, next: .nothing))
        _ = m.dispatch([ByteRange(0, Self.mib)], background: true, refusal: nil)
        #expect(
            m.finished(ByteRange(0, Self.mib), attempt: AttemptID(1), generation: 1, background: true, ending: .failed(failure), now: 0)
                == .failed(failure, next: .retry))
    }

    @Test(arguments: [
        (FetchFailure(error: .remoteChanged("new etag"), kind: .validation), true, false, TransferMachine.Next.restart("new etag")),
        // A read on a full disk fails its reader (ENOSPC); only a pinned file parks for room.
        (FetchFailure.local(.noSpace("disk")), false, false, .nothing),
        (FetchFailure.local(.noSpace("disk")), true, true, .park(.storageFull)),
        (FetchFailure(error: .authenticationFailed("401"), kind: .validation), true, false, .park(.signInRefused)),
        (FetchFailure(error: .authenticationFailed("401"), kind: .validation), false, false, .nothing),
        (FetchFailure.transport(.fetchFailed("reset")), false, false, .nothing),
        (FetchFailure.transport(.fetchFailed("reset")), false, true, .retry),
        (FetchFailure.transport(.fetchFailed("reset")), true, false, .retry),
        (FetchFailure.stall(.timedOut("stalled")), true, false, .retry)
    ])
    func whatAFailedFetchComesTo(failure: FetchFailure, pinned: Bool, background: Bool, next: TransferMachine.Next) {
        var m = Self.fetching([ByteRange(0, Self.mib)], pinned: pinned, background: background)
        let end = m.finished(ByteRange(0, Self.mib), attempt: AttemptID(1), generation: 0, background: background, ending: .failed(failure), now: 50)
        #expect(end == .failed(failure, next: next))
        #expect(m.failure(after: 0, overlapping: ByteRange(0, 1))?.error == failure.error)
        #expect((m.lastStall?.at == 50) == (failure.class == .stalled))
    }

    // MARK: Readers' checks, retries, sign-in

    @Test func aReadersCheckCountsOnlyForItsAttempt() {
        var m = TransferMachine(row: Self.row())
        let good = ByteRange(0, Self.mib), bad = ByteRange(Self.mib, 2 * Self.mib)
        #expect(m.checked([(good, true), (bad, false)], attempt: AttemptID(2)).isEmpty)
        #expect(m.attempt.verified.isEmpty)
        #expect(m.checked([(good, true), (bad, false)], attempt: AttemptID(1)) == [bad])
        #expect(m.attempt.verified.contains(good) && !m.attempt.verified.contains(bad))
    }

    @Test func retriesCountUntilTheUserSaysTryAgain() {
        var m = TransferMachine(row: Self.row(pinned: true))
        #expect(m.failedAgain() == 1 && m.failedAgain() == 2)
        m.retry(at: 100)
        #expect(m.retryAt == 100)
        #expect(m.unauthorized(checksWhenSent: m.authChecks) == .check(first: true))
        #expect(m.unauthorized(checksWhenSent: m.authChecks) == .check(first: false))
        m.startOver(fresh: false)
        #expect(m.consecutiveFailures == 0 && m.retryAt == nil && m.generation == 0)
        #expect(m.unauthorized(checksWhenSent: m.authChecks) == .check(first: false))
        m.startOver(fresh: true)
        #expect(m.generation == 1 && m.unauthorized(checksWhenSent: m.authChecks) == .check(first: true))
    }

    /// Ranges of one file on the wire when its token expires all answer 401: the first checks
    /// the sign-in (which renews the token), the others, sent before that check, are asked again
    /// without counting against the file; one sent after the check that still gets 401 does.
    @Test func a401SentBeforeTheLastCheckIsAskedAgain() {
        var m = TransferMachine(row: Self.row(pinned: true))
        let sent = m.authChecks
        #expect(m.unauthorized(checksWhenSent: sent) == .check(first: true))
        #expect(m.unauthorized(checksWhenSent: sent) == .askAgain)
        #expect(m.unauthorized(checksWhenSent: sent) == .askAgain)
        #expect(m.unauthorized(checksWhenSent: m.authChecks) == .check(first: false))
    }
}
