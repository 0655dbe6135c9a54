/// How much the daemon says.
public enum LogLevel: Int, Sendable, Comparable, CaseIterable {
    case error, warning, info, debug

    /// `error`, `warning` (or `warn`), `info`, `debug`.
    public init?(_ text: String) {
        switch text.lowercased() {
        case "error": self = .error
        case "warning", "warn": self = .warning
        case "info": self = .info
        case "debug": self = .debug
        default: return nil
        }
    }

    public var name: String { ["error", "warning", "info", "debug"][rawValue] }

    public static func < (a: LogLevel, b: LogLevel) -> Bool { a.rawValue < b.rawValue }
}

/// The last guard before a line is written anywhere: secrets that slipped into a message (a
/// server's error echoing a URL with `api_key=`, a header value) are replaced. Pure.
public enum LogRedaction {
    public static let mask = "[redacted]"

    /// Keys whose values are secrets, matched case-insensitively, each followed by the
    /// separator that introduces the value.
    static let keys: [String] = [String]([
        "api_key=", "apikey=", "x-plex-token=", "x-emby-token=", "access_token=", "token=", "password=", "pw=",
        "x-plex-token: ", "x-emby-token: ", "x-emby-authorization: ", "authorization: ",
        "token=\"", "\"accesstoken\":\"", "\"pw\":\"", "\"password\":\"", "\"authtoken\":\"", "\"accesstoken\": \"", "\"authtoken\": \""
    ]).sorted { $0.utf8.count > $1.utf8.count }  // the longest key wins (`token="` before `token=`)

    public static func redact(_ line: String) -> String {
        var bytes = Array(line.utf8)
        let lower = Array(line.lowercased().utf8)
        guard lower.count == bytes.count else { return line.isEmpty ? line : mask }  // case mapping changed lengths: be safe
        var out: [UInt8] = []
        var i = 0
        while i < bytes.count {
            var matched: [UInt8]?
            for key in keys {
                let k = Array(key.utf8)
                if i + k.count <= lower.count, Array(lower[i..<i + k.count]) == k, isBoundary(lower, i) { matched = k; break }
            }
            guard let key = matched else {
                out.append(bytes[i])
                i += 1
                continue
            }
            out += bytes[i..<i + key.count]
            i += key.count
            // Authorization headers carry the scheme and several fields: mask to the line's end.
            let toEnd = key.last == UInt8(ascii: " ") && (key.starts(with: Array("authorization".utf8)) || key.starts(with: Array("x-emby-authorization".utf8)))
            var j = i
            while j < bytes.count && !toEnd && !isDelimiter(bytes[j], quoted: key.last == UInt8(ascii: "\"")) { j += 1 }
            if toEnd { j = bytes.count }
            if j > i { out += Array(mask.utf8) }
            i = j
        }
        bytes = out
        return String(decoding: bytes, as: UTF8.self)
    }

    /// A key starts a word: `token=` inside `mytoken=` is not a match, `X-Plex-Token=` is.
    static func isBoundary(_ s: [UInt8], _ i: Int) -> Bool {
        guard i > 0 else { return true }
        let c = s[i - 1]
        return !(c >= UInt8(ascii: "a") && c <= UInt8(ascii: "z")) && !(c >= UInt8(ascii: "0") && c <= UInt8(ascii: "9")) && c != UInt8(ascii: "_")
    }

    static func isDelimiter(_ c: UInt8, quoted: Bool) -> Bool {
        if quoted { return c == UInt8(ascii: "\"") }
        return c == UInt8(ascii: "&") || c == UInt8(ascii: " ") || c == UInt8(ascii: ",") || c == UInt8(ascii: "\"")
            || c == UInt8(ascii: ";") || c == UInt8(ascii: ")") || c == UInt8(ascii: "\n")
    }
}
