import LabstreamCore

/// Talks to one Jellyfin or Emby server through an injected transport.
public struct MediaBrowserClient: MediaBackend, IncrementalCatalog, WatchedState, LiveCopySource, PreparedCopySource, SideAssetSource {
    public let requests: MediaBrowserRequests
    public let transport: any HTTPTransport
    public let session: ServerSession
    public var pageSize: Int

    public var serverName: String { session.name }
    public var kind: BackendKind { requests.flavor.kind }

    public init(
        flavor: MediaBrowserFlavor = .jellyfin, session: ServerSession, identity: ClientIdentity,
        transport: any HTTPTransport, pageSize: Int = 200
    ) {
        self.session = session
        self.requests = MediaBrowserRequests(flavor: flavor, baseURL: session.url, identity: identity, userId: session.userId)
        self.transport = transport
        self.pageSize = max(pageSize, 1)
    }

    /// The base URL the API answers at, with its public info. Emby serves its API below `/emby`
    /// (its spec's base path); users give the server URL with or without it.
    public static func resolve(
        flavor: MediaBrowserFlavor, url: String, identity: ClientIdentity,
        transport: any HTTPTransport
    ) throws(LabstreamError) -> (url: String, info: MediaBrowserDecode.PublicInfo) {
        var base = url
        while base.hasSuffix("/") { base.removeLast() }
        let candidates = flavor == .emby && !base.lowercased().hasSuffix("/emby") ? [base + "/emby", base] : [base]
        var failure: LabstreamError?
        for candidate in candidates {
            let requests = MediaBrowserRequests(flavor: flavor, baseURL: candidate, identity: identity)
            let body: [UInt8]
            do throws(LabstreamError) {
                body = try expectOK(try transport.call(requests.publicInfo()), "/System/Info/Public", flavor)
            } catch {
                if case .serverUnavailable = error { throw error }  // nothing answers at all
                failure = failure ?? error
                continue
            }
            // An answer that names another product says more than a 404 elsewhere.
            do throws(LabstreamError) { return (candidate, try MediaBrowserDecode.publicInfo(body, flavor: flavor, url: url)) } catch { failure = error }
        }
        // Emby answers below `/emby` only: a Jellyfin add given an Emby server's URL names it.
        var refused = false
        if case .invalidArgument = failure! { refused = true }
        if flavor == .jellyfin, !refused,
            let answer = try? transport.call(MediaBrowserRequests(flavor: .emby, baseURL: base + "/emby", identity: identity).publicInfo()),
            answer.status == 200
        {
            do throws(LabstreamError) { _ = try MediaBrowserDecode.publicInfo(answer.body, flavor: .jellyfin, url: url) } catch {
                if case .invalidArgument = error { throw error }
            }
        }
        throw refused ? failure! : ProductProbe.naming(failure!, asked: flavor.kind, url: url, identity: identity, transport: transport)
    }

    /// Checks the URL answers as the expected product, then logs in. Nothing is stored here.
    public static func login(
        flavor: MediaBrowserFlavor = .jellyfin, url: String, user: String, password: String, identity: ClientIdentity,
        transport: any HTTPTransport
    ) throws(LabstreamError) -> (url: String, info: MediaBrowserDecode.PublicInfo, login: MediaBrowserDecode.Login) {
        let (base, info) = try resolve(flavor: flavor, url: url, identity: identity, transport: transport)
        let requests = MediaBrowserRequests(flavor: flavor, baseURL: base, identity: identity)
        let response = try transport.call(requests.authenticate(user: user, password: password))
        if response.status == 401 || response.status == 403 {
            throw .authenticationFailed("wrong user name or password for '\(user)'")
        }
        return (base, info, try MediaBrowserDecode.login(expectOK(response, "/Users/AuthenticateByName", flavor)))
    }

