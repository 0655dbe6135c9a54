/// `labstream.conf`'s `[http]` section: where the local HTTP API and status page listen. Off
/// unless the section is there. See labstream.conf(5).
///
///     [http]
///     listen = 127.0.0.1:8280        # or unix:/run/labstream/http.sock
///     allow_remote = no              # yes: a non-loopback address (always with the token)
public struct HTTPSettings: Sendable, Hashable {
    public enum Listen: Sendable, Hashable, CustomStringConvertible {
        /// An IPv4 address (`localhost` is 127.0.0.1) and port; port 0 takes a free one.
        case tcp(host: String, port: UInt16)
        case unix(path: String)

        public var description: String {
            switch self {
            case .tcp(let host, let port): return "\(host):\(port)"
            case .unix(let path): return "unix:\(path)"
            }
        }
    }

    public var listen: Listen
    /// Whether a non-loopback `listen` address is wanted (a person said so, knowing the house
    /// network then sees the page; every API call still needs the token).
    public var allowRemote: Bool

    public init(listen: Listen, allowRemote: Bool = false) {
        self.listen = listen
        self.allowRemote = allowRemote
    }

    /// `127.0.0.1:8280`, `localhost:8280`, `0.0.0.0:8280` or `unix:/path`; nil with the reason.
    public static func parseListen(_ text: String) -> Result<Listen, HTTPSettingsError> {
        if text.hasPrefix("unix:") {
            let path = String(text.dropFirst("unix:".count))
            guard path.hasPrefix("/"), path.utf8.count < 108 else {
                return .failure(.init("listen = unix:PATH takes an absolute path shorter than 108 bytes"))
            }
            return .success(.unix(path: path))
        }
        guard let colon = text.lastIndex(of: ":"), let port = UInt16(text[text.index(after: colon)...]) else {
            return .failure(.init("listen must be ADDRESS:PORT (such as 127.0.0.1:8280) or unix:/PATH"))
        }
        var host = String(text[..<colon])
        if host == "localhost" { host = "127.0.0.1" }
        guard ipv4(host) != nil else {
            return .failure(.init("listen's address '\(host)' is not an IPv4 address (such as 127.0.0.1 or 0.0.0.0)"))
        }
        return .success(.tcp(host: host, port: port))
    }

    /// Whether the listener answers only this machine: a unix socket or 127.0.0.0/8.
    public var isLoopback: Bool {
        switch listen {
        case .unix: return true
        case .tcp(let host, _): return Self.ipv4(host)?.first == 127
        }
    }

    /// Why these settings may not be used, or nil.
    public var problem: String? {
        guard !isLoopback, !allowRemote else { return nil }
        return "listen = \(listen) answers other machines; set allow_remote = yes in [http] to mean it (every API call still needs the token)"
    }

    /// The four octets of a dotted IPv4 address.
    public static func ipv4(_ text: String) -> [UInt8]? {
        let parts = text.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 4 else { return nil }
        let octets = parts.compactMap { $0.count <= 3 && $0.allSatisfy(\.isNumber) ? UInt8($0) : nil }
        return octets.count == 4 ? octets : nil
    }
}

public struct HTTPSettingsError: Error, Sendable, Equatable {
    public let message: String
    public init(_ message: String) { self.message = message }
}

extension LabstreamConfig {
    /// One `[http]` line.
    mutating func parseHTTP(_ key: String, _ value: String, line: Int) throws(ParseError) {
        switch key {
        case "listen":
            switch HTTPSettings.parseListen(value) {
            case .success(let listen): http = HTTPSettings(listen: listen, allowRemote: http?.allowRemote ?? false)
            case .failure(let error): throw ParseError(line: line, message: error.message)
            }
        case "allow_remote":
            guard value == "yes" || value == "no" else { throw ParseError(line: line, message: "allow_remote must be yes or no") }
            // Before `listen`: kept until it comes (a section with no listen is refused below).
            http = HTTPSettings(listen: http?.listen ?? .unix(path: ""), allowRemote: value == "yes")
        default: throw ParseError(line: line, message: "unknown http key '\(key)'; [http] takes listen and allow_remote")
        }
    }
}
