import LabstreamCore

/// How a server's event channel is opened.
public struct EventChannelRequest: Sendable, Hashable {
    public enum Wire: String, Sendable, Hashable {
        /// RFC 6455 WebSocket: each text message one event.
        case webSocket
        /// Server-Sent Events over a long HTTP GET: each `data:` block one event.
        case serverSentEvents
    }

    public var kind: Wire
    /// `ws://`/`wss://` for a WebSocket, `http(s)://` for SSE. May carry a token in its query:
    /// never log it (`request.redactedDescription` drops the query).
    public var request: HTTPRequest
    /// Sent every `keepAliveWithin / 2` seconds once the server asks for keep-alives.
    public var keepAlive: String?

    public init(kind: Wire, request: HTTPRequest, keepAlive: String? = nil) {
        self.kind = kind
        self.request = request
        self.keepAlive = keepAlive
    }
}

/// A server that tells what changes as it happens, on a channel of its own.
public protocol ServerEventSource: MediaBackend {
    /// How to open the channel.
    func eventChannel() -> EventChannelRequest
    /// What one message on it means.
    func event(from message: [UInt8]) -> ServerEvent
}

/// Jellyfin's and Emby's session messages (`{"MessageType": …, "Data": …}`), as Jellyfin's
/// `OutboundWebSocketMessage<T>` serialises them: `LibraryChanged` carries a `LibraryUpdateInfo`
/// (`ItemsAdded`, `ItemsUpdated`, `ItemsRemoved`, `FoldersAddedTo`, `FoldersRemovedFrom`,
/// `CollectionFolders`), `ForceKeepAlive` the seconds after which a silent socket is dropped
/// (Jellyfin: 60), and the client's `{"MessageType":"KeepAlive"}` is answered `KeepAlive`.
public enum MediaBrowserEvents {
    public static let keepAlive = #"{"MessageType":"KeepAlive"}"#

    public static func event(from message: [UInt8]) -> ServerEvent {
        guard let json = try? JSONValue.parse(message) else { return .other }
        let data = json["Data"]
        switch json["MessageType"].string {
        case "LibraryChanged":
            func ids(_ key: String) -> [String] { data[key].array?.compactMap(\.string) ?? [] }
            // A library's folders gained or lost something the item lists may not name (its
            // own folders): counted as changed, so the incremental sync looks.
            let folders = ids("FoldersAddedTo") + ids("FoldersRemovedFrom")
            return .itemsChanged(added: ids("ItemsAdded"), updated: ids("ItemsUpdated") + folders, removed: ids("ItemsRemoved"))
        case "ForceKeepAlive":
            return data.int.map { .keepAliveWithin(seconds: $0) } ?? .other
        default:
            return .other
        }
    }
}

extension MediaBrowserRequests {
    /// Jellyfin: `/socket`, signed in by the same authorization header as every request (its
    /// `WebSocketManager` authenticates the upgrade request like any other), so the token stays
    /// out of the URL. Emby: `/embywebsocket` with `api_key` and `deviceId` in the query, as its
    /// web-socket documentation gives them.
    public func eventSocket(token: String) -> EventChannelRequest {
        let ws = baseURL.hasPrefix("https://") ? "wss://" + baseURL.dropFirst(8) : "ws://" + baseURL.dropFirst(baseURL.hasPrefix("http://") ? 7 : 0)
        switch flavor {
        case .jellyfin:
            return EventChannelRequest(
                kind: .webSocket, request: HTTPRequest(url: ws + "/socket", headers: headers(token: token)), keepAlive: MediaBrowserEvents.keepAlive)
        case .emby:
            let query = "?api_key=\(token.queryEscaped)&deviceId=\(identity.deviceId.queryEscaped)"
            return EventChannelRequest(
                kind: .webSocket, request: HTTPRequest(url: ws + "/embywebsocket" + query, headers: headers(token: token)),
                keepAlive: MediaBrowserEvents.keepAlive)
        }
    }
}

extension MediaBrowserClient: ServerEventSource {
    public func eventChannel() -> EventChannelRequest { requests.eventSocket(token: session.token) }
    public func event(from message: [UInt8]) -> ServerEvent { MediaBrowserEvents.event(from: message) }
}

