/// One file's transfer state, as swift-nio's connection state machines keep theirs: a value whose
/// events return what to do, never doing it. `FileTransfer` holds one under the file's lock, feeds
/// it events, and performs the actions (the network, the disk, the index) with the lock let go
/// where it can. Pure: the clock is a parameter.
///
/// The state is the attempt, with the commit that may be running for it:
/// - `open`: the attempt's bytes and checks, no commit running;
/// - `committing`: one commit of the attempt is being recorded outside the lock (its token): a
///   second commit waits for it, and so does every other change of the row (the commit writes
///   the row whole, and a pause saved meanwhile would be overwritten); readers are woken when it
///   lands. A new attempt (the file changed, a cancel) does not wait: the commit's token is then
///   stale, and its landing changes nothing (the index refuses an older attempt's row too).
public struct TransferMachine: Sendable {
    /// What the current attempt has: its row and what is known of its bytes.
    public struct Attempt: Sendable, Equatable {
        public var row: DownloadRow
        /// Durable ranges whose digests were checked since this daemon started.
        public var verified = RangeSet()
        /// Bytes of this attempt in the partial, from answers carrying the attempt's validator,
        /// that may not be synced and committed yet: readers are served them at once.
        public var written = RangeSet()

        public init(row: DownloadRow, verified: RangeSet = RangeSet()) {
            self.row = row
            self.verified = verified
        }

        /// What a reader can be served now: committed bytes and those written ahead of their commit.
        public var readable: RangeSet {
            guard !written.isEmpty else { return row.present }
            var all = row.present
            all.formUnion(written)
            return all
        }
    }

    /// A commit being recorded: only the holder of the current token may land it.
    public struct CommitToken: Sendable, Hashable {
        public let attempt: AttemptID
        let serial: Int
    }

    public enum State: Sendable, Equatable {
        case open(Attempt)
        case committing(Attempt, CommitToken)
    }

    public struct Failure: Sendable, Equatable {
        public var sequence: Int
        public var range: ByteRange
        public var error: LabstreamError
        public var kind: RetryPolicy.Failure
    }

    public struct Stall: Sendable, Equatable {
        public var range: ByteRange
        public var failure: FetchFailure
        public var at: Double
    }

    public private(set) var state: State
    private var serial = 0

    // The file's, across attempts.
    /// Each request on the wire (the train counts requests; adjacent ones coalesce in `inFlight`).
    public private(set) var requests: [ByteRange] = []
    /// Those fetched for the background fill.
    public private(set) var fillRequests: [ByteRange] = []
    /// Failures of fetches, numbered by `sequence` (a reader counts those after it began).
    public private(set) var failures: [Failure] = []
    public private(set) var sequence = 0
    /// The last fetch that stalled, and when (`FetchFailure.echoesToReaders`).
    public private(set) var lastStall: Stall?
    /// What each waiting reader needs (a body writes early for them, and wakes only them).
    public private(set) var waiting: [ByteRange] = []
    public private(set) var consecutiveFailures = 0
    /// When a failed pinned file tries again (seconds since the epoch).
    public private(set) var retryAt: Double?
    /// A 401 made us check the sign-in once already.
    public private(set) var authRechecked = false
    /// The sign-in checks 401s made so far: a request records the count it was sent at.
    public private(set) var authChecks = 0
    /// Bumped by a user's resume or retry: failures of fetches started before it do not count.
    public private(set) var generation = 0
    /// The server answered a ranged request from past byte 0 with the whole file: from then on
    /// one whole-file fetch from byte 0 serves every reader and the fill.
    public private(set) var ignoresRange = false

    public init(row: DownloadRow, verified: RangeSet = RangeSet()) {
        state = .open(Attempt(row: row, verified: verified))
    }

    public var attempt: Attempt {
        switch state {
        case .open(let a), .committing(let a, _): return a
        }
    }

    private mutating func modify<T>(_ body: (inout Attempt) -> T) -> T {
        switch state {
        case .open(var a):
            let out = body(&a)
            state = .open(a)
            return out
        case .committing(var a, let token):
            let out = body(&a)
            state = .committing(a, token)
            return out
        }
    }