    /// Validates an existing token or API key and finds the user id it acts for.
    public static func adoptToken(
        flavor: MediaBrowserFlavor = .jellyfin, url: String, user: String?, token: String, identity: ClientIdentity,
        transport: any HTTPTransport
    ) throws(LabstreamError) -> (url: String, info: MediaBrowserDecode.PublicInfo, userId: String) {
        let (base, info) = try resolve(flavor: flavor, url: url, identity: identity, transport: transport)
        let requests = MediaBrowserRequests(flavor: flavor, baseURL: base, identity: identity)
        if flavor == .jellyfin {
            let me = try transport.call(requests.me(token: token))
            if me.status == 200 { return (base, info, try MediaBrowserDecode.userId(me.body)) }
            if me.status == 401 { throw .authenticationFailed("the token was not accepted") }
        }
        // An API key (and any Emby token: Emby has no "who am I") needs the user's name.
        guard let user else {
            throw .invalidArgument(
                flavor == .jellyfin
                    ? "this token is not a user session (an API key?); give --user NAME so Labstream knows whose libraries to mount"
                    : "Emby tokens do not say whose they are; give --user NAME so Labstream knows whose libraries to mount")
        }
        let users = try expectOK(try transport.call(requests.users(token: token)), "the user list", flavor)
        return (base, info, try MediaBrowserDecode.userId(named: user, in: users))
    }

    public func fetchCatalog(progress: (String) -> Void, stash: (any DetailsStash)?) throws(LabstreamError) -> [LibraryCatalog] {
        let token = session.token
        let views = try MediaBrowserDecode.views(get(requests.userViews(userId: session.userId, token: token), "/UserViews"))
        var libraries: [LibraryCatalog] = []
        for view in views {
            switch view.collectionType {
            case "movies", "music":
                let type = view.collectionType == "music" ? "Audio" : "Movie"
                let items = try pages("/Items", decode: { stash.stashing(MediaBrowserDecode.item($0)) }) { start in
                    requests.items(userId: session.userId, parentId: view.id, types: type, startIndex: start, limit: pageSize, token: token)
                }
                libraries.append(LibraryCatalog(id: view.id, name: view.name, items: items))
            case "tvshows":
                let series = try pages("/Items") { start in
                    requests.items(userId: session.userId, parentId: view.id, types: "Series", startIndex: start, limit: pageSize, token: token)
                }
                var episodes: [CatalogItem] = []
                var seriesDetails: [String: ItemDetails] = [:]
                // A server that ignores includeItemTypes answers seasons and episodes too: series only.
                for (index, s) in series.enumerated() where (s["Type"].string ?? "Series") == "Series" {
                    guard let sid = s["Id"].string, !sid.isEmpty else { continue }
                    seriesDetails[sid] = MediaBrowserDecode.details(s)
                    let name = s["Name"].string ?? "Unknown Series"
                    progress("\(view.name): \(name) (\(index + 1)/\(series.count))")
                    let (seasons, posters) = try MediaBrowserDecode.seasons(
                        get(requests.seasons(seriesId: sid, userId: session.userId, token: token), "/Shows/{id}/Seasons"))
                    if !posters.isEmpty { seriesDetails[sid, default: ItemDetails()].assets += posters }
                    episodes += try pages(
                        "/Shows/{id}/Episodes",
                        decode: { stash.stashing(MediaBrowserDecode.item($0, series: (sid, name, s["ProductionYear"].int), seasons: seasons)) }
                    ) { start in
                        requests.episodes(seriesId: sid, userId: session.userId, startIndex: start, limit: pageSize, token: token)
                    }
                }
                libraries.append(LibraryCatalog(id: view.id, name: view.name, items: episodes, seriesDetails: seriesDetails))
            case "musicvideos":
                libraries.append(LibraryCatalog(id: view.id, name: view.name, items: try musicVideos(in: view, stash: stash)))
            case let kind where Self.isFolderLibrary(kind):
                libraries.append(LibraryCatalog(id: view.id, name: view.name, items: try folderItems(in: view)))
            default:
                // Photos, live TV, playlists…: said, not mounted.
                libraries.append(LibraryCatalog(id: view.id, name: view.name, items: [], leftOut: LibraryCatalog.whyLeftOut(kind: view.collectionType)))
            }
            progress("\(view.name): \(libraries.last?.items.count ?? 0) items")
        }
        return libraries
    }

