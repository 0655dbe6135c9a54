import Foundation
import LabstreamCore
import Synchronization

/// A Silo server over its native `/api/v2`. The stored secret is a refresh token (or an `sa_…`
/// API key, used as it is); access tokens live in memory only and are renewed on the first
/// request and whenever the server says the one held is spent (`401`), once per request. The
/// stored profile id is the acting profile (`X-Profile-Id`).
///
/// (About 500 lines: sign-in, catalog, managed downloads, monitors and side assets of one
/// backend; each capability is its own extension.)
public struct SiloClient: MediaBackend, ItemExtrasSource, RenewableSignIn {
    public let requests: SiloRequests
    public let transport: any HTTPTransport
    public let session: ServerSession
    public var pageSize: Int
    let tokens: Tokens

    /// The secrets in flight: the access token held (none until the first renewal) and the
    /// refresh token in use (rotated by the server).
    final class Tokens: Sendable {
        let access = Mutex<String?>(nil)
        let refresh: Mutex<String>
        /// The managed entry each file's bytes are fetched through (by source id), once registered.
        let entryRoutes = Mutex<[FileKey: String]>([:])
        /// The download capability held, with its ETag (asked again conditionally).
        let capability = Mutex<(etag: String, presets: [String], monitors: Bool)?>(nil)
        init(refresh: String) { self.refresh = Mutex(refresh) }
    }

    public var serverName: String { session.name }
    public var kind: BackendKind { .silo }

    public init(session: ServerSession, identity: ClientIdentity, transport: any HTTPTransport, pageSize: Int = 100) {
        self.session = session
        self.requests = SiloRequests(serverBase: session.url, identity: identity, profileToken: session.profileToken)
        self.transport = transport
        self.pageSize = min(max(pageSize, 1), 200)
        self.tokens = Tokens(refresh: session.token)
    }

    var isAPIKey: Bool { session.token.hasPrefix("sa_") }
    var profile: String { session.userId }

    // MARK: Tokens

    /// The bearer for the next request: the API key, or the access token held (renewed when
    /// there is none).
    func bearer() throws(LabstreamError) -> String {
        if isAPIKey { return session.token }
        if let held = tokens.access.withLock({ $0 }) { return held }
        return try renewAccess()
    }

    /// Trades the refresh token for a new pair. A rotated refresh token is written to the
    /// credential store before it is used. A refused refresh ends the session: only signing in
    /// again helps.
    @discardableResult
    func renewAccess() throws(LabstreamError) -> String {
        if isAPIKey { return session.token }
        let refresh = tokens.refresh.withLock { $0 }
        let answer = try transport.call(requests.refresh(refresh))
        switch answer.status {
        case 200:
            let pair = try SiloDecode.tokens(try SiloDecode.json(answer.body, "/auth/refresh"), "/auth/refresh")
            if pair.refresh != refresh {
                try session.persistToken?(pair.refresh)
                tokens.refresh.withLock { $0 = pair.refresh }
            }
            tokens.access.withLock { $0 = pair.access }
            return pair.access
        case 400, 401, 403:
            tokens.access.withLock { $0 = nil }
            let problem = SiloDecode.problem(answer.body)
            throw .authenticationFailed(
                "Silo ended this sign-in (\(problem.code ?? "HTTP \(answer.status)")\(problem.sentence.isEmpty ? "" : ": " + problem.sentence)); "
                    + "sign in again with `labstream server add silo \(session.name) --url \(requests.serverBase)`")
        default:
            throw Self.failure(answer, "/auth/refresh")
        }
    }

    /// Sends the request `build` makes with the current bearer; a `401` renews the access token
    /// once and sends it again. Reads ride out a busy server (`CatalogRequestRetry`); anything else
    /// is sent once (a create that timed out may have been made: the caller looks, never resends).
    func call(_ build: (String) -> HTTPRequest, _ what: String) throws(LabstreamError) -> HTTPResponse {
        let first = try CatalogRequestRetry().call(build(try bearer()), on: transport) { false }
        guard first.status == 401, !isAPIKey else { return first }
        return try CatalogRequestRetry().call(build(try renewAccess()), on: transport) { false }
    }