    /// The row. Changing it while a commit of this attempt runs would lose one of the two
    /// changes: wait for `mayChangeRow` first.
    public var row: DownloadRow {
        get { attempt.row }
        set {
            precondition(mayChangeRow || newValue.attempt != attempt.row.attempt || newValue == attempt.row, "the row changed during a commit")
            modify { $0.row = newValue }
        }
    }

    /// Whether the row may change now: no commit of it is being recorded.
    public var mayChangeRow: Bool {
        if case .committing = state { return false }
        return true
    }

    public var inFlight: RangeSet { RangeSet(requests) }
    public var isIdle: Bool { requests.isEmpty && waiting.isEmpty }

    // MARK: A new attempt

    /// Makes `next` (a `nextAttempt`) the attempt: nothing of the old one counts as checked or
    /// written, and a commit of it still running lands as stale.
    public mutating func begin(_ next: DownloadRow) {
        state = .open(Attempt(row: next))
    }

    // MARK: Readers

    public mutating func readerArrived(_ demand: ByteRange) { waiting.append(demand) }

    public mutating func readerLeft(_ demand: ByteRange) {
        if let i = waiting.firstIndex(of: demand) { waiting.remove(at: i) }
    }

    /// The checks a reader made outside the lock (`checked`: each segment and whether its bytes
    /// match), if `attempt` is still current. Returns the segments to drop.
    public mutating func checked(_ segments: [(range: ByteRange, matches: Bool)], attempt: AttemptID) -> [ByteRange] {
        guard row.attempt == attempt else { return [] }
        var drop: [ByteRange] = []
        modify { a in
            for (segment, matches) in segments where !a.verified.contains(segment) {
                if matches { a.verified.insert(segment) } else { drop.append(segment) }
            }
        }
        return drop
    }

    /// A segment that failed its check is gone: not present, written, nor checked.
    public mutating func dropped(_ range: ByteRange) {
        modify { a in
            a.row.present.remove(range)
            a.written.remove(range)
        }
    }

    // MARK: Fetches

    public enum Dispatch: Sendable, Equatable {
        case none
        /// No fetch can start (`refusal`): each range failed; wake the readers.
        case refused
        /// Start these fetches of `attempt`, asking for `validator`.
        case fetch([ByteRange], attempt: AttemptID, generation: Int, validator: Validator?)
    }

    /// Fetches `planned` (nothing of it is in flight), unless `refusal` says none can start.
    public mutating func dispatch(_ planned: [ByteRange], background: Bool, refusal: LabstreamError?) -> Dispatch {
        var plan = planned
        if ignoresRange && !plan.isEmpty {
            // One stream of the whole file; readers wait for it to pass their bytes.
            guard requests.isEmpty else { return .none }
            plan = [ByteRange(0, row.total)]
        }
        guard !plan.isEmpty else { return .none }
        if let refusal {
            sequence += 1
            for r in plan { failures.append(Failure(sequence: sequence, range: r, error: refusal, kind: .validation)) }
            return .refused
        }
        requests += plan
        if background { fillRequests += plan }
        return .fetch(plan, attempt: row.attempt, generation: generation, validator: row.validator)
    }

    public enum Wrote: Sendable, Equatable {
        /// A newer attempt replaced this one.
        case stale
        /// Whether readers may have the answer's bytes; `wake`: a reader waits inside them.
        case written(servable: Bool, wake: Bool)
    }

    /// `piece` of `attempt`, carrying `validator`, is in the partial. `servable`: the verdict
    /// at the answer's first write, nil before it (it is servable when it carries the attempt's
    /// validator, which the first answer pins).
    public mutating func wrote(_ piece: ByteRange, attempt: AttemptID, validator: Validator?, servable decided: Bool?) -> Wrote {
        let current = row.attempt == attempt
        var servable = decided
        if servable == nil {
            guard current else { return .stale }
            modify { a in
                if a.row.validator == nil { a.row.validator = validator }
            }
            servable = row.validator == validator
        }
        guard servable == true, current else { return .written(servable: servable ?? false, wake: false) }
        modify { $0.written.insert(piece) }
        return .written(servable: true, wake: waiting.contains { $0.overlaps(piece) })
    }

