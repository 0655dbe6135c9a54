import CCrypto
import Foundation
import LabstreamCore
import LabstreamDemo
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

/// The Jellyfin/Emby session WebSocket (Jellyfin `/socket`, Emby `/embywebsocket`), written from
/// Jellyfin's server code: `WebSocketManager` authenticates the upgrade like any request, then
/// `SessionWebSocketListener` sends `ForceKeepAlive` with its 60-second timeout, answers each
/// client `{"MessageType":"KeepAlive"}` with a `KeepAlive`, and `LibraryChangedNotifier` sends
/// `LibraryChanged` with a `LibraryUpdateInfo` (every list always present, possibly empty).
/// Messages are `OutboundWebSocketMessage<T>`: `MessageType`, `Data`, `MessageId`.
/// A server frame is unmasked, a client frame masked (RFC 6455 § 5.3).
final class EventSockets: Sendable {
    struct Session {
        var outbox: [String] = []
        var drop = false
    }
    let sessions = Mutex<[Int: Session]>([:])
    let opened = Atomic<Int>(0)
    let keepAlives = Atomic<Int>(0)
    /// Whether releasing, removing and touching items tells the open sockets.
    let telling = Atomic<Bool>(false)

    func broadcast(_ message: String) {
        sessions.withLock { s in for id in s.keys { s[id]?.outbox.append(message) } }
    }

    static func message(_ type: String, data: Any?) -> String {
        var object: [String: Any] = ["MessageType": type, "MessageId": UUID().uuidString.lowercased()]
        if let data { object["Data"] = data }
        let bytes = (try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys])) ?? Data()
        return String(decoding: bytes, as: UTF8.self)
    }

    /// `Sec-WebSocket-Accept`: base64 of SHA-1 of the key and RFC 6455's GUID.
    static func accept(_ key: String) -> String {
        let input = Array((key + "258EAFA5-E914-47DA-95CA-C5AB0DC85B11").utf8)
        var digest = [UInt8](repeating: 0, count: 20)
        var length: UInt32 = 0
        _ = EVP_Digest(input, input.count, &digest, &length, EVP_sha1(), nil)
        return Data(digest).base64EncodedString()
    }

    static func frame(_ text: String, opcode: UInt8 = 0x1) -> [UInt8] {
        let payload = Array(text.utf8)
        var out: [UInt8] = [0x80 | opcode]
        if payload.count < 126 {
            out.append(UInt8(payload.count))
        } else if payload.count < 65536 {
            out += [126, UInt8(payload.count >> 8), UInt8(payload.count & 0xff)]
        } else {
            out.append(127)
            for shift in stride(from: 56, through: 0, by: -8) { out.append(UInt8((payload.count >> shift) & 0xff)) }
        }
        return out + payload
    }

    /// One session on its connection's thread, until the client closes or the test drops it.
    /// `sse`: Plex's event source, each message an `event:`/`data:` block on a body that lasts
    /// until the connection closes; else a WebSocket.
    func serve(_ fd: Int32, sse: Bool = false) {
        let id = opened.add(1, ordering: .sequentiallyConsistent).newValue
        sessions.withLock { $0[id] = Session() }
        defer { sessions.withLock { _ = $0.removeValue(forKey: id) } }
        func send(_ text: String, opcode: UInt8 = 0x1) -> Bool {
            let bytes = sse ? Array("event: timeline\ndata: \(text)\n\n".utf8) : Self.frame(text, opcode: opcode)
            return bytes.withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) } == bytes.count
        }
        // SessionWebSocketListener.ProcessWebSocketConnectedAsync → KeepAliveWebSocket → SendForceKeepAlive(60).
        if !sse { guard send(Self.message("ForceKeepAlive", data: 60)) else { return } }
        var buffer: [UInt8] = []
        while true {
            let (out, drop) = sessions.withLock { s -> ([String], Bool) in
                defer { s[id]?.outbox.removeAll() }
                return (s[id]?.outbox ?? [], s[id]?.drop ?? true)
            }
            // A dropped connection: gone without a close frame, as a restarting server's are.
            if drop {
                shutdown(fd, Int32(SHUT_RDWR))
                return
            }
            for message in out { guard send(message) else { return } }
            var p = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            guard poll(&p, 1, 50) >= 0 else { return }  // wakes to look at the outbox
            guard p.revents != 0 else { continue }
            var chunk = [UInt8](repeating: 0, count: 4096)
            let n = chunk.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            guard n > 0, !sse else { return }
            buffer += chunk[0..<n]
            while let (opcode, payload, used) = Self.clientFrame(buffer) {
                buffer.removeFirst(used)
                switch opcode {
                case 0x1:
                    let json = (try? JSONSerialization.jsonObject(with: Data(payload))) as? [String: Any]
                    if json?["MessageType"] as? String == "KeepAlive" {
                        keepAlives.add(1, ordering: .sequentiallyConsistent)
                        guard send(Self.message("KeepAlive", data: nil)) else { return }
                    }
                case 0x8:
                    _ = send("", opcode: 0x8)
                    return
                case 0x9:
                    guard send(String(decoding: payload, as: UTF8.self), opcode: 0xA) else { return }
                default: continue
                }
            }
        }
    }

    /// One whole masked client frame at the start of `buffer`: opcode, unmasked payload, bytes used.
    static func clientFrame(_ buffer: [UInt8]) -> (UInt8, [UInt8], Int)? {
        guard buffer.count >= 2 else { return nil }
        var length = Int(buffer[1] & 0x7f)
        var at = 2
        if length == 126 {
            guard buffer.count >= 4 else { return nil }
            length = Int(buffer[2]) << 8 | Int(buffer[3])
            at = 4
        } else if length == 127 {
            guard buffer.count >= 10 else { return nil }
            length = buffer[2..<10].reduce(0) { $0 << 8 | Int($1) }
            at = 10
        }
        let masked = buffer[1] & 0x80 != 0
        let key = masked ? Array(buffer[at..<min(buffer.count, at + 4)]) : []
        if masked { at += 4 }
        guard buffer.count >= at + length else { return nil }
        var payload = Array(buffer[at..<(at + length)])
        if masked { for i in payload.indices { payload[i] ^= key[i % 4] } }
        return (buffer[0] & 0x0f, payload, at + length)
    }
}

