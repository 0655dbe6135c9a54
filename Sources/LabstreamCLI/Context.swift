import Foundation
import LabstreamBackends
import LabstreamCore
import LabstreamHTTP
import LabstreamStore

/// Where Labstream keeps things for this invocation, and the loaded configuration.
struct Context {
    let configDir: String
    let dataDir: String
    var configPath: String { configDir + "/labstream.conf" }
    var credentialsPath: String { configDir + "/credentials" }
    var layout: DataLayout { DataLayout(root: dataDir) }
    var credentials: CredentialStore { CredentialStore(path: credentialsPath) }

    static let globalValued: Set<String> = ["--config-dir", "--data-dir", "--log-level"]
    static let globalFlags: Set<String> = ["-v", "--verbose", "-h", "--help"]

    /// `--config-dir`, else `LABSTREAM_CONFIG_DIR`, else `$XDG_CONFIG_HOME/labstream`
    /// (`/etc/labstream` for root); the data dir likewise.
    init(args: Arguments, environment: [String: String] = ProcessInfo.processInfo.environment) {
        let root = geteuid() == 0
        let home = environment["HOME"] ?? "/root"
        configDir =
            args.value("--config-dir") ?? environment["LABSTREAM_CONFIG_DIR"]
            ?? (root ? "/etc/labstream" : (environment["XDG_CONFIG_HOME"] ?? home + "/.config") + "/labstream")
        dataDir =
            args.value("--data-dir") ?? environment["LABSTREAM_DATA_DIR"]
            ?? (root ? "/var/lib/labstream" : (environment["XDG_DATA_HOME"] ?? home + "/.local/share") + "/labstream")
    }

    init(configDir: String, dataDir: String) {
        self.configDir = configDir
        self.dataDir = dataDir
    }

    func loadConfig() throws(CLIError) -> LabstreamConfig {
        guard let data = FileManager.default.contents(atPath: configPath) else { return LabstreamConfig() }
        do {
            return try LabstreamConfig.parse(String(decoding: data, as: UTF8.self))
        } catch {
            throw CLIError(ExitCode.config, "\(configPath): \(error.description). Fix the file (see labstream.conf(5)).")
        }
    }

    func saveConfig(_ config: LabstreamConfig) throws(LabstreamError) {
        try makeDirectories(configDir)
        try AtomicFile.write(config.serialized(), to: configPath, mode: 0o644)
    }

    /// A stable per-install device id for the `Authorization` header.
    func identity() -> ClientIdentity {
        let path = dataDir + "/device-id"
        var id = (FileManager.default.contents(atPath: path)).map { String(decoding: $0, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines) } ?? ""
        if id.isEmpty {
            id = UUID().uuidString.lowercased()
            try? makeDirectories(dataDir)
            try? AtomicFile.write(id + "\n", to: path, mode: 0o600)
        }
        var host = [CChar](repeating: 0, count: 256)
        gethostname(&host, 255)
        let hostname = String(decoding: host.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
        return ClientIdentity(device: hostname, deviceId: id)
    }

    func transport(_ config: LabstreamConfig) -> CurlTransport {
        CurlTransport(options: .init(connectTimeout: config.connectTimeout, stallTimeout: config.fetchTimeout))
    }

    /// A backend for every configured server that has credentials; the rest are reported.
    func backends(_ config: LabstreamConfig, log: Logger) throws(CLIError) -> [any MediaBackend] {
        let creds: [String: CredentialStore.Entry]
        do { creds = try credentials.load() } catch { throw CLIError(error) }
        let transport = transport(config)
        let identity = identity()
        var out: [any MediaBackend] = []
        for server in config.servers {
            guard let entry = creds[server.name] else {
                log.warn("server \(server.name) has no stored credentials; add it again with `labstream server add`")
                continue
            }
            // A rotated secret (a Silo refresh token) is stored before it is used.
            let store = credentials, name = server.name
            let session = ServerSession(
                name: server.name, url: server.url, userId: entry.userId, token: entry.token,
                profileToken: entry.profileToken
            ) { rotated throws(LabstreamError) in
                var updated = entry
                updated.token = rotated
                try store.set(name, updated)
            }
            out.append(BackendRegistry.client(server.kind, session: session, identity: identity, transport: transport))
        }
        return out
    }

    func openIndex() throws(CLIError) -> OfflineIndex {
        do {
            try makeDirectories(dataDir)
            // An index moved aside after damage: its last verified backup takes its place.
            _ = try OfflineIndex.restoreBackupIfMissing(indexPath: layout.indexPath)
            return try OfflineIndex(path: layout.indexPath)
        } catch { throw CLIError(error) }
    }
}

/// A failure with the exit code and the full sentence the user reads.
struct CLIError: Error {
    let code: Int32
    let message: String

    init(_ code: Int32, _ message: String) {
        self.code = code
        self.message = message
    }

    init(_ error: LabstreamError) {
        self.init(ExitCode.of(error), error.userMessage)
    }

    static func noSuchServer(_ name: String) -> CLIError {
        CLIError(ExitCode.noInput, "there is no server named '\(name)'; `labstream server list` shows the configured ones")
    }
}

/// Log lines to stderr (the foreground, or the data dir's log file when daemonised, then also
/// to syslog/the journal), one per event, at or above the chosen level. Every line passes
/// `LogRedaction` first: callers never pass a token, and a server that echoes one is masked.
final class Logger: Sendable {
    let fd: Int32
    let level: LogLevel
    let toSyslog: Bool
    /// A command's own words (`labstream: …`) rather than a daemon's stamped log lines.
    let command: Bool
    var verbose: Bool { level >= .debug }

    /// openlog keeps the pointer: it must outlive every call.
    nonisolated(unsafe) static let ident = strdup("labstream")

    init(fd: Int32 = 2, level: LogLevel = .info, syslog: Bool = false, command: Bool = false) {
        self.fd = fd
        self.level = level
        self.toSyslog = syslog
        self.command = command
        if syslog { openlog(Self.ident, LOG_PID, LOG_DAEMON) }
    }

    /// `-v`/`--verbose` is `debug`; `--log-level LEVEL` otherwise; `info` by default.
    static func level(_ args: Arguments) throws -> LogLevel {
        if args.flag("-v") || args.flag("--verbose") { return .debug }
        guard let text = args.value("--log-level") else { return .info }
        guard let level = LogLevel(text) else { throw UsageError("--log-level takes error, warning, info or debug") }
        return level
    }

    func line(_ level: LogLevel, _ message: String) {
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

    func info(_ m: String) { line(.info, m) }
    func warn(_ m: String) { line(.warning, m) }
    func error(_ m: String) { line(.error, m) }
    func debug(_ m: String) { line(.debug, m) }
}

/// Writes to stdout unbuffered; a line ends in a newline unless `newline` is false (progress
/// redrawn in place).
func printOut(_ text: String, newline: Bool = true) {
    let line = !newline || text.hasSuffix("\n") ? text : text + "\n"
    line.utf8CString.withUnsafeBufferPointer { p in _ = write(1, p.baseAddress, p.count - 1) }
}

/// The sentence a user reads for any error.
func describe(_ error: any Error) -> String {
    switch error {
    case let e as LabstreamError: return e.userMessage
    case let e as CLIError: return e.message
    case let e as UsageError: return e.message
    default: return "\(error)"
    }
}
