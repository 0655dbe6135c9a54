import Foundation
import LabstreamBackends
import LabstreamDemo
import LabstreamFixture
import LabstreamHTTP
import Testing

/// What the transport says when a limit runs out: which limit, and what to do.
@Suite struct TransportTests {
    @Test func aStalledBodySaysWhichLimitRanOutNotJustTimeout() throws {
        let scratch = Scratch("transport-stall")
        let file = scratch.path + "/body"
        writeRandomFile(file, size: 64 * 1024, seed: 1)
        let server = try HTTPServer { _ in
            HTTPServer.Response(
                status: 200, headers: [("Content-Length", "65536")],
                body: FaultyFile.body(path: file, offset: 0, length: 65536, stall: (after: 0, seconds: 4)))
        }
        defer { server.stop() }
        let transport = CurlTransport(options: .init(connectTimeout: 2, stallTimeout: 1))
        do {
            _ = try transport.send(HTTPRequest(method: "GET", url: "http://127.0.0.1:\(server.port)/Items/x/Download", headers: []))
            Issue.record("a stalled body was answered")
        } catch {
            guard case .timedOut(let why) = error else { Issue.record("\(error)"); return }
            #expect(why.contains("sent nothing for 1 s (fetch_timeout)") && why.contains("raise fetch_timeout"), "\(why)")
            #expect(!why.contains("Timeout was reached"), "\(why)")
            #expect(why.hasPrefix("GET http://127.0.0.1:\(server.port)/Items/x/Download: "), "\(why)")
        }
    }
}
