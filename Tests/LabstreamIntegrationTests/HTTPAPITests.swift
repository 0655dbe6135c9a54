import CLinux
import Foundation
import LabstreamCore
import LabstreamDaemon
import Testing

/// The local HTTP API over real loopback sockets against a real daemon (in-process, its
/// server emulated): who may call it, what it does, how it refuses bad input, and many callers
/// at once.
@Suite(.serialized) struct HTTPAPITests {
    let beta = "test/Movies/Beta (2002)/Beta (2002).mp4"
    let alpha = "test/Movies/Alpha (2001)/Alpha (2001).mkv"

    @Test func everyAPICallNeedsTheTokenAndThePageHoldsNoData() throws {
        let d = try HTTPDaemon("http-auth", http: "127.0.0.1:0")
        defer { d.stop() }
        #expect(d.port != 0)
        var st = stat()
        #expect(stat(d.context.dataDir + "/http.token", &st) == 0 && st.st_mode & 0o777 == 0o600)
        #expect(d.token.count == 64)

        let none = try exchange(port: d.port, request("GET", "/api/status"))
        #expect(none.status == 401 && none.headers["content-type"] == "application/problem+json")
        #expect(none.headers["www-authenticate"]?.hasPrefix("Bearer") == true)
        #expect(none.json["exit_code"] as? Int == Int(ExitCode.noPerm) && none.json["status"] as? Int == 401)
        #expect(!none.text.contains("test/Movies"))
        let wrong = try exchange(port: d.port, request("GET", "/api/status", token: String(repeating: "0", count: 64)))
        #expect(wrong.status == 401 && (wrong.json["detail"] as? String)?.contains("refused") == true)
        // Nor does a command run without it.
        let pinWithout = try exchange(port: d.port, request("POST", "/api/pin", json: #"{"paths":["\#(beta)"]}"#))
        #expect(pinWithout.status == 401)
        #expect(d.daemon.fs.statuses(below: try #require(d.daemon.fs.resolve(beta.split(separator: "/").map(String.init))), named: beta).first?.pinned == false)

        let ok = try exchange(port: d.port, request("GET", "/api/status", token: d.token))
        #expect(ok.status == 200 && ok.headers["content-type"]?.hasPrefix("application/json") == true)
        let servers = ok.json["servers"] as? [[String: Any]] ?? []
        #expect(servers.count == 1 && servers.first?["name"] as? String == "test" && servers.first?["reachability"] as? String == "online")
        #expect(servers.first?["last_sync"] is Int)
        #expect((ok.json["storage"] as? [String: Any])?["used"] as? Int == 0)

        // The page itself is there without the token, and holds nothing of the catalog.
        let page = try exchange(port: d.port, request("GET", "/"))
        #expect(page.status == 200 && page.headers["content-type"]?.hasPrefix("text/html") == true && page.text.contains("<script src=\"app.js\""))
        #expect(!page.text.contains("Beta") && page.headers["content-security-policy"]?.contains("default-src 'self'") == true)
        #expect(try exchange(port: d.port, request("GET", "/app.js")).text.contains("sessionStorage"))
        // The token is never logged.
        #expect(d.log.contains("HTTP API and status page on 127.0.0.1:\(d.port)") && !d.log.contains(d.token))
    }

    @Test func pinUnpinCancelAndMonitorsGoThroughTheDaemonsTypedCalls() throws {
        let d = try HTTPDaemon("http-commands", http: "localhost:0")
        defer { d.stop() }
        let pin = try exchange(port: d.port, request("POST", "/api/pin", token: d.token, json: #"{"paths":["\#(beta)"]}"#))
        #expect(pin.status == 200 && pin.json["files"] as? Int == 1)
        // Followed on the daemon's change counter through the API (after/wait), never a clock.
        var change = 0
        var state = ""
        let query = "/api/status?path=" + (beta.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? "")
        for _ in 0..<30 where state != "unverified" {
            let answer = try exchange(port: d.port, request("GET", query + "&after=\(change)&wait=5", token: d.token))
            #expect(answer.status == 200)
            change = answer.json["change"] as? Int ?? change
            state = (answer.json["files"] as? [[String: Any]])?.first?["state"] as? String ?? ""
        }
        #expect(state == "unverified")
        let overview = try exchange(port: d.port, request("GET", "/api/status", token: d.token)).json
        let files = overview["files"] as? [[String: Any]] ?? []
        #expect(files.count == 1 && files.first?["path"] as? String == beta && files.first?["pinned"] as? Bool == true)
        #expect((overview["storage"] as? [String: Any])?["used"] as? Int == 3 * MiB)
        let events = overview["events"] as? [[String: Any]] ?? []
        #expect(events.first?["path"] as? String == beta && events.first?["outcome"] as? String == "unverified")

        let unpin = try exchange(port: d.port, request("POST", "/api/unpin", token: d.token, json: #"{"paths":["\#(beta)"]}"#))
        #expect(unpin.status == 200)
        let after = try exchange(port: d.port, request("GET", query, token: d.token)).json["files"] as? [[String: Any]]
        #expect(after?.first?["pinned"] as? Bool == false)

        // Cancel drops what a pin fetched, and the pin.
        #expect(try exchange(port: d.port, request("POST", "/api/pin", token: d.token, json: #"{"paths":["\#(alpha)"]}"#)).status == 200)
        let cancel = try exchange(port: d.port, request("POST", "/api/cancel", token: d.token, json: #"{"paths":["\#(alpha)"]}"#))
        #expect(cancel.status == 200)
        let cancelled = d.daemon.fs.statuses(below: try #require(d.daemon.fs.resolve(alpha.split(separator: "/").map(String.init))), named: alpha)
        #expect(cancelled.first?.pinned == false && cancelled.first?.state == .notLocal)

        // Search finds catalog files by words of their path.
        let found = try exchange(port: d.port, request("GET", "/api/search?q=show+pilot", token: d.token)).json["files"] as? [[String: Any]]
        #expect(found?.map { $0["path"] as? String } == ["test/Shows/Show (2020)/Season 01/Show (2020) - S01E01 - Pilot.mkv"])

        // Monitors: set through the API, listed by it.
        #expect((try exchange(port: d.port, request("GET", "/api/monitors", token: d.token)).json["monitors"] as? [Any])?.isEmpty == true)
        let monitor = try exchange(
            port: d.port, request("POST", "/api/monitor", token: d.token, json: #"{"paths":["test/Shows/Show (2020)"],"settings":"latest-season"}"#))
        #expect(monitor.status == 200, "\(monitor.text)")
        let monitors = try exchange(port: d.port, request("GET", "/api/monitors", token: d.token)).json["monitors"] as? [[String: Any]]
        #expect(monitors?.count == 1 && monitors?.first?["mode"] as? String == "latest-season")
    }

    /// A monitor whose series left the catalog (a rebuilt library gave the series new ids, and
    /// with no stored episode nothing says which is its series now) has no folder to be named by:
    /// `POST /api/monitor` with its `SERVER/SERIES-ID` and no settings removes it, from the API's
    /// list and the index. A name no monitor has is refused, and removes nothing.
    @Test func aMonitorWhoseSeriesLeftTheCatalogIsRemovedByItsServerAndSeriesId() throws {
        let d = try HTTPDaemon("http-monitor-name", http: "127.0.0.1:0")
        defer { d.stop() }
        func monitors() throws -> [[String: Any]] {
            try exchange(port: d.port, request("GET", "/api/monitors", token: d.token)).json["monitors"] as? [[String: Any]] ?? []
        }
        func remove(_ name: String) throws -> HTTPAnswer {
            try exchange(port: d.port, request("POST", "/api/monitor", token: d.token, json: #"{"paths":["\#(name)"],"settings":null}"#))
        }
        let show = "test/Shows/Show (2020)"
        let made = try exchange(port: d.port, request("POST", "/api/monitor", token: d.token, json: #"{"paths":["\#(show)"],"settings":"future"}"#))
        #expect(made.status == 200, "\(made.text)")
        let old = try #require(try monitors().first?["series_id"] as? String)
        d.fixture.readdLibraries()
        guard case .synced(let results) = d.daemon.handle(.sync(server: nil, full: true)) else { Issue.record("no sync answer"); return }
        #expect(results.allSatisfy { $0.error == nil }, "\(results)")
        // The folder is there under the series' new id; the monitor is still of the old one.
        #expect(d.daemon.fs.resolve(show.split(separator: "/").map(String.init)) != nil)
        #expect(try d.daemon.index.catalog(server: "test").flatMap(\.items).allSatisfy { $0.seriesId != old })
        #expect(try monitors().map { $0["series_id"] as? String } == [old])

        let typo = try remove("test/\(old)x")
        #expect(typo.status == 404 && typo.text.contains("`labstream monitor list` shows"), "\(typo.text)")
        #expect(try monitors().count == 1)
        let gone = try remove("test/\(old)")
        #expect(gone.status == 200 && gone.json["files"] as? Int == 1, "\(gone.text)")
        #expect(try monitors().isEmpty)
        #expect(try d.daemon.index.monitors().isEmpty)
        #expect(d.log.contains("no longer monitoring test/\(old)"), "\(d.log)")
    }

    /// The queue as the API shows and steers it, through the daemon's own queue calls: one fill
    /// slot, held by the first file's first answer, so the order stays to be read (every change
    /// keeps that file first: one put before it would take the slot and could finish).
    @Test func theQueueIsListedAndSteeredThroughTheAPI() throws {
        let d = try HTTPDaemon("http-queue", http: "127.0.0.1:0", configure: { $0.maxConcurrentFiles = 1 })
        defer { d.stop() }
        let gate = QueueTests.Gate()
        gate.install(on: d.fixture)
        defer { gate.release() }
        let pilot = "test/Shows/Show (2020)/Season 01/Show (2020) - S01E01 - Pilot.mkv"
        for path in [alpha, beta, pilot] {
            #expect(try exchange(port: d.port, request("POST", "/api/pin", token: d.token, json: #"{"paths":["\#(path)"]}"#)).status == 200)
        }
        #expect(eventually { gate.entered.get() }, "the first file's request never came")
        func order() throws -> [String] {
            let answer = try exchange(port: d.port, request("GET", "/api/queue", token: d.token))
            #expect(answer.status == 200)
            return (answer.json["queue"] as? [[String: Any]] ?? []).compactMap { $0["path"] as? String }
        }
        #expect(try order() == [alpha, beta, pilot])
        let move = try exchange(port: d.port, request("POST", "/api/move", token: d.token, json: #"{"path":"\#(pilot)","before":"\#(beta)"}"#))
        #expect(move.status == 200 && move.json["files"] as? Int == 1, "\(move.text)")
        #expect(try order() == [alpha, pilot, beta])
        let low = try exchange(port: d.port, request("POST", "/api/priority", token: d.token, json: #"{"paths":["\#(pilot)"],"priority":"low"}"#))
        #expect(low.status == 200, "\(low.text)")
        #expect(try order() == [alpha, beta, pilot])
        // Bad input is refused with the CLI's usage code, and changes nothing.
        let unknown = try exchange(port: d.port, request("POST", "/api/priority", token: d.token, json: #"{"paths":["\#(beta)"],"priority":"urgent"}"#))
        #expect(unknown.status == 400 && unknown.json["exit_code"] as? Int == Int(ExitCode.usage))
        let nowhere = try exchange(port: d.port, request("POST", "/api/move", token: d.token, json: #"{"before":"\#(beta)"}"#))
        #expect(nowhere.status == 400)
        #expect(try exchange(port: d.port, request("GET", "/api/queue")).status == 401)
        #expect(try order() == [alpha, beta, pilot])
    }

    /// The page's storage figure is the budget kept now: a SIGHUP's new `max_size` shows at the
    /// next poll, not the one read at mount.
    @Test func theStorageBudgetShownFollowsAReload() throws {
        let d = try HTTPDaemon("http-budget", http: "127.0.0.1:0", configure: { $0.maxCacheSize = Int64(64 * MiB) })
        defer { d.stop() }
        func budget() throws -> Int? {
            (try exchange(port: d.port, request("GET", "/api/status", token: d.token)).json["storage"] as? [String: Any])?["budget"] as? Int
        }
        #expect(try budget() == 64 * MiB)
        var config = try d.context.loadConfig()
        config.maxCacheSize = Int64(96 * MiB)
        let text = config.serialized()
        #expect(text.contains("[http]"), "\(text)")
        try text.write(toFile: d.context.configPath, atomically: true, encoding: .utf8)
        d.daemon.reconfigure()
        #expect(try budget() == 96 * MiB)
    }

    @Test func badInputIsRefusedWithProblemJSONAndLosesNothing() throws {
        let d = try HTTPDaemon("http-bad", http: "127.0.0.1:0")
        defer { d.stop() }
        let t = d.token
        func problem(_ raw: [UInt8], _ status: Int, _ exit: Int32, _ words: String) throws {
            let a = try exchange(port: d.port, raw)
            #expect(a.status == status, "\(a.text)")
            #expect(a.headers["content-type"] == "application/problem+json")
            #expect(a.json["status"] as? Int == status && a.json["exit_code"] as? Int == Int(exit))
            #expect((a.json["detail"] as? String)?.contains(words) == true, "\(a.text)")
        }
        try problem(request("POST", "/api/pin", token: t, json: "{\"paths\": [\"unclosed"), 400, ExitCode.usage, "not JSON")
        try problem(request("POST", "/api/pin", token: t, json: "[1, 2]"), 400, ExitCode.usage, "\"paths\"")
        try problem(request("POST", "/api/pin", token: t, json: #"{"paths":[3]}"#), 400, ExitCode.usage, "must be a string")
        try problem(request("POST", "/api/pin", token: t, json: #"{"paths":["\#(beta)"],"quality":"huge"}"#), 400, ExitCode.usage, "quality")
        try problem(request("POST", "/api/pin", token: t, json: #"{"paths":["test/Nowhere"]}"#), 404, ExitCode.noInput, "not in the mounted catalog")
        try problem(request("GET", "/api/status?path=test/Nowhere", token: t), 404, ExitCode.noInput, "test/Nowhere is not in the mounted catalog")
        try problem(request("GET", "/api/nothing", token: t), 404, ExitCode.noInput, "no such API route")
        try problem(request("GET", "/api/status?after=x", token: t), 400, ExitCode.usage, "after")
        try problem(Array("POST /api/pin HTTP/1.1\r\nAuthorization: Bearer \(t)\r\nContent-Length: 2\r\n\r\n{}".utf8), 415, ExitCode.usage, "application/json")
        try problem(Array("BLAH\r\n\r\n".utf8), 400, ExitCode.usage, "request line")
        try problem(Array("GET / HTTP/2.0\r\n\r\n".utf8), 505, ExitCode.usage, "HTTP/1.1")
        try problem(request("POST", "/api/pin", token: t, headers: ["Transfer-Encoding: chunked"]), 411, ExitCode.usage, "Content-Length")
        // A huge body is refused from its Content-Length, before it is read.
        let huge =
            Array("POST /api/pin HTTP/1.1\r\nAuthorization: Bearer \(t)\r\nContent-Type: application/json\r\nContent-Length: 104857600\r\n\r\n".utf8)
            + [UInt8](repeating: 32, count: 256 * 1024)
        try problem(huge, 413, ExitCode.usage, "at most 65536")
        // So is a huge head.
        try problem(request("GET", "/api/status", token: t, headers: ["X-Filler: " + String(repeating: "a", count: 20_000)]), 431, ExitCode.usage, "headers")
        let wrongMethod = try exchange(port: d.port, request("GET", "/api/pin", token: t))
        #expect(wrongMethod.status == 405 && wrongMethod.headers["allow"] != nil)

        // Nothing was pinned by any of it, and the daemon still answers.
        let overview = try exchange(port: d.port, request("GET", "/api/status", token: t))
        #expect(overview.status == 200 && (overview.json["files"] as? [Any])?.isEmpty == true)
    }

    @Test func manyCallersAtOnceAreEachAnsweredAndPinsAllLand() throws {
        let d = try HTTPDaemon("http-many", http: "127.0.0.1:0")
        defer { d.stop() }
        let t = d.token
        // A few idle connections hold workers; the rest are still served.
        var idle: [Int32] = []
        for _ in 0..<3 {
            let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
            var addr = sockaddr_in()
            addr.sin_family = sa_family_t(AF_INET)
            addr.sin_addr.s_addr = inet_addr("127.0.0.1")
            addr.sin_port = d.port.bigEndian
            _ = withUnsafePointer(to: &addr) { p in
                p.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
            }
            idle.append(fd)
        }
        defer { idle.forEach { close($0) } }
        let paths = [
            "test/Movies/Beta (2002)/Beta (2002).mp4", "test/Movies/Gamma/Gamma.mkv",
            "test/Shows/Show (2020)/Season 01/Show (2020) - S01E01 - Pilot.mkv", "test/Shows/Show (2020)/Season 02/Show (2020) - S02E01 - Return.mkv"
        ]
        let statuses = LockedBox<[Int]>([])
        // Threads of their own, released together: all 48 connect at once.
        let start = DispatchSemaphore(value: 0)
        let done = DispatchGroup()
        for i in 0..<48 {
            done.enter()
            Thread {
                start.wait()
                let raw =
                    i < paths.count
                    ? request("POST", "/api/pin", token: t, json: #"{"paths":["\#(paths[i])"]}"#)
                    : request("GET", i % 2 == 0 ? "/api/status" : "/api/search?q=show", token: t)
                var answer = (try? exchange(port: d.port, raw)) ?? HTTPAnswer(status: 0, headers: [:], body: [])
                statuses.update { $0.append(answer.status) }
                if answer.status == 503 {
                    #expect(answer.json["exit_code"] as? Int == Int(ExitCode.tempFail))
                }
                // A pin refused for load is said (503) and taken when asked again, as a person would.
                var tries = 0
                while i < paths.count, answer.status == 503, tries < 50 {
                    answer = (try? exchange(port: d.port, raw)) ?? answer
                    tries += 1
                }
                done.leave()
            }.start()
        }
        for _ in 0..<48 { start.signal() }
        done.wait()
        let all = statuses.get()
        #expect(all.count == 48 && all.allSatisfy { $0 == 200 || $0 == 503 }, "\(all)")
        #expect(all.filter { $0 == 200 }.count >= 5)
        let pinned = (try exchange(port: d.port, request("GET", "/api/status", token: t)).json["files"] as? [[String: Any]] ?? [])
            .filter { $0["pinned"] as? Bool == true }.compactMap { $0["path"] as? String }
        #expect(Set(pinned) == Set(paths))
    }

    @Test func onAUnixSocketTheDaemonsOwnUserNeedsNoToken() throws {
        let scratch = Scratch("http-unix-path")
        let path = scratch.path + "/api.sock"
        let d = try HTTPDaemon("http-unix", http: "unix:" + path)
        defer { d.stop() }
        #expect(d.address == "unix:" + path)
        let mine = try exchange(unixPath: path, request("GET", "/api/status"))
        #expect(mine.status == 200 && (mine.json["servers"] as? [Any])?.count == 1)
        let pin = try exchange(unixPath: path, request("POST", "/api/pin", json: #"{"paths":["\#(beta)"]}"#))
        #expect(pin.status == 200)
        d.stop()
        #expect(access(path, F_OK) != 0)  // the socket goes with the daemon
    }
}
