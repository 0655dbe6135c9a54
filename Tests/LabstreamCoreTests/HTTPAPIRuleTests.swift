import LabstreamCore
import Testing

/// The local HTTP API's decisions, as values: reading a request's head within its limits, who
/// may call, which route a request is, and `[http]` in labstream.conf.
@Suite struct HTTPAPIRuleTests {
    func head(_ text: String) -> HTTPRequestHead.Parse { HTTPRequestHead.parse(Array(text.utf8)) }

    @Test func aHeadIsReadWithinItsLimits() {
        #expect(head("GET /api/status HTTP/1.1\r\nHost: x\r\n") == .incomplete)
        guard case .head(let h, let start) = head("GET /api/st%61tus?path=a%2Fb+c&path=d HTTP/1.1\r\nAuthorization:  Bearer T \r\n\r\nBODY") else {
            Issue.record("not read")
            return
        }
        #expect(h.method == "GET" && h.path == "/api/status" && h.query["path"] == ["a/b c", "d"] && h.headers["authorization"] == "Bearer T")
        #expect(start == "GET /api/st%61tus?path=a%2Fb+c&path=d HTTP/1.1\r\nAuthorization:  Bearer T \r\n\r\n".utf8.count)
        // Past the limit with no end in sight, or an end past it: 431, not more reading.
        #expect(
            head("GET / HTTP/1.1\r\nX: " + String(repeating: "a", count: HTTPRequestHead.maxHeadBytes))
                == .refused(status: 431, "the request's headers are larger than 16384 bytes"))
        #expect(head("GET / HTTP/2.0\r\n\r\n") == .refused(status: 505, "only HTTP/1.1 is spoken here"))
        #expect(head("GET nothing HTTP/1.1\r\n\r\n") == .refused(status: 400, "the request line is not METHOD /PATH HTTP/1.1"))
        #expect(head("GET /%zz HTTP/1.1\r\n\r\n") == .refused(status: 400, "the request's path is not valid percent-encoded UTF-8"))
        #expect(head("GET / HTTP/1.1\r\nno colon\r\n\r\n") == .refused(status: 400, "a header line has no ':'"))
    }

    @Test func aBodyIsTakenOnlyWithinItsLimit() {
        func length(_ headers: [String: String]) -> Result<Int, HTTPProblem> {
            HTTPRequestHead(method: "POST", path: "/api/pin", query: [:], headers: headers).bodyLength
        }
        #expect(length([:]) == .success(0))
        #expect(length(["content-length": "65536"]) == .success(65536))
        #expect(length(["content-length": "65537"]).problemStatus == 413)
        #expect(length(["content-length": "-1"]).problemStatus == 400)
        #expect(length(["transfer-encoding": "chunked"]).problemStatus == 411)
    }

    @Test func onlyTheTokenOrTheDaemonsOwnUserOnItsUnixSocketMayCall() {
        let token = String(repeating: "ab", count: 32)
        #expect(APIAccess.decide(peer: .tcp, policy: AccessPolicy(daemonUID: 1000), authorization: "Bearer " + token, token: token) == .allowed)
        #expect(APIAccess.decide(peer: .tcp, policy: AccessPolicy(daemonUID: 1000), authorization: "bearer " + token, token: token) == .allowed)
        // On TCP even the daemon's own user needs it: the kernel does not say who connected.
        guard case .refused = APIAccess.decide(peer: .tcp, policy: AccessPolicy(daemonUID: 1000), authorization: nil, token: token) else {
            Issue.record("allowed"); return
        }
        guard case .refused = APIAccess.decide(peer: .tcp, policy: AccessPolicy(daemonUID: 1000), authorization: "Bearer " + token.dropLast(), token: token)
        else {
            Issue.record("a prefix of the token was taken")
            return
        }
        guard case .refused = APIAccess.decide(peer: .tcp, policy: AccessPolicy(daemonUID: 1000), authorization: "Basic " + token, token: token) else {
            Issue.record("allowed"); return
        }
        #expect(
            APIAccess.decide(peer: .unix(Caller(uid: 1000, gid: 1000)), policy: AccessPolicy(daemonUID: 1000), authorization: nil, token: token) == .allowed)
        #expect(APIAccess.decide(peer: .unix(Caller(uid: 0, gid: 0)), policy: AccessPolicy(daemonUID: 1000), authorization: nil, token: token) == .allowed)
        guard
            case .refused = APIAccess.decide(peer: .unix(Caller(uid: 1001, gid: 1001)), policy: AccessPolicy(daemonUID: 1000), authorization: nil, token: token)
        else {
            Issue.record("allowed"); return
        }
        #expect(
            APIAccess.decide(peer: .unix(Caller(uid: 1001, gid: 1001)), policy: AccessPolicy(daemonUID: 1000), authorization: "Bearer " + token, token: token)
                == .allowed)
        // A member of the control group is let in on the unix socket as the other ways in let it change the mount.
        let shared = AccessPolicy(daemonUID: 1000, controlGroup: .init(name: "media", gid: 500))
        #expect(APIAccess.decide(peer: .unix(Caller(uid: 1001, gid: 1001, groups: [500])), policy: shared, authorization: nil, token: token) == .allowed)
        guard case .refused = APIAccess.decide(peer: .unix(Caller(uid: 1002, gid: 1002, groups: [501])), policy: shared, authorization: nil, token: token)
        else {
            Issue.record("a caller outside the group was let in"); return
        }
    }

    @Test func routesAreDecidedFromMethodAndPath() throws {
        #expect(try APIRoute.route(method: "GET", path: "/", query: [:]).get() == .asset("index.html"))
        #expect(
            try APIRoute.route(method: "GET", path: "/api/status", query: ["path": ["a", "b"], "wait": ["60"]]).get()
                == .status(paths: ["a", "b"], after: nil, wait: 10))
        #expect(try APIRoute.route(method: "POST", path: "/api/cancel", query: [:]).get() == .command("cancel"))
        #expect(APIRoute.route(method: "GET", path: "/api/pin", query: [:]).problemStatus == 405)
        #expect(APIRoute.route(method: "POST", path: "/api/status", query: [:]).problemStatus == 405)
        #expect(APIRoute.route(method: "GET", path: "/api/nothing", query: [:]).problemStatus == 404)
        #expect(APIRoute.route(method: "GET", path: "/api/search", query: [:]).problemStatus == 400)
        #expect(APIRoute.route(method: "GET", path: "/api/status", query: ["wait": ["nan"]]).problemStatus == 400)

        #expect(
            try APIRoute.command("pin", body: .object(["paths": .array([.string("a")]), "quality": .string("10mbps")])).get().0
                == .pin(quality: Quality("10mbps")))
        #expect(try APIRoute.command("monitor", body: .object(["paths": .array([.string("a")]), "settings": .null])).get().0 == .monitor(nil))
        let retry = try APIRoute.command("retry", body: .object(["paths": .array([.string("a")])])).get()
        #expect(retry.0 == .queue(.retry) && retry.1 == ["a"])
        #expect(APIRoute.command("pin", body: .object(["paths": .array([])])).problemStatus == 400)
        #expect(APIRoute.command("pin", body: .array([])).problemStatus == 400)
    }

    /// The page's controls go through these: every queue action is a route and a typed
    /// command, and a monitor is started, changed and stopped through `POST /api/monitor`.
    @Test func queueActionsAndMonitorsDecodeIntoTypedCommands() throws {
        for action in QueueAction.allCases {
            #expect(try APIRoute.route(method: "POST", path: "/api/" + action.rawValue, query: [:]).get() == .command(action.rawValue))
            #expect(APIRoute.route(method: "GET", path: "/api/" + action.rawValue, query: [:]).problemStatus == 405)
            let decoded = try APIRoute.command(action.rawValue, body: .object(["paths": .array([.string("s/L/F")])])).get()
            #expect(decoded.0 == .queue(action) && decoded.1 == ["s/L/F"])
        }
        #expect(try APIRoute.route(method: "POST", path: "/api/monitor", query: [:]).get() == .command("monitor"))
        let folder: JSONValueLite = .array([.string("s/Shows/Show (2020)")])
        let start = try APIRoute.command("monitor", body: .object(["paths": folder, "settings": .string("latest-season,delete-watched")])).get()
        #expect(start.0 == .monitor("latest-season,delete-watched") && start.1 == ["s/Shows/Show (2020)"])
        #expect(try APIRoute.command("monitor", body: .object(["paths": folder, "settings": .string("seasons=1,2")])).get().0 == .monitor("seasons=1,2"))
        #expect(try APIRoute.command("monitor", body: .object(["paths": folder, "settings": .null])).get().0 == .monitor(nil))
        // A body without settings stops nothing: stopping is said with null.
        let forgot = APIRoute.command("monitor", body: .object(["paths": folder]))
        #expect(forgot.problemStatus == 400)
        #expect(forgot.problemDetail?.contains("null to stop") == true, "\(forgot)")
        // Settings are read at the door: a bad one is refused, naming it, before the daemon acts.
        let bad = APIRoute.command("monitor", body: .object(["paths": folder, "settings": .string("sometimes")]))
        #expect(bad.problemStatus == 400 && bad.problemDetail?.contains("'sometimes' is not a monitor setting") == true, "\(bad)")
        #expect(APIRoute.command("monitor", body: .object(["paths": folder, "settings": .string("")])).problemStatus == 400)
        #expect(APIRoute.command("monitor", body: .object(["paths": folder, "settings": .number(1)])).problemStatus == 400)
    }

    @Test func theHTTPSectionListensOnLoopbackUnlessToldOtherwise() throws {
        let base = "[server \"a\"]\ntype = jellyfin\nurl = http://x\n"
        #expect(try LabstreamConfig.parse(base).http == nil)
        #expect(try LabstreamConfig.parse(base + "[http]\nlisten = 127.0.0.1:8280\n").http == HTTPSettings(listen: .tcp(host: "127.0.0.1", port: 8280)))
        #expect(try LabstreamConfig.parse(base + "[http]\nlisten = localhost:0\n").http?.listen == .tcp(host: "127.0.0.1", port: 0))
        #expect(try LabstreamConfig.parse(base + "[http]\nlisten = unix:/run/l.sock\n").http?.listen == .unix(path: "/run/l.sock"))
        #expect(throws: LabstreamConfig.ParseError.self) { try LabstreamConfig.parse(base + "[http]\nlisten = 0.0.0.0:8280\n") }
        let remote = try LabstreamConfig.parse(base + "[http]\nallow_remote = yes\nlisten = 0.0.0.0:8280\n")
        #expect(remote.http == HTTPSettings(listen: .tcp(host: "0.0.0.0", port: 8280), allowRemote: true) && remote.http?.isLoopback == false)
        #expect(throws: LabstreamConfig.ParseError.self) { try LabstreamConfig.parse(base + "[http]\nlisten = media.local:8280\n") }
        #expect(throws: LabstreamConfig.ParseError.self) { try LabstreamConfig.parse(base + "[http]\nlisten = unix:relative\n") }
        #expect(throws: LabstreamConfig.ParseError.self) { try LabstreamConfig.parse(base + "[http]\nallow_remote = yes\n") }
        #expect(throws: LabstreamConfig.ParseError.self) { try LabstreamConfig.parse(base + "[http]\nport = 8280\n") }
        // Written back, it reads the same.
        #expect(try LabstreamConfig.parse(remote.serialized()).http == remote.http)
    }
}

extension Result where Failure == HTTPProblem {
    var problemStatus: Int? {
        if case .failure(let p) = self { return p.status }
        return nil
    }

    var problemDetail: String? {
        if case .failure(let p) = self { return p.detail }
        return nil
    }
}