extension ServerFixture {
    /// From now on the server tells its open event sockets what `release`, `remove` and `touch`
    /// change (`LibraryChanged`), as Jellyfin and Emby do.
    public func tellChanges() { eventSockets.telling.store(true, ordering: .sequentiallyConsistent) }

    /// Event sockets opened so far, and open now.
    public var eventSocketsOpened: Int { eventSockets.opened.load(ordering: .sequentiallyConsistent) }
    public var eventSocketsOpen: Int { eventSockets.sessions.withLock { $0.count } }
    /// Client keep-alives received so far.
    public var eventKeepAlives: Int { eventSockets.keepAlives.load(ordering: .sequentiallyConsistent) }

    /// Drops every open event socket without a close frame (a restarting server, a lost network).
    public func dropEventSockets() { eventSockets.sessions.withLock { s in for id in s.keys { s[id]?.drop = true } } }

    /// Sends `LibraryChanged` to every open event socket.
    public func libraryChanged(added: [String] = [], updated: [String] = [], removed: [String] = []) {
        let info: [String: Any] = [
            "FoldersAddedTo": [String](), "FoldersRemovedFrom": [String](), "ItemsAdded": added, "ItemsRemoved": removed,
            "ItemsUpdated": updated, "CollectionFolders": [String]()
        ]
        eventSockets.broadcast(EventSockets.message("LibraryChanged", data: info))
    }

    func tellingChanges(added: [String] = [], updated: [String] = [], removed: [String] = []) {
        guard eventSockets.telling.load(ordering: .sequentiallyConsistent) else { return }
        guard kind == .plex else { return libraryChanged(added: added, updated: updated, removed: removed) }
        // A `timeline` notification per item: state 5 once processed (added or changed), 9 deleted.
        let now = Int64(Date().timeIntervalSince1970)
        let entries: [[String: Any]] = (added + updated).map { entry(plexNumber($0), 5, now) } + removed.map { entry(plexNumber($0), 9, now) }
        let container: [String: Any] = ["NotificationContainer": ["type": "timeline", "size": entries.count, "TimelineEntry": entries]]
        let bytes = (try? JSONSerialization.data(withJSONObject: container, options: [.sortedKeys])) ?? Data()
        eventSockets.broadcast(String(decoding: bytes, as: UTF8.self))
    }

    private func entry(_ ratingKey: String, _ state: Int, _ now: Int64) -> [String: Any] {
        ["identifier": "com.plexapp.plugins.library", "itemID": Int64(ratingKey) ?? 0, "state": state, "updatedAt": now, "sectionID": 1, "type": 1]
    }

    /// Plex's `/:/eventsource/notifications`: `text/event-stream`, open until the client goes.
    func eventSource() -> HTTPServer.Response {
        let sockets = eventSockets
        return HTTPServer.Response(
            status: 200, headers: [("Content-Type", "text/event-stream"), ("Cache-Control", "no-cache"), ("Connection", "close")],
            body: .upgrade(run: { sockets.serve($0, sse: true) }))
    }

    /// The upgrade of `/socket` (Jellyfin) or `/embywebsocket` (Emby), for a signed-in request.
    func eventSocket(_ request: HTTPServer.Request) -> HTTPServer.Response {
        guard request.headers["upgrade"]?.lowercased() == "websocket", let key = request.headers["sec-websocket-key"] else {
            return .json("{\"title\":\"Bad Request\",\"status\":400}", status: 400)
        }
        let sockets = eventSockets
        return HTTPServer.Response(
            status: 101, headers: [("Upgrade", "websocket"), ("Connection", "Upgrade"), ("Sec-WebSocket-Accept", EventSockets.accept(key))],
            body: .upgrade(run: { sockets.serve($0) }))
    }
}