    /// Home-video, photo and mixed libraries: the server's own folders. Jellyfin says `folders`
    /// for a mixed library, Emby leaves CollectionType out.
    static func isFolderLibrary(_ kind: String?) -> Bool { ["homevideos", "photos", "folders", "mixed", nil].contains(kind) }

    /// The videos, photos (and, in a mixed library, films) of a folder library, in its folders.
    func folderItems(in view: MediaBrowserDecode.View) throws(LabstreamError) -> [CatalogItem] {
        let raw = try pages("/Items") { start in
            requests.items(
                userId: session.userId, parentId: view.id, types: "Folder,PhotoAlbum,Video,Movie,Photo", startIndex: start,
                limit: pageSize, token: session.token)
        }
        // A photo's size (Jellyfin's DTO has none) is learnt at sync like any unsized file's.
        return MediaBrowserDecode.folderItems(raw, root: view.id)
    }

    /// A music-video library's videos as `Title (Year)` in their artist's folder; `savedSince`:
    /// only those saved since then.
    func musicVideos(in view: MediaBrowserDecode.View, savedSince: String? = nil, stash: (any DetailsStash)? = nil) throws(LabstreamError) -> [CatalogItem] {
        try pages("/Items", decode: { stash.stashing(MediaBrowserDecode.item($0, otherVideos: true)) }) { start in
            requests.items(
                userId: session.userId, parentId: view.id, types: "MusicVideo", startIndex: start, limit: pageSize,
                token: session.token, savedSince: savedSince)
        }.filter { $0.kind == .other }.map { video in
            var titled = video
            titled.title = Naming.titled(video.title, year: video.year)
            return titled
        }
    }

