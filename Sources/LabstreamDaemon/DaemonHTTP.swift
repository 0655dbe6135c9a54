import Foundation
import LabstreamCore
import LabstreamFS
import LabstreamStore
import Synchronization

/// The local HTTP API and status page (`[http]` in labstream.conf): the daemon's third door,
/// over the same typed calls as the control socket (`Daemon.handle`). Routes are decided by
/// `APIRoute`, who may call by `APIAccess`; this file only turns requests into those calls and
/// answers into JSON. See labstream-http(7).
final class WebAPI: Sendable {
    let listener: HTTPListener
    let token: String
    let recent: RecentEvents

    init(listener: HTTPListener, token: String, recent: RecentEvents) {
        self.listener = listener
        self.token = token
        self.recent = recent
    }

    /// `DATA_DIR/http.token`: made once (32 random bytes, hex), 0600, kept across restarts so a
    /// page signed in stays so. Never logged.
    static func token(_ layout: DataLayout) throws(CLIError) -> String {
        let path = layout.root + "/http.token"
        if let data = FileManager.default.contents(atPath: path) {
            let text = String(decoding: data, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
            if text.count >= 32 { return text }
        }
        var bytes = [UInt8](repeating: 0, count: 32)
        guard getentropy(&bytes, bytes.count) == 0 else { throw CLIError(ExitCode.osErr, "no randomness for the HTTP API's token") }
        let text = bytes.map { String(format: "%02x", $0) }.joined()
        do { try AtomicFile.write(text + "\n", to: path, mode: 0o600) } catch { throw CLIError(error) }
        return text
    }
}

/// What finished or failed for good lately (at most 50), newest last, for the status page.
final class RecentEvents: Sendable {
    struct Event: Sendable {
        var key: FileKey
        var outcome: FinishedFile.Outcome
        var reason: StatusReason?
        var at: Int64
    }

    let events = Mutex<[Event]>([])

    /// Called as a transfer finishes (maybe under its lock): only takes note.
    func note(_ key: FileKey, _ outcome: FinishedFile.Outcome, _ reason: StatusReason?) {
        let event = Event(key: key, outcome: outcome, reason: reason, at: Int64(Date().timeIntervalSince1970))
        events.withLock {
            $0.append(event)
            if $0.count > 50 { $0.removeFirst($0.count - 50) }
        }
    }

    var all: [Event] { events.withLock { $0 } }
}

extension Daemon {
    /// Where the HTTP API listens (`127.0.0.1:8280`, `unix:/path`), or nil when it is off.
    public var httpAddress: String? { web?.listener.address }

    static func startWeb(_ config: LabstreamConfig, context: Context, recent: RecentEvents, log: Logger) throws(CLIError) -> WebAPI? {
        guard let settings = config.http else { return nil }
        let token = try WebAPI.token(context.layout)
        return WebAPI(listener: try HTTPListener(settings, log: log), token: token, recent: recent)
    }

    /// One HTTP request: the page's files (no token: they hold no data), or an API call
    /// (authorized first).
    func answer(_ request: HTTPListener.Request, web: WebAPI) -> HTTPListener.Response {
        let route: APIRoute
        switch APIRoute.route(method: request.head.method, path: request.head.path, query: request.head.query) {
        case .success(let r): route = r
        case .failure(let problem):
            return .problem(problem, headers: problem.status == 405 ? [("Allow", request.head.path.hasPrefix("/api/") ? "GET, POST" : "GET")] : [])
        }
        if case .asset(let name) = route { return StatusPage.asset(name) }
        switch APIAccess.decide(peer: request.peer, policy: fs.access, authorization: request.head.headers["authorization"], token: web.token) {
        case .allowed: break
        case .refused(let why):
            return .problem(HTTPProblem(status: 401, exitCode: ExitCode.noPerm, detail: why), headers: [("WWW-Authenticate", "Bearer realm=\"labstream\"")])
        }
        switch route {
        case .asset: return .problem(HTTPProblem(status: 404, exitCode: ExitCode.noInput, detail: "no such page"))
        case .status(let paths, let after, let wait):
            return paths.isEmpty ? overview(after: after, wait: wait, web: web) : statuses(paths, after: after, wait: wait)
        case .search(let text): return search(text)
        case .monitors: return monitorList()
        case .queue:
            guard case .queue(let entries) = handle(.queue) else {
                return .problem(HTTPProblem(status: 500, exitCode: ExitCode.software, detail: "the daemon gave no queue"))
            }
            return Self.json(["queue": Self.encoded(entries)])
        case .queueChange(let name):
            let change: QueueChange
            switch Self.body(request).flatMap({ QueueChange.decode(name, body: $0) }) {
            case .failure(let problem): return .problem(problem)
            case .success(let c): change = c
            }
            let answer: DaemonResponse
            switch change {
            case .priority(let priority, let paths): answer = handle(.prioritize(priority, paths: paths))
            case .move(let path, let before): answer = handle(.moveInQueue(path: path, before: before))
            }
            switch answer {
            case .performed(let files, _): return Self.json(["files": files])
            case .failure(let code, let message): return .problem(HTTPProblem(exitCode: code, detail: message))
            default: return .problem(HTTPProblem(status: 500, exitCode: ExitCode.software, detail: "the daemon gave no answer"))
            }
        case .command(let name):
            let object: JSONValueLite
            switch Self.body(request) {
            case .failure(let problem): return .problem(problem)
            case .success(let o): object = o
            }
            switch APIRoute.command(name, body: object) {
            case .failure(let problem): return .problem(problem)
            case .success(let (command, paths)):
                switch handle(.perform(command, paths: paths)) {
                case .performed(let files, let parked):
                    var out: [String: Any] = ["files": files]
                    if let parked { out["parked_again"] = parked.map { ["path": $0.path, "missing": $0.missing, "message": $0.sentence] } }
                    return Self.json(out)
                case .failure(let code, let message): return .problem(HTTPProblem(exitCode: code, detail: message))
                default: return .problem(HTTPProblem(status: 500, exitCode: ExitCode.software, detail: "the daemon gave no answer"))
                }
            }
        }
    }

