import Foundation
import LabstreamCore
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

/// A small HTTP/1.1 server on real loopback sockets, one thread per connection, keep-alive.
/// Enough of the protocol for the demo's server and the test emulators; not for production. It
/// has no faults of its own: the emulators make theirs with `stream` bodies (LabstreamFixture's
/// `FaultyFile`), so `labstream demo` carries none.
public final class HTTPServer: Sendable {
    public struct Request: Sendable {
        public var method: String
        public var path: String
        public var query: [String: String]
        /// Lower-cased names.
        public var headers: [String: String]
        public var body: [UInt8]

        public init(method: String, path: String, query: [String: String], headers: [String: String], body: [UInt8]) {
            self.method = method
            self.path = path
            self.query = query
            self.headers = headers
            self.body = body
        }
    }

    public enum Body: Sendable {
        case bytes([UInt8])
        /// `length` bytes of `file` from `offset`.
        case file(path: String, offset: Int64, length: Int64)
        /// A body of `length` bytes (its `Content-Length`) that `write` sends itself, through
        /// `send` (false: the connection is gone). `write` returns whether the connection may
        /// serve another request; false closes it, even mid-body.
        case stream(length: Int64, write: @Sendable (_ send: ([UInt8]) -> Bool) -> Bool)
        /// The connection is handed over after the head (no `Content-Length`): a `101 Switching
        /// Protocols`, or a body that lasts until the connection closes. `run` has the socket
        /// to itself; the connection closes when it returns.
        case upgrade(run: @Sendable (_ socket: Int32) -> Void)
    }

    public struct Response: Sendable {
        public var status: Int
        public var headers: [(String, String)]
        public var body: Body

        public init(status: Int, headers: [(String, String)] = [], body: Body = .bytes([])) {
            self.status = status
            self.headers = headers
            self.body = body
        }

        public static func json(_ text: String, status: Int = 200) -> Response {
            Response(status: status, headers: [("Content-Type", "application/json; charset=utf-8")], body: .bytes(Array(text.utf8)))
        }
    }

    public typealias Handler = @Sendable (Request) -> Response

    public let port: UInt16
    let listenFD: Int32
    let handler: Handler
    let connections = Mutex<Set<Int32>>([])
    let stopped = Atomic<Bool>(false)