    func get(_ build: (String) -> HTTPRequest, _ what: String) throws(LabstreamError) -> [UInt8] {
        let answer = try call(build, what)
        guard answer.status == 200 else { throw Self.failure(answer, what) }
        return answer.body
    }

    /// A non-200 answer said as what it is, with the server's own problem text.
    static func failure(_ answer: HTTPResponse, _ what: String) -> LabstreamError {
        let problem = SiloDecode.problem(answer.body)
        let said = problem.sentence.isEmpty ? "" : ": " + problem.sentence
        switch (answer.status, problem.code) {
        case (401, _), (403, _): return .authenticationFailed("\(what) answered HTTP \(answer.status)\(said)")
        case (410, "client_upgrade_required"?):
            return .refused("\(what): this server no longer speaks the API Labstream asked for (HTTP 410\(said))")
        case (400..<500, _) where ![404, 408, 429].contains(answer.status):
            return .refused("\(what) answered HTTP \(answer.status)\(said)")
        default: return .serverUnavailable("\(what) answered HTTP \(answer.status)\(said)")
        }
    }

    // MARK: MediaBackend

    public var reachabilityProbes: (public: HTTPRequest, signedIn: HTTPRequest) {
        (requests.systemInfo(), requests.me(bearer: (try? bearer()) ?? ""))
    }

    public func renewedSignInProbe() -> HTTPRequest? {
        guard !isAPIKey, let renewed = try? renewAccess() else { return nil }
        return requests.me(bearer: renewed)
    }

    public func rangeRequest(for file: TreeFile, range: ByteRange, validator: Validator?) -> HTTPRequest {
        // A spent token answers 401: the engine checks the sign-in (which renews it) and asks again.
        if let entry = tokens.entryRoutes.withLock({ $0[file.key] }) {
            return requests.downloadFile(id: entry, range: range, validator: validator, bearer: (try? bearer()) ?? "", profile: profile)
        }
        return requests.directDownload(fileId: file.key.sourceId, range: range, validator: validator, bearer: (try? bearer()) ?? "")
    }

    /// Every movie and series library: movies with their versions, series by season with the
    /// episodes that have a file. Kinds Labstream cannot place yet (music, books, podcasts)
    /// are left out.
    /// Silo's cards carry no details; an episode carries its provider ids (`SiloDecode.episodes`),
    /// stashed as its season arrives. Only those: a whole read stages no row for an item without
    /// details (it then has none), so a library of films stages nothing.
    public func fetchCatalog(progress: (String) -> Void, stash: (any DetailsStash)?) throws(LabstreamError) -> [LibraryCatalog] {
        let libraries = try SiloDecode.libraries(try get({ requests.libraries(bearer: $0, profile: profile) }, "/user/libraries"))
        var out: [LibraryCatalog] = []
        for library in libraries {
            let types = Self.cardTypes(ofLibrary: library.type)
            guard !types.isEmpty else {
                out.append(LibraryCatalog(id: library.id, name: library.name, items: [], leftOut: Self.whyLeftOut(kind: library.type)))
                continue
            }
            var items: [CatalogItem] = []
            for type in types {
                let before = items.count
                try eachCardPage(library: library.id, type: type) { (cards: [JSONValue], fresh: Bool) throws(LabstreamError) in
                    if fresh { items.removeSubrange(before...) }
                    for card in cards {
                        switch card["type"].string ?? type {
                        case "movie":
                            if let movie = try movie(card, library: library.id) { items.append(movie) }
                        case "series":
                            progress("\(library.name): \(card["title"].string ?? "")")
                            items += try episodes(ofSeries: card, library: library.id).map { $0.details == nil ? $0 : stash.stashing($0) ?? $0 }
                        default: continue
                        }
                    }
                }
            }
            progress("\(library.name): \(items.count) items")
            out.append(LibraryCatalog(id: library.id, name: library.name, items: items))
        }
        return out
    }

