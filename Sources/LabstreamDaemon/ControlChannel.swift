import CLinux
import Foundation
import LabstreamCore
import LabstreamStore
import Synchronization

/// The daemon's control socket, `DATA_DIR/control.sock`: 0600, or 0660 in `[access]
/// control_group` so its members can connect. It answers only peers (SO_PEERCRED) the access
/// policy lets change the mount — the control socket is for them; anyone else reads through the
/// mount, as its options allow. One request per connection, one JSON line each way: a `DaemonRequest`, then
/// `DaemonResponse.progress` lines (a sync's steps) and one other `DaemonResponse`.
public enum ControlChannel {
    public static func path(_ layout: DataLayout) -> String { layout.root + "/control.sock" }

    // MARK: Daemon side

    final class Server: @unchecked Sendable {
        let fd: Int32
        let socketPath: String
        let log: Logger
        typealias Handler = @Sendable (DaemonRequest, Caller, _ progress: @escaping (String) -> Void) -> DaemonResponse
        let handle: Handler

        let policy: Mutex<AccessPolicy>

        init(layout: DataLayout, log: Logger, access: AccessPolicy, handle: @escaping Handler) throws(CLIError) {
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
            // Then opened to the control group, once it belongs to it.
            guard bound == 0, listen(fd, 16) == 0 else {
                let why = String(cString: strerror(errno))
                close(fd)
                throw CLIError(ExitCode.osErr, "control socket \(socketPath): \(why)")
            }
            self.fd = fd
            self.log = log
            self.policy = Mutex(access)
            self.handle = handle
            share(access)
        }

        /// Who may use the socket now (a SIGHUP may name another control group).
        var access: AccessPolicy { policy.withLock { $0 } }

        /// Takes `access` and opens the socket to its control group (0660 in it), or closes it to
        /// the owner (0600). A daemon's user outside the group cannot give it the socket: it stays
        /// 0600, and members' commands go through the mount's attributes.
        func share(_ access: AccessPolicy) {
            policy.withLock { $0 = access }
            if let group = access.controlGroup?.gid, chown(socketPath, uid_t.max, group) != 0 {
                log.warn(
                    "control socket \(socketPath) stays 0600 (\(String(cString: strerror(errno)))): the daemon's user must be in the control group to share it; its members' commands go through the mount's attributes"
                )
                chmod(socketPath, mode_t(DataDirModes(shared: false).socket))
                return
            }
            chmod(socketPath, mode_t(DataDirModes(access).socket))
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
            guard let caller = Caller.peer(of: client) else { return }
            if let refused = access.refusal(caller) {
                log.warn("control: refused a connection from uid \(caller.uid): \(refused.code.rawValue)")
                ControlChannel.write(client, DaemonResponse.failure(code: ExitCode.noPerm, message: refused.sentence))
                return
            }
            var reader = LineReader(fd: client)
            guard let line = reader.next(), let request = try? JSONDecoder().decode(DaemonRequest.self, from: Data(line.utf8)) else {
                ControlChannel.write(client, DaemonResponse.failure(code: ExitCode.usage, message: "malformed request"))
                return
            }
            ControlChannel.write(client, handle(request, caller) { step in ControlChannel.write(client, DaemonResponse.progress(step)) })
        }
    }

    // MARK: CLI side

    /// Sends `request` to the daemon of `layout` and returns its answer; nil when no daemon
    /// listens there. Progress lines before the answer go to `progress`; a failure is thrown.
    /// A socket closed to this user is said, or with `orNilWhenClosed` answered nil: a
    /// command with another way in (the mount's attributes) takes it, where the access policy
    /// answers the same way.
    public static func send(
        _ layout: DataLayout, _ request: DaemonRequest, progress: (String) -> Void = { _ in }, orNilWhenClosed: Bool = false
    ) throws(CLIError) -> DaemonResponse? {
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var address = address(path(layout))
        let connected = withUnsafePointer(to: &address) { p in
            p.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
        guard connected == 0 else {
            if errno == EACCES && !orNilWhenClosed {
                throw CLIError(
                    ExitCode.noPerm,
                    "the Labstream daemon's control socket \(path(layout)) is not open to you (uid \(geteuid())): it is for the daemon's user, root and the members of its [access] control_group (labstream.conf); ask the mount's owner to add you to that group"
                )
            }
            return nil
        }
        write(fd, request)
        var reader = LineReader(fd: fd)
        while true {
            guard let line = reader.next(), let answer = try? JSONDecoder().decode(DaemonResponse.self, from: Data(line.utf8)) else {
                throw CLIError(ExitCode.software, "the daemon did not answer on \(path(layout)); see its log")
            }
            switch answer {
            case .progress(let step): progress(step)
            case .failure(let code, let message): throw CLIError(code, message)
            default: return answer
            }
        }
    }

    /// `path` relative to the mount root at `mountpoint`, or nil when it is not below it.
    public static func relative(_ path: String, to mountpoint: String) -> String? {
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

    static func write(_ fd: Int32, _ value: some Encodable) {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.withoutEscapingSlashes]
        guard var data = try? encoder.encode(value) else { return }
        data.append(10)
        // A peer that went away (an interrupted client, one the daemon refused) gets nothing more.
        data.withUnsafeBytes { raw in _ = try? sendAll(fd, raw, context: "the control socket") }
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
