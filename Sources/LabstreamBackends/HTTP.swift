import LabstreamCore

public struct HTTPRequest: Sendable, Hashable {
    public var method: String
    public var url: String
    public var headers: [Header]
    public var body: [UInt8]?
    /// A buffered answer is cut after this many body bytes (status and headers still arrive):
    /// a probe must not pull a whole film into memory from a server that ignores `Range`.
    public var bodyLimit: Int?

    public struct Header: Sendable, Hashable {
        public var name: String
        public var value: String
        public init(_ name: String, _ value: String) {
            self.name = name
            self.value = value
        }
    }

    public init(method: String = "GET", url: String, headers: [Header] = [], body: [UInt8]? = nil) {
        self.method = method
        self.url = url
        self.headers = headers
        self.body = body
    }

    /// The request with its authorization header values hidden, safe to log or print.
    public var redactedDescription: String {
        let path = url.split(separator: "?", maxSplits: 1).first.map(String.init) ?? url
        return "\(method) \(path)"
    }
}

public struct HTTPResponse: Sendable, Hashable {
    public var status: Int
    /// Header names lower-cased.
    public var headers: [String: String]
    public var body: [UInt8]

    public init(status: Int, headers: [String: String], body: [UInt8]) {
        self.status = status
        self.headers = headers
        self.body = body
    }

    public func header(_ name: String) -> String? { headers[name.lowercased()] }
}

/// Why a request did not produce a response.
public enum TransportError: Error, Sendable, Equatable {
    case unreachable(String)
    case timedOut(String)
    /// Connected and asked, then nothing arrived for the stall timeout (`fetch_timeout`),
    /// before the answer or in the middle of its body.
    case stalled(String)
    case aborted(String)
    case protocolError(String)
}

/// The result of streaming a ranged body into a sink.
public struct RangeTransferResult: Sendable, Hashable {
    public var verdict: RangeResponsePolicy.Verdict
    public var bytesWritten: Int64
    public var status: Int
    public var retryAfter: String?

    public init(verdict: RangeResponsePolicy.Verdict, bytesWritten: Int64, status: Int, retryAfter: String? = nil) {
        self.verdict = verdict
        self.bytesWritten = bytesWritten
        self.status = status
        self.retryAfter = retryAfter
    }
}

/// The largest body piece a transport hands a sink at once (libcurl's CURL_MAX_WRITE_SIZE).
public let maxPiece = 16 * 1024

/// The network, injected. `LabstreamHTTP` implements it with libcurl.
public protocol HTTPTransport: Sendable {
    /// A buffered request for API calls.
    func send(_ request: HTTPRequest) throws(TransportError) -> HTTPResponse

    /// A ranged GET whose body goes to `sink(bytes, offsetInFile, validator)` only if the
    /// response headers pass `RangeResponsePolicy` for `expectation`; otherwise no byte reaches
    /// the sink. `validator` is the one the accepted response carries (to pin with its bytes).
    /// Bodies arrive in pieces of at most `maxPiece` bytes (libcurl's own limit): the engine
    /// gathers them into buffers sized for that.
    func fetchRange(
        _ request: HTTPRequest, expectation: RangeExpectation,
        sink: (UnsafeRawBufferPointer, Int64, Validator?) throws -> Void
    ) throws(TransportError) -> RangeTransferResult

    /// A forward-only GET (a live transcode): the body goes to `sink(bytes, offset)` only when
    /// the answer is a `200` in the identity encoding. Returns the status and the bytes written.
    func fetchStream(_ request: HTTPRequest, sink: (UnsafeRawBufferPointer, Int64) throws -> Void) throws(TransportError) -> (status: Int, written: Int64)
}

extension String {
    /// Percent-encodes a query component (RFC 3986 unreserved characters pass through).
    public var queryEscaped: String {
        var out = ""
        for b in utf8 {
            switch b {
            case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"),
                UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "_"), UInt8(ascii: "~"):
                out.unicodeScalars.append(UnicodeScalar(b))
            default:
                let hex = Array("0123456789ABCDEF")
                out += "%" + String(hex[Int(b >> 4)]) + String(hex[Int(b & 15)])
            }
        }
        return out
    }
}
