/// What one message on a server's event channel means to Labstream (decoded by each backend).
public enum ServerEvent: Sendable, Hashable {
    /// Items were added, changed or removed (ids as the server names them; a library's folders
    /// added or removed count as changed).
    case itemsChanged(added: [String], updated: [String], removed: [String])
    /// The server drops a channel that stays silent longer than this many seconds: a
    /// keep-alive goes out at half of it (Jellyfin/Emby `ForceKeepAlive`).
    case keepAliveWithin(seconds: Int)
    /// Anything else the server tells (playback, sessions, its own keep-alive answers).
    case other
}

/// Where one server's event channel stands: a code and its numbers, words rendered at the edge.
public enum EventChannelState: Sendable, Hashable {
    /// Opening (the first time, or again after `lost` waited out its backoff).
    case connecting
    /// Open since (seconds since the epoch): what the server tells is applied as it comes.
    case open(since: Int64)
    /// Lost, tried again at `retryAt` (seconds since the epoch); `failures` in a row so far.
    case lost(failures: Int, retryAt: Int64, why: String)
    /// The server offers no channel Labstream can read: only the periodic refresh.
    case none

    /// `open`, `connecting`, `lost retry=1733390000 failures=2 why=...`, `none`: the mount's
    /// `user.labstream.events.SERVER` attribute, read back by `server list` and `monitor list`.
    public var attribute: String {
        switch self {
        case .connecting: return "connecting"
        case .open(let since): return "open since=\(since)"
        case .lost(let failures, let retryAt, let why): return "lost retry=\(retryAt) failures=\(failures) why=\(why)"
        case .none: return "none"
        }
    }

    /// The members `server list --json` and `GET /api/status` give a server's channel
    /// (`events`, and `events_since` or `events_retry_at`, `events_failures`, `events_why`).
    public var jsonFields: [String: Any] {
        switch self {
        case .open(let since): return ["events": "open", "events_since": since]
        case .lost(let failures, let retryAt, let why):
            return ["events": "lost", "events_retry_at": retryAt, "events_failures": failures, "events_why": why]
        case .connecting: return ["events": "connecting"]
        case .none: return ["events": "none"]
        }
    }

    /// `attribute` read back; nil for a value this build does not know.
    public init?(attribute: String) {
        let words = attribute.split(separator: " ", maxSplits: 3).map(String.init)
        func value(_ key: String) -> String? {
            words.first { $0.hasPrefix(key + "=") }.map { String($0.dropFirst(key.count + 1)) }
        }
        switch words.first {
        case "connecting": self = .connecting
        case "none": self = .none
        case "open":
            guard let since = value("since").flatMap({ Int64($0) }) else { return nil }
            self = .open(since: since)
        case "lost":
            guard let retry = value("retry").flatMap({ Int64($0) }), let failures = value("failures").flatMap({ Int($0) }) else { return nil }
            self = .lost(failures: failures, retryAt: retry, why: value("why") ?? "")
        default: return nil
        }
    }
}

/// One server's event channel as a state machine: what opening, a message, a loss and time do,
/// as actions for the shell (the daemon's worker) to carry out. Pure: no I/O, no clock.
///
/// A change told on the channel is applied by an incremental sync (what changed since the last
/// sync: the changed items, and removals by the server's counts), coalesced: messages that
/// arrive together, or while a sync runs, lead to one more sync, not one each. A channel that
/// opens again after a loss syncs at once, since what the server told meanwhile was missed.
public struct EventChannel: Sendable, Hashable {
    public enum Action: Sendable, Hashable {
        /// Open the channel now.
        case connect
        /// Wait this many seconds, then open it again (`retryDue`).
        case reconnect(after: Double)
        /// Run an incremental sync of the server (what changed since its last sync).
        case sync
        /// Send the server's keep-alive now.
        case keepAlive
    }

    public private(set) var state: EventChannelState = .connecting
    /// Seconds between keep-alives the server asked for (nil: it asked for none).
    public private(set) var keepAliveEvery: Double?
    /// When the last keep-alive went out (or the channel opened).
    var lastKeepAlive: Int64 = 0
    /// A change arrived that no sync has applied yet.
    public private(set) var syncWanted = false
    var openedBefore = false
    /// Losses since the channel was last open.
    var failuresInRow = 0
    let firstRetry: Double
    let maxRetry: Double

    public init(firstRetry: Double = 2, maxRetry: Double = 300) {
        self.firstRetry = firstRetry
        self.maxRetry = maxRetry
    }

    /// The server offers no channel: nothing to open.
    public mutating func unsupported() { state = .none }

    /// The channel opened (its handshake was answered).
    public mutating func opened(now: Int64) -> [Action] {
        let again = openedBefore
        openedBefore = true
        failuresInRow = 0
        state = .open(since: now)
        lastKeepAlive = now
        keepAliveEvery = nil
        // What the server told while the channel was down was not heard.
        if again { syncWanted = true }
        return takeSync()
    }

    /// One message, decoded. Changes are only noted: `takeSync` says whether to sync, once the
    /// messages at hand are read.
    public mutating func received(_ event: ServerEvent, now: Int64) -> [Action] {
        guard case .open = state else { return [] }
        switch event {
        case .itemsChanged(let added, let updated, let removed):
            if !(added.isEmpty && updated.isEmpty && removed.isEmpty) { syncWanted = true }
            return []
        case .keepAliveWithin(let seconds):
            guard seconds > 0 else { return [] }
            keepAliveEvery = max(1, Double(seconds) / 2)
            lastKeepAlive = now
            return [.keepAlive]
        case .other:
            return []
        }
    }

    /// The messages at hand are read: one sync for every change among them (none when there was none).
    public mutating func takeSync() -> [Action] {
        guard syncWanted else { return [] }
        syncWanted = false
        return [.sync]
    }

    /// Time passed while the channel is open: a keep-alive, when one is due.
    public mutating func tick(now: Int64) -> [Action] {
        guard case .open = state, let every = keepAliveEvery, Double(now - lastKeepAlive) >= every else { return [] }
        lastKeepAlive = now
        return [.keepAlive]
    }

    /// Seconds until the next keep-alive is due (nil: none is); the shell waits for messages at most this long.
    public func untilKeepAlive(now: Int64) -> Double? {
        guard case .open = state, let every = keepAliveEvery else { return nil }
        return max(0, every - Double(now - lastKeepAlive))
    }

    /// The channel failed to open, or closed: try again after a backoff that doubles with each
    /// failure in a row (a channel that was open resets it).
    public mutating func lost(why: String, now: Int64) -> [Action] {
        guard state != .none else { return [] }
        failuresInRow += 1
        let failures = failuresInRow
        let delay = Backoff.doubled(firstRetry, steps: failures - 1, cap: maxRetry)
        state = .lost(failures: failures, retryAt: now + Int64(delay.rounded(.up)), why: why)
        keepAliveEvery = nil
        return [.reconnect(after: delay)]
    }

    /// The backoff after a loss ran out: open again.
    public mutating func retryDue() -> [Action] {
        guard case .lost = state else { return [] }
        state = .connecting
        return [.connect]
    }
}
