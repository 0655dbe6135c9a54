/// What a request to the local HTTP API asks, decided from its method, path and query alone
/// (the body is read by the adapter once the route is known to take one).
public enum APIRoute: Sendable, Hashable {
    /// The status page's files: `index.html`, `app.js`, `app.css`.
    case asset(String)
    /// `GET /api/status`: servers, storage, the files with local bytes or a pin, recent events.
    /// With `path`: the status of every file at or below each path instead. `after`/`wait`: the
    /// answer waits for a change past that point (at most `wait` seconds, 10).
    case status(paths: [String], after: Int?, wait: Double?)
    /// `GET /api/search?q=TEXT`: catalog files whose path holds every word.
    case search(String)
    /// `GET /api/monitors`.
    case monitors
    /// `GET /api/queue`: the pinned files still to fetch, in the order they are worked on.
    case queue
    /// `POST /api/priority` (`{"paths": […], "priority": "high|normal|low"}`) and `POST
    /// /api/move` (`{"path": P}` first, or `{"path": P, "before": OTHER}`): the queue steered.
    case queueChange(String)
    /// `POST /api/pin`, `/api/unpin`, `/api/pause|resume|retry|cancel|verify`, `/api/monitor`:
    /// a person's command; the body names the paths (and a quality or a monitor's settings).
    case command(String)

    /// The commands `POST /api/NAME` takes (besides the queue's `priority` and `move`).
    public static let commands: Set<String> = Set(["pin", "unpin", "monitor"] + QueueAction.allCases.map(\.rawValue))

    public static func route(method: String, path: String, query: [String: [String]]) -> Result<APIRoute, HTTPProblem> {
        func only(_ allowed: String, _ route: APIRoute) -> Result<APIRoute, HTTPProblem> {
            method == allowed || (allowed == "GET" && method == "HEAD")
                ? .success(route) : .failure(HTTPProblem(status: 405, exitCode: ExitCode.usage, detail: "\(path) takes \(allowed), not \(method)"))
        }
        switch path {
        case "/", "/index.html": return only("GET", .asset("index.html"))
        case "/app.js", "/app.css": return only("GET", .asset(String(path.dropFirst())))
        case "/api/status":
            var after: Int?
            var wait: Double?
            if let text = query["after"]?.last {
                guard let n = Int(text), n >= 0 else { return .failure(bad("after must be a change number from an earlier answer")) }
                after = n
            }
            if let text = query["wait"]?.last {
                guard let n = Double(text), n >= 0, n.isFinite else { return .failure(bad("wait must be a number of seconds")) }
                wait = min(n, 10)
            }
            return only("GET", .status(paths: query["path"] ?? [], after: after, wait: wait))
        case "/api/search":
            guard let text = query["q"]?.last, !text.trimming(" ").isEmpty else { return .failure(bad("search needs q=TEXT")) }
            return only("GET", .search(text))
        case "/api/monitors": return only("GET", .monitors)
        case "/api/queue": return only("GET", .queue)
        case "/api/priority", "/api/move": return only("POST", .queueChange(String(path.dropFirst("/api/".count))))
        default:
            if path.hasPrefix("/api/"), case let name = String(path.dropFirst("/api/".count)), commands.contains(name) {
                return only("POST", .command(name))
            }
            return .failure(HTTPProblem(status: 404, exitCode: ExitCode.noInput, detail: "no such API route: \(path) (see labstream-http(7))"))
        }
    }

    static func bad(_ detail: String) -> HTTPProblem { HTTPProblem(status: 400, exitCode: ExitCode.usage, detail: detail) }

    /// The body of `POST /api/NAME`, decoded into the daemon's typed command and its paths.
    /// `{"paths": ["SERVER/LIBRARY/…"], "quality": "10mbps"}` (pin only) or, for `monitor`,
    /// `{"paths": [SERIES-FOLDER], "settings": "latest-season"}` to monitor (or change) a series
    /// and `"settings": null` to stop.
    public static func command(_ name: String, body: JSONValueLite) -> Result<(FileCommand, [String]), HTTPProblem> {
        guard case .object(let fields) = body else { return .failure(bad("the body must be a JSON object with \"paths\"")) }
        guard case .array(let items)? = fields["paths"], !items.isEmpty else {
            return .failure(bad("the body needs \"paths\": a list of catalog paths (SERVER/LIBRARY/…)"))
        }
        var paths: [String] = []
        for item in items {
            guard case .string(let p) = item else { return .failure(bad("every entry of \"paths\" must be a string")) }
            paths.append(p)
        }
        switch name {
        case "pin":
            switch fields["quality"] {
            case nil, .null?: return .success((.pin(quality: nil), paths))
            case .string(let text)?:
                guard let q = Quality(text) else { return .failure(bad("quality must be \(Quality.spellings)")) }
                return .success((.pin(quality: q), paths))
            default: return .failure(bad("quality must be a string: \(Quality.spellings)"))
            }
        case "unpin": return .success((.unpin, paths))
        case "monitor":
            // Stopping is said in so many words (`null`): a body that forgot its settings must
            // not end a monitor. Settings are read here, so a bad one is a 400 naming it.
            switch fields["settings"] {
            case nil: return .failure(bad("the body needs \"settings\": such as \"latest-season\" to monitor, or null to stop monitoring"))
            case .null?: return .success((.monitor(nil), paths))
            case .string(let text)?:
                do throws(LabstreamError) {
                    _ = try SeriesMonitor.parseSettings(text)
                } catch {
                    return .failure(bad("settings: " + error.userMessage))
                }
                return .success((.monitor(text), paths))
            default: return .failure(bad("settings must be a string such as \"latest-season\", or null to stop"))
            }
        default:
            guard let action = QueueAction(rawValue: name) else { return .failure(bad("no such command: \(name)")) }
            return .success((.queue(action), paths))
        }
    }
}

/// A change of the queue's order, as `POST /api/priority|move` asks it.
public enum QueueChange: Sendable, Hashable {
    case priority(QueuePriority, paths: [String])
    /// `before` nil: first.
    case move(path: String, before: String?)

    public static func decode(_ name: String, body: JSONValueLite) -> Result<QueueChange, HTTPProblem> {
        guard case .object(let fields) = body else { return .failure(APIRoute.bad("the body must be a JSON object")) }
        if name == "priority" {
            guard case .string(let text)? = fields["priority"], let priority = QueuePriority(rawValue: text) else {
                return .failure(APIRoute.bad("the body needs \"priority\": high, normal or low"))
            }
            guard case .array(let items)? = fields["paths"], !items.isEmpty else {
                return .failure(APIRoute.bad("the body needs \"paths\": a list of catalog paths (SERVER/LIBRARY/…)"))
            }
            var paths: [String] = []
            for item in items {
                guard case .string(let p) = item else { return .failure(APIRoute.bad("every entry of \"paths\" must be a string")) }
                paths.append(p)
            }
            return .success(.priority(priority, paths: paths))
        }
        guard case .string(let path)? = fields["path"], !path.isEmpty else {
            return .failure(APIRoute.bad("the body needs \"path\": the catalog path to move"))
        }
        switch fields["before"] {
        case nil, .null?: return .success(.move(path: path, before: nil))
        case .string(let other)?: return .success(.move(path: path, before: other))
        default: return .failure(APIRoute.bad("\"before\" must be a catalog path, or left out to move first"))
        }
    }
}

/// Just enough of a decoded JSON document for a request body (Core has no Foundation).
public indirect enum JSONValueLite: Sendable, Hashable {
    case null, bool(Bool), number(Double), string(String), array([JSONValueLite]), object([String: JSONValueLite])
}
