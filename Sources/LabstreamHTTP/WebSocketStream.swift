import CCurl
import CWebSockets
import Foundation
import LabstreamBackends
import LabstreamCore
import Synchronization

/// A WebSocket client channel on libwebsockets: one client-only context per channel, serviced
/// only on the thread that calls `receive` (lws callbacks run inside `lws_service`), so its
/// state needs no lock; `interrupt` wakes it from any thread through `lws_cancel_service`.
public final class WebSocketStream: EventStream, @unchecked Sendable {
    /// Messages larger than this close the channel (a server's events are small).
    static let largestMessage = 16 << 20

    private var context: OpaquePointer?
    private var wsi: OpaquePointer?
    private let protocols: UnsafeMutablePointer<lws_protocols>
    private let names: [UnsafeMutablePointer<CChar>]
    private let headers: [(name: UnsafeMutablePointer<CChar>, value: UnsafeMutablePointer<CChar>)]
    /// Strings a failure's words must not carry (header values, the URL's query).
    private let secrets: [String]
    // Touched only on the servicing thread.
    private var justOpened = false
    private var failure: String?
    private var fragment: [UInt8] = []
    private var inbox: [[UInt8]] = []
    private var outbox: [[UInt8]] = []
    private var timerFired = false
    private let interrupted = Atomic<Bool>(false)

    /// Starts connecting to `request.url` (`ws://` or `wss://`) with `request.headers` in the
    /// handshake; a handshake not answered within `connectTimeout` seconds closes it.
    public init(_ request: HTTPRequest, connectTimeout: Double = 10) {
        lws_set_log_level(0, nil)  // its lines would go to stderr, and could name the URL
        secrets = request.headers.map(\.value) + [request.url.split(separator: "?", maxSplits: 1).dropFirst().first.map(String.init)].compactMap { $0 }
        names = [strdup("labstream-events")!]
        headers = request.headers.map { (strdup($0.name.lowercased() + ":")!, strdup($0.value)!) }
        protocols = .allocate(capacity: 2)
        protocols.initialize(repeating: lws_protocols(), count: 2)
        protocols[0].name = UnsafePointer(names[0])
        protocols[0].callback = { wsi, reason, _, input, length in
            guard let wsi, let owner = lws_context_user(lws_get_context(wsi)) else { return 0 }
            return Unmanaged<WebSocketStream>.fromOpaque(owner).takeUnretainedValue().event(wsi, reason, input, length)
        }
        protocols[0].rx_buffer_size = 0
        guard let url = URLComponents(string: request.url), let host = url.host, let scheme = url.scheme, scheme == "ws" || scheme == "wss" else {
            failure = "the event channel's address is not a ws:// or wss:// URL"
            return
        }
        var info = lws_context_creation_info()
        info.port = CWebSockets_no_listen()
        info.protocols = UnsafePointer(protocols)
        info.gid = -1
        info.uid = -1
        info.options = scheme == "wss" ? UInt64(LWS_SERVER_OPTION_DO_SSL_GLOBAL_INIT) : 0
        info.timeout_secs = UInt32(max(1, connectTimeout.rounded(.up)))
        info.connect_timeout_secs = info.timeout_secs
        // Its poll table is sized from this: a channel needs a handful of descriptors, not ulimit -n.
        info.fd_limit_per_thread = 8
        info.count_threads = 1
        info.user = Unmanaged.passUnretained(self).toOpaque()
        context = lws_create_context(&info)
        guard context != nil else {
            failure = "libwebsockets could not make a context"
            return
        }
        let path = (url.percentEncodedPath.isEmpty ? "/" : url.percentEncodedPath) + (url.percentEncodedQuery.map { "?" + $0 } ?? "")
        let port = url.port ?? (scheme == "wss" ? 443 : 80)
        let hostHeader = url.port.map { "\(host):\($0)" } ?? host
        host.withCString { hostC in
            path.withCString { pathC in
                hostHeader.withCString { hostHeaderC in
                    var connect = lws_client_connect_info()
                    connect.context = context
                    connect.address = hostC
                    connect.port = Int32(port)
                    connect.path = pathC
                    connect.host = hostHeaderC
                    connect.origin = hostHeaderC
                    connect.ssl_connection = scheme == "wss" ? Int32(LCCSCF_USE_SSL.rawValue) : 0
                    connect.ietf_version_or_minus_one = -1
                    wsi = lws_client_connect_via_info(&connect)
                }
            }
        }
        if wsi == nil && failure == nil { failure = "could not start connecting to \(host):\(port)" }
    }

