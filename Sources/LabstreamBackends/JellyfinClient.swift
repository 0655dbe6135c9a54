import LabstreamCore

/// Talks to one Jellyfin server through an injected transport.
public struct JellyfinClient: MediaBackend {
    public let requests: JellyfinRequests
    public let transport: any HTTPTransport
    public let session: ServerSession
    public var pageSize: Int

    public var serverName: String { session.name }

    public init(session: ServerSession, identity: ClientIdentity, transport: any HTTPTransport, pageSize: Int = 200) {
        self.session = session
        self.requests = JellyfinRequests(baseURL: session.url, identity: identity)
        self.transport = transport
        self.pageSize = max(pageSize, 1)
    }

    /// Checks the URL answers as Jellyfin, then logs in. Nothing is stored here.
    public static func login(url: String, user: String, password: String, identity: ClientIdentity,
                             transport: any HTTPTransport) throws(LabstreamError) -> (JellyfinDecode.PublicInfo, JellyfinDecode.Login) {
        let requests = JellyfinRequests(baseURL: url, identity: identity)
        let info = try JellyfinDecode.publicInfo(expectOK(try call(transport, requests.publicInfo()), "/System/Info/Public"))
        let response = try call(transport, requests.authenticate(user: user, password: password))
        if response.status == 401 || response.status == 403 {
            throw .authenticationFailed("wrong user name or password for '\(user)'")
        }
        return (info, try JellyfinDecode.login(expectOK(response, "/Users/AuthenticateByName")))
    }

    /// Validates an existing token or API key and finds the user id it acts for.
    public static func adoptToken(url: String, user: String?, token: String, identity: ClientIdentity,
                                  transport: any HTTPTransport) throws(LabstreamError) -> (JellyfinDecode.PublicInfo, String) {
        let requests = JellyfinRequests(baseURL: url, identity: identity)
        let info = try JellyfinDecode.publicInfo(expectOK(try call(transport, requests.publicInfo()), "/System/Info/Public"))
        let me = try call(transport, requests.me(token: token))
        if me.status == 200 { return (info, try JellyfinDecode.userId(me.body)) }
        if me.status == 401 { throw .authenticationFailed("the token was not accepted") }
        // An API key has no user of its own: find the named user.
        guard let user else {
            throw .invalidArgument("this token is not a user session (an API key?); give --user NAME so Labstream knows whose libraries to mount")
        }
        let users = try expectOK(try call(transport, requests.users(token: token)), "/Users")
        return (info, try JellyfinDecode.userId(named: user, in: users))
    }

    public func fetchCatalog(progress: (String) -> Void) throws(LabstreamError) -> [LibraryCatalog] {
        let token = session.token
        let views = try JellyfinDecode.views(get(requests.userViews(userId: session.userId, token: token), "/UserViews"))
        var libraries: [LibraryCatalog] = []
        for view in views {
            switch view.collectionType {
            case "movies":
                let items = try pages("/Items") { start in
                    requests.items(userId: session.userId, parentId: view.id, types: "Movie", startIndex: start, limit: pageSize, token: token)
                }.compactMap { JellyfinDecode.item($0) }
                libraries.append(LibraryCatalog(id: view.id, name: view.name, items: items))
            case "tvshows":
                let series = try pages("/Items") { start in
                    requests.items(userId: session.userId, parentId: view.id, types: "Series", startIndex: start, limit: pageSize, token: token)
                }
                var episodes: [CatalogItem] = []
                for (index, s) in series.enumerated() {
                    guard let sid = s["Id"].string, !sid.isEmpty else { continue }
                    let name = s["Name"].string ?? "Unknown Series"
                    progress("\(view.name): \(name) (\(index + 1)/\(series.count))")
                    let seasons = try JellyfinDecode.seasonNumbers(get(requests.seasons(seriesId: sid, userId: session.userId, token: token), "/Shows/{id}/Seasons"))
                    let raw = try pages("/Shows/{id}/Episodes") { start in
                        requests.episodes(seriesId: sid, userId: session.userId, startIndex: start, limit: pageSize, token: token)
                    }
                    episodes += raw.compactMap { JellyfinDecode.item($0, series: (sid, name, s["ProductionYear"].int), seasons: seasons) }
                }
                libraries.append(LibraryCatalog(id: view.id, name: view.name, items: episodes))
            default:
                continue // music, photos, … are not mounted yet
            }
            progress("\(view.name): \(libraries.last?.items.count ?? 0) items")
        }
        return libraries
    }

    public func checkReachability() -> Reachability {
        let info = try? transport.send(requests.publicInfo())
        guard info?.status == 200 else { return ReachabilityPolicy.state(probeStatus: info?.status, authStatus: nil) }
        let me = try? transport.send(requests.me(token: session.token))
        return ReachabilityPolicy.state(probeStatus: 200, authStatus: me?.status)
    }

    public func rangeRequest(for key: FileKey, range: ByteRange, validator: Validator?) -> HTTPRequest {
        requests.download(sourceId: key.sourceId, range: range, validator: validator, token: session.token)
    }

    func get(_ request: HTTPRequest, _ what: String) throws(LabstreamError) -> [UInt8] {
        try Self.expectOK(try Self.call(transport, request), what)
    }

    /// Follows `startIndex`/`limit` until `TotalRecordCount` items arrived (or a short page).
    func pages(_ what: String, _ request: (Int) -> HTTPRequest) throws(LabstreamError) -> [JSONValue] {
        var all: [JSONValue] = []
        while true {
            let page = try JellyfinDecode.page(get(request(all.count), what), what)
            all += page.items
            if page.items.isEmpty || page.items.count < pageSize || all.count >= page.total { return all }
        }
    }

    static func call(_ transport: any HTTPTransport, _ request: HTTPRequest) throws(LabstreamError) -> HTTPResponse {
        do { return try transport.send(request) } catch { throw error.asLabstreamError }
    }

    static func expectOK(_ response: HTTPResponse, _ what: String) throws(LabstreamError) -> [UInt8] {
        switch response.status {
        case 200: return response.body
        case 401, 403: throw .authenticationFailed("\(what) answered \(response.status)")
        case 404: throw .malformedResponse("\(what) answered 404: is this a Jellyfin server, and is the URL its base URL?")
        default: throw .serverUnavailable("\(what) answered HTTP \(response.status)")
        }
    }
}
