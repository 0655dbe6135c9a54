import CLinux
import Foundation
import LabstreamCore
import LabstreamFS
import LabstreamStore
import Synchronization

/// The daemon's control socket, `DATA_DIR/control.sock` (0600; connections from other users are
/// refused). One JSON request per connection, one JSON answer:
///
///     {"op": "status", "paths": ["home/Movies"]}            → {"entries": [FileStatus.wire…], "change": N}
///     {"op": "set", "name": "pin", "value": "1", "paths": […]} → {"files": N}
///     {"op": "sync", "server": "home"?, "full": true?}  → {"progress": "…"} lines, then {"results": […]}
///
/// Paths are relative to the mount root. Errors answer {"error": "…", "code": N}.
enum ControlChannel {
    static func path(_ layout: DataLayout) -> String { layout.root + "/control.sock" }

    // MARK: Daemon side

    final class Server: @unchecked Sendable {
        let fd: Int32
        let socketPath: String
        let fs: FilesystemEngine
        let log: Logger
        typealias SyncHandler = @Sendable (_ server: String?, _ full: Bool, _ progress: @escaping (String) -> Void) -> [[String: Any]]
        let syncHandler = Hook<SyncHandler>()

        /// What `sync` runs: the daemon's own catalog sync and reload.
        func onSync(_ handler: @escaping SyncHandler) { syncHandler.set(handler) }

        init(layout: DataLayout, fs: FilesystemEngine, log: Logger) throws {
            socketPath = ControlChannel.path(layout)
            unlink(socketPath)  // a previous daemon's (the lock says none runs now)
            let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
            guard fd >= 0 else { throw CLIError(ExitCode.osErr, "control socket: \(String(cString: strerror(errno)))") }
            var address = ControlChannel.address(socketPath)
            let old = umask(0o177)  // born 0600: no window in which others could connect
            let bound = withUnsafePointer(to: &address) { p in
                p.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
            }
            umask(old)
            guard bound == 0, chmod(socketPath, 0o600) == 0, listen(fd, 16) == 0 else {
                let why = String(cString: strerror(errno))
                close(fd)
                throw CLIError(ExitCode.osErr, "control socket \(socketPath): \(why)")
            }
            self.fd = fd
            self.fs = fs
            self.log = log
        }

        func start() {
            let thread = Thread { [self] in
                while true {
                    let client = accept(fd, nil, nil)
                    if client < 0 {
                        if errno == EINTR { continue }
                        return  // closed at shutdown
                    }
                    _ = fcntl(client, F_SETFD, FD_CLOEXEC)
                    // Each request on its own thread: a long sync does not hold up a status.
                    let worker = Thread { [self] in
                        serve(client)
                        close(client)
                    }
                    worker.name = "control-request"
                    worker.start()
                }
            }
            thread.name = "control"
            thread.start()
        }

        func stop() {
            shutdown(fd, Int32(SHUT_RDWR))
            close(fd)
            unlink(socketPath)
        }

        func serve(_ client: Int32) {
            let uid = CLinux_peer_uid(client)
            guard uid >= 0 else { return }
            guard uid == Int(geteuid()) || uid == 0 else {
                log.warn("control: refused a connection from uid \(uid)")
                ControlChannel.write(client, ["error": "refused: this daemon belongs to uid \(geteuid())", "code": Int(ExitCode.noPerm)])
                return
            }
            var reader = LineReader(fd: client)
            guard let line = reader.next(),
                let request = (try? JSONSerialization.jsonObject(with: Data(line.utf8))) as? [String: Any],
                let op = request["op"] as? String
            else {
                ControlChannel.write(client, ["error": "malformed request", "code": Int(ExitCode.usage)])
                return
            }
            let paths = request["paths"] as? [String] ?? []
            if op == "sync", let sync = syncHandler.function {
                let results = sync(request["server"] as? String, request["full"] as? Bool ?? false) { step in
                    ControlChannel.write(client, ["progress": step])
                }
                ControlChannel.write(client, ["results": results])
                return
            }
            ControlChannel.write(client, answer(op, paths: paths, request: request))
        }

