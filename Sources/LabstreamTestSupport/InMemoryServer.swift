import Foundation
import LabstreamBackends
import LabstreamCore
import LabstreamDemo
import LabstreamFixture
import Synchronization

extension InMemoryTransport {
    /// A transport whose every request is answered by `fixture` in memory, exactly as its
    /// loopback listener would answer it: a whole daemon can run against an emulated server
    /// with no socket between them.
    public convenience init(serving fixture: ServerFixture) {
        self.init { request in Self.answer(request, by: fixture.handle) }
    }

    static func answer(_ request: HTTPRequest, by handle: (HTTPServer.Request) -> HTTPServer.Response) -> HTTPResponse {
        let url = URLComponents(string: request.url)
        var query: [String: String] = [:]
        for item in url?.queryItems ?? [] { query[item.name] = item.value ?? "" }
        var headers: [String: String] = [:]
        for h in request.headers { headers[h.name.lowercased()] = h.value }
        let answer = handle(
            HTTPServer.Request(
                method: request.method, path: url?.percentEncodedPath.removingPercentEncoding ?? "/", query: query, headers: headers,
                body: request.body ?? []))
        var out: [String: String] = [:]
        for (name, value) in answer.headers { out[name.lowercased()] = value }
        switch answer.body {
        case .bytes(let bytes):
            return HTTPResponse(status: answer.status, headers: out, body: bytes)
        case .file(let path, let offset, let length):
            let handle = FileHandle(forReadingAtPath: path)
            defer { try? handle?.close() }
            try? handle?.seek(toOffset: UInt64(offset))
            let bytes = (try? handle?.read(upToCount: Int(length))).flatMap { $0.map { [UInt8]($0) } } ?? []
            return HTTPResponse(status: answer.status, headers: out, body: bytes)
        case .stream(_, let write):
            // What a faulty body sends before it stops is what arrives.
            let sent = Mutex<[UInt8]>([])
            _ = write { chunk in
                sent.withLock { $0 += chunk }
                return true
            }
            return HTTPResponse(status: answer.status, headers: out, body: sent.withLock { $0 })
        case .upgrade:
            // No socket to hand over in memory: the head is the answer.
            return HTTPResponse(status: answer.status, headers: out, body: [])
        }
    }
}