    /// Servers, storage, what has local bytes or a pin, and what finished lately: the page's poll.
    func overview(after: Int?, wait: Double?, web: WebAPI) -> HTTPListener.Response {
        // Only the files the index has a row for (pinned, stored, under way), never the whole
        // catalog: the page asks every second.
        let rows = (try? index.downloads()) ?? []
        let paths = Set(rows.compactMap { row in transfers.treePath(of: DerivedCopy.parse(row.key)?.base ?? row.key)?.joined(separator: "/") })
        guard case .statuses(let all, let change) = handle(.status(paths: paths.sorted(), after: after, wait: wait)) else {
            return .problem(HTTPProblem(status: 500, exitCode: ExitCode.software, detail: "the daemon gave no status"))
        }
        let files = all.filter { $0.state != .notLocal || $0.pinned || !$0.copies.isEmpty }
        let synced = Dictionary(((try? index.servers()) ?? []).map { ($0.name, $0.lastSync) }, uniquingKeysWith: { a, _ in a })
        let channels = channels.states()
        // What a person needs to see something is wrong, as `server list --json` names it; the
        // page puts it in words.
        let servers: [[String: Any]] = scheduler.configured.map { s in
            let reachability = transfers.reachability(of: s.name)
            var row: [String: Any] = ["name": s.name, "type": s.kind.rawValue, "reachability": reachability.rawValue]
            if let t = synced[s.name] ?? nil { row["last_sync"] = t }
            if reachability == .authFailed { row["sign_in_again"] = s.signInAgain }
            if let channel = channels[s.name] { row.merge(channel.jsonFields) { _, new in new } }
            return row
        }
        let used = rows.reduce(Int64(0)) { $0 + $1.present.byteCount }
        // The budget kept now, so a SIGHUP's new max_size shows at the next poll.
        var storage: [String: Any] = ["used": used, "budget": transfers.budget.maxSize]
        if let free = transfers.freeSpace { storage["free"] = free }
        let events: [[String: Any]] = web.recent.all.reversed().map { e in
            var row: [String: Any] = ["path": transfers.treePath(of: e.key)?.joined(separator: "/") ?? e.key.itemId, "outcome": e.outcome.rawValue, "at": e.at]
            if let reason = e.reason {
                row["message"] = reason.sentence
                let state: DisplayState = e.outcome == .failed ? .failed : e.outcome == .complete ? .complete : .unverified
                if let code = StatusReason.code(reason, state: state, cause: nil) { row["reason"] = code.rawValue }
            }
            return row
        }
        return Self.json(["servers": servers, "storage": storage, "files": Self.encoded(files), "events": events, "change": change])
    }

    func statuses(_ paths: [String], after: Int?, wait: Double?) -> HTTPListener.Response {
        switch handle(.status(paths: paths, after: after, wait: wait)) {
        case .statuses(let entries, let change): return Self.json(["files": Self.encoded(entries), "change": change])
        case .failure(let code, let message): return .problem(HTTPProblem(exitCode: code, detail: message))
        default: return .problem(HTTPProblem(status: 500, exitCode: ExitCode.software, detail: "the daemon gave no status"))
        }
    }