    /// A film card as a catalog item, with its versions (`/catalog/items/{id}/versions`: the
    /// catalog's cards carry none, and /api/v2 has no read of many items' versions); nil when
    /// it has no file.
    func movie(_ card: JSONValue, library: String) throws(LabstreamError) -> CatalogItem? {
        guard let id = card["content_id"].string else { return nil }
        let what = "/catalog/items/{id}/versions"
        let sources = try SiloDecode.versions(try get({ requests.versions(of: id, library: library, bearer: $0, profile: profile) }, what), what)
        guard !sources.isEmpty else { return nil }
        return CatalogItem(
            id: id, kind: .movie, title: card["title"].string ?? id, year: card["year"].int.flatMap { $0 > 0 ? $0 : nil },
            modified: SiloDecode.addedAt(card), sources: sources)
    }

    /// A series card's episodes that have a file, season by season (each season's episodes
    /// carry their files).
    func episodes(ofSeries card: JSONValue, library: String) throws(LabstreamError) -> [CatalogItem] {
        guard let id = card["content_id"].string else { return [] }
        let title = card["title"].string ?? id
        let year = card["year"].int.flatMap { $0 > 0 ? $0 : nil }
        let seasonsWhat = "/catalog/series/{id}/seasons"
        let seasons = try SiloDecode.seasons(try get({ requests.seasons(of: id, library: library, bearer: $0, profile: profile) }, seasonsWhat), seasonsWhat)
        var items: [CatalogItem] = []
        for season in seasons {
            let what = "/catalog/series/{id}/seasons/{num}/episodes"
            let body = try get({ requests.episodes(of: id, season: season, library: library, bearer: $0, profile: profile) }, what)
            items += try SiloDecode.episodes(body, what, series: (id, title, year), added: SiloDecode.addedAt(card))
        }
        return items
    }

    /// The card types a library of `type` holds that Labstream can place.
    /// Silo's downloads carry films and episodes only (downloads-api.md); its audiobooks and
    /// podcasts are served through its Audiobookshelf-compatible endpoint instead.
    static func whyLeftOut(kind: String) -> String {
        let k = kind.lowercased()
        if ["book", "podcast", "music", "photo", "comic", "manga"].contains(where: k.contains) {
            return "Silo's /api/v2 downloads carry films and episodes only; its \(kind) library is not files Labstream can fetch through it"
        }
        return LibraryCatalog.whyLeftOut(kind: kind)
    }

    static func cardTypes(ofLibrary type: String) -> [String] {
        let t = type.lowercased()
        if t.contains("movie") || t.contains("film") { return ["movie"] }
        if t.contains("series") || t.contains("show") || t == "tv" { return ["series"] }
        if t.contains("mixed") { return ["movie", "series"] }
        return []
    }

    /// Every card of one type in a library, following `page.next_cursor` until it is absent. A
    /// cursor the server no longer accepts (`400 invalid_cursor`) restarts the walk once.
    /// `groups`: only the cards its rules match.
    func cards(library: String, type: String, groups: String? = nil) throws(LabstreamError) -> [JSONValue] {
        var cards: [JSONValue] = []
        try eachCardPage(library: library, type: type, groups: groups) { (page: [JSONValue], fresh: Bool) throws(LabstreamError) in
            if fresh { cards = [] }
            cards += page
        }
        return cards
    }

    /// Each page of `cards(library:type:groups:)` handed to `deliver` as it arrives and then let
    /// go (a 90 000-film library's cards held whole were a third of a first sync's peak);
    /// `fresh` is true on the first page of a walk, restarted or not: what came before goes.
    func eachCardPage(
        library: String, type: String, groups: String? = nil, deliver: ([JSONValue], Bool) throws(LabstreamError) -> Void
    ) throws(LabstreamError) {
        var restarted = false
        var cursor: String?
        var seen = Set<String>()
        while true {
            let answer = try call(
                { requests.catalog(library: library, type: type, cursor: cursor, limit: pageSize, groups: groups, bearer: $0, profile: profile) }, "/catalog")
            if answer.status == 400, SiloDecode.problem(answer.body).code == "invalid_cursor", cursor != nil, !restarted {
                restarted = true
                cursor = nil
                seen = []
                continue
            }
            guard answer.status == 200 else { throw Self.failure(answer, "/catalog") }
            let page = try SiloDecode.catalogPage(answer.body)
            try deliver(page.cards, cursor == nil)
            // A cursor that comes back again would loop forever: the walk ends there.
            guard let next = page.next, seen.insert(next).inserted, !page.cards.isEmpty else { return }
            cursor = next
        }
    }

