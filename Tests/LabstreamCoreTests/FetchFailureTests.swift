import LabstreamCore
import Testing

/// One classification of a failed fetch for every fetch path.
@Suite struct FetchFailureTests {
    @Test func rangedAnswersAreClassifiedOnce() {
        #expect(FetchFailure.answer(.accept(validator: nil, total: 10), status: 206, retryAfter: nil) == nil)
        let changed = FetchFailure.answer(.remoteChanged("ETag differs"), status: 206, retryAfter: nil)
        #expect(changed?.class == .changedVersion && changed?.rangeIgnored == false)
        let whole = FetchFailure.answer(.restart("200 to a range"), status: 200, retryAfter: nil)
        #expect(whole?.class == .changedVersion && whole?.rangeIgnored == true)
        let busy = FetchFailure.answer(.reject("HTTP 503"), status: 503, retryAfter: "4")
        #expect(busy?.class == .transient && busy?.kind == .status(503, retryAfter: "4") && busy?.error == .serverUnavailable("HTTP 503"))
        let gone = FetchFailure.answer(.reject("HTTP 404"), status: 404, retryAfter: nil)
        #expect(gone?.class == .permanent && gone?.error == .fetchFailed("HTTP 404"))
    }

    @Test func liveStreamsSayWhatFailed() {
        let missing = FetchFailure.stream(status: 404)
        #expect(missing.class == .permanent && missing.error.userMessage.contains("no live stream for this file"))
        #expect(!missing.error.userMessage.contains("Check that it is running"))
        #expect(FetchFailure.stream(status: 500).error.userMessage.contains("could not make the stream"))
        #expect(FetchFailure.stream(status: 503).class == .transient)
        // A refused sign-in parks the file until the user signs in again; it is not the file's failure.
        #expect(FetchFailure.stream(status: 401).class == .signedOut)
        #expect(FetchFailure.stream(status: 400).error.userMessage.contains("refused the request"))
    }

    /// Open-ended fills and live copies: a full disk or a refused sign-in parks the file and
    /// counts no retry; anything else retries while the policy says so, then fails.
    @Test func wholeFilePathsParkRetryOrFailByOneRule() {
        var asked = 0
        func step(_ f: FetchFailure, policy: Bool) -> FetchFailure.Step {
            f.step {
                asked += 1; return policy
            }
        }
        #expect(step(.local(.noSpace("partials")), policy: true) == .park(.storageFull))
        #expect(step(.stream(status: 401), policy: true) == .park(.signInRefused))
        #expect(asked == 0)
        #expect(step(.transport(.fetchFailed("reset")), policy: true) == .retry)
        #expect(step(.transport(.fetchFailed("reset")), policy: false) == .fail)
        #expect(step(.stream(status: 404), policy: false) == .fail)
        #expect(step(.transport(.remoteChanged("new ETag")), policy: true) == .retry)
        #expect(asked == 4)
    }

    @Test func localAndTransportFailuresAreWhatTheyAre() {
        #expect(FetchFailure.local(.noSpace("partials")).class == .diskFull)  // never the server's fault
        #expect(FetchFailure.local(.storage("EIO")).class == .permanent)
        #expect(FetchFailure.transport(.timedOut("GET /x")).class == .transient)
        #expect(FetchFailure.cutShort("ended at byte 5").class == .transient)
    }

    /// A server that stopped sending for fetch_timeout is a stall: a pinned file tries again, a
    /// reader fails now, and so does a reader asking for those bytes at once after.
    @Test func aStallIsItsOwnClass() {
        let stall = FetchFailure.stall(.timedOut("the server stopped sending mid-body"))
        #expect(stall.class == .stalled && RetryPolicy.isTransient(stall.kind))
        #expect(stall.step { true } == .retry)
        #expect(stall.echoesToReaders(age: 0) && stall.echoesToReaders(age: 0.5) && !stall.echoesToReaders(age: FetchFailure.stallEcho))
        #expect(!FetchFailure.transport(.timedOut("no connection")).echoesToReaders(age: 0))
    }
}
