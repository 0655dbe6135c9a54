import Foundation
import LabstreamCore
import Synchronization

/// Talks to one Plex Media Server with a server access token.
public struct PlexClient: MediaBackend, PreparedCopySource, ItemExtrasSource, MovableSources {
    public let requests: PlexRequests
    public let transport: any HTTPTransport
    public let session: ServerSession
    public var pageSize: Int
    /// Part keys learnt since the catalog's: the catalog's key → the part's key now.
    let movedParts = MovedParts()

    final class MovedParts: Sendable {
        let keys = Mutex<[String: String]>([:])
        /// Held while an item is asked where its part went, so fetches that met the old key
        /// together wait for one answer.
        let asking = NSLock()
    }

    public var serverName: String { session.name }
    public var kind: BackendKind { .plex }

    public init(session: ServerSession, identity: ClientIdentity, transport: any HTTPTransport, pageSize: Int = 200) {
        self.session = session
        self.requests = PlexRequests(baseURL: session.url, identity: identity)
        self.transport = transport
        self.pageSize = max(pageSize, 1)
    }

    // MARK: Signing in

    /// plex.tv's PIN flow: `announce` is told the code; `approved` polls until the user
    /// enters it at plex.tv/link, the PIN expires, or `deadline` passes. Returns the user token.
    public static func pinLogin(
        plexTV: String, identity: ClientIdentity, transport: any HTTPTransport, pollInterval: Double = 2,
        announce: (PlexDecode.Pin) -> Void
    ) throws(LabstreamError) -> String {
        let tv = PlexRequests(baseURL: plexTV, identity: identity)
        let created = try transport.call(tv.createPin())
        guard created.status == 201 || created.status == 200 else {
            throw .serverUnavailable("plex.tv did not create a PIN (HTTP \(created.status))")
        }
        let pin = try PlexDecode.pin(created.body)
        announce(pin)
        let deadline = pin.expiresAt.map { Double($0) } ?? Date().timeIntervalSince1970 + 900
        while true {
            let polled = try transport.call(tv.pin(id: pin.id))
            if polled.status == 404 { throw .authenticationFailed("the PIN \(pin.code) expired before it was approved; run the command again") }
            guard polled.status == 200 else { throw .serverUnavailable("plex.tv answered HTTP \(polled.status) while checking the PIN") }
            let state = try PlexDecode.pin(polled.body)
            if let token = state.authToken { return token }
            if Date().timeIntervalSince1970 >= Double(state.expiresAt ?? Int64(deadline)) {
                throw .authenticationFailed("the PIN \(pin.code) expired before it was approved; run the command again")
            }
            Thread.sleep(forTimeInterval: pollInterval)
        }
    }

    /// Finds the server to mount among the account's resources and a connection that answers.
    /// `url`, when given, wins over the advertised connections. Returns the base URL, the
    /// server's own access token and its machine identifier.
    public static func discover(
        plexTV: String, userToken: String, serverName: String?, url: String?, identity: ClientIdentity,
        transport: any HTTPTransport
    ) throws(LabstreamError) -> (url: String, token: String, machineId: String, name: String) {
        let tv = PlexRequests(baseURL: plexTV, identity: identity)
        let answer = try transport.call(tv.resources(token: userToken))
        if answer.status == 401 { throw .authenticationFailed("plex.tv did not accept the token") }
        guard answer.status == 200 else { throw .serverUnavailable("plex.tv /resources answered HTTP \(answer.status)") }
        var servers = try PlexDecode.servers(answer.body)
        if let serverName { servers = servers.filter { $0.name.lowercased() == serverName.lowercased() } }
        if servers.isEmpty {
            throw .invalidArgument(serverName.map { "this Plex account has no server named '\($0)'" } ?? "this Plex account has no Plex Media Server")
        }
        guard servers.count == 1 else {
            throw .invalidArgument("this Plex account has several servers (\(servers.map(\.name).joined(separator: ", "))); choose one with --server NAME")
        }
        let chosen = servers[0]
        let token = chosen.accessToken ?? userToken
        let candidates = url.map { [$0] } ?? PlexConnectionPolicy.order(chosen).map(\.uri)
        var tried: [String] = []
        for base in candidates {
            let requests = PlexRequests(baseURL: base, identity: identity)
            guard let response = try? transport.send(requests.identityRequest()), response.status == 200,
                let identity = try? PlexDecode.machineIdentifier(response.body)
            else {
                tried.append(base)
                continue
            }
            return (requests.baseURL, token, identity.id, chosen.name)
        }
        throw .serverUnavailable("no connection of Plex server '\(chosen.name)' answered (tried \(tried.joined(separator: ", ")))")
    }