    /// Every item of a cursor-paged listing (`request` builds a page's request from its cursor
    /// and the bearer), following `page.next_cursor`; a cursor that comes back again is an
    /// error, since the listing could not be finished.
    func everyPage(_ what: String, _ request: (String?, String) -> HTTPRequest) throws(LabstreamError) -> [JSONValue] {
        var out: [JSONValue] = []
        var cursor: String?
        var seen = Set<String>()
        while true {
            let page = try SiloDecode.cursorPage(try get({ request(cursor, $0) }, what), what)
            out += page.items
            guard let next = page.next else { return out }
            guard seen.insert(next).inserted else { throw .malformedResponse("\(what) gave the same cursor twice; its listing cannot be finished") }
            cursor = next
        }
    }

    func allEntries() throws(LabstreamError) -> [ManagedEntry] {
        try everyPage("/downloads") { requests.listDownloads(cursor: $0, bearer: $1, profile: profile) }.compactMap(SiloDecode.entry)
    }

    /// Ends this sign-in's session on the server (`POST /auth/logout`); an API key has no
    /// session to end.
    public func logout() throws(LabstreamError) {
        guard !isAPIKey else { return }
        let answer = try transport.call(requests.logout(bearer: try renewAccess()))
        guard (200..<300).contains(answer.status) else { throw Self.failure(answer, "/auth/logout") }
    }

    // MARK: Signing in (used by `labstream server add silo`)

    /// Checks that `url` is a Silo server speaking `/api/v2`.
    public static func check(url: String, identity: ClientIdentity, transport: any HTTPTransport) throws(LabstreamError) -> SiloRequests {
        let requests = SiloRequests(serverBase: url, identity: identity)
        let answer = try transport.call(requests.systemInfo())
        guard answer.status == 200, (try? SiloDecode.json(answer.body, "/system/info"))?.isObject == true else {
            throw .malformedResponse(
                "\(url) does not answer as a Silo server (/api/v2/system/info answered HTTP \(answer.status)); is the URL the server's base URL?")
        }
        return requests
    }

    /// `POST /auth/login` (once: a login is never sent again after an uncertain answer).
    public static func login(_ requests: SiloRequests, user: String, password: String, transport: any HTTPTransport) throws(LabstreamError) -> SiloDecode.Tokens
    {
        let answer = try transport.call(requests.login(user: user, password: password))
        guard answer.status == 200 else {
            if answer.status == 401 { throw .authenticationFailed("Silo refused the user name or password") }
            throw failure(answer, "/auth/login")
        }
        return try SiloDecode.tokens(try SiloDecode.json(answer.body, "/auth/login"), "/auth/login")
    }

    public enum DeviceSignIn: Error, Sendable, Equatable {
        case denied, expired, canceled, consumed
    }

    /// Device sign-in: shows the code (`show`), then polls at the server's pace until the
    /// request is approved (the token pair) or ends otherwise.
    public static func deviceLogin(
        _ requests: SiloRequests, transport: any HTTPTransport, sleep: (Double) -> Void = { Thread.sleep(forTimeInterval: $0) },
        show: (SiloDecode.DeviceStart) -> Void
    ) throws -> SiloDecode.Tokens {
        let started = try transport.call(requests.deviceStart())
        guard started.status == 201 || started.status == 200 else { throw failure(started, "/auth/device/start") }
        let start = try SiloDecode.deviceStart(started.body)
        show(start)
        var wait = Double(start.interval)
        let deadline = Date().addingTimeInterval(Double(start.expiresIn) + 60)
        while Date() < deadline {
            sleep(wait)
            let answer = try transport.call(requests.devicePoll(start.deviceCode))
            guard answer.status == 200 else { throw failure(answer, "/auth/device/poll") }
            switch try SiloDecode.devicePoll(answer.body) {
            case .pending(let after): wait = Double(after)
            case .approved(let pair): return pair
            case .ended("denied"): throw DeviceSignIn.denied
            case .ended("canceled"): throw DeviceSignIn.canceled
            case .ended("consumed"): throw DeviceSignIn.consumed
            case .ended: throw DeviceSignIn.expired
            }
        }
        throw DeviceSignIn.expired
    }