        func answer(_ op: String, paths: [String], request: [String: Any]) -> [String: Any] {
            var inodes: [(String, UInt64)] = []
            for path in paths {
                let components = path.split(separator: "/").map(String.init)
                guard let ino = components.isEmpty ? FilesystemEngine.rootInode : fs.resolve(components) else {
                    return ["error": "\(path) is not in the mounted catalog", "code": Int(ExitCode.noInput)]
                }
                inodes.append((path, ino))
            }
            switch op {
            case "status":
                // `after`: answer once a download row changed past that point (or `wait` seconds
                // went by), so a follower needs no polling; `change` says where it now stands.
                let change =
                    (request["after"] as? NSNumber).map { after in
                        fs.transfers.waitForChange(after: after.intValue, timeout: min((request["wait"] as? NSNumber)?.doubleValue ?? 1, 10))
                    } ?? fs.transfers.changeCount
                let entries = inodes.flatMap { path, ino in fs.statuses(below: ino, named: path).map(\.wire) }
                return ["entries": entries, "change": change]
            case "set":
                guard let name = request["name"] as? String, let value = request["value"] as? String else {
                    return ["error": "set needs name and value", "code": Int(ExitCode.usage)]
                }
                do {
                    for (_, ino) in inodes { try fs.setxattr(ino, name: FilesystemEngine.xattrPrefix + name, value: Array(value.utf8)) }
                } catch {
                    return ["error": error.userMessage, "code": Int(ExitCode.of(error))]
                }
                log.info("control: \(name)=\(value) on \(paths.count) paths")
                return ["files": inodes.count]
            default:
                return ["error": "unknown request '\(op)'", "code": Int(ExitCode.usage)]
            }
        }
    }

    // MARK: CLI side

    /// Sends `request` to the daemon of `layout`; nil when none listens there. Progress lines
    /// before the answer go to `progress`.
    static func send(_ layout: DataLayout, _ request: [String: Any], progress: (String) -> Void = { _ in }) throws -> [String: Any]? {
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var address = address(path(layout))
        let connected = withUnsafePointer(to: &address) { p in
            p.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
        guard connected == 0 else {
            if errno == EACCES { throw CLIError(ExitCode.noPerm, "the Labstream daemon's control socket \(path(layout)) belongs to another user") }
            return nil
        }
        write(fd, request)
        var reader = LineReader(fd: fd)
        var answer: [String: Any] = [:]
        while true {
            guard let line = reader.next(), let object = (try? JSONSerialization.jsonObject(with: Data(line.utf8))) as? [String: Any] else {
                throw CLIError(ExitCode.software, "the daemon did not answer on \(path(layout)); see its log")
            }
            if let step = object["progress"] as? String { progress(step); continue }
            answer = object
            break
        }
        if let error = answer["error"] as? String { throw CLIError(Int32(answer["code"] as? Int ?? Int(ExitCode.software)), error) }
        return answer
    }

    /// `path` relative to the mount root at `mountpoint`, or nil when it is not below it.
    static func relative(_ path: String, to mountpoint: String) -> String? {
        let absolute = path.hasPrefix("/") ? path : FileManager.default.currentDirectoryPath + "/" + path
        let clean = URL(fileURLWithPath: absolute).standardized.path
        if clean == mountpoint { return "" }
        guard clean.hasPrefix(mountpoint + "/") else { return nil }
        return String(clean.dropFirst(mountpoint.count + 1))
    }

    static func address(_ path: String) -> sockaddr_un {
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            let bytes = Array(path.utf8.prefix(raw.count - 1))
            raw.copyBytes(from: bytes)
            raw[bytes.count] = 0
        }
        return address
    }

    static func write(_ fd: Int32, _ object: [String: Any]) {
        guard var data = try? JSONSerialization.data(withJSONObject: object, options: [.withoutEscapingSlashes]) else { return }
        data.append(10)
        data.withUnsafeBytes { raw in
            var offset = 0
            while offset < raw.count {
                // MSG_NOSIGNAL: a peer that went away is an error here, never SIGPIPE (which would
                // kill the daemon when a client is interrupted, or a client the daemon refused).
                let n = Glibc.send(fd, raw.baseAddress! + offset, raw.count - offset, Int32(MSG_NOSIGNAL))
                if n < 0 && errno == EINTR { continue }
                if n <= 0 { return }
                offset += n
            }
        }
    }

    /// Newline-separated lines from a socket, keeping what was read past each one.
    struct LineReader {
        let fd: Int32
        var pending: [UInt8] = []

        mutating func next(limit: Int = 16 << 20) -> String? {
            var chunk = [UInt8](repeating: 0, count: 65536)
            while !pending.contains(10) && pending.count < limit {
                let n = read(fd, &chunk, chunk.count)
                if n < 0 && errno == EINTR { continue }
                if n <= 0 { break }
                pending += chunk[0..<n]
            }
            guard !pending.isEmpty else { return nil }
            let end = pending.firstIndex(of: 10) ?? pending.count
            let line = String(decoding: pending[..<end], as: UTF8.self)
            pending.removeFirst(min(end + 1, pending.count))
            return line
        }
    }
}