    /// Checks a server token against the server itself.
    public static func check(url: String, token: String, identity: ClientIdentity, transport: any HTTPTransport) throws(LabstreamError) -> (
        machineId: String, version: String
    ) {
        let requests = PlexRequests(baseURL: url, identity: identity)
        let info = try PlexDecode.machineIdentifier(expectOK(try transport.call(requests.identityRequest()), "/identity"))
        let checked = (machineId: info.id, version: info.version)
        _ = try expectOK(try transport.call(requests.sections(token: token)), "/library/sections", allow404: true)
        return checked
    }

    // MARK: MediaBackend

    public func fetchCatalog(progress: (String) -> Void, stash: (any DetailsStash)?) throws(LabstreamError) -> [LibraryCatalog] {
        var libraries: [LibraryCatalog] = []
        for section in try sections() {
            switch section.type {
            case "movie":
                // Plex metadata type 1: a movie. Home videos ("Other Videos") are placed in the
                // server's folders instead: where each file lies below the section's locations.
                let placedBelow = section.holdsHomeVideos ? section.locations : nil
                let items = try pages("/library/sections/{id}/all", decode: { stash.stashing(PlexDecode.item($0, placedBelow: placedBelow)) }) { start in
                    requests.sectionItems(section: section.key, type: 1, start: start, size: pageSize, token: session.token)
                }
                libraries.append(LibraryCatalog(id: section.key, name: section.title, items: items))
            case "photo":
                libraries.append(LibraryCatalog(id: section.key, name: section.title, items: try photos(in: section)))
            case "artist":
                libraries.append(LibraryCatalog(id: section.key, name: section.title, items: try tracks(in: section)))
            case "show":
                let shows = try pages("/library/sections/{id}/all") { start in
                    requests.sectionItems(section: section.key, type: 2, start: start, size: pageSize, token: session.token)
                }
                var episodes: [CatalogItem] = []
                // A server that ignores `type` lists episodes here already: take them as they are,
                // with their show's year from its own metadata (an episode does not carry it).
                var years: [String: Int?] = [:]
                for e in shows where e["type"].string == "episode" {
                    guard var item = PlexDecode.item(e), let showKey = item.seriesId else { continue }
                    if years[showKey] == nil {
                        let show = try PlexDecode.page(
                            get(requests.metadata(showKey, token: session.token), "/library/metadata/{id}"), "/library/metadata/{id}")
                        years[showKey] = show.metadata.first?["year"].int
                    }
                    item.seriesYear = years[showKey] ?? nil
                    episodes.append(item)
                }
                var showDetails: [String: ItemDetails] = [:]
                for (index, show) in shows.enumerated() where show["type"].string ?? "show" == "show" {
                    guard let showKey = show["ratingKey"].text, !showKey.isEmpty else { continue }
                    showDetails[showKey] = PlexDecode.details(show)
                    let title = show["title"].string ?? "Unknown Series"
                    progress("\(section.title): \(title) (\(index + 1)/\(shows.count))")
                    let seasons = try children(of: showKey)
                    for season in seasons where season["type"].string == "season" {
                        guard let seasonKey = season["ratingKey"].text else { continue }
                        if let thumb = season["thumb"].string, thumb.hasPrefix("/"), let number = season["index"].int {
                            showDetails[showKey, default: ItemDetails()].assets.append(RemoteAsset(kind: .poster, ref: thumb, tag: thumb, season: number))
                        }
                        episodes += try children(of: seasonKey).compactMap { e in
                            var item = PlexDecode.item(e, show: (showKey, title, show["year"].int))
                            if item?.seasonNumber == nil { item?.seasonNumber = season["index"].int }
                            return stash.stashing(item)
                        }
                    }
                }
                libraries.append(LibraryCatalog(id: section.key, name: section.title, items: episodes, seriesDetails: showDetails))
            default:
                // Anything else Labstream cannot place: said, not mounted.
                libraries.append(LibraryCatalog(id: section.key, name: section.title, items: [], leftOut: LibraryCatalog.whyLeftOut(kind: section.type)))
            }
            progress("\(section.title): \(libraries.last?.items.count ?? 0) items")
        }
        return libraries
    }