/// An open (or opening) event channel. One thread drives it (`receive`, `send`, `close`);
/// `interrupt` may come from any other, to make a waiting `receive` return at once.
public protocol EventStream: AnyObject, Sendable {
    /// Waits at most `seconds` for what happens next on the channel.
    func receive(within seconds: Double) -> EventStreamNews
    /// Queues a text message (sent during the next `receive`).
    func send(_ text: String)
    /// Makes the current and every later `receive` return `.idle` at once (the channel is being let go).
    func interrupt()
    /// Closes the channel; nothing more arrives.
    func close()
}

public enum EventStreamNews: Sendable, Hashable {
    /// The handshake was answered: the channel is open.
    case opened
    /// Whole messages, in order.
    case messages([[UInt8]])
    /// Nothing within the time given (or interrupted).
    case idle
    /// Failed to open, or closed; why, in words without the URL's query or any header value.
    case closed(String)
}

/// Opens a channel (without waiting for it: `receive` says when it is open).
public typealias EventStreamOpener = @Sendable (EventChannelRequest) -> any EventStream

/// The Server-Sent Events wire format (WHATWG HTML § 9.2.6), fed as bytes arrive: each event's
/// `data:` lines joined by newlines, handed over at the blank line that ends it. `event:`, `id:`,
/// `retry:` and comments (`:` lines, a server's keep-alive) are read past. Pure.
public struct ServerSentEvents: Sendable {
    var line: [UInt8] = []
    var data: [UInt8] = []
    var hasData = false
    var lastWasCR = false

    public init() {}

    /// The events `bytes` complete.
    public mutating func feed(_ bytes: some Sequence<UInt8>) -> [[UInt8]] {
        var out: [[UInt8]] = []
        for byte in bytes {
            if byte == 10 && lastWasCR {
                lastWasCR = false
                continue  // the LF of a CRLF
            }
            lastWasCR = byte == 13
            guard byte == 10 || byte == 13 else {
                line.append(byte)
                continue
            }
            if line.isEmpty {
                if hasData { out.append(data) }
                data = []
                hasData = false
            } else if line.starts(with: Array("data".utf8)) && (line.count == 4 || line[4] == 58) {
                var value = line.count > 5 ? Array(line[5...]) : []
                if value.first == 32 { value.removeFirst() }
                if hasData { data.append(10) }
                data += value
                hasData = true
            }
            line = []
        }
        return out
    }
}

/// Plex's notifications (`/:/eventsource/notifications`, plex-api-spec.yaml's Events: "changes to
/// media"), each a `NotificationContainer` (or its members alone) whose `timeline` entries name
/// library items: `identifier` `com.plexapp.plugins.library`, `itemID`, and a `state`, 5 once the
/// server has finished with an added or changed item, 9 once it is deleted (the states between
/// are its scan's progress, not yet worth a sync).
public enum PlexEvents {
    public static func event(from message: [UInt8]) -> ServerEvent {
        guard let json = try? JSONValue.parse(message) else { return .other }
        let container = json["NotificationContainer"].isObject ? json["NotificationContainer"] : json
        guard let entries = container["TimelineEntry"].array else { return .other }
        var updated: [String] = []
        var removed: [String] = []
        for entry in entries where entry["identifier"].string == "com.plexapp.plugins.library" {
            guard let id = entry["itemID"].text else { continue }
            switch entry["state"].int {
            case 5?: updated.append(id)
            case 9?: removed.append(id)
            default: continue
            }
        }
        return .itemsChanged(added: [], updated: updated, removed: removed)
    }
}

extension PlexRequests {
    /// The event source, asked for timeline events only; its token in the header, as every request's.
    public func eventSource(token: String) -> EventChannelRequest {
        EventChannelRequest(kind: .serverSentEvents, request: get("/:/eventsource/notifications", [("filters", "timeline")], token: token))
    }
}

extension PlexClient: ServerEventSource {
    public func eventChannel() -> EventChannelRequest { requests.eventSource(token: session.token) }
    public func event(from message: [UInt8]) -> ServerEvent { PlexEvents.event(from: message) }
}