    deinit {
        close()
        protocols.deinitialize(count: 2)
        protocols.deallocate()
        names.forEach { free($0) }
        headers.forEach {
            free($0.name)
            free($0.value)
        }
    }

    public func receive(within seconds: Double) -> EventStreamNews {
        timerFired = false
        let deadline = Date().addingTimeInterval(seconds)
        if let wsi { lws_set_timer_usecs(wsi, lws_usec_t(max(1, seconds * 1_000_000))) }
        while true {
            if justOpened {
                justOpened = false
                return .opened
            }
            if !inbox.isEmpty {
                defer { inbox.removeAll() }
                return .messages(inbox)
            }
            if let failure { return .closed(failure) }
            guard let context else { return .closed("the event channel is closed") }
            if timerFired || interrupted.load(ordering: .sequentiallyConsistent) || Date() >= deadline { return .idle }
            if !outbox.isEmpty, let wsi { lws_callback_on_writable(wsi) }
            lws_service(context, 0)
        }
    }

    public func send(_ text: String) {
        outbox.append(Array(text.utf8))
        if let wsi { lws_callback_on_writable(wsi) }
    }

    public func interrupt() {
        interrupted.store(true, ordering: .sequentiallyConsistent)
        if let context { lws_cancel_service(context) }
    }

    public func close() {
        guard let context else { return }
        self.context = nil
        wsi = nil
        lws_context_destroy(context)
        if failure == nil { failure = "the event channel is closed" }
    }

    /// One libwebsockets callback, on the servicing thread.
    private func event(_ wsi: OpaquePointer, _ reason: lws_callback_reasons, _ input: UnsafeMutableRawPointer?, _ length: Int) -> Int32 {
        switch reason {
        case LWS_CALLBACK_CLIENT_APPEND_HANDSHAKE_HEADER:
            guard let input else { return -1 }
            for h in headers where CWebSockets_append_header(wsi, input, length, h.name, h.value) != 0 { return -1 }
        case LWS_CALLBACK_CLIENT_ESTABLISHED:
            justOpened = true
        case LWS_CALLBACK_CLIENT_RECEIVE:
            if let input, length > 0 { fragment.append(contentsOf: UnsafeRawBufferPointer(start: input, count: length)) }
            guard fragment.count <= Self.largestMessage else {
                failure = "the server sent a message over \(Self.largestMessage >> 20) MiB"
                return -1
            }
            if lws_is_final_fragment(wsi) != 0 && lws_remaining_packet_payload(wsi) == 0 {
                inbox.append(fragment)
                fragment = []
            }
        case LWS_CALLBACK_CLIENT_WRITEABLE:
            guard !outbox.isEmpty else { break }
            let message = outbox.removeFirst()
            let pre = CWebSockets_pre()
            var buffer = [UInt8](repeating: 0, count: pre + message.count)
            buffer.replaceSubrange(pre..., with: message)
            let written = buffer.withUnsafeMutableBufferPointer { lws_write(wsi, $0.baseAddress! + pre, message.count, LWS_WRITE_TEXT) }
            guard written >= message.count else {
                failure = "sending on the event channel failed"
                return -1
            }
            if !outbox.isEmpty { lws_callback_on_writable(wsi) }
        case LWS_CALLBACK_CLIENT_CONNECTION_ERROR:
            let said = input.map { String(cString: $0.assumingMemoryBound(to: CChar.self)) } ?? "connection failed"
            failure = scrub(said.isEmpty ? "connection failed" : said)
            self.wsi = nil
        case LWS_CALLBACK_CLIENT_CLOSED, LWS_CALLBACK_CLOSED:
            if failure == nil { failure = "closed by the server" }
            self.wsi = nil
        case LWS_CALLBACK_TIMER:
            timerFired = true
        default:
            break
        }
        return 0
    }

    /// A failure's words without any secret the request carried.
    private func scrub(_ text: String) -> String {
        secrets.filter { !$0.isEmpty }.reduce(text) { $0.replacingOccurrences(of: $1, with: "…") }
    }
}

/// Opens each kind of event channel on its library: WebSocket on libwebsockets, SSE on libcurl.
public enum EventStreams {
    public static let open: EventStreamOpener = { channel in
        switch channel.kind {
        case .webSocket: return WebSocketStream(channel.request)
        case .serverSentEvents: return ServerSentEventStream(channel.request)
        }
    }
}

