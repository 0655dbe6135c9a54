import Foundation
import LabstreamBackends
import LabstreamCore
import Synchronization

/// An `HTTPTransport` with no sockets: `handler` answers every request in memory. For engine
/// unit tests that need no network (the loopback tests go through libcurl, the real path).
/// Ranged answers are judged by the same `RangeResponsePolicy` as the real transport: no byte
/// of an answer the policy rejects reaches the sink.
public final class InMemoryTransport: HTTPTransport, Sendable {
    public typealias Handler = @Sendable (HTTPRequest) -> HTTPResponse
    let handler: Handler
    let seen = Mutex<[HTTPRequest]>([])

    public init(_ handler: @escaping Handler) { self.handler = handler }

    /// Every request so far, in order.
    public var requests: [HTTPRequest] { seen.withLock { $0 } }

    func answer(_ request: HTTPRequest) -> HTTPResponse {
        seen.withLock { $0.append(request) }
        return handler(request)
    }

    public func send(_ request: HTTPRequest) throws(TransportError) -> HTTPResponse {
        var response = answer(request)
        if let limit = request.bodyLimit, response.body.count > limit { response.body = Array(response.body.prefix(limit)) }
        return response
    }

    public func fetchRange(
        _ request: HTTPRequest, expectation: RangeExpectation,
        sink: (UnsafeRawBufferPointer, Int64, Validator?) throws -> Void
    ) throws(TransportError) -> RangeTransferResult {
        let response = answer(request)
        let verdict = RangeResponsePolicy.judge(
            status: response.status, contentRange: response.header("Content-Range"),
            etag: response.header("ETag"), lastModified: response.header("Last-Modified"),
            contentEncoding: response.header("Content-Encoding"), expected: expectation)
        let body: ArraySlice<UInt8>
        let validator: Validator?
        switch verdict {
        case .accept(let v, _):
            body = response.body[...]
            validator = v
        case .acceptPrefix(let v):
            body = response.body.prefix(Int(expectation.range.count))
            validator = v
        default:
            return RangeTransferResult(verdict: verdict, bytesWritten: 0, status: response.status, retryAfter: response.header("Retry-After"))
        }
        do {
            try deliver(body) { piece, at in try sink(piece, expectation.range.lower + at, validator) }
        } catch {
            throw .aborted("writing the partial failed: \(error)")
        }
        return RangeTransferResult(
            verdict: .accept(validator: validator, total: expectation.total), bytesWritten: Int64(body.count),
            status: response.status, retryAfter: response.header("Retry-After"))
    }

    public func fetchStream(_ request: HTTPRequest, sink: (UnsafeRawBufferPointer, Int64) throws -> Void) throws(TransportError) -> (
        status: Int, written: Int64
    ) {
        let response = answer(request)
        guard response.status == 200 else { return (response.status, 0) }
        do { try deliver(response.body[...]) { piece, at in try sink(piece, at) } } catch { throw .aborted("writing the copy failed: \(error)") }
        return (200, Int64(response.body.count))
    }

    /// Hands `body` over in pieces of at most `maxPiece` bytes, as libcurl does.
    func deliver(_ body: ArraySlice<UInt8>, to sink: (UnsafeRawBufferPointer, Int64) throws -> Void) throws {
        var at = body.startIndex
        while at < body.endIndex {
            let end = min(at + maxPiece, body.endIndex)
            try body[at..<end].withUnsafeBytes { try sink($0, Int64(at - body.startIndex)) }
            at = end
        }
    }

    /// The answer a server that honours `Range` gives for `bytes` (206 with Content-Range, or
    /// 200 with everything when no range was asked), with `etag` as its validator.
    public static func serve(_ bytes: [UInt8], to request: HTTPRequest, etag: String = "\"v1\"") -> HTTPResponse {
        let total = Int64(bytes.count)
        guard let spec = request.headers.first(where: { $0.name.lowercased() == "range" })?.value, spec.hasPrefix("bytes=") else {
            return HTTPResponse(status: 200, headers: ["etag": etag, "content-length": "\(total)"], body: bytes)
        }
        let ends = spec.dropFirst("bytes=".count).split(separator: "-", omittingEmptySubsequences: false)
        let first = Int64(ends.first ?? "") ?? 0
        let last = min(ends.count > 1 ? Int64(ends[1]) ?? total - 1 : total - 1, total - 1)
        guard first <= last else { return HTTPResponse(status: 416, headers: ["content-range": "bytes */\(total)"], body: []) }
        return HTTPResponse(
            status: 206, headers: ["etag": etag, "content-range": "bytes \(first)-\(last)/\(total)"],
            body: Array(bytes[Int(first)...Int(last)]))
    }
}