    // MARK: Commits

    /// A durable piece to record: `row` with it (the caller adds what the index says and moves
    /// the status), and what is checked once it lands.
    public struct Commit: Sendable, Equatable {
        public let token: CommitToken
        public let range: ByteRange
        public let row: DownloadRow
        public let verified: RangeSet
    }

    public enum CommitStart: Sendable, Equatable {
        /// Another commit of this attempt is being recorded: wait for it and ask again.
        case wait
        /// Not committed (`why`); `current`: the attempt is still the file's.
        case discard(String, current: Bool)
        /// Bytes of one attempt from two versions of the file: start a new attempt.
        case changedValidator(pinned: Validator, got: Validator)
        /// Record it outside the lock, then `landed`.
        case record(Commit)
    }

    /// A fetch of `attempt` has `piece` durable (synced), carrying `validator`.
    public mutating func beginCommit(_ piece: ByteRange, validator: Validator?, attempt: AttemptID) -> CommitStart {
        if case .committing(let a, _) = state, a.row.attempt == attempt { return .wait }
        let decision = AssemblyPolicy.decide(
            .init(planned: piece, received: piece.count, attempt: attempt), durable: row.present, currentAttempt: row.attempt, total: row.total)
        guard case .commit(let committed) = decision else {
            if case .discard(let why) = decision { return .discard(why, current: attempt == row.attempt) }
            return .discard("", current: attempt == row.attempt)
        }
        if let pinned = row.validator, let validator, pinned != validator { return .changedValidator(pinned: pinned, got: validator) }
        var next = row
        next.present.insert(committed)
        if next.validator == nil { next.validator = validator }
        var verified = self.attempt.verified
        verified.insert(committed)
        serial += 1
        let token = CommitToken(attempt: attempt, serial: serial)
        state = .committing(self.attempt, token)
        return .record(Commit(token: token, range: committed, row: next, verified: verified))
    }

    public enum Landing: Sendable, Equatable {
        /// The index has `row` (or refused it for a newer attempt of another transfer object).
        case recorded(DownloadRow)
        case failed(LabstreamError)
    }

    public enum Landed: Sendable, Equatable {
        /// A newer attempt began meanwhile: nothing changed.
        case stale
        /// The row is the recorded one; wake the readers (and validation when `awaitingValidation`).
        case recorded(awaitingValidation: Bool)
        /// The bytes are on disk but not recorded: they will be fetched again, never trusted.
        case failed(LabstreamError)
    }

    /// The index answered for `commit` (recorded or failed); the token is given back.
    public mutating func landed(_ commit: Commit, _ landing: Landing) -> Landed {
        guard case .committing(var a, let token) = state, token == commit.token else { return .stale }
        switch landing {
        case .recorded(var recorded):
            // The one change the row may have had meanwhile: the first answer's validator.
            if recorded.validator == nil { recorded.validator = a.row.validator }
            a.row = recorded
            a.verified.insert(commit.range)
            a.written.remove(commit.range)  // durable now: kept in `present`
            state = .open(a)
            consecutiveFailures = 0
            return .recorded(awaitingValidation: recorded.awaitingValidation)
        case .failed(let error):
            state = .open(a)
            sequence += 1
            failures.append(Failure(sequence: sequence, range: commit.range, error: error, kind: .localFile))
            return .failed(error)
        }
    }

    // MARK: A fetch's end

    public enum Ending: Sendable, Equatable {
        /// Its body was used (what arrived is committed).
        case succeeded
        case failed(FetchFailure)
        /// Stopped by its requester before its end (a prefetch whose playback stopped): what
        /// arrived is committed; nothing failed, so no reader is told of it.
        case cancelled
    }

    /// What to do about a failed fetch of the current attempt.
    public enum Next: Sendable, Equatable {
        case nothing
        case restart(String)
        case park(PauseCause)
        case retry
    }

    public enum Finish: Sendable, Equatable {
        case done
        /// The server ignores `Range`: one whole-file fetch from byte 0 from now on (a new
        /// attempt, not counted as a failure).
        case ignoresRange(String)
        /// Say `failure`, then do `next`.
        case failed(FetchFailure, next: Next)
    }