/// A Server-Sent Events channel on a libcurl multi handle: one long GET whose body is read as it
/// arrives, serviced only on the thread that calls `receive` (`curl_multi_poll` waits for the
/// socket); `interrupt` wakes it from any thread (`curl_multi_wakeup`).
public final class ServerSentEventStream: EventStream, @unchecked Sendable {
    private var multi: UnsafeMutableRawPointer?
    private var easy: UnsafeMutableRawPointer?
    private var headerList: UnsafeMutablePointer<curl_slist>?
    private let where_: String
    // Touched only on the servicing thread (curl's callbacks run inside curl_multi_perform).
    private var parser = ServerSentEvents()
    fileprivate var inbox: [[UInt8]] = []
    fileprivate var status = 0
    private var openedSaid = false
    private var failure: String?
    private let interrupted = Atomic<Bool>(false)

    public init(_ request: HTTPRequest, connectTimeout: Double = 10) {
        _ = CurlTransport.globalInit
        where_ = request.redactedDescription
        multi = curl_multi_init()
        easy = curl_easy_init()
        guard let multi, let easy else {
            failure = "libcurl could not make a handle"
            return
        }
        for h in request.headers { headerList = curl_slist_append(headerList, "\(h.name): \(h.value)") }
        headerList = curl_slist_append(headerList, "Accept: text/event-stream")
        CCurl_setopt_string(easy, CURLOPT_URL, request.url)
        CCurl_setopt_long(easy, CURLOPT_NOSIGNAL, 1)
        CCurl_setopt_long(easy, CURLOPT_CONNECTTIMEOUT_MS, Int(connectTimeout * 1000))
        CCurl_setopt_slist(easy, CURLOPT_HTTPHEADER, headerList)
        CCurl_setopt_string(easy, CURLOPT_USERAGENT, "Labstream/\(LabstreamVersion.current)")
        CCurl_setopt_callback(
            easy, CURLOPT_WRITEFUNCTION,
            { ptr, size, count, user in
                let stream = Unmanaged<ServerSentEventStream>.fromOpaque(user!).takeUnretainedValue()
                return stream.body(UnsafeRawBufferPointer(start: ptr, count: size * count)) ? size * count : 0
            })
        CCurl_setopt_pointer(easy, CURLOPT_WRITEDATA, Unmanaged.passUnretained(self).toOpaque())
        curl_multi_add_handle(multi, easy)
    }

    deinit { close() }

    /// The body as it arrives; false (abort) when the answer is not a 200.
    private func body(_ bytes: UnsafeRawBufferPointer) -> Bool {
        if status == 0, let easy { CCurl_getinfo_long(easy, CURLINFO_RESPONSE_CODE, &status) }
        guard status == 200 else { return false }
        inbox += parser.feed(bytes)
        return true
    }

    public func receive(within seconds: Double) -> EventStreamNews {
        let deadline = Date().addingTimeInterval(seconds)
        while true {
            if status == 200 && !openedSaid {
                openedSaid = true
                return .opened
            }
            if !inbox.isEmpty {
                defer { inbox.removeAll() }
                return .messages(inbox)
            }
            if let failure { return .closed(failure) }
            guard let multi, let easy else { return .closed("the event channel is closed") }
            let left = deadline.timeIntervalSinceNow
            if interrupted.load(ordering: .sequentiallyConsistent) || left <= 0 { return .idle }
            var running: Int32 = 0
            curl_multi_perform(multi, &running)
            if status == 0 { CCurl_getinfo_long(easy, CURLINFO_RESPONSE_CODE, &status) }
            if running == 0 {
                var queued: Int32 = 0
                var result = CURLE_OK
                while let message = curl_multi_info_read(multi, &queued) {
                    if message.pointee.msg == CURLMSG_DONE { result = message.pointee.data.result }
                }
                if status != 0 && status != 200 {
                    failure = "\(where_) answered \(status)"
                } else if result != CURLE_OK {
                    failure = "\(where_): \(String(cString: curl_easy_strerror(result)))"
                } else {
                    failure = "closed by the server"
                }
                continue
            }
            if status == 200 && !openedSaid || !inbox.isEmpty { continue }
            curl_multi_poll(multi, nil, 0, Int32(max(1, min(left, 60) * 1000)), nil)
        }
    }

    /// SSE carries nothing from the client.
    public func send(_ text: String) {}

    public func interrupt() {
        interrupted.store(true, ordering: .sequentiallyConsistent)
        if let multi { curl_multi_wakeup(multi) }
    }

    public func close() {
        if let multi, let easy { curl_multi_remove_handle(multi, easy) }
        if let easy { curl_easy_cleanup(easy) }
        if let multi { curl_multi_cleanup(multi) }
        curl_slist_free_all(headerList)
        multi = nil
        easy = nil
        headerList = nil
        if failure == nil { failure = "the event channel is closed" }
    }
}
