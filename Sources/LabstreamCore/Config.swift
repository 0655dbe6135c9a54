/// `labstream.conf`: a small INI-style file. See labstream.conf(5).
///
///     [server "home"]
///     type = jellyfin
///     url = http://media.local:8096
///     user = alice
///
///     [cache]
///     segment_size = 16M
public struct LabstreamConfig: Sendable, Hashable {
    public struct Server: Sendable, Hashable {
        public var name: String
        public var kind: BackendKind
        public var url: String
        public var user: String?
        /// What `labstream pin` fetches from this server unless told otherwise.
        public var quality: Quality = .original
        /// Per library (`quality.Movies = 10mbps`, the library's folder name), over `quality`.
        public var libraryQualities: [String: Quality] = [:]
        /// `max_size` in the server's section: a budget for its copies alone (0: none).
        public var maxSize: Int64 = 0

        public init(name: String, kind: BackendKind, url: String, user: String?) {
            self.name = name
            self.kind = kind
            self.url = url
            self.user = user
        }

        /// The command that signs in to this server again (a refused sign-in says it).
        public var signInAgain: String { "labstream server add \(kind.rawValue) \(name) --url \(url)" }
    }

    public var servers: [Server] = []
    public var sizes: TransferSizes = .default
    /// How long a read waits on the network before it fails with EIO, in seconds.
    public var fetchTimeout: Double = 30
    /// How long a connection attempt may take, in seconds: also how long a read of bytes that
    /// are not stored waits before failing when a server has just vanished.
    public var connectTimeout: Double = 2
    /// The storage budget over everything stored (0: none) and the free-space floor on the data
    /// dir's disk, in bytes: both hold for pinned fills and reads (`StorageBudget`).
    public var maxCacheSize: Int64 = 0
    public var minFree: Int64 = StorageBudget.defaultMinFree

    /// The budget the engine keeps, per server too.
    public var budget: StorageBudget {
        StorageBudget(maxSize: maxCacheSize, minFree: minFree, serverMaxSize: Dictionary(servers.map { ($0.name, $0.maxSize) }) { a, _ in a })
    }
    public var playbackProbe = true
    /// What appears beside the media: with `off`, only the media files (no `.nfo`).
    public var sideAssets: SideAssets = .all
    public enum SideAssets: String, Sendable, Hashable, CaseIterable { case all, pinned, off }
    /// Pinned files filled at once, and segment requests in flight per file.
    /// Bytes per second for all transfers together; 0 is unlimited.
    public var rateLimit: Int64 = 0
    /// Seconds between full catalog refreshes while mounted; 0 turns them off.
    public var refreshInterval: Double = 900
    public var maxConcurrentFiles = 3
    public var connectionsPerFile = 2
    /// Range fetches on the wire at once, reads and fills together (the engine's fetch pool).
    public var fetchThreads = LabstreamConfig.defaultFetchThreads
    public static let defaultFetchThreads = 16
    /// `[daemon]`: how large the daemon's log file grows and how many rotated ones are kept.
    public var logRotation: LogRotation = .default
    /// `[daemon]`: the commands run (argv, no shell) when a pinned file finishes or fails for
    /// good, and how long one may run before it is killed, in seconds.
    public var onComplete: [String]?
    public var onFailed: [String]?
    public var hookTimeout: Double = 60
    /// `[access] control_group`: the group whose members may change what the mount holds, as
    /// its daemon's user and root may (`AccessPolicy`); nil: only those two.
    public var controlGroup: String?
    /// `[http]`: the local HTTP API and status page; nil (no section) is off.
    public var http: HTTPSettings?

    public init() {}

    public func server(named name: String) -> Server? { servers.first { $0.name == name } }

    /// What a pin fetches by default, keyed `SERVER` and `SERVER/LIBRARY` (the library's folder).
    public var qualities: [String: Quality] {
        var out: [String: Quality] = [:]
        for s in servers {
            out[s.name] = s.quality
            for (library, q) in s.libraryQualities { out[s.name + "/" + library] = q }
        }
        return out
    }

    public struct ParseError: Error, Sendable, Equatable, CustomStringConvertible {
        public let line: Int
        public let message: String
        public var description: String { "labstream.conf line \(line): \(message)" }
    }