    public var reachabilityProbes: (public: HTTPRequest, signedIn: HTTPRequest) {
        (requests.identityRequest(), requests.sections(token: session.token))
    }

    public func assetRequest(_ asset: PlannedAsset) -> HTTPRequest? {
        requests.asset(path: asset.asset.ref, token: session.token)
    }

    public func rangeRequest(for file: TreeFile, range: ByteRange, validator: Validator?) -> HTTPRequest {
        if case .queueItem(let queue, let item)? = file.prepared {
            return requests.downloadQueueMedia(queue, item: item, range: range, validator: validator, token: session.token)
        }
        return requests.part(key: partKey(of: file), range: range, validator: validator, token: session.token)
    }

    /// Where `file`'s part is: the catalog's key, or the one its item named since.
    func partKey(of file: TreeFile) -> String {
        let listed = file.etag ?? "/library/parts/\(file.key.sourceId)"
        return movedParts.keys.withLock { $0[listed] } ?? listed
    }

    /// A part key carries the file's changestamp: once the file changes its old key answers 404
    /// ("The part doesn't exist"), and the item's metadata names the part (same id) at its new key.
    public func sourceMoved(_ file: TreeFile, asked request: HTTPRequest, status: Int) -> String? {
        func url(_ key: String) -> String { requests.part(key: key, range: ByteRange(0, 1), validator: nil, token: "").url }
        func moved(to key: String) -> String { "its old part key answers 404 and its item names the part at \(key) now; a new open reads it there" }
        guard status == 404, file.prepared == nil, let listed = file.etag else { return nil }
        // Fetches in flight together all meet the old key: the item is asked once.
        movedParts.asking.lock()
        defer { movedParts.asking.unlock() }
        if let known = movedParts.keys.withLock({ $0[listed] }), request.url != url(known) { return moved(to: known) }
        guard
            let answer = try? transport.call(requests.metadata(file.key.itemId, token: session.token)), answer.status == 200,
            let now = try? PlexDecode.partKey(answer.body, partId: file.key.sourceId),
            request.url != url(now)
        else { return nil }
        movedParts.keys.withLock { $0[listed] = now }
        return moved(to: now)
    }

    // MARK: Server-prepared copies: the download queue

    /// A job id is `<queue>/<item>`.
    static func queueJob(_ job: String) -> (queue: Int, item: Int)? {
        let parts = job.split(separator: "/")
        guard parts.count == 2, let queue = Int(parts[0]), let item = Int(parts[1]) else { return nil }
        return (queue, item)
    }

    public func startPreparation(of file: TreeFile, route: Route) throws(LabstreamError) -> String {
        guard case .serverPreparedCopy(let bitsPerSecond, .queue) = route else { throw .invalidArgument("Plex prepares only capped copies") }
        let position = try PlexDecode.partPosition(
            get(requests.metadata(file.key.itemId, token: session.token), "/library/metadata/{id}"),
            partId: file.key.sourceId)
        let queue = try PlexDecode.downloadQueueId(get(requests.createDownloadQueue(token: session.token), "/downloadQueue"))
        let added = try get(
            requests.addToDownloadQueue(
                queue, key: "/library/metadata/\(file.key.itemId)", mediaIndex: position.media,
                partIndex: position.part, kilobitsPerSecond: bitsPerSecond / 1000, token: session.token),
            "/downloadQueue/{id}/add")
        return "\(queue)/\(try PlexDecode.addedQueueItemId(added))"
    }