    public init(port requested: UInt16 = 0, handler: @escaping Handler) throws {
        self.handler = handler
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw SyscallError(function: "socket", context: "fixture", code: errno) }
        var one: Int32 = 1
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, socklen_t(MemoryLayout<Int32>.size))
        var addr = sockaddr_in()
        addr.sin_family = sa_family_t(AF_INET)
        addr.sin_addr.s_addr = inet_addr("127.0.0.1")
        addr.sin_port = requested.bigEndian
        let bound = withUnsafePointer(to: &addr) { p in
            p.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard bound == 0, listen(fd, 128) == 0 else {
            let code = errno
            close(fd)
            throw SyscallError(function: "bind/listen", context: "127.0.0.1", code: code)
        }
        var len = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &addr) { p in
            p.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &len) }
        }
        port = UInt16(bigEndian: addr.sin_port)
        listenFD = fd
        let thread = Thread { [self] in acceptLoop() }
        thread.name = "fixture-accept"
        thread.start()
    }

    public var baseURL: String { "http://127.0.0.1:\(port)" }

    /// Stops accepting and closes every open connection (a "vanished server").
    public func stop() {
        guard !stopped.exchange(true, ordering: .sequentiallyConsistent) else { return }
        shutdown(listenFD, Int32(SHUT_RDWR))
        close(listenFD)
        for fd in connections.withLock({ $0 }) { shutdown(fd, Int32(SHUT_RDWR)) }
    }

    func acceptLoop() {
        while !stopped.load(ordering: .sequentiallyConsistent) {
            let fd = accept(listenFD, nil, nil)
            if fd < 0 {
                if errno == EINTR { continue }
                return
            }
            var one: Int32 = 1
            setsockopt(fd, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))
            connections.withLock { _ = $0.insert(fd) }
            let thread = Thread { [self] in
                serve(fd)
                connections.withLock { _ = $0.remove(fd) }
                close(fd)
            }
            thread.start()
        }
    }

    func serve(_ fd: Int32) {
        var buffer: [UInt8] = []
        while !stopped.load(ordering: .sequentiallyConsistent) {
            guard let request = readRequest(fd, &buffer) else { return }
            let response = handler(request)
            guard write(response, to: fd, method: request.method) else { return }
            if request.headers["connection"]?.lowercased() == "close" { return }
        }
    }

    func readRequest(_ fd: Int32, _ buffer: inout [UInt8]) -> Request? {
        let terminator: [UInt8] = [13, 10, 13, 10]
        var headerEnd: Int? = nil
        while headerEnd == nil {
            if let r = find(terminator, in: buffer) { headerEnd = r; break }
            guard fill(fd, &buffer), buffer.count < 1 << 20 else { return nil }
        }
        let head = String(decoding: buffer[0..<headerEnd!], as: UTF8.self)
        buffer.removeFirst(headerEnd! + 4)
        var lines = head.split(separator: "\r\n", omittingEmptySubsequences: false).map(String.init)
        let requestLine = lines.removeFirst().split(separator: " ").map(String.init)
        guard requestLine.count >= 2 else { return nil }
        var headers: [String: String] = [:]
        for line in lines {
            guard let colon = line.firstIndex(of: ":") else { continue }
            headers[line[..<colon].lowercased()] = line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)
        }
        let length = Int(headers["content-length"] ?? "0") ?? 0
        while buffer.count < length { guard fill(fd, &buffer) else { return nil } }
        let body = Array(buffer[0..<length])
        buffer.removeFirst(length)
        let target = requestLine[1]
        let pathPart = target.split(separator: "?", maxSplits: 1, omittingEmptySubsequences: false)
        var query: [String: String] = [:]
        if pathPart.count == 2 {
            for pair in pathPart[1].split(separator: "&") {
                let kv = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
                let key = String(kv[0]).removingPercentEncoding ?? String(kv[0])
                let value = kv.count > 1 ? (String(kv[1]).replacingOccurrences(of: "+", with: " ").removingPercentEncoding ?? "") : ""
                query[key] = value
            }
        }
        let path = String(pathPart[0]).removingPercentEncoding ?? String(pathPart[0])
        return Request(method: requestLine[0], path: path, query: query, headers: headers, body: body)
    }

    func fill(_ fd: Int32, _ buffer: inout [UInt8]) -> Bool {
        var chunk = [UInt8](repeating: 0, count: 65536)
        while true {
            let n = chunk.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            if n < 0 && errno == EINTR { continue }
            if n <= 0 { return false }
            buffer.append(contentsOf: chunk[0..<n])
            return true
        }
    }

    func find(_ needle: [UInt8], in hay: [UInt8]) -> Int? {
        guard hay.count >= needle.count else { return nil }
        for i in 0...(hay.count - needle.count) where hay[i] == needle[0] && Array(hay[i..<(i + needle.count)]) == needle {
            return i
        }
        return nil
    }

    func write(_ response: Response, to fd: Int32, method: String) -> Bool {
        let length: Int64
        switch response.body {
        case .bytes(let b): length = Int64(b.count)
        case .file(_, _, let l), .stream(let l, _): length = l
        case .upgrade(let run):
            var head = "HTTP/1.1 \(response.status) \(reason(response.status))\r\n"
            for (k, v) in response.headers { head += "\(k): \(v)\r\n" }
            guard sendAll(fd, Array((head + "\r\n").utf8)) else { return false }
            run(fd)
            return false
        }
        var head = "HTTP/1.1 \(response.status) \(reason(response.status))\r\n"
        for (k, v) in response.headers { head += "\(k): \(v)\r\n" }
        head += "Content-Length: \(length)\r\n\r\n"
        guard sendAll(fd, Array(head.utf8)) else { return false }
        if method == "HEAD" { return true }
        switch response.body {
        case .bytes(let b):
            return sendAll(fd, b)
        case .file(let path, let offset, _):
            let file = open(path, O_RDONLY)
            guard file >= 0 else { return false }
            defer { close(file) }
            var sent: Int64 = 0
            var chunk = [UInt8](repeating: 0, count: 256 * 1024)
            while sent < length {
                let want = Int(min(Int64(chunk.count), length - sent))
                let n = chunk.withUnsafeMutableBytes { pread(file, $0.baseAddress, want, off_t(offset + sent)) }
                guard n > 0 else { return false }
                guard sendAll(fd, Array(chunk[0..<n])) else { return false }
                sent += Int64(n)
            }
            return true
        case .stream(_, let produce):
            return produce { sendAll(fd, $0) }
        case .upgrade:
            return false
        }
    }

    func sendAll(_ fd: Int32, _ bytes: [UInt8]) -> Bool {
        var done = 0
        while done < bytes.count {
            let n = bytes.withUnsafeBytes { send(fd, $0.baseAddress! + done, bytes.count - done, Int32(MSG_NOSIGNAL)) }
            if n < 0 && errno == EINTR { continue }
            if n <= 0 { return false }
            done += n
        }
        return true
    }

    func reason(_ status: Int) -> String {
        switch status {
        case 101: return "Switching Protocols"
        case 200: return "OK"
        case 204: return "No Content"
        case 206: return "Partial Content"
        case 400: return "Bad Request"
        case 401: return "Unauthorized"
        case 403: return "Forbidden"
        case 404: return "Not Found"
        case 416: return "Range Not Satisfiable"
        case 500: return "Internal Server Error"
        case 503: return "Service Unavailable"
        default: return "Status"
        }
    }
}