    public static func parse(_ text: String) throws(ParseError) -> LabstreamConfig {
        var config = LabstreamConfig()
        enum Section { case none, server(Int), cache, daemon, access, http }
        var section = Section.none
        var typed = Set<Int>()  // servers whose section has a `type` line
        for (index, rawLine) in text.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
            let lineNo = index + 1
            let line = rawLine.trimmingSpaces
            if line.isEmpty || line.hasPrefix("#") || line.hasPrefix(";") { continue }
            if line.hasPrefix("[") {
                guard line.hasSuffix("]") else { throw ParseError(line: lineNo, message: "section header is missing its closing ']'") }
                let inner = String(line.dropFirst().dropLast()).trimmingSpaces
                if inner == "cache" {
                    section = .cache
                } else if inner == "daemon" {
                    section = .daemon
                } else if inner == "access" {
                    section = .access
                } else if inner == "http" {
                    section = .http
                } else if inner.hasPrefix("server") {
                    let rest = String(inner.dropFirst("server".count)).trimmingSpaces
                    guard rest.count >= 2, rest.hasPrefix("\""), rest.hasSuffix("\"") else {
                        throw ParseError(line: lineNo, message: "write a server section as [server \"NAME\"]")
                    }
                    let name = String(rest.dropFirst().dropLast())
                    if let problem = validateServerName(name) { throw ParseError(line: lineNo, message: problem) }
                    if config.server(named: name) != nil { throw ParseError(line: lineNo, message: "server \"\(name)\" is defined twice") }
                    config.servers.append(Server(name: name, kind: .jellyfin, url: "", user: nil))  // its `type` line says which
                    section = .server(config.servers.count - 1)
                } else {
                    throw ParseError(line: lineNo, message: "unknown section [\(inner)]; expected [server \"NAME\"], [cache], [daemon], [access] or [http]")
                }
                continue
            }
            guard let eq = line.firstIndex(of: "=") else {
                throw ParseError(line: lineNo, message: "expected 'key = value'")
            }
            let key = String(line[..<eq]).trimmingSpaces
            let value = String(line[line.index(after: eq)...]).trimmingSpaces
            switch section {
            case .none:
                throw ParseError(line: lineNo, message: "'\(key)' is outside any section")
            case .server(let i):
                switch key {
                case "type":
                    guard let kind = BackendKind(named: value) else {
                        throw ParseError(line: lineNo, message: "unsupported server type '\(value)'; supported: \(BackendKind.spellings)")
                    }
                    config.servers[i].kind = kind
                    typed.insert(i)
                case "url": config.servers[i].url = value
                case "max_size": config.servers[i].maxSize = try size(value, line: lineNo)
                case "user": config.servers[i].user = value.isEmpty ? nil : value
                case "quality":
                    guard let q = Quality(value) else {
                        throw ParseError(line: lineNo, message: "quality must be \(Quality.spellings)")
                    }
                    config.servers[i].quality = q
                case let k where k.hasPrefix("quality.") && k.count > "quality.".count:
                    guard let q = Quality(value) else {
                        throw ParseError(line: lineNo, message: "\(k) must be \(Quality.spellings)")
                    }
                    config.servers[i].libraryQualities[String(k.dropFirst("quality.".count))] = q
                case "token", "password", "access_token", "api_key":
                    throw ParseError(
                        line: lineNo, message: "secrets do not belong in labstream.conf; remove '\(key)' and use `labstream server add … --token-stdin`")
                default: throw ParseError(line: lineNo, message: "unknown server key '\(key)'")
                }
            case .cache:
                switch key {
                case "segment_size":
                    let v = try size(value, line: lineNo)
                    guard v >= TransferSizes.mebibyte, v <= 512 * TransferSizes.mebibyte else {
                        throw ParseError(line: lineNo, message: "segment_size must be between 1M and 512M")
                    }
                    config.sizes.segmentSize = v
                case "read_chunk":
                    let v = try size(value, line: lineNo)
                    guard v >= 4096, v <= 64 * TransferSizes.mebibyte else { throw ParseError(line: lineNo, message: "read_chunk must be between 4K and 64M") }
                    config.sizes.readChunk = v
                case "read_ahead_max":
                    config.sizes.readAheadMax = try size(value, line: lineNo)
                case "max_concurrent_files", "connections_per_file":
                    guard let v = Int(value), (1...16).contains(v) else {
                        throw ParseError(line: lineNo, message: "\(key) must be a whole number from 1 to 16")
                    }
                    if key == "max_concurrent_files" { config.maxConcurrentFiles = v } else { config.connectionsPerFile = v }
                case "fetch_threads":
                    guard let v = Int(value), (1...64).contains(v) else {
                        throw ParseError(line: lineNo, message: "fetch_threads must be a whole number from 1 to 64")
                    }
                    config.fetchThreads = v
                case "refresh_interval":
                    guard let v = Double(value), v >= 0 else {
                        throw ParseError(line: lineNo, message: "refresh_interval must be a number of seconds (0: never)")
                    }
                    config.refreshInterval = v
                case "rate_limit":
                    config.rateLimit = try size(value, line: lineNo)
                case "playback_probe":
                    guard value == "yes" || value == "no" else { throw ParseError(line: lineNo, message: "playback_probe must be yes or no") }
                    config.playbackProbe = value == "yes"
                case "side_assets":
                    guard let v = SideAssets(rawValue: value) else { throw ParseError(line: lineNo, message: "side_assets must be all, pinned or off") }
                    config.sideAssets = v
                case "max_size":
                    config.maxCacheSize = try size(value, line: lineNo)
                case "min_free":
                    config.minFree = try size(value, line: lineNo)
                case "fetch_timeout":
                    guard let v = Double(value), v > 0 else { throw ParseError(line: lineNo, message: "fetch_timeout must be a positive number of seconds") }
                    config.fetchTimeout = v
                case "connect_timeout":
                    guard let v = Double(value), v > 0 else { throw ParseError(line: lineNo, message: "connect_timeout must be a positive number of seconds") }
                    config.connectTimeout = v
                default: throw ParseError(line: lineNo, message: "unknown cache key '\(key)'")
                }
            case .daemon:
                switch key {
                case "log_max_size":
                    let v = try size(value, line: lineNo)
                    guard v >= 4096 else { throw ParseError(line: lineNo, message: "log_max_size must be at least 4K") }
                    config.logRotation.maxSize = v
                case "log_files":
                    guard let v = Int(value), (0...20).contains(v) else {
                        throw ParseError(line: lineNo, message: "log_files must be a whole number from 0 to 20")
                    }
                    config.logRotation.files = v
                case "on_complete", "on_failed":
                    let argv: [String]
                    switch HookCommand.split(value) {
                    case .success(let words): argv = words
                    case .failure(let problem): throw ParseError(line: lineNo, message: "\(key) \(problem)")
                    }
                    if key == "on_complete" { config.onComplete = argv } else { config.onFailed = argv }
                case "hook_timeout":
                    guard let v = Double(value), v >= 1, v <= 3600 else {
                        throw ParseError(line: lineNo, message: "hook_timeout must be a number of seconds from 1 to 3600")
                    }
                    config.hookTimeout = v
                default: throw ParseError(line: lineNo, message: "unknown daemon key '\(key)'")
                }
            case .access:
                guard key == "control_group" else { throw ParseError(line: lineNo, message: "unknown access key '\(key)'; expected control_group") }
                guard Self.isGroupName(value) else {
                    throw ParseError(line: lineNo, message: "control_group must name a group (letters, digits, '-', '_', '.'), such as media")
                }
                config.controlGroup = value
            case .http:
                try config.parseHTTP(key, value, line: lineNo)
            }
        }
        if let http = config.http {
            if http.listen == .unix(path: "") { throw ParseError(line: 0, message: "[http] needs listen = 127.0.0.1:PORT or listen = unix:/PATH") }
            if let problem = http.problem { throw ParseError(line: 0, message: problem) }
        }
        for (i, server) in config.servers.enumerated() {
            if !typed.contains(i) { throw ParseError(line: 0, message: "server \"\(server.name)\" has no type") }
            if server.url.isEmpty { throw ParseError(line: 0, message: "server \"\(server.name)\" has no url") }
        }
        return config
    }

    /// `16M`, `512K`, `1G` or plain bytes.
    public static func size(_ text: String, line: Int) throws(ParseError) -> Int64 {
        guard let parsed = parseSize(text) else {
            throw ParseError(line: line, message: "'\(text)' is not a size (examples: 16M, 512K, 1G)")
        }
        return parsed
    }

    public static func parseSize(_ text: String) -> Int64? {
        var digits = text.uppercased()
        var multiplier: Int64 = 1
        if let last = digits.last, let m = ["K": Int64(1) << 10, "M": Int64(1) << 20, "G": Int64(1) << 30][String(last)] {
            multiplier = m
            digits.removeLast()
        }
        guard let n = Int64(digits), n >= 0, n <= Int64.max / multiplier else { return nil }
        return n * multiplier
    }

    /// A group name as useradd(8) takes it (a name, not a number: a gid would silently name
    /// another group on another machine).
    static func isGroupName(_ name: String) -> Bool {
        !name.isEmpty && name.utf8.count <= 32 && !name.hasPrefix("-") && !name.allSatisfy(\.isNumber)
            && name.unicodeScalars.allSatisfy { ($0.isASCII && ($0.properties.isAlphabetic || ("0"..."9").contains($0))) || "-_.".unicodeScalars.contains($0) }
    }

    /// Names become directory names and config keys: keep them boring.
    public static func validateServerName(_ name: String) -> String? {
        if name.isEmpty { return "a server name cannot be empty" }
        if name.utf8.count > 64 { return "a server name must be at most 64 bytes" }
        let ok = name.unicodeScalars.allSatisfy {
            ($0.isASCII && ($0.properties.isAlphabetic || ("0"..."9").contains($0))) || "-_.".unicodeScalars.contains($0)
        }
        if !ok || name.hasPrefix(".") { return "server name '\(name)' may use only letters, digits, '-', '_' and '.', and may not start with '.'" }
        return nil
    }

    public func serialized() -> String {
        var out = "# Labstream configuration; see labstream.conf(5). Secrets are kept in the credentials file, not here.\n"
        for s in servers {
            out += "\n[server \"\(s.name)\"]\ntype = \(s.kind.rawValue)\nurl = \(s.url)\n"
            if let u = s.user { out += "user = \(u)\n" }
            if s.quality != .original { out += "quality = \(s.quality)\n" }
            if s.maxSize != 0 { out += "max_size = \(s.maxSize)\n" }
            for (library, q) in s.libraryQualities.sorted(by: { $0.key < $1.key }) { out += "quality.\(library) = \(q)\n" }
        }
        let d = TransferSizes.default
        var cache: [String] = []
        if sizes.segmentSize != d.segmentSize { cache.append("segment_size = \(sizes.segmentSize)") }
        if sizes.readChunk != d.readChunk { cache.append("read_chunk = \(sizes.readChunk)") }
        if sizes.readAheadMax != d.readAheadMax { cache.append("read_ahead_max = \(sizes.readAheadMax)") }
        if fetchTimeout != 30 { cache.append("fetch_timeout = \(fetchTimeout)") }
        if connectTimeout != 2 { cache.append("connect_timeout = \(connectTimeout)") }
        if maxCacheSize != 0 { cache.append("max_size = \(maxCacheSize)") }
        if minFree != StorageBudget.defaultMinFree { cache.append("min_free = \(minFree)") }
        if !playbackProbe { cache.append("playback_probe = no") }
        if sideAssets != .all { cache.append("side_assets = \(sideAssets.rawValue)") }
        if rateLimit != 0 { cache.append("rate_limit = \(rateLimit)") }
        if refreshInterval != 900 { cache.append("refresh_interval = \(refreshInterval)") }
        if maxConcurrentFiles != 3 { cache.append("max_concurrent_files = \(maxConcurrentFiles)") }
        if connectionsPerFile != 2 { cache.append("connections_per_file = \(connectionsPerFile)") }
        if fetchThreads != Self.defaultFetchThreads { cache.append("fetch_threads = \(fetchThreads)") }
        if !cache.isEmpty { out += "\n[cache]\n" + cache.joined(separator: "\n") + "\n" }
        var daemon: [String] = []
        if logRotation.maxSize != LogRotation.default.maxSize { daemon.append("log_max_size = \(logRotation.maxSize)") }
        if logRotation.files != LogRotation.default.files { daemon.append("log_files = \(logRotation.files)") }
        if let argv = onComplete { daemon.append("on_complete = \(HookCommand.joined(argv))") }
        if let argv = onFailed { daemon.append("on_failed = \(HookCommand.joined(argv))") }
        if hookTimeout != 60 { daemon.append("hook_timeout = \(hookTimeout)") }
        if !daemon.isEmpty { out += "\n[daemon]\n" + daemon.joined(separator: "\n") + "\n" }
        if let controlGroup { out += "\n[access]\ncontrol_group = \(controlGroup)\n" }
        if let http { out += "\n[http]\nlisten = \(http.listen)\n" + (http.allowRemote ? "allow_remote = yes\n" : "") }
        return out
    }
}

extension StringProtocol {
    /// Without leading and trailing characters from `set` (Foundation-free, so pure modules can use it).
    /// Compared by scalar: "\r\n" is one Character, so a set written " \t\r\n" would not hold a lone "\n".
    public func trimming(_ set: String) -> String {
        var s = Substring(self).unicodeScalars
        while let f = s.first, set.unicodeScalars.contains(f) { s.removeFirst() }
        while let l = s.last, set.unicodeScalars.contains(l) { s.removeLast() }
        return String(s)
    }

    var trimmingSpaces: String { trimming(" \t\r") }
}