    /// The profile to act as: the one named, else the primary one, with its profile token when
    /// it is locked with a PIN (`pin`; without one it is refused, saying what to do).
    public static func chooseProfile(
        _ requests: SiloRequests, named: String?, pin: String?, bearer: String,
        transport: any HTTPTransport
    ) throws(LabstreamError) -> (profile: SiloDecode.Profile, token: String?) {
        let listed = try transport.call(requests.profiles(bearer: bearer))
        guard listed.status == 200 else { throw failure(listed, "/profiles") }
        let profiles = try SiloDecode.profiles(listed.body)
        let chosen: SiloDecode.Profile?
        if let named { chosen = profiles.first { $0.name == named } } else { chosen = profiles.first(where: \.isPrimary) ?? profiles.first }
        guard let chosen else {
            throw .invalidArgument(
                named.map { "this account has no profile named '\($0)'; it has: \(profiles.map(\.name).joined(separator: ", "))" }
                    ?? "this account has no profile")
        }
        guard chosen.hasPIN else { return (chosen, nil) }
        guard let pin, !pin.isEmpty else {
            throw .invalidArgument(
                "the profile '\(chosen.name)' is locked with a PIN: give it on standard input with --pin-stdin, or choose another with --profile NAME")
        }
        let answer = try transport.call(requests.verifyPIN(profile: chosen.id, pin: pin, bearer: bearer))
        guard answer.status == 200 else { throw failure(answer, "/profiles/{id}/verify-pin") }
        guard let token = try SiloDecode.verifiedPIN(answer.body) else {
            throw .authenticationFailed("Silo did not accept that PIN for the profile '\(chosen.name)'")
        }
        return (chosen, token)
    }
}

