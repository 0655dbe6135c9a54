import CLinux
import Foundation
import LabstreamCore
import Synchronization

/// The local HTTP API's listener: HTTP/1.1 over a TCP or unix socket, one request per
/// connection, on threads of its own (never Swift's cooperative pool, which a slow client must
/// not hold). Bounded everywhere: `workers` connections are served at once and `waiting` more
/// wait; past that a connection is answered 503 at once. A head is at most
/// `HTTPRequestHead.maxHeadBytes` (431), a body at most `maxBodyBytes` (413, refused before it
/// is read), and a client that stops sending or reading is dropped after `timeout` seconds.
final class HTTPListener: @unchecked Sendable {
    struct Request: Sendable {
        var head: HTTPRequestHead
        var body: [UInt8]
        var peer: APIAccess.Peer
    }

    struct Response: Sendable {
        var status: Int
        var headers: [(String, String)] = []
        var body: [UInt8] = []

        static func problem(_ p: HTTPProblem, headers: [(String, String)] = []) -> Response {
            let object: [String: Any] = [
                "type": "about:blank", "title": HTTPProblem.title(p.status), "status": p.status, "detail": p.detail, "exit_code": Int(p.exitCode)
            ]
            let data = (try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys, .withoutEscapingSlashes])) ?? Data()
            return Response(status: p.status, headers: [("Content-Type", "application/problem+json")] + headers, body: Array(data))
        }
    }

    typealias Handler = @Sendable (Request) -> Response

    static let workers = 8
    static let waiting = 32
    static let timeout = 10

    let fd: Int32
    let listen: HTTPSettings.Listen
    /// Where it listens, with the port the kernel chose for `:0`.
    let address: String
    let log: Logger
    let queue = Mutex<[Int32]>([])
    let ready = DispatchSemaphore(value: 0)
    let stopped = Atomic<Bool>(false)

    init(_ settings: HTTPSettings, log: Logger) throws(CLIError) {
        self.listen = settings.listen
        self.log = log
        func failed(_ what: String) -> CLIError { CLIError(ExitCode.osErr, "the HTTP API cannot listen on \(settings.listen): \(what)") }
        switch settings.listen {
        case .tcp(let host, let port):
            let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
            guard fd >= 0 else { throw failed(String(cString: strerror(errno))) }
            var one: Int32 = 1
            setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, socklen_t(MemoryLayout<Int32>.size))
            var addr = sockaddr_in()
            addr.sin_family = sa_family_t(AF_INET)
            addr.sin_addr.s_addr = inet_addr(host)
            addr.sin_port = port.bigEndian
            let bound = withUnsafePointer(to: &addr) { p in
                p.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
            }
            guard bound == 0, Glibc.listen(fd, 64) == 0 else {
                let why = String(cString: strerror(errno))
                close(fd)
                throw failed(why)
            }
            var actual = sockaddr_in()
            var length = socklen_t(MemoryLayout<sockaddr_in>.size)
            _ = withUnsafeMutablePointer(to: &actual) { p in p.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) } }
            self.fd = fd
            address = "\(host):\(UInt16(bigEndian: actual.sin_port))"
        case .unix(let path):
            let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
            guard fd >= 0 else { throw failed(String(cString: strerror(errno))) }
            // Only a socket is replaced: a file of another kind at the path is a mistake to say.
            var st = stat()
            if lstat(path, &st) == 0 {
                guard st.st_mode & S_IFMT == S_IFSOCK else {
                    close(fd)
                    throw failed("\(path) exists and is not a socket")
                }
                unlink(path)
            }
            var address = ControlChannel.address(path)
            // Anyone may connect: the kernel names each caller and `APIAccess` decides.
            let old = umask(0o111)
            let bound = withUnsafePointer(to: &address) { p in
                p.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
            }
            umask(old)
            guard bound == 0, Glibc.listen(fd, 64) == 0 else {
                let why = String(cString: strerror(errno))
                close(fd)
                throw failed(why)
            }
            self.fd = fd
            self.address = "unix:\(path)"
        }
    }

    /// Starts the workers and the acceptor; `handler` answers each request on a worker.
    func start(answer handler: @escaping Handler) {
        for n in 0..<Self.workers {
            let worker = Thread { [self] in
                while true {
                    ready.wait()
                    guard !stopped.load(ordering: .acquiring) else { return }
                    guard let client = queue.withLock({ $0.isEmpty ? nil : $0.removeFirst() }) else { continue }
                    serve(client, handler)
                    close(client)
                }
            }
            worker.name = "http-\(n)"
            worker.start()
        }
        let acceptor = Thread { [self] in
            while true {
                let client = accept(fd, nil, nil)
                if client < 0 {
                    if errno == EINTR || errno == ECONNABORTED || errno == EMFILE || errno == ENFILE {
                        if stopped.load(ordering: .acquiring) { return }
                        continue
                    }
                    return  // closed at stop
                }
                _ = fcntl(client, F_SETFD, FD_CLOEXEC)
                var limit = timeval(tv_sec: Self.timeout, tv_usec: 0)
                setsockopt(client, SOL_SOCKET, SO_RCVTIMEO, &limit, socklen_t(MemoryLayout<timeval>.size))
                setsockopt(client, SOL_SOCKET, SO_SNDTIMEO, &limit, socklen_t(MemoryLayout<timeval>.size))
                let queued = queue.withLock { q in
                    guard q.count < Self.waiting else { return false }
                    q.append(client)
                    return true
                }
                if queued {
                    ready.signal()
                } else {
                    send(client, .problem(HTTPProblem(status: 503, exitCode: ExitCode.tempFail, detail: "too many requests at once; try again")))
                    close(client)
                }
            }
        }
        acceptor.name = "http-accept"
        acceptor.start()
    }

    func stop() {
        stopped.store(true, ordering: .releasing)
        shutdown(fd, Int32(SHUT_RDWR))
        close(fd)
        if case .unix(let path) = listen { unlink(path) }
        for _ in 0..<Self.workers { ready.signal() }
        for client in queue.withLock({ q in
            defer { q.removeAll() }; return q
        }) { close(client) }
    }

    /// Reads one request, answers it.
    func serve(_ client: Int32, _ handler: Handler) {
        let peer: APIAccess.Peer
        if case .unix = listen {
            guard let caller = Caller.peer(of: client) else { return }
            peer = .unix(caller)
        } else {
            peer = .tcp
        }
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 4096)
        // The whole request within `timeout`, not each read: a client trickling a byte at a
        // time would otherwise hold a worker for as long as it likes.
        let deadline = Date().addingTimeInterval(Double(Self.timeout))
        func more() -> Bool? {
            guard Date() < deadline else { return nil }
            let n = read(client, &chunk, chunk.count)
            if n < 0 && errno == EINTR { return more() }
            if n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK) { return nil }  // timed out
            guard n > 0 else { return false }
            bytes += chunk[0..<n]
            return true
        }
        var parsed = HTTPRequestHead.parse(bytes)
        while case .incomplete = parsed {
            switch more() {
            case true?: parsed = HTTPRequestHead.parse(bytes)
            case nil:
                send(client, .problem(HTTPProblem(status: 408, exitCode: ExitCode.tempFail, detail: "the request did not arrive within \(Self.timeout) s")))
                return
            case false?: return
            }
        }
        switch parsed {
        case .incomplete: return
        case .refused(let status, let why):
            send(client, .problem(HTTPProblem(status: status, exitCode: ExitCode.usage, detail: why)))
        case .head(let head, let bodyStart):
            let length: Int
            switch head.bodyLength {
            case .success(let n): length = n
            case .failure(let problem):
                send(client, .problem(problem))
                return
            }
            while bytes.count - bodyStart < length {
                switch more() {
                case true?: continue
                case nil:
                    send(client, .problem(HTTPProblem(status: 408, exitCode: ExitCode.tempFail, detail: "the body did not arrive within \(Self.timeout) s")))
                    return
                case false?: return
                }
            }
            var response = handler(Request(head: head, body: Array(bytes[bodyStart..<(bodyStart + length)]), peer: peer))
            if head.method == "HEAD" {
                response.headers.append(("Content-Length", String(response.body.count)))
                response.body = []
                send(client, response, length: false)
            } else {
                send(client, response)
            }
        }
    }

    func send(_ client: Int32, _ response: Response, length: Bool = true) {
        var head = "HTTP/1.1 \(response.status) \(response.status < 300 ? "OK" : HTTPProblem.title(response.status))\r\n"
        for (name, value) in response.headers { head += "\(name): \(value)\r\n" }
        if length { head += "Content-Length: \(response.body.count)\r\n" }
        head += "Connection: close\r\nCache-Control: no-store\r\nX-Content-Type-Options: nosniff\r\n\r\n"
        let out = Array(head.utf8) + response.body
        // A client that went away gets nothing more; the connection is closed by the caller.
        out.withUnsafeBytes { raw in _ = try? sendAll(client, raw, context: "an HTTP answer") }
    }
}