    /// `minDateLastSaved` over each movie and TV library, each page applied as it arrives. A
    /// changed episode of a series the stored catalog does not know (a new series), a library
    /// gone, or a library whose item count on the server is not what the merged catalog would
    /// hold (a removal) needs the full walk: false.
    public func fetchChanges(
        since: Int64, known: CatalogOutline, progress: (String) -> Void, stash: (any DetailsStash)?,
        apply: (LibraryCatalog) throws(LabstreamError) -> Void
    ) throws(LabstreamError) -> Bool {
        let token = session.token
        let stamp = ISODate.string(epochSeconds: since)
        let series = known.seriesYears
        let knownIds = Dictionary(known.libraries.map { ($0.id, $0.itemIds) }, uniquingKeysWith: { a, _ in a })
        /// The server's count of `view`'s items of `types` (`TotalRecordCount` of a one-item page).
        func total(_ view: MediaBrowserDecode.View, types: String) throws(LabstreamError) -> Int {
            try MediaBrowserDecode.page(
                get(
                    requests.items(
                        userId: session.userId, parentId: view.id, types: types, startIndex: 0,
                        limit: 1, token: token), "/Items"), "/Items"
            ).total
        }
        /// A removal changes no item's save date: the server's count of the library's items, set
        /// against what the stored catalog will hold, tells. Any difference: read everything.
        /// `added`: how many changed items the stored catalog does not hold.
        func countAgrees(_ view: MediaBrowserDecode.View, types: String, added: Int) throws(LabstreamError) -> Bool {
            let total = try total(view, types: types)
            let expected = (knownIds[view.id]?.count ?? 0) + added
            if total != expected { progress("\(view.name): \(total) items on the server, \(expected) known; reading everything") }
            return total == expected
        }
        let views = try MediaBrowserDecode.views(get(requests.userViews(userId: session.userId, token: token), "/UserViews"))
        // A library gone from the server goes only with a full read.
        guard Set(knownIds.keys).isSubset(of: Set(views.map(\.id))) else {
            progress("a library is gone from the server; reading everything")
            return false
        }
        for view in views {
            let types: String
            switch view.collectionType {
            case "movies": types = "Movie"
            case "tvshows": types = "Episode"
            case "music": types = "Audio"
            case "musicvideos":
                let items = try musicVideos(in: view, savedSince: stamp, stash: stash)
                let stored = knownIds[view.id] ?? []
                guard try countAgrees(view, types: "MusicVideo", added: Set(items.map(\.id)).subtracting(stored).count) else { return false }
                progress("\(view.name): \(items.count) changed")
                try apply(LibraryCatalog(id: view.id, name: view.name, items: items))
                continue
            case let kind where Self.isFolderLibrary(kind):
                // A changed file's folders may not have changed: anything changed or removed in the
                // library re-reads that library (only that one) whole.
                let changed = try MediaBrowserDecode.page(
                    get(
                        requests.items(
                            userId: session.userId, parentId: view.id, types: "Video,Movie,Photo",
                            startIndex: 0, limit: 1, token: token, savedSince: stamp), "/Items"), "/Items")
                let count = try total(view, types: "Video,Movie,Photo")
                guard !changed.items.isEmpty || count != (knownIds[view.id]?.count ?? 0) else { continue }
                let items = try folderItems(in: view)
                progress("\(view.name): changed, \(items.count) items")
                try apply(LibraryCatalog(id: view.id, name: view.name, items: items))
                continue
            default: continue
            }
            // Counts, not a set of 100 000 ids: the pages' own walk already drops repeats.
            let stored = knownIds[view.id] ?? []
            var changed = 0, added = 0
            var unknownSeries = false
            try eachPage("/Items", decode: { MediaBrowserDecode.item($0) }) { start in
                requests.items(userId: session.userId, parentId: view.id, types: types, startIndex: start, limit: pageSize, token: token, savedSince: stamp)
            } deliver: { (page: [CatalogItem], _: Int) throws(LabstreamError) -> Bool in
                var items: [CatalogItem] = []
                items.reserveCapacity(page.count)
                for var item in page {
                    if item.kind == .episode {
                        guard let sid = item.seriesId, let year = series[sid], item.seasonNumber != nil else {
                            unknownSeries = true
                            return false
                        }
                        item.seriesYear = year
                    }
                    changed += 1
                    if !stored.contains(item.id) { added += 1 }
                    items.append(stash.stashing(item) ?? item)
                }
                guard !items.isEmpty else { return true }
                try apply(LibraryCatalog(id: view.id, name: view.name, items: items))
                return true
            }
            guard !unknownSeries, try countAgrees(view, types: types, added: added) else { return false }
            // A library where nothing changed is still named (a rename is a change).
            if changed == 0 { try apply(LibraryCatalog(id: view.id, name: view.name, items: [])) }
            progress("\(view.name): \(changed) changed")
        }
        return true
    }

    public var reachabilityProbes: (public: HTTPRequest, signedIn: HTTPRequest) {
        (requests.publicInfo(), requests.me(token: session.token))
    }

    /// The series' episodes with `isPlayed` (Jellyfin `/Items`, Emby `/Users/{UserId}/Items`),
    /// each with its own `UserData.Played` (asked with `enableUserData`).
    public func watchedEpisodes(ofSeries series: [String]) throws(LabstreamError) -> WatchedAnswer {
        var out = WatchedAnswer(listed: [])
        for id in series {
            let listed = try pages("/Items") { start in
                requests.items(
                    userId: session.userId, parentId: id, types: "Episode", startIndex: start, limit: pageSize, token: session.token, played: true)
            }
            for item in listed {
                guard let itemId = item["Id"].string else { continue }
                out.listed.insert(itemId)
                if item["UserData"]["Played"].bool == false { out.ownFlagUnwatched.insert(itemId) }
            }
        }
        return out
    }

    public func assetRequest(_ asset: PlannedAsset) -> HTTPRequest? {
        requests.asset(asset.asset, format: asset.fileExtension, token: session.token)
    }