    /// Catalog files whose path holds every word of `text` (case-insensitive), at most 50; an
    /// episode names its series folder (`series`), which `POST /api/monitor` takes.
    func search(_ text: String) -> HTTPListener.Response {
        let words = text.lowercased().split(separator: " ").map(String.init)
        var hits: [[String: Any]] = []
        for file in (try? index.treeFiles()) ?? [] where DerivedCopy.parse(file.key) == nil {
            let path = file.path.joined(separator: "/")
            let lower = path.lowercased()
            guard words.allSatisfy({ lower.contains($0) }) else { continue }
            let row = transfers.row(for: file)
            var hit: [String: Any] = ["path": path, "state": FileStatus.state(of: row).rawValue, "pinned": row?.pinned ?? false, "bytes_total": file.size]
            if file.kind == .episode, file.path.count > 3 { hit["series"] = file.path.prefix(3).joined(separator: "/") }
            hits.append(hit)
            if hits.count == 50 { break }
        }
        return Self.json(["files": hits])
    }

    /// The monitors, with the fields `monitor list --json` gives them: the series folder
    /// (`path`; none for a series gone from the catalog) and what each held at its last look.
    func monitorList() -> HTTPListener.Response {
        let monitors = (try? index.monitors()) ?? []
        // Each monitored server's episodes by series and its tree files, read once.
        var folders: [String: [String: String]] = [:]
        if !monitors.isEmpty {
            let files = (try? index.treeFiles()) ?? []
            for server in Set(monitors.map(\.server)) {
                let episodes = ((try? index.catalog(server: server, reading: .withoutDetails)) ?? []).flatMap(\.items).filter { $0.kind == .episode }
                let seriesOf = Dictionary(episodes.map { ($0.id, $0.seriesId ?? "") }, uniquingKeysWith: { a, _ in a })
                var folder: [String: String] = [:]
                for file in files where file.key.server == server && file.path.count > 3 {
                    if let series = seriesOf[file.key.itemId], folder[series] == nil { folder[series] = file.path.prefix(3).joined(separator: "/") }
                }
                folders[server] = folder
            }
        }
        let rows: [[String: Any]] = monitors.map { m in
            var row: [String: Any] = [
                "server": m.server, "series_id": m.seriesId, "mode": m.mode.description, "settings": m.settings, "delete_watched": m.deleteWatched
            ]
            if let cap = m.maxStorage { row["max_storage"] = cap }
            if let path = folders[m.server]?[m.seriesId] { row["path"] = path }
            if let outcome = (try? index.monitorOutcome(server: m.server, series: m.seriesId)) ?? nil {
                row["episodes"] = outcome.episodes
                row["bytes"] = outcome.bytes
            }
            return row
        }
        return Self.json(["monitors": rows])
    }

    static func json(_ object: [String: Any]) -> HTTPListener.Response {
        let data = (try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys, .withoutEscapingSlashes])) ?? Data("{}".utf8)
        return HTTPListener.Response(status: 200, headers: [("Content-Type", "application/json; charset=utf-8")], body: Array(data))
    }

    /// A command's JSON body (`Content-Type: application/json`).
    static func body(_ request: HTTPListener.Request) -> Result<JSONValueLite, HTTPProblem> {
        guard request.head.headers["content-type"].map({ $0.lowercased().hasPrefix("application/json") }) ?? false else {
            return .failure(HTTPProblem(status: 415, exitCode: ExitCode.usage, detail: "send the body as Content-Type: application/json"))
        }
        guard let object = try? JSONSerialization.jsonObject(with: Data(request.body), options: [.fragmentsAllowed]) else {
            return .failure(HTTPProblem(status: 400, exitCode: ExitCode.usage, detail: "the body is not JSON"))
        }
        return .success(lite(object))
    }

    /// Values in the one JSON form the CLI's `--json` prints (statuses, the queue).
    static func encoded<T: Encodable>(_ entries: T) -> Any {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return (try? encoder.encode(entries)).flatMap { try? JSONSerialization.jsonObject(with: $0) } ?? []
    }

    static func lite(_ value: Any) -> JSONValueLite {
        switch value {
        case let s as String: return .string(s)
        case let n as NSNumber: return .number(n.doubleValue)
        case let a as [Any]: return .array(a.map(lite))
        case let o as [String: Any]: return .object(o.mapValues(lite))
        default: return .null
        }
    }
}
