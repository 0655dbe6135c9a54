/// One HTTP/1.1 request's head (request line and headers) read off a connection, and the
/// limits a request must keep: the local API's listener reads no more than this before it has
/// said no.
public struct HTTPRequestHead: Sendable, Hashable {
    public var method: String
    /// The path, percent-decoded (`/api/status`).
    public var path: String
    /// Query parameters, percent-decoded (`+` is a space); a repeated name keeps every value.
    public var query: [String: [String]]
    /// Lower-cased names.
    public var headers: [String: String]

    public init(method: String, path: String, query: [String: [String]], headers: [String: String]) {
        self.method = method
        self.path = path
        self.query = query
        self.headers = headers
    }

    /// The most a head may be: a larger one is refused with 431.
    public static let maxHeadBytes = 16 * 1024
    /// The most a body may be: a larger one is refused with 413 before it is read.
    public static let maxBodyBytes = 64 * 1024

    public enum Parse: Sendable, Hashable {
        /// More bytes are needed (and may come: the head is under its limit).
        case incomplete
        /// The head, and where its body starts in the bytes read.
        case head(HTTPRequestHead, bodyStart: Int)
        /// Refused: the status to answer and why.
        case refused(status: Int, String)
    }

    /// Reads the head from the bytes a connection sent so far.
    public static func parse(_ bytes: [UInt8]) -> Parse {
        guard let end = headEnd(bytes) else {
            return bytes.count >= maxHeadBytes ? .refused(status: 431, "the request's headers are larger than \(maxHeadBytes) bytes") : .incomplete
        }
        guard end <= maxHeadBytes else { return .refused(status: 431, "the request's headers are larger than \(maxHeadBytes) bytes") }
        let lines = String(decoding: bytes[..<end], as: UTF8.self).split(separator: "\r\n", omittingEmptySubsequences: false).map(String.init)
        let requestLine = lines[0].split(separator: " ", omittingEmptySubsequences: false)
        guard requestLine.count == 3, !requestLine[0].isEmpty, requestLine[1].hasPrefix("/") else {
            return .refused(status: 400, "the request line is not METHOD /PATH HTTP/1.1")
        }
        guard requestLine[2] == "HTTP/1.1" || requestLine[2] == "HTTP/1.0" else {
            return .refused(status: 505, "only HTTP/1.1 is spoken here")
        }
        var headers: [String: String] = [:]
        for line in lines.dropFirst() where !line.isEmpty {
            guard let colon = line.firstIndex(of: ":") else { return .refused(status: 400, "a header line has no ':'") }
            let name = line[..<colon].lowercased()
            guard !name.isEmpty, !name.contains(" ") else { return .refused(status: 400, "a header's name is malformed") }
            headers[name] = line[line.index(after: colon)...].trimming(" \t")
        }
        let target = String(requestLine[1])
        let pathPart = target.split(separator: "?", maxSplits: 1, omittingEmptySubsequences: false)
        guard let path = percentDecoded(String(pathPart[0]), plusIsSpace: false) else {
            return .refused(status: 400, "the request's path is not valid percent-encoded UTF-8")
        }
        var query: [String: [String]] = [:]
        if pathPart.count == 2 {
            for pair in pathPart[1].split(separator: "&") {
                let kv = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
                guard let name = percentDecoded(String(kv[0]), plusIsSpace: true),
                    let value = percentDecoded(kv.count == 2 ? String(kv[1]) : "", plusIsSpace: true)
                else { return .refused(status: 400, "the request's query is not valid percent-encoded UTF-8") }
                query[name, default: []].append(value)
            }
        }
        return .head(HTTPRequestHead(method: String(requestLine[0]), path: path, query: query, headers: headers), bodyStart: end + 4)
    }

    /// How many body bytes follow the head, or why none may be read.
    public var bodyLength: Result<Int, HTTPProblem> {
        if headers["transfer-encoding"] != nil {
            return .failure(HTTPProblem(status: 411, exitCode: ExitCode.usage, detail: "send the body with a Content-Length, not chunked"))
        }
        guard let text = headers["content-length"] else { return .success(0) }
        guard let n = Int(text), n >= 0 else {
            return .failure(HTTPProblem(status: 400, exitCode: ExitCode.usage, detail: "Content-Length '\(text)' is not a number of bytes"))
        }
        guard n <= Self.maxBodyBytes else {
            return .failure(HTTPProblem(status: 413, exitCode: ExitCode.usage, detail: "the body is \(n) bytes; at most \(Self.maxBodyBytes) are taken"))
        }
        return .success(n)
    }

    /// The index of the blank line's `\r\n\r\n`, or nil.
    static func headEnd(_ bytes: [UInt8]) -> Int? {
        guard bytes.count >= 4 else { return nil }
        for i in 0...(bytes.count - 4) where bytes[i] == 13 && bytes[i + 1] == 10 && bytes[i + 2] == 13 && bytes[i + 3] == 10 { return i }
        return nil
    }

    public static func percentDecoded(_ text: String, plusIsSpace: Bool) -> String? {
        var out: [UInt8] = []
        var bytes = Array(text.utf8)[...]
        while let b = bytes.popFirst() {
            if b == UInt8(ascii: "%") {
                guard bytes.count >= 2, let hi = hex(bytes.removeFirst()), let lo = hex(bytes.removeFirst()) else { return nil }
                out.append(hi << 4 | lo)
            } else {
                out.append(plusIsSpace && b == UInt8(ascii: "+") ? 32 : b)
            }
        }
        return String(validating: out, as: UTF8.self)
    }

    static func hex(_ b: UInt8) -> UInt8? {
        switch b {
        case 48...57: return b - 48
        case 65...70: return b - 55
        case 97...102: return b - 87
        default: return nil
        }
    }
}

/// An API error as `application/problem+json` (RFC 9457): the HTTP status, and the exit code
/// the CLI would end with for the same failure (`exit_code`), with the sentence a person reads.
public struct HTTPProblem: Error, Sendable, Hashable {
    public var status: Int
    public var exitCode: Int32
    public var detail: String

    public init(status: Int, exitCode: Int32, detail: String) {
        self.status = status
        self.exitCode = exitCode
        self.detail = detail
    }

    /// The daemon's refusal (a sysexits code and its sentence) as an HTTP answer.
    public init(exitCode: Int32, detail: String) {
        self.init(status: Self.status(forExit: exitCode), exitCode: exitCode, detail: detail)
    }

    /// The HTTP status that says what a CLI exit code says.
    public static func status(forExit code: Int32) -> Int {
        switch code {
        case ExitCode.usage, ExitCode.dataErr: return 400
        case ExitCode.noInput: return 404
        case ExitCode.noPerm: return 403
        case ExitCode.unavailable, ExitCode.tempFail: return 503
        case ExitCode.protocolErr: return 502
        case ExitCode.ioErr, ExitCode.cantCreate: return 507
        default: return 500
        }
    }

    public static func title(_ status: Int) -> String {
        switch status {
        case 400: return "Bad Request"
        case 401: return "Unauthorized"
        case 403: return "Forbidden"
        case 404: return "Not Found"
        case 405: return "Method Not Allowed"
        case 408: return "Request Timeout"
        case 411: return "Length Required"
        case 413: return "Content Too Large"
        case 415: return "Unsupported Media Type"
        case 431: return "Request Header Fields Too Large"
        case 502: return "Bad Gateway"
        case 503: return "Service Unavailable"
        case 505: return "HTTP Version Not Supported"
        case 507: return "Insufficient Storage"
        default: return "Internal Server Error"
        }
    }
}
