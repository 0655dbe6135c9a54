import CLinux
import Foundation
import LabstreamBackends
import LabstreamCore
import LabstreamDaemon
import LabstreamFixture
import LabstreamTestSupport
import Testing

/// A real daemon in-process (index, transfers, tree; no mount) against an emulated Jellyfin
/// answered in memory, with its HTTP API on `http`. The in-memory server has no event channel:
/// opening one is refused, so it shows as lost.
final class HTTPDaemon: @unchecked Sendable {
    let scratch: Scratch
    let context: Context
    let daemon: Daemon
    let fixture: ServerFixture
    let logFD: Int32
    var address: String { daemon.httpAddress ?? "" }
    var port: UInt16 { UInt16(address.split(separator: ":").last ?? "") ?? 0 }
    var token: String { (try? String(contentsOfFile: context.dataDir + "/http.token", encoding: .utf8))?.trimmingCharacters(in: .whitespacesAndNewlines) ?? "" }

    init(
        _ name: String, http: String, catalog: (String) -> FixtureCatalog = testCatalog(in:), configure: (inout LabstreamConfig) -> Void = { _ in }
    ) throws {
        scratch = Scratch(name)
        let media = scratch.sub("media")
        fixture = try ServerFixture(catalog: catalog(media), userName: "demo", password: "pw")
        let transport = InMemoryTransport(serving: fixture)
        let identity = ClientIdentity(device: "t", deviceId: "t")
        let url = "http://jellyfin.test:8096"
        let (_, _, login) = try MediaBrowserClient.login(url: url, user: "demo", password: "pw", identity: identity, transport: transport)
        let client = MediaBrowserClient(
            session: ServerSession(name: "test", url: url, userId: login.userId, token: login.token), identity: identity, transport: transport)
        context = Context(configDir: scratch.sub("config"), dataDir: scratch.sub("data"))
        try FileManager.default.createDirectory(atPath: context.configDir, withIntermediateDirectories: true)
        var config = LabstreamConfig()
        config.servers = [.init(name: "test", kind: .jellyfin, url: url, user: "demo")]
        config.playbackProbe = false
        configure(&config)
        // Written as a person would write it: the [http] section goes through the parser.
        try (config.serialized() + "\n[http]\nlisten = \(http)\n").write(toFile: context.configPath, atomically: true, encoding: .utf8)
        logFD = open(scratch.path + "/daemon.log", O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0o600)
        daemon = try Daemon(
            context: context, options: MountOptions(), log: Logger(fd: logFD), backends: { _, _ in [client] }, events: { _ in RefusedEventStream() })
    }

    let stopped = LockedBox(false)

    func stop() {
        var first = false
        stopped.update {
            first = !$0; $0 = true
        }
        guard first else { return }
        daemon.stop()
        close(logFD)
    }

    var log: String { (try? String(contentsOfFile: scratch.path + "/daemon.log", encoding: .utf8)) ?? "" }
}

/// An event channel whose server refuses it: the daemon shows it lost, the same on every
/// machine (no name lookup of the emulated server's host).
final class RefusedEventStream: EventStream {
    func receive(within seconds: Double) -> EventStreamNews { .closed("connection refused") }
    func send(_ text: String) {}
    func interrupt() {}
    func close() {}
}

struct HTTPAnswer {
    var status: Int
    var headers: [String: String]
    var body: [UInt8]
    var text: String { String(decoding: body, as: UTF8.self) }
    var json: [String: Any] { (try? JSONSerialization.jsonObject(with: Data(body))) as? [String: Any] ?? [:] }
}

/// Connects to `port` on 127.0.0.1 (or the unix socket at `unixPath`), sends `raw`, reads the
/// answer until the server closes (it answers one request per connection).
func exchange(port: UInt16 = 0, unixPath: String? = nil, _ raw: [UInt8]) throws -> HTTPAnswer {
    let fd: Int32
    if let unixPath {
        fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            let bytes = Array(unixPath.utf8)
            raw.copyBytes(from: bytes)
            raw[bytes.count] = 0
        }
        let ok = withUnsafePointer(to: &address) { p in
            p.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
        guard ok == 0 else { throw SyscallError(function: "connect", context: unixPath, code: errno) }
    } else {
        fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var addr = sockaddr_in()
        addr.sin_family = sa_family_t(AF_INET)
        addr.sin_addr.s_addr = inet_addr("127.0.0.1")
        addr.sin_port = port.bigEndian
        let ok = withUnsafePointer(to: &addr) { p in
            p.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard ok == 0 else { throw SyscallError(function: "connect", context: "127.0.0.1:\(port)", code: errno) }
    }
    defer { close(fd) }
    var limit = timeval(tv_sec: 30, tv_usec: 0)
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &limit, socklen_t(MemoryLayout<timeval>.size))
    // The server may answer (413, 431) and close before all of a large request is sent.
    _ = raw.withUnsafeBytes { p in send(fd, p.baseAddress!, p.count, Int32(MSG_NOSIGNAL)) }
    var out: [UInt8] = []
    var chunk = [UInt8](repeating: 0, count: 65536)
    while true {
        let n = read(fd, &chunk, chunk.count)
        if n <= 0 { break }
        out += chunk[0..<n]
    }
    guard let end = (0..<max(out.count - 3, 0)).first(where: { out[$0] == 13 && out[$0 + 1] == 10 && out[$0 + 2] == 13 && out[$0 + 3] == 10 }) else {
        return HTTPAnswer(status: 0, headers: [:], body: out)
    }
    let lines = String(decoding: out[..<end], as: UTF8.self).components(separatedBy: "\r\n")
    var headers: [String: String] = [:]
    for line in lines.dropFirst() {
        if let colon = line.firstIndex(of: ":") {
            headers[line[..<colon].lowercased()] = line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)
        }
    }
    let status = Int(lines[0].split(separator: " ").dropFirst().first ?? "") ?? 0
    return HTTPAnswer(status: status, headers: headers, body: Array(out[(end + 4)...]))
}

/// One request as bytes.
func request(_ method: String, _ target: String, token: String? = nil, json body: String? = nil, headers extra: [String] = []) -> [UInt8] {
    var head = "\(method) \(target) HTTP/1.1\r\nHost: 127.0.0.1\r\n"
    if let token { head += "Authorization: Bearer \(token)\r\n" }
    if let body { head += "Content-Type: application/json\r\nContent-Length: \(body.utf8.count)\r\n" }
    for h in extra { head += h + "\r\n" }
    return Array((head + "\r\n" + (body ?? "")).utf8)
}