    public func startPreparation(of file: TreeFile, route: Route) throws(LabstreamError) -> String {
        guard requests.flavor == .emby, case .serverPreparedCopy(let bps, .job) = route else {
            throw .invalidArgument("\(requests.flavor.product) has no Convert jobs")
        }
        let body = try get(
            requests.createSyncJob(
                itemId: requests.downloadItemId(of: file), userId: session.userId, bitrate: bps,
                name: Self.syncJobName(file), token: session.token), "/Sync/Jobs")
        let j = try MediaBrowserDecode.json(body, "/Sync/Jobs")
        guard let id = j["Job"]["Id"].text else { throw .malformedResponse("/Sync/Jobs answered no Job.Id") }
        return id
    }

    /// Convert jobs for this device (`TargetId`) of the same item (`RequestedItemIds`) at the
    /// same bitrate that have not failed or been cancelled.
    public func existingPreparations(of file: TreeFile, route: Route) throws(LabstreamError) -> [String] {
        guard requests.flavor == .emby, case .serverPreparedCopy(let bps, .job) = route else { return [] }
        let item = requests.downloadItemId(of: file)
        let jobs = try MediaBrowserDecode.page(get(requests.syncJobs(token: session.token), "/Sync/Jobs"), "/Sync/Jobs").items
        return jobs.filter { j in
            // The item it was asked for, or the name Labstream gives its jobs.
            let same = (j["RequestedItemIds"].array ?? []).contains { $0.text == item } || j["Name"].string == Self.syncJobName(file)
            return j["TargetId"].string == requests.identity.deviceId && same
                && (j["Bitrate"].int.map { $0 == bps } ?? true) && !["Failed", "Cancelled", "CompletedWithError"].contains(j["Status"].string ?? "")
        }.compactMap { $0["Id"].text }.reversed()
    }

    static func syncJobName(_ file: TreeFile) -> String { "Labstream: " + (file.path.last ?? file.key.itemId) }

    public func preparation(job: String) throws(LabstreamError) -> Preparation {
        let ready = try MediaBrowserDecode.json(get(requests.readySyncItems(token: session.token), "/Sync/Items/Ready"), "/Sync/Items/Ready")
        guard let items = ready.array else { throw .malformedResponse("/Sync/Items/Ready is not a list") }
        if let mine = items.first(where: { $0["SyncJobId"].text == job }), let item = mine["SyncJobItemId"].text {
            let probe = try transport.sizeOf(requests.syncJobItemFile(item, range: ByteRange(0, 1), validator: nil, token: session.token))
            guard probe.status == 206, let total = probe.size else {
                throw .malformedResponse("/Sync/JobItems/\(item)/File did not answer a ranged request with its size (HTTP \(probe.status))")
            }
            return .ready(.syncJobItem(item), size: total)
        }
        let answer = try transport.call(requests.syncJob(job, token: session.token))
        if answer.status == 404 { return .failed("Emby no longer knows Convert job \(job) (deleted or expired)") }
        let state = try MediaBrowserDecode.json(Self.expectOK(answer, "/Sync/Jobs/{Id}", requests.flavor), "/Sync/Jobs/{Id}")
        let status = state["Status"].string ?? "Queued"
        if ["Failed", "CompletedWithError"].contains(status) { return .failed("Emby's Convert job \(job) ended \(status)") }
        let progress = state["Progress"].int64.map { " \($0)%" } ?? ""
        return .running("Emby is converting (job \(job): \(status)\(progress))")
    }

    public func finishPreparation(job: String, file: PreparedFile) throws(LabstreamError) {
        guard case .syncJobItem(let item) = file else { return }
        let answer = try transport.call(requests.syncJobItemTransferred(item, token: session.token))
        guard (200..<300).contains(answer.status) || answer.status == 404 else {
            throw .serverUnavailable("/Sync/JobItems/{Id}/Transferred answered HTTP \(answer.status)")
        }
    }

    public func cancelPreparationRequest(job: String) -> HTTPRequest? {
        requests.flavor == .emby ? requests.deleteSyncJob(job, token: session.token) : nil
    }

