/// What the engine asked the server for, pinned for one attempt.
public struct RangeExpectation: Sendable, Hashable {
    public var range: ByteRange
    public var total: Int64?
    /// The validator pinned by the first response of this attempt (strong ETag, else Last-Modified).
    public var validator: Validator?

    public init(range: ByteRange, total: Int64?, validator: Validator?) {
        self.range = range
        self.total = total
        self.validator = validator
    }
}

public enum Validator: Sendable, Hashable, Codable, CustomStringConvertible {
    case etag(String)
    case lastModified(String)

    /// The response's validator: a strong ETag wins, weak ETags cannot be used with If-Range.
    public static func from(etag: String?, lastModified: String?) -> Validator? {
        if let e = etag, !e.isEmpty, !e.hasPrefix("W/") { return .etag(e) }
        if let l = lastModified, !l.isEmpty { return .lastModified(l) }
        return nil
    }

    public var headerValue: String {
        switch self {
        case .etag(let v), .lastModified(let v): return v
        }
    }

    public var description: String {
        switch self {
        case .etag(let v): return "etag:\(v)"
        case .lastModified(let v): return "last-modified:\(v)"
        }
    }

    public init?(persisted: String) {
        if persisted.hasPrefix("etag:") {
            self = .etag(String(persisted.dropFirst(5)))
        } else if persisted.hasPrefix("last-modified:") {
            self = .lastModified(String(persisted.dropFirst(14)))
        } else {
            return nil
        }
    }
}

/// `Content-Range: bytes a-b/total` (total may be `*`).
public struct ContentRange: Sendable, Hashable {
    public var first: Int64
    public var last: Int64
    public var total: Int64?

    public init(first: Int64, last: Int64, total: Int64?) {
        self.first = first
        self.last = last
        self.total = total
    }

    public init?(header: String) {
        let h = header.trimmingSpaces
        guard h.hasPrefix("bytes ") else { return nil }
        let spec = h.dropFirst(6)
        let parts = spec.split(separator: "/", maxSplits: 1)
        guard parts.count == 2 else { return nil }
        let bounds = parts[0].split(separator: "-")
        guard bounds.count == 2, let a = Int64(bounds[0]), let b = Int64(bounds[1]), a >= 0, a <= b else { return nil }
        first = a
        last = b
        if parts[1] == "*" {
            total = nil
        } else {
            guard let t = Int64(parts[1]), t > b else { return nil }
            total = t
        }
    }
}

/// Decides, from status and headers alone and before any body byte is written, whether a
/// response to a ranged GET may be written into the partial.
public enum RangeResponsePolicy {
    public enum Verdict: Sendable, Hashable {
        /// Write the body at `expectation.range.lower`; pin `validator` if none was pinned.
        case accept(validator: Validator?, total: Int64?)
        /// The file changed on the server (validator or size differ): restart as a new attempt.
        case remoteChanged(String)
        /// The server ignored or mangled the range: nothing may be written.
        case reject(String)
        /// The server answered a ranged request with the whole file (200): nothing is written and
        /// the transfer starts over as a new attempt.
        case restart(String)
        /// A 200 with the whole file to a request from byte 0, carrying the pinned (or a first)
        /// validator: its first `expectation.range.count` bytes are the range asked for; write
        /// those, then stop reading.
        case acceptPrefix(validator: Validator)

        public var isAccept: Bool {
            switch self {
            case .accept, .acceptPrefix: return true
            default: return false
            }
        }
    }

    public static func judge(
        status: Int, contentRange: String?, etag: String?, lastModified: String?,
        contentEncoding: String? = nil, expected: RangeExpectation
    ) -> Verdict {
        if (200..<300).contains(status), let encoding = contentEncoding?.lowercased(), !encoding.isEmpty, encoding != "identity" {
            return .reject("the server sent a \(encoding)-encoded body; only the file's own bytes can be stored")
        }
        let seen = Validator.from(etag: etag, lastModified: lastModified)
        if let pinned = expected.validator, let seen, sameKind(pinned, seen), pinned != seen {
            return .remoteChanged("validator changed from \(pinned.headerValue) to \(seen.headerValue)")
        }
        switch status {
        case 206:
            guard let header = contentRange, let cr = ContentRange(header: header) else {
                return .reject("206 without a usable Content-Range")
            }
            if let total = expected.total, let t = cr.total, t != total {
                return .remoteChanged("size changed from \(total) to \(t)")
            }
            if expected.range.isOpenEnded {
                // To the end of the file, whatever its size: only the start must match.
                guard cr.first == expected.range.lower, cr.total.map({ cr.last < $0 }) ?? true else {
                    return .reject("asked for bytes \(expected.range.lower)- to the end, got \(cr.first)-\(cr.last)")
                }
            } else if cr.first != expected.range.lower || cr.last != expected.range.lastByte {
                return .reject("asked for bytes \(expected.range.lower)-\(expected.range.lastByte), got \(cr.first)-\(cr.last)")
            }
            return .accept(validator: expected.validator ?? seen, total: cr.total ?? expected.total)
        case 200:
            // The whole file from byte 0 with the validator we hold (or a first one): the range
            // asked for is its beginning. A differing validator was caught above.
            if expected.range.lower == 0, let seen, expected.validator == nil || expected.validator == seen {
                return .acceptPrefix(validator: seen)
            }
            // All of a file from its first byte, in one answer: nothing to mix it with.
            let wholeFile = expected.range.isOpenEnded || expected.total == expected.range.upper
            if expected.range.lower == 0 && wholeFile && expected.validator == nil {
                return .accept(validator: nil, total: expected.total)
            }
            // With If-Range, a 200 carrying the validator sent means the server ignores Range
            // (the file is the same); with another validator, or none, the file changed.
            if let pinned = expected.validator, seen != pinned {
                return .remoteChanged(
                    "server answered 200 to an If-Range request" + (seen.map { " with validator \($0.headerValue)" } ?? " without a validator"))
            }
            return .restart("server ignored the Range header (200)")
        case 416:
            // `Content-Range: bytes */TOTAL`: a different total means the file changed; the same
            // total means our plan was wrong, which must not be retried blindly.
            if let header = contentRange, header.hasPrefix("bytes */"), let t = Int64(header.dropFirst(8)),
                let total = expected.total, t == total
            {
                return .reject("server says bytes \(expected.range.lower)-\(expected.range.lastByte) are not satisfiable within \(total)")
            }
            return .remoteChanged("server says the range is not satisfiable (416): the file's size changed")
        case 401, 403:
            return .reject("server refused access (\(status))")
        case 404:
            // Gone, not changed: keep what is stored; a catalog refresh decides what it means.
            return .reject("the file is gone on the server (404)")
        default:
            return .reject("unexpected HTTP status \(status)")
        }
    }

    static func sameKind(_ a: Validator, _ b: Validator) -> Bool {
        switch (a, b) {
        case (.etag, .etag), (.lastModified, .lastModified): return true
        default: return false
        }
    }
}
