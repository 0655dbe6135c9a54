import LabstreamCore
import Testing

@Suite struct PinWaitTests {
    typealias F = (state: String, reason: String?)
    let complete: F = ("complete", nil)
    let checked: F = ("unverified", StatusReason.probeOff)
    let checking: F = ("unverified", StatusReason.awaitingValidation)
    let failed: F = ("failed", "HTTP 404")
    let full: F = ("paused", StatusReason.storageFull)
    let byUser: F = ("paused", StatusReason.pausedByUser)
    let offline: F = ("paused", StatusReason.serverUnavailable)

    @Test func followsWhileAnyFileCanStillMoveOnItsOwn() {
        for moving: F in [("queued", nil), ("downloading", nil), ("partial", nil), checking, offline] {
            #expect(PinWait.verdict([complete, moving]) == .following, "\(moving)")
            #expect(PinWait.verdict([failed, full, moving]) == .following, "\(moving)")
        }
    }

    @Test func endsDoneFailedOrHeldOnceNothingMoves() {
        #expect(PinWait.verdict([]) == .done)
        #expect(PinWait.verdict([complete, checked]) == .done)
        #expect(PinWait.verdict([complete, failed]) == .failed)
        #expect(PinWait.verdict([failed, full]) == .failed)   // a failure outranks a pause
        #expect(PinWait.verdict([complete, full]) == .held)
        #expect(PinWait.verdict([byUser]) == .held)
    }

    @Test func heldMessagesSayWhatToRun() {
        let full = PinWait.heldMessage(path: "/m/a.mkv", reason: StatusReason.storageFull)
        #expect(full.contains("disk cannot hold") && full.contains("labstream resume /m/a.mkv"))
        let user = PinWait.heldMessage(path: "/m/a.mkv", reason: StatusReason.pausedByUser)
        #expect(user.contains("paused by user") && user.contains("labstream resume /m/a.mkv"))
    }
}
