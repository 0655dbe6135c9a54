import LabstreamCore

#if canImport(Glibc)
    import Glibc
#endif

/// Access tokens, one section per server, in a file only its owner can read (0600). The only
/// place a token is ever written. Passwords are never stored.
public struct CredentialStore: Sendable {
    public struct Entry: Sendable, Hashable {
        public var token: String
        public var userId: String
        public var serverId: String?
        /// A Silo profile's PIN verification (`X-Profile-Token`), bound to the stored session.
        public var profileToken: String?

        public init(token: String, userId: String, serverId: String?, profileToken: String? = nil) {
            self.token = token
            self.userId = userId
            self.serverId = serverId
            self.profileToken = profileToken
        }
    }

    public let path: String

    public init(path: String) { self.path = path }

    /// Reads every entry; a missing file is an empty store. Refuses a file others can read.
    public func load() throws(LabstreamError) -> [String: Entry] {
        let fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW)
        if fd < 0 {
            if errno == ENOENT { return [:] }
            throw .permission("cannot open the credential file \(path): \(String(cString: strerror(errno)))")
        }
        defer { close(fd) }
        var st = stat()
        guard fstat(fd, &st) == 0 else { throw .storage("cannot stat \(path)") }
        if st.st_mode & 0o077 != 0 {
            throw .permission(
                "the credential file \(path) is readable by others (mode \(String(st.st_mode & 0o777, radix: 8))); refusing to use it. Fix it with: chmod 600 \(path)"
            )
        }
        if st.st_uid != geteuid() {
            throw .permission("the credential file \(path) belongs to uid \(st.st_uid), not to you (uid \(geteuid())); refusing to use it")
        }
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 4096)
        while true {
            let n = chunk.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
            if n < 0 && errno == EINTR { continue }
            if n <= 0 { break }
            bytes += chunk[0..<n]
        }
        return try Self.parse(String(decoding: bytes, as: UTF8.self))
    }

    static func parse(_ text: String) throws(LabstreamError) -> [String: Entry] {
        var out: [String: Entry] = [:]
        var current: String?
        var fields: [String: [String: String]] = [:]
        for (n, raw) in text.split(separator: "\n").enumerated() {
            let line = String(raw).trimming(" \t\r")
            if line.isEmpty || line.hasPrefix("#") { continue }
            if line.hasPrefix("[server \""), line.hasSuffix("\"]") {
                current = String(line.dropFirst(9).dropLast(2))
                fields[current!] = [:]
                continue
            }
            guard let name = current, let eq = line.firstIndex(of: "=") else {
                throw .storage("the credential file is damaged at line \(n + 1); remove the server and add it again")
            }
            fields[name]![String(line[..<eq]).trimming(" \t")] = String(line[line.index(after: eq)...]).trimming(" \t")
        }
        for (name, f) in fields {
            guard let token = f["token"], let user = f["user_id"] else { continue }
            out[name] = Entry(token: token, userId: user, serverId: f["server_id"], profileToken: f["profile_token"])
        }
        return out
    }

    /// Replaces the file atomically with `entries`, created 0600 from the start.
    public func save(_ entries: [String: Entry]) throws(LabstreamError) {
        var text = "# Labstream credentials. Keep this file private (mode 0600).\n"
        for name in entries.keys.sorted() {
            let e = entries[name]!
            text += "\n[server \"\(name)\"]\ntoken = \(e.token)\nuser_id = \(e.userId)\n"
            if let s = e.serverId { text += "server_id = \(s)\n" }
            if let p = e.profileToken { text += "profile_token = \(p)\n" }
        }
        try AtomicFile.write(text, to: path, mode: 0o600)
    }

    public func set(_ name: String, _ entry: Entry) throws(LabstreamError) {
        var all = try load()
        all[name] = entry
        try save(all)
    }

    public func remove(_ name: String) throws(LabstreamError) {
        var all = try load()
        guard all.removeValue(forKey: name) != nil else { return }
        try save(all)
    }
}

/// Write-to-temp, fsync, rename: a reader sees the old file or the new one, never half.
public enum AtomicFile {
    public static func write(_ text: String, to path: String, mode: mode_t) throws(LabstreamError) {
        let tmp = path + ".tmp-\(getpid())"
        let fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode)
        guard fd >= 0 else { throw .storage("cannot write \(tmp): \(String(cString: strerror(errno)))") }
        fchmod(fd, mode)
        let bytes = Array(text.utf8)
        let written = bytes.withUnsafeBytes { b in (try? pwriteAll(fd, b, at: 0, context: tmp)) != nil }
        let ok = written && fsync(fd) == 0
        close(fd)
        guard ok, rename(tmp, path) == 0 else {
            let why = String(cString: strerror(errno))
            unlink(tmp)
            if errno == ENOSPC { throw .noSpace("writing \(path)") }
            throw .storage("cannot write \(path): \(why)")
        }
    }
}
