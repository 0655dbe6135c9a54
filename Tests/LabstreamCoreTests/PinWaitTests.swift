import LabstreamCore
import Testing

@Suite struct PinWaitTests {
    typealias F = (state: String, reason: StatusReason?, cause: PauseCause?)
    let complete: F = ("complete", nil, nil)
    let checked: F = ("unverified", StatusReason.probeOff, nil)
    let checking: F = ("unverified", StatusReason.awaitingValidation, nil)
    let failed: F = ("failed", .said("HTTP 404"), nil)
    let full: F = ("paused", StatusReason.storageFull, .storageFull)
    let byUser: F = ("paused", StatusReason.pausedByUser, .user)
    let offline: F = ("paused", StatusReason.serverUnavailable, .serverUnavailable)
    let signedOut: F = ("paused", StatusReason.signInRefused(server: "home"), .signInRefused)
    /// The cause decides, never the sentence: a pause of unknown cause waits for the user.
    let unknown: F = ("paused", StatusReason.serverUnavailable, nil)

    @Test func followsWhileAnyFileCanStillMoveOnItsOwn() {
        for moving: F in [("queued", nil, nil), ("downloading", nil, nil), ("partial", nil, nil), checking, offline, signedOut] {
            #expect(PinWait.verdict([complete, moving]) == .following, "\(moving)")
            #expect(PinWait.verdict([failed, full, moving]) == .following, "\(moving)")
        }
    }

    @Test func endsDoneFailedOrHeldOnceNothingMoves() {
        #expect(PinWait.verdict([]) == .done)
        #expect(PinWait.verdict([complete, checked]) == .done)
        #expect(PinWait.verdict([complete, failed]) == .failed)
        #expect(PinWait.verdict([failed, full]) == .failed)  // a failure outranks a pause
        #expect(PinWait.verdict([complete, full]) == .held)
        #expect(PinWait.verdict([byUser]) == .held)
        #expect(PinWait.verdict([unknown]) == .held)
        #expect(PinWait.verdict([("paused", nil, .serverRemoved)]) == .held)
    }

    @Test func heldMessagesSayWhatToRun() {
        let full = PinWait.heldMessage(path: "/m/a.mkv", reason: StatusReason.storageFull, cause: .storageFull)
        #expect(full.contains("disk cannot hold") && full.contains("labstream resume /m/a.mkv"))
        let user = PinWait.heldMessage(path: "/m/a.mkv", reason: StatusReason.pausedByUser, cause: .user)
        #expect(user.contains("paused by user") && user.contains("labstream resume /m/a.mkv"))
    }
}