// Managed downloads (downloads-api.md § 4): a pinned film or episode is registered with the
// server as this device's copy; its bytes then come through the entry's file route.
/// A refresh asks Silo only for what its catalog can tell has changed (catalog-api.md § Rule
/// fields and operators): films added since the last sync (`added_at` `gt`), each read with its
/// versions, and series with an episode added since (`latest_episode_added` `gt`), each read
/// season by season; each library's `total` against the stored catalog tells a removal. Films
/// already known keep their versions: no request per film at a refresh. What the catalog says
/// nothing of (a film's file replaced, an episode removed) waits for the daily whole read.
extension SiloClient: IncrementalCatalog {
    public func fetchChanges(
        since: Int64, known: CatalogOutline, progress: (String) -> Void, stash: (any DetailsStash)?,
        apply: (LibraryCatalog) throws(LabstreamError) -> Void
    ) throws(LabstreamError) -> Bool {
        let libraries = try SiloDecode.libraries(try get({ requests.libraries(bearer: $0, profile: profile) }, "/user/libraries"))
        let knownLibraries = Dictionary(known.libraries.map { ($0.id, $0) }, uniquingKeysWith: { a, _ in a })
        guard Set(knownLibraries.keys).isSubset(of: Set(libraries.map(\.id))) else {
            progress("a library is gone from the server; reading everything")
            return false
        }
        let instant = ISODate.string(epochSeconds: since)
        for library in libraries {
            let types = Self.cardTypes(ofLibrary: library.type)
            guard let type = types.first else {
                try apply(LibraryCatalog(id: library.id, name: library.name, items: [], leftOut: Self.whyLeftOut(kind: library.type)))
                continue
            }
            // A mixed library's stored ids do not say which are films: its count cannot be checked.
            guard types.count == 1, let stored = knownLibraries[library.id] else {
                progress("\(library.name): new, or of films and series; reading everything")
                return false
            }
            let field = type == "movie" ? "added_at" : "latest_episode_added"
            let filtered = try call(
                {
                    requests.catalog(
                        library: library.id, type: type, cursor: nil, limit: 1, groups: SiloDecode.addedAfter(field, instant), bearer: $0, profile: profile)
                },
                "/catalog")
            // A server without the rule answers 422 (catalog-api.md: older servers do).
            guard filtered.status == 200 else {
                if filtered.status == 422 {
                    progress("\(library.name): the server cannot list what was added since a time; reading everything")
                    return false
                }
                throw Self.failure(filtered, "/catalog")
            }
            let arrived =
                try SiloDecode.catalogPage(filtered.body).cards.isEmpty
                ? [] : try cards(library: library.id, type: type, groups: SiloDecode.addedAfter(field, instant))
            var items: [CatalogItem] = []
            var cardIds = Set<String>()
            for card in arrived {
                guard let id = card["content_id"].string else { continue }
                cardIds.insert(id)
                if type == "movie" {
                    if let movie = try movie(card, library: library.id) { items.append(movie) }
                } else {
                    items += try episodes(ofSeries: card, library: library.id)
                }
            }
            // The server's count of the library's films or series, against what the stored catalog
            // will hold: a difference is a removal (or a film without a file), read whole.
            let all = try get(
                { requests.catalog(library: library.id, type: type, cursor: nil, limit: 1, bearer: $0, profile: profile) }, "/catalog")
            let knownIds = type == "movie" ? stored.itemIds : stored.seriesIds
            let expected = knownIds.count + cardIds.lazy.filter { !knownIds.contains($0) }.count
            guard let total = try SiloDecode.catalogTotal(all), total == expected else {
                progress("\(library.name): the server's count is not the \(expected) known; reading everything")
                return false
            }
            progress("\(library.name): \(arrived.count) added")
            try apply(LibraryCatalog(id: library.id, name: library.name, items: items.map { stash.stashing($0) ?? $0 }))
        }
        return true
    }
}

extension SiloClient: ManagedDownloadRegistry {
    public func register(_ file: TreeFile, quality: Quality) throws(LabstreamError) -> Registration {
        let episode = file.kind == .episode ? file.key.itemId : nil
        let content = file.remoteItemId ?? file.key.itemId
        let preset = quality.description
        if quality != .original {
            // Only what the server offers this profile now (§ 3).
            let offered = try presets()
            guard offered.contains(preset) else {
                throw .refused(
                    offered.isEmpty
                        ? "Silo does not let this profile download copies at another quality"
                        : "Silo does not offer \(preset) to this profile (it offers: \(offered.joined(separator: ", ")))")
            }
        }
        // `call` sends a POST once (creation is "non-retryable", § 4.1; the caller looks first),
        // again only after a 401, which did nothing on the server.
        let answer = try call(
            {
                requests.createDownload(
                    contentId: content, episodeId: episode, mediaFileId: file.key.sourceId, quality: preset,
                    bearer: $0, profile: profile)
            }, "POST /downloads")
        switch answer.status {
        case 200, 201, 202: return .made(try SiloDecode.created(answer.body))
        case 409: return .exists
        default: throw Self.failure(answer, "POST /downloads")
        }
    }

    public func entries() throws(LabstreamError) -> [ManagedEntry] { try allEntries() }

    public func registerSeason(series: String, season: Int, batch: String) throws(LabstreamError) -> (
        made: [ManagedEntry], skipped: [(episode: String, reason: String)]
    ) {
        var made: [ManagedEntry] = []
        var skipped: [(episode: String, reason: String)] = []
        var cursor: String?
        var seen = Set<String>()
        while true {
            // Each page is sent once (again only after a 401), like a single create.
            let answer = try call(
                { requests.createSeasonDownloads(series: series, season: season, batch: batch, cursor: cursor, bearer: $0, profile: profile) },
                "POST /downloads (season)")
            // 409: an entry of the season changed meanwhile; the caller reads the registry back.
            if answer.status == 409 { throw .remoteChanged("a download entry of the season changed on the server") }
            guard [200, 201, 202].contains(answer.status) else { throw Self.failure(answer, "POST /downloads (season)") }
            let page = try SiloDecode.seasonPage(answer.body)
            made += page.made
            skipped += page.skipped
            guard let next = page.next else { return (made, skipped) }
            guard seen.insert(next).inserted else { throw .malformedResponse("/downloads gave the same season cursor twice") }
            cursor = next
        }
    }