    /// Items of this client's queue added for the same item at the same bitrate that have not
    /// failed or expired.
    public func existingPreparations(of file: TreeFile, route: Route) throws(LabstreamError) -> [String] {
        guard case .serverPreparedCopy(let bitsPerSecond, .queue) = route else { return [] }
        let queue = try PlexDecode.downloadQueueId(get(requests.createDownloadQueue(token: session.token), "/downloadQueue"))
        let key = "/library/metadata/\(file.key.itemId)"
        return try PlexDecode.downloadQueueItems(get(requests.downloadQueueItems(queue, token: session.token), "/downloadQueue/{id}/items"))
            .filter { $0.key == key && ($0.kbps.map { $0 == bitsPerSecond / 1000 } ?? true) && !["error", "expired"].contains($0.status) }
            .sorted { $0.id > $1.id }.map { "\(queue)/\($0.id)" }
    }

    public func preparation(job: String) throws(LabstreamError) -> Preparation {
        guard let (queue, item) = Self.queueJob(job) else { return .failed("'\(job)' is not a Plex download queue item") }
        let answer = try transport.call(requests.downloadQueueItem(queue, item: item, token: session.token))
        if answer.status == 404 { return .failed("Plex no longer knows download queue item \(job) (removed or expired)") }
        let state = try PlexDecode.downloadQueueItem(Self.expectOK(answer, "/downloadQueue/{id}/items/{itemId}"))
        switch state.status {
        case "available":
            let probe = try transport.sizeOf(requests.downloadQueueMedia(queue, item: item, range: ByteRange(0, 1), validator: nil, token: session.token))
            guard probe.status == 206, let total = probe.size else {
                return .failed("Plex's prepared file for item \(job) does not answer ranged requests (HTTP \(probe.status)); pin the original instead")
            }
            return .ready(.queueItem(queue: queue, item: item), size: total)
        case "error":
            return .failed("Plex could not prepare item \(job): \(state.error ?? "the transcode failed")")
        case "expired":
            return .failed("Plex's prepared file for item \(job) expired before it was fetched; pin it again to have it prepared anew")
        default:
            let progress = state.progress.map { " \(Int($0))%" } ?? ""
            return .running("Plex is preparing the copy (download queue item \(job): \(state.status)\(progress))")
        }
    }

    /// The file arrived: the queue item goes, so the server can drop its transcode.
    public func finishPreparation(job: String, file: PreparedFile) throws(LabstreamError) {
        guard let request = cancelPreparationRequest(job: job) else { return }
        let answer = try transport.call(request)
        guard (200..<300).contains(answer.status) || answer.status == 404 else {
            throw .serverUnavailable("DELETE /downloadQueue/{id}/items/{itemId} answered HTTP \(answer.status)")
        }
    }

    public func cancelPreparationRequest(job: String) -> HTTPRequest? {
        Self.queueJob(job).map { requests.removeDownloadQueueItem($0.queue, item: $0.item, token: session.token) }
    }

    public var extrasNeedEntry: Bool { false }

    public func extras(of itemId: String, entry: ManagedEntry?) throws(LabstreamError) -> ItemDetails? {
        let what = "/library/metadata/{id}"
        guard let item = try PlexDecode.page(get(requests.metadata(itemId, token: session.token, chapters: true), what), what).metadata.first else {
            throw .malformedResponse("\(what) answered no Metadata for item \(itemId)")
        }
        return PlexDecode.extras(item)
    }

    func get(_ request: HTTPRequest, _ what: String) throws(LabstreamError) -> [UInt8] {
        try Self.expectOK(try CatalogRequestRetry().call(request, on: transport) { checkReachability() == .online }, what)
    }

    func sections() throws(LabstreamError) -> [PlexDecode.Section] {
        let first = try CatalogRequestRetry().call(requests.sections(token: session.token), on: transport) { checkReachability() == .online }
        if first.status == 404 {
            return try PlexDecode.sections(Self.expectOK(try transport.call(requests.sections(token: session.token, newerPath: true)), "/library/sections/all"))
        }
        return try PlexDecode.sections(Self.expectOK(first, "/library/sections"))
    }

