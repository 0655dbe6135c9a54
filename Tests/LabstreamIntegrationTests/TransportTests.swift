import Foundation
import LabstreamBackends
import LabstreamDemo
import LabstreamFixture
import LabstreamHTTP
import Testing

/// What the transport says when a limit runs out: which limit, and what to do.
@Suite struct TransportTests {
    /// A server that answers and then stops: a stall (not a connection that never came), and
    /// where in the answer it stopped. The second request reuses the first one's connection.
    @Test func aStalledBodySaysWhichLimitRanOutAndWhere() throws {
        let scratch = Scratch("transport-stall")
        let file = scratch.path + "/body"
        writeRandomFile(file, size: 64 * 1024, seed: 1)
        let stallAfter = LockedBox<Int64>(0)
        let server = try HTTPServer { _ in
            HTTPServer.Response(
                status: 200, headers: [("Content-Length", "65536")],
                body: FaultyFile.body(path: file, offset: 0, length: 65536, stall: (after: stallAfter.get(), seconds: 4)))
        }
        defer { server.stop() }
        let transport = CurlTransport(options: .init(connectTimeout: 2, stallTimeout: 1))
        for (after, words) in [
            (Int64(0), "the server answered (HTTP 200), then sent nothing for 1 s (fetch_timeout)"),
            (16384, "the server stopped sending mid-body: it sent nothing for 1 s (fetch_timeout) after 16384 bytes")
        ] {
            stallAfter.set(after)
            do {
                _ = try transport.send(HTTPRequest(method: "GET", url: "http://127.0.0.1:\(server.port)/Items/x/Download", headers: []))
                Issue.record("a stalled body was answered")
            } catch {
                guard case .stalled(let why) = error else { Issue.record("\(error)"); continue }
                #expect(why.contains(words) && why.contains("raise fetch_timeout"), "\(why)")
                #expect(!why.contains("Timeout was reached") && !why.contains("no connection"), "\(why)")
                #expect(why.hasPrefix("GET http://127.0.0.1:\(server.port)/Items/x/Download: "), "\(why)")
            }
        }
    }
}