    /// The presets of the download capability, asked with the ETag of the copy held (`304`: unchanged).
    func presets() throws(LabstreamError) -> [String] { try capability().presets }

    func capability() throws(LabstreamError) -> (presets: [String], monitors: Bool) {
        let held = tokens.capability.withLock { $0 }
        let answer = try call({ requests.downloadCapability(etag: held?.etag, bearer: $0, profile: profile) }, "/capabilities/downloads")
        if answer.status == 304, let held { return (held.presets, held.monitors) }
        guard answer.status == 200 else { throw Self.failure(answer, "/capabilities/downloads") }
        let read = try SiloDecode.downloadCapability(answer.body)
        if let etag = answer.header("ETag") { tokens.capability.withLock { $0 = (etag, read.presets, read.monitors) } }
        return read
    }

    public func report(_ entry: ManagedEntry, _ state: ManagedEntry.Report, at: Int64) throws(LabstreamError) -> ManagedEntry? {
        guard let id = entry.id else { return nil }
        let answer = try call(
            { requests.reportDownload(id: id, status: state.rawValue, updatedAt: at, revision: entry.revision, bearer: $0, profile: profile) },
            "PATCH /downloads/{id}")
        switch answer.status {
        case 200:
            guard var now = (try? JSONValue.parse(answer.body)).flatMap(SiloDecode.entry) else { return entry }
            now.reported = state
            now.reportedAt = at
            now.manifest = entry.manifest
            return now
        case 404, 409: return nil
        default: throw Self.failure(answer, "PATCH /downloads/{id}")
        }
    }

    public func remove(entry id: String) -> Int? {
        (try? call({ requests.deleteDownload(id: id, bearer: $0, profile: profile) }, "DELETE /downloads/{id}"))?.status
    }

    public func manifest(of entry: ManagedEntry) throws(LabstreamError) -> (integrity: Integrity, document: [UInt8]) {
        guard let id = entry.id else { throw .invalidArgument("the download entry has no id yet") }
        let body = try get({ requests.manifest(id: id, bearer: $0, profile: profile) }, "/downloads/{id}/manifest")
        let read = try SiloDecode.integrity(body)
        // § 6: the manifest's revision is the entry's; another one describes other bytes.
        if let revision = read.revision, revision != entry.revision {
            throw .remoteChanged("the download entry moved from revision \(entry.revision) to \(revision)")
        }
        return (read.integrity, body)
    }

    // MARK: Side assets (§ 4.8–4.9, § 6)

    public var extrasNeedEntry: Bool { true }

    /// The entry's manifest: its artwork, subtitles and chapters.
    public func extras(of itemId: String, entry: ManagedEntry?) throws(LabstreamError) -> ItemDetails? {
        guard let entry else { throw .invalidArgument("item \(itemId) has no download entry to ask") }
        return try SiloDecode.extras(try manifest(of: entry).document)
    }

    public func assetRequest(_ asset: PlannedAsset) -> HTTPRequest? {
        requests.downloadAsset(path: asset.asset.ref, bearer: (try? bearer()) ?? "", profile: profile)
    }

    public func routeBytes(of source: FileKey, through entry: String?) {
        tokens.entryRoutes.withLock { $0[source] = entry }
    }

    /// downloads-api.md § 4.5: the entry's file route answers `409` for an entry that is revoked
    /// or otherwise not servable.
    public func byteRefusal(of source: FileKey, status: Int) -> String? {
        guard status == 409, let entry = tokens.entryRoutes.withLock({ $0[source] }) else { return nil }
        return "the server will not serve download entry \(entry) (HTTP 409: revoked or no longer servable); the entry is read back to say why"
    }
}

