import Foundation
import LabstreamCore

/// Log lines to stderr (the foreground, or the data dir's log file when daemonised, then also
/// to syslog/the journal), one per event, at or above the chosen level. Every line passes
/// `LogRedaction` first: callers never pass a token, and a server that echoes one is masked.
public final class Logger: Sendable {
    let fd: Int32
    public let level: LogLevel
    let toSyslog: Bool
    /// A command's own words (`labstream: …`) rather than a daemon's stamped log lines.
    let command: Bool
    public var verbose: Bool { level >= .debug }

    /// openlog keeps the pointer: it must outlive every call.
    nonisolated(unsafe) static let ident = strdup("labstream")

    public init(fd: Int32 = 2, level: LogLevel = .info, syslog: Bool = false, command: Bool = false) {
        self.fd = fd
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
        text.utf8CString.withUnsafeBufferPointer { p in _ = write(fd, p.baseAddress, p.count - 1) }
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
