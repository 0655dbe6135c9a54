import LabstreamCore
import Testing

@Suite struct EventChannelTests {
    let added = ServerEvent.itemsChanged(added: ["a"], updated: [], removed: [])

    @Test func aChangeLeadsToOneSyncForEverythingAtHand() {
        var channel = EventChannel()
        #expect(channel.opened(now: 100) == [])  // the first opening follows a sync of its own
        #expect(channel.state == .open(since: 100))
        #expect(channel.received(added, now: 101) == [])
        #expect(channel.received(.itemsChanged(added: [], updated: ["b"], removed: []), now: 101) == [])
        #expect(channel.received(.itemsChanged(added: [], updated: [], removed: ["c"]), now: 101) == [])
        #expect(channel.takeSync() == [.sync])
        #expect(channel.takeSync() == [])  // applied: nothing more to do
    }

    @Test func messagesThatChangeNothingSyncNothing() {
        var channel = EventChannel()
        _ = channel.opened(now: 0)
        #expect(channel.received(.other, now: 1) == [])
        #expect(channel.received(.itemsChanged(added: [], updated: [], removed: []), now: 1) == [])
        #expect(channel.takeSync() == [])
    }

    @Test func aLostChannelReconnectsWithDoublingBackoffAndSyncsWhatItMissed() {
        var channel = EventChannel(firstRetry: 2, maxRetry: 10)
        #expect(channel.lost(why: "connection refused", now: 50) == [.reconnect(after: 2)])
        #expect(channel.state == .lost(failures: 1, retryAt: 52, why: "connection refused"))
        #expect(channel.retryDue() == [.connect])
        #expect(channel.state == .connecting)
        #expect(channel.lost(why: "connection refused", now: 52) == [.reconnect(after: 4)])
        _ = channel.retryDue()
        #expect(channel.lost(why: "x", now: 56) == [.reconnect(after: 8)])
        _ = channel.retryDue()
        #expect(channel.lost(why: "x", now: 64) == [.reconnect(after: 10)])  // capped
        _ = channel.retryDue()
        // The first opening: the daemon's own start-up sync covers what came before.
        #expect(channel.opened(now: 80) == [])
        #expect(channel.lost(why: "closed by the server", now: 90) == [.reconnect(after: 2)])  // an open channel resets the backoff
        _ = channel.retryDue()
        // Opened again after a loss: whatever the server told meanwhile was missed.
        #expect(channel.opened(now: 93) == [.sync])
    }

    @Test func keepAlivesGoOutAtHalfTheServersTimeout() {
        var channel = EventChannel()
        _ = channel.opened(now: 0)
        #expect(channel.untilKeepAlive(now: 0) == nil)
        #expect(channel.tick(now: 1000) == [])  // the server asked for none
        #expect(channel.received(.keepAliveWithin(seconds: 60), now: 10) == [.keepAlive])
        #expect(channel.untilKeepAlive(now: 20) == 20)
        #expect(channel.tick(now: 39) == [])
        #expect(channel.tick(now: 40) == [.keepAlive])
        #expect(channel.tick(now: 41) == [])
        // A lost channel sends nothing, and the request lapses with it.
        _ = channel.lost(why: "x", now: 50)
        #expect(channel.tick(now: 500) == [])
        _ = channel.retryDue()
        _ = channel.opened(now: 600)
        #expect(channel.untilKeepAlive(now: 600) == nil)
    }

    @Test func aServerWithoutAChannelStaysThatWay() {
        var channel = EventChannel()
        channel.unsupported()
        #expect(channel.lost(why: "x", now: 1) == [])
        #expect(channel.retryDue() == [])
        #expect(channel.state == .none)
    }

    @Test func theStateReadsBackFromItsAttribute() {
        let states: [EventChannelState] = [
            .connecting, .open(since: 1_733_390_000), .none,
            .lost(failures: 3, retryAt: 1_733_390_016, why: "closed by the server")
        ]
        for state in states { #expect(EventChannelState(attribute: state.attribute) == state) }
        #expect(EventChannelState(attribute: "lost retry=12") == nil)
        #expect(EventChannelState(attribute: "sideways") == nil)
    }

    /// `server list --json` and `GET /api/status` give the same members for a channel.
    @Test func theStateGivesItsJSONMembers() {
        let lost = EventChannelState.lost(failures: 3, retryAt: 1_733_390_016, why: "closed by the server").jsonFields
        #expect(lost["events"] as? String == "lost" && lost["events_retry_at"] as? Int64 == 1_733_390_016)
        #expect(lost["events_failures"] as? Int == 3 && lost["events_why"] as? String == "closed by the server")
        let open = EventChannelState.open(since: 7).jsonFields
        #expect(open["events"] as? String == "open" && open["events_since"] as? Int64 == 7 && open.count == 2)
        #expect(EventChannelState.none.jsonFields["events"] as? String == "none")
        #expect(EventChannelState.connecting.jsonFields.count == 1)
    }
}