    /// The fetch of `range` (of `attempt`, dispatched at `generation`) ended. `background`: it
    /// was the fill's; `now`: seconds since the epoch.
    public mutating func finished(_ range: ByteRange, attempt: AttemptID, generation: Int, background: Bool, ending: Ending, now: Double) -> Finish {
        if let i = requests.firstIndex(of: range) { requests.remove(at: i) }
        if let i = fillRequests.firstIndex(of: range) { fillRequests.remove(at: i) }
        sequence += 1
        let current = attempt == row.attempt
        switch ending {
        case .failed(let failure) where failure.rangeIgnored:
            guard current, !ignoresRange else { return .done }
            // Its body was not written; the readers waiting now wait for the whole-file stream.
            ignoresRange = true
            return .ignoresRange(failure.error.userMessage)
        case .cancelled:
            return .done
        case .succeeded:
            if current && !row.present.contains(range) {
                failures.append(Failure(sequence: sequence, range: range, error: .fetchFailed("the response could not be used"), kind: .validation))
            }
            return .done
        case .failed(let failure):
            guard current else { return .done }
            failures.append(Failure(sequence: sequence, range: range, error: failure.error, kind: failure.kind))
            if failures.count > 64 { failures.removeFirst(failures.count - 64) }
            if failure.class == .stalled { lastStall = Stall(range: range, failure: failure, at: now) }
            // Started before the user's last resume or retry: it cannot fail the fresh dispatch.
            guard generation == self.generation else { return .failed(failure, next: .nothing) }
            // On the wire when the user paused: a retry, a park or a new attempt would each move
            // the row out of the pause. Resuming fetches again and meets whatever this was.
            guard row.pauseCause != .user else { return .failed(failure, next: .nothing) }
            switch failure.class {
            case .changedVersion:
                if case .remoteChanged(let why) = failure.error { return .failed(failure, next: .restart(why)) }
                return .failed(failure, next: .nothing)
            case .diskFull:
                // A read's fetch fails its reader with ENOSPC; only a pinned file waits for room.
                return .failed(failure, next: row.pinned ? .park(.storageFull) : .nothing)
            case .signedOut:
                return .failed(failure, next: row.pinned ? .park(.signInRefused) : .nothing)
            case .transient, .stalled, .permanent:
                return .failed(failure, next: background || row.pinned ? .retry : .nothing)
            }
        }
    }

    // MARK: Failures and retries

    /// The first failure after `sequence` of a fetch overlapping `demand`.
    public func failure(after sequence: Int, overlapping demand: ByteRange) -> Failure? {
        failures.first { $0.sequence > sequence && $0.range.overlaps(demand) }
    }

    /// The file failed once more (a changed version, a failed try); how often in a row now.
    @discardableResult
    public mutating func failedAgain() -> Int {
        consecutiveFailures += 1
        return consecutiveFailures
    }

    public mutating func retry(at time: Double?) { retryAt = time }

    /// The user said try again (resume, retry) or pinned the file: the count and the backoff start
    /// over; with `fresh`, fetches already on the wire can no longer fail the new dispatch and a
    /// 401 is checked again.
    public mutating func startOver(fresh: Bool) {
        consecutiveFailures = 0
        retryAt = nil
        if fresh {
            generation += 1
            authRechecked = false
        }
    }

    /// What a 401 comes to.
    public enum Unauthorized: Sendable, Hashable {
        /// The request went out before the sign-in was last checked (which renewed its token):
        /// it is asked again, nothing more.
        case askAgain
        /// The sign-in is checked now; `first`: the first check of this transfer (a second
        /// refuses the file when the sign-in holds).
        case check(first: Bool)
    }

    /// A 401 for a request sent when `authChecks` was `checksWhenSent`: several ranges of one
    /// file on the wire when a token expires all come back 401, and only those sent after a
    /// check count against the file.
    public mutating func unauthorized(checksWhenSent: Int) -> Unauthorized {
        guard authChecks <= checksWhenSent else { return .askAgain }
        defer {
            authRechecked = true
            authChecks += 1
        }
        return .check(first: !authRechecked)
    }
}
