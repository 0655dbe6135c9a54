import LabstreamBackends
import LabstreamCore
import LabstreamTestSupport
import Synchronization
import Testing

/// One typed list of server kinds: every kind has a client, a product name and sign-in modes,
/// and a config file or command line names only those.
@Suite struct BackendRegistryTests {
    struct NoNetwork: HTTPTransport {
        func send(_ request: HTTPRequest) throws(TransportError) -> HTTPResponse { throw .unreachable("no network in this test") }
        func fetchRange(
            _ request: HTTPRequest, expectation: RangeExpectation,
            sink: (UnsafeRawBufferPointer, Int64, Validator?) throws -> Void
        ) throws(TransportError) -> RangeTransferResult {
            throw .unreachable("no network in this test")
        }
        func fetchStream(_ request: HTTPRequest, sink: (UnsafeRawBufferPointer, Int64) throws -> Void) throws(TransportError) -> (status: Int, written: Int64) {
            throw .unreachable("no network in this test")
        }
    }

    @Test(arguments: BackendKind.allCases)
    func everyKindHasAClientOfItsOwnKind(kind: BackendKind) {
        let session = ServerSession(name: "s", url: "http://127.0.0.1:1", userId: "u", token: "t")
        let client = BackendRegistry.client(kind, session: session, identity: ClientIdentity(device: "d", deviceId: "i"), transport: NoNetwork())
        #expect(client.kind == kind && client.serverName == "s")
        #expect(!kind.product.isEmpty && !kind.signIns.isEmpty)
        #expect(BackendKind(named: kind.rawValue) == kind && BackendKind.spellings.contains(kind.rawValue))
        // A MediaBrowser flavor exists exactly for the kinds that speak that API.
        #expect(MediaBrowserFlavor(kind: kind)?.kind == ([.plex, .silo].contains(kind) ? nil : kind))
    }

    /// The one reachability check, for every kind: the public probe, then the signed-in one.
    @Test(arguments: BackendKind.allCases)
    func reachabilityIsTheSameTwoQuestionsForEveryKind(kind: BackendKind) {
        let session = ServerSession(name: "s", url: "http://in-memory", userId: "u", token: "t")
        func state(public first: Int, signedIn second: Int) -> Reachability {
            let asked = Mutex(0)
            let transport = InMemoryTransport { request in
                // A backend whose access tokens expire renews one first (Silo): that is not a probe.
                if request.url.hasSuffix("/auth/refresh") {
                    return HTTPResponse(status: 200, headers: [:], body: Array(#"{"access_token":"t","refresh_token":"r","expires_in":60}"#.utf8))
                }
                let n = asked.withLock {
                    $0 += 1; return $0
                }
                return HTTPResponse(status: n == 1 ? first : second, headers: [:], body: Array("{}".utf8))
            }
            let client = BackendRegistry.client(kind, session: session, identity: ClientIdentity(device: "d", deviceId: "i"), transport: transport)
            let answer = client.checkReachability()
            let probes = transport.requests.filter { !$0.url.hasSuffix("/auth/refresh") }
            // A refused access token is renewed and the signed-in probe asked once more (Silo).
            #expect(probes.count == (first != 200 ? 1 : kind == .silo && second == 401 ? 3 : 2))
            // The public probe carries no token; the second one does.
            let token = { (r: HTTPRequest) in
                r.url.contains("=t&") || r.url.hasSuffix("=t")
                    || r.headers.contains { $0.value.contains("Token=\"t\"") || $0.value == "t" || $0.value == "Bearer t" }
            }
            #expect(probes.first.map(token) == false)
            if first == 200 { #expect(probes.last.map(token) == true, "\(transport.requests)") }
            return answer
        }
        #expect(state(public: 503, signedIn: 200) == .offline)
        #expect(state(public: 200, signedIn: 401) == .authFailed)
        #expect(state(public: 200, signedIn: 200) == .online)
    }

    /// What only some servers do is a capability of its own; the engine asks for it by type.
    @Test func capabilitiesAreTheServersOwn() {
        let session = ServerSession(name: "s", url: "http://127.0.0.1:1", userId: "u", token: "t")
        func client(_ kind: BackendKind) -> any MediaBackend {
            BackendRegistry.client(kind, session: session, identity: ClientIdentity(device: "d", deviceId: "i"), transport: NoNetwork())
        }
        let expected: [BackendKind: (incremental: Bool, live: Bool, prepared: Bool)] = [
            .jellyfin: (true, true, true), .emby: (true, true, true), .plex: (false, false, true), .silo: (true, false, false)
        ]
        for kind in BackendKind.allCases {
            let c = client(kind), e = expected[kind]!
            #expect(
                (c is any IncrementalCatalog) == e.incremental && (c is any LiveCopySource) == e.live && (c is any PreparedCopySource) == e.prepared, "\(kind)")
        }
    }

    @Test func anUnknownKindIsAConfigErrorNamingTheLine() {
        #expect(BackendKind(named: "kodi") == nil && BackendKind(named: "Jellyfin") == nil)
        #expect(throws: LabstreamConfig.ParseError.self) { try LabstreamConfig.parse("[server \"a\"]\ntype = kodi\nurl = http://x\n") }
        do {
            _ = try LabstreamConfig.parse("[server \"a\"]\ntype = kodi\nurl = http://x\n")
        } catch {
            #expect(error.line == 2 && error.message.contains(BackendKind.spellings), "\(error)")
        }
        let parsed = try? LabstreamConfig.parse("[server \"a\"]\nurl = http://x\ntype = emby\n")
        #expect(parsed?.servers.first?.kind == .emby)
        #expect(throws: LabstreamConfig.ParseError.self) { try LabstreamConfig.parse("[server \"a\"]\nurl = http://x\n") }
    }
}
