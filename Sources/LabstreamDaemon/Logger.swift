import Foundation
import LabstreamCore
import Synchronization

/// Log lines to stderr (the foreground, or the data dir's log file when daemonised, then also
/// to syslog/the journal), one per event, at or above the chosen level. Every line passes
/// `LogRedaction` first: callers never pass a token, and a server that echoes one is masked.
public final class Logger: Sendable {
    let fd: Int32
    public let level: LogLevel
    let toSyslog: Bool
    /// A command's own words (`labstream: …`) rather than a daemon's stamped log lines.
    let command: Bool
    /// The log file `fd` writes to, rotated by size (a daemonised daemon's `labstream.log`).
    let rotating: RotatingLogFile?
    public var verbose: Bool { level >= .debug }

    /// openlog keeps the pointer: it must outlive every call.
    nonisolated(unsafe) static let ident = strdup("labstream")

    public init(fd: Int32 = 2, level: LogLevel = .info, syslog: Bool = false, command: Bool = false, rotating: RotatingLogFile? = nil) {
        self.fd = fd
        self.rotating = rotating
        self.level = level
        self.toSyslog = syslog
        self.command = command
        if syslog { openlog(Self.ident, LOG_PID, LOG_DAEMON) }
    }

    public func line(_ level: LogLevel, _ message: String) {
        guard level <= self.level else { return }
        let clean = LogRedaction.redact(message)
        let text =
            command
            ? "labstream: \(level <= .warning ? level.name + ": " : "")\(clean)\n"
            : "\(ISO8601DateFormatter().string(from: Date())) labstream[\(getpid())] \(level.name): \(clean)\n"
        if let rotating {
            rotating.write(text)
        } else {
            text.utf8CString.withUnsafeBufferPointer { p in _ = write(fd, p.baseAddress, p.count - 1) }
        }
        if toSyslog {
            let priority: Int32 = [LOG_ERR, LOG_WARNING, LOG_INFO, LOG_DEBUG][level.rawValue]
            withVaList([clean]) { vsyslog(priority, "%s", $0) }
        }
    }

    public func info(_ m: String) { line(.info, m) }
    public func warn(_ m: String) { line(.warning, m) }
    public func error(_ m: String) { line(.error, m) }
    public func debug(_ m: String) { line(.debug, m) }
}

/// A log file bounded by size (the daemonised daemon's `labstream.log`). Each line is written
/// whole under one lock; a line that would pass the cap first rotates the file (`LogRotation`).
/// With `standardStreams` the file is the process's stdout and stderr, which the starter opened
/// on it, and a new file takes their place: whatever else writes there (the runtime's last
/// words, a library's warning) lands in the current file too.
public final class RotatingLogFile: Sendable {
    let path: String
    let rotation: LogRotation
    let standardStreams: Bool
    private let fd: Mutex<Int32>

    public init(path: String, rotation: LogRotation, standardStreams: Bool) {
        self.path = path
        self.rotation = rotation
        self.standardStreams = standardStreams
        fd = Mutex(standardStreams ? 2 : open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0o600))
    }

    deinit { fd.withLock { if !standardStreams && $0 >= 0 { close($0) } } }

    public func write(_ text: String) {
        let bytes = Array(text.utf8)
        fd.withLock { fd in
            // The file's own size, not a count of ours: other writers to stderr add to it too.
            var st = stat()
            let size = fstat(fd, &st) == 0 ? Int64(st.st_size) : 0
            if rotation.rotatesBefore(lineBytes: bytes.count, currentSize: size) { rotate(&fd) }
            var done = 0
            while done < bytes.count {
                let n = bytes[done...].withUnsafeBytes { Foundation.write(fd, $0.baseAddress, $0.count) }
                if n < 0 && errno == EINTR { continue }
                if n <= 0 { break }
                done += n
            }
        }
    }

    /// Call with the lock held. A rotation that cannot open the new file keeps writing to the
    /// old one (bigger than asked, but no line lost).
    private func rotate(_ fd: inout Int32) {
        let plan = rotation.renames(of: path)
        if let gone = plan.unlink { unlink(gone) }
        for move in plan.moves { rename(move.from, move.to) }
        let new = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0o600)
        guard new >= 0 else { return }
        if standardStreams {
            dup2(new, 1)
            dup2(new, 2)
            close(new)
        } else {
            if fd >= 0 { close(fd) }
            fd = new
        }
    }
}