    public func rangeRequest(for file: TreeFile, range: ByteRange, validator: Validator?) -> HTTPRequest {
        if case .syncJobItem(let item)? = file.prepared {
            return requests.syncJobItemFile(item, range: range, validator: validator, token: session.token)
        }
        return requests.download(itemId: requests.downloadItemId(of: file), range: range, validator: validator, token: session.token)
    }

    public func liveStreamRequest(for file: TreeFile, route: Route, playSession: String) -> HTTPRequest? {
        guard case .liveCopy(let remux, let bitsPerSecond) = route else { return nil }
        return requests.stream(
            itemId: file.key.itemId, sourceId: file.key.sourceId, remux: remux, videoBitRate: bitsPerSecond,
            playSession: playSession, token: session.token)
    }

    public func stopEncodingRequest(playSession: String) -> HTTPRequest? {
        requests.stopEncoding(playSession: playSession, token: session.token)
    }

    func get(_ request: HTTPRequest, _ what: String) throws(LabstreamError) -> [UInt8] {
        try Self.expectOK(try CatalogRequestRetry().call(request, on: transport) { checkReachability() == .online }, what, requests.flavor)
    }

    /// Follows `startIndex`/`limit` until `TotalRecordCount` items arrived (or a short page).
    func pages(_ what: String, _ request: (Int) -> HTTPRequest) throws(LabstreamError) -> [JSONValue] {
        try pages(what, decode: { $0 }, request)
    }

    /// Every entry of a paged listing, decoded by `decode` as each page arrives (nil: left out).
    func pages<Entry>(_ what: String, decode: (JSONValue) -> Entry?, _ request: (Int) -> HTTPRequest) throws(LabstreamError) -> [Entry] {
        var all: [Entry] = []
        try eachPage(what, decode: decode, request) { (page: [Entry], total: Int) throws(LabstreamError) -> Bool in
            // Room for the whole listing once its first page said how long it is: a 90 000-film
            // array grown by doubling held both copies at its last growth.
            if all.isEmpty { all.reserveCapacity(min(max(total, 0), PageCollector<Entry>.reserveLimit)) }
            all += page
            return true
        }
        return all
    }

    /// Each page of a paged listing, decoded by `decode` (nil: left out), handed to `deliver`
    /// with the server's total as it arrives and then let go; `deliver` answers false to stop.
    func eachPage<Entry>(
        _ what: String, decode: (JSONValue) -> Entry?, _ request: (Int) -> HTTPRequest, deliver: ([Entry], Int) throws(LabstreamError) -> Bool
    ) throws(LabstreamError) {
        var pages = PageCollector<Entry>(key: { $0["Id"].string })
        var ahead: [PageAhead<[UInt8]>] = []
        defer { PageAhead.settle(ahead) }
        while true {
            let start = pages.count
            let body = try PageAhead.page(at: start, from: &ahead) { () throws(LabstreamError) in try get(request(start), what) }
            let page = try MediaBrowserDecode.page(body, what)
            let progressed = pages.add(page.items, decode: decode)
            let decoded = pages.all
            pages.all.removeAll()
            guard try deliver(decoded, page.total) else { return }
            if !progressed || page.items.count < pageSize || pages.count >= page.total { return }
            PageAhead.topUp(&ahead, after: start, pageCount: page.items.count, total: page.total) { offset in
                let (client, next) = (self, request(offset))
                return { () throws(LabstreamError) in try client.get(next, what) }
            }
        }
    }

    static func expectOK(_ response: HTTPResponse, _ what: String, _ flavor: MediaBrowserFlavor) throws(LabstreamError) -> [UInt8] {
        switch response.status {
        case 200: return response.body
        case 401, 403: throw .authenticationFailed("\(what) answered \(response.status)")
        case 404: throw .malformedResponse("\(what) answered 404: is this a \(flavor.product) server, and is the URL its base URL?")
        default: throw .answered(response.status, to: what, body: response.body)
        }
    }
}