extension SiloClient: SeriesSubscriptions, WatchedState {
    public func keepsMonitors() throws(LabstreamError) -> Bool { try capability().monitors }

    public func subscriptions() throws(LabstreamError) -> [SeriesSubscription] {
        try everyPage("/downloads/subscriptions") { requests.listSubscriptions(cursor: $0, bearer: $1, profile: profile) }.compactMap(SiloDecode.subscription)
    }

    public func subscribe(_ monitor: SeriesMonitor) throws(LabstreamError) -> SeriesSubscription {
        let answer = try call({ requests.createSubscription(monitor, bearer: $0, profile: profile) }, "POST /downloads/subscriptions")
        guard [200, 201].contains(answer.status) else { throw Self.failure(answer, "POST /downloads/subscriptions") }
        return try Self.subscription(answer, "POST /downloads/subscriptions")
    }

    public func update(_ subscription: SeriesSubscription, to monitor: SeriesMonitor) throws(LabstreamError) -> SeriesSubscription? {
        let answer = try call(
            { requests.updateSubscription(id: subscription.id, etag: subscription.etag, to: monitor, bearer: $0, profile: profile) },
            "PATCH /downloads/subscriptions/{id}")
        if [409, 412].contains(answer.status) { return nil }
        guard answer.status == 200 else { throw Self.failure(answer, "PATCH /downloads/subscriptions/{id}") }
        return try Self.subscription(answer, "PATCH /downloads/subscriptions/{id}")
    }

    public func unsubscribe(_ subscription: SeriesSubscription) throws(LabstreamError) -> Bool {
        let answer = try call(
            { requests.deleteSubscription(id: subscription.id, etag: subscription.etag, bearer: $0, profile: profile) },
            "DELETE /downloads/subscriptions/{id}")
        if [409, 412].contains(answer.status) { return false }
        guard [200, 204, 404].contains(answer.status) else { throw Self.failure(answer, "DELETE /downloads/subscriptions/{id}") }
        return true
    }

    public func sync(_ subscription: SeriesSubscription) throws(LabstreamError) -> Int? {
        var registered = 0
        var cursor: String?
        var seen = Set<String>()
        while true {
            // Each page continues the walk under the same validator (§ 8.2); a changed monitor is 409.
            let answer = try call(
                { requests.syncSubscription(id: subscription.id, etag: subscription.etag, cursor: cursor, bearer: $0, profile: profile) },
                "POST /downloads/subscriptions/sync")
            if [409, 412].contains(answer.status) { return nil }
            guard answer.status == 200 else { throw Self.failure(answer, "POST /downloads/subscriptions/sync") }
            let j = try SiloDecode.json(answer.body, "/downloads/subscriptions/sync")
            registered += j["registered"].int ?? 0
            guard j["page"]["has_more"].bool == true, let next = j["page"]["next_cursor"].string, !next.isEmpty else { return registered }
            guard seen.insert(next).inserted else { throw .malformedResponse("/downloads/subscriptions/sync gave the same cursor twice") }
            cursor = next
        }
    }

    /// Everything the profile has finished (`GET /progress?status=completed`, § 7.2), in one
    /// walk: every series' episodes are in it. A row whose own `completed` is false is one the
    /// filter should not have listed.
    public func watchedEpisodes(ofSeries series: [String]) throws(LabstreamError) -> WatchedAnswer {
        let finished = try everyPage("/progress") { requests.completedProgress(cursor: $0, bearer: $1, profile: profile) }
        var out = WatchedAnswer(listed: [])
        for row in finished {
            guard let id = row["media_item_id"].text else { continue }
            out.listed.insert(id)
            if row["completed"].bool == false { out.ownFlagUnwatched.insert(id) }
        }
        return out
    }

    static func subscription(_ answer: HTTPResponse, _ what: String) throws(LabstreamError) -> SeriesSubscription {
        guard let read = SiloDecode.subscription(try SiloDecode.json(answer.body, what)) else {
            throw .malformedResponse("\(what) answered no subscription Labstream can read")
        }
        return read
    }
}