    /// A music section's tracks: metadata type 10, the number Plex answers to and the spec's own
    /// examples use; a server that refuses it or lists no track there is asked for 7, the
    /// number the spec's `type` enum gives a track.
    func tracks(in section: PlexDecode.Section) throws(LabstreamError) -> [CatalogItem] {
        var found: [CatalogItem] = []
        for type in [10, 7] where found.isEmpty {
            do {
                found = try pages("/library/sections/{id}/all") { start in
                    requests.sectionItems(section: section.key, type: type, start: start, size: pageSize, token: session.token)
                }.compactMap { PlexDecode.item($0) }.filter { $0.kind == .track }
            } catch .refused where type == 10 {
                continue
            }
        }
        return found
    }

    /// A photo section's pictures and videos in their albums (Plex's photo albums are the
    /// section's folders), walked from the section's top level, so no metadata type number is
    /// asked for (the spec's numbers for photos are not the ones Plex answers to). A photo listed
    /// both in an album and at the top (a server that lists the section flat) keeps its album.
    func photos(in section: PlexDecode.Section) throws(LabstreamError) -> [CatalogItem] {
        var placed: [String: CatalogItem] = [:]
        var order: [String] = []
        var walked = Set<String>()
        func walk(_ listing: [JSONValue], folders: [String]) throws(LabstreamError) {
            for j in listing {
                if j["type"].string == "photoalbum" {
                    guard let key = j["ratingKey"].text, walked.insert(key).inserted else { continue }
                    try walk(children(of: key), folders: folders + [j["title"].string ?? key])
                } else if var item = PlexDecode.item(j), item.kind == .photo || item.kind == .other {
                    item.folders = folders
                    if let known = placed[item.id] {
                        if known.folders.count < folders.count { placed[item.id] = item }
                    } else {
                        placed[item.id] = item
                        order.append(item.id)
                    }
                }
            }
        }
        try walk(
            pages("/library/sections/{id}/all") { start in
                requests.sectionItems(section: section.key, type: nil, start: start, size: pageSize, token: session.token)
            }, folders: [])
        return order.compactMap { placed[$0] }
    }

    func children(of key: String) throws(LabstreamError) -> [JSONValue] {
        try pages("/library/metadata/{id}/children") { start in requests.children(of: key, start: start, size: pageSize, token: session.token) }
    }

    /// Follows `X-Plex-Container-Start/Size` until `totalSize` items arrived (or a short page).
    func pages(_ what: String, _ request: (Int) -> HTTPRequest) throws(LabstreamError) -> [JSONValue] {
        try pages(what, decode: { $0 }, request)
    }

    /// Every entry of a paged listing, decoded by `decode` as each page arrives (nil: left out).
    func pages<Entry>(_ what: String, decode: (JSONValue) -> Entry?, _ request: (Int) -> HTTPRequest) throws(LabstreamError) -> [Entry] {
        var pages = PageCollector<Entry>(key: { $0["ratingKey"].text })
        var ahead: [PageAhead<HTTPResponse>] = []
        defer { PageAhead.settle(ahead) }
        while true {
            let start = pages.count
            let response = try PageAhead.page(at: start, from: &ahead) { () throws(LabstreamError) in try transport.call(request(start)) }
            let page = try PlexDecode.page(Self.expectOK(response, what), what)
            let total = page.total ?? response.header("X-Plex-Container-Total-Size").flatMap { Int($0) }
            if let total { pages.expect(total) }
            let progressed = pages.add(page.metadata, decode: decode)
            if !progressed || page.metadata.count < pageSize || total.map({ pages.count >= $0 }) ?? false { return pages.all }
            if let total {
                PageAhead.topUp(&ahead, after: start, pageCount: page.metadata.count, total: total) { offset in
                    let (transport, next) = (transport, request(offset))
                    return { () throws(LabstreamError) in try transport.call(next) }
                }
            }
        }
    }

    static func expectOK(_ response: HTTPResponse, _ what: String, allow404: Bool = false) throws(LabstreamError) -> [UInt8] {
        switch response.status {
        case 200: return response.body
        case 404 where allow404: return response.body
        case 401, 403: throw .authenticationFailed("\(what) answered \(response.status)")
        case 404: throw .malformedResponse("\(what) answered 404: is this a Plex Media Server, and is the URL its base URL?")
        default: throw .answered(response.status, to: what, body: response.body)
        }
    }
}
