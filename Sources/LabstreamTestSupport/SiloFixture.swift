import Foundation
import LabstreamDemo
import LabstreamFixture
import Synchronization

// A fake Silo media server speaking Silo's native `/api/v2`, written only from Silo's published
// API documentation (docs/auth-api.md, docs/architecture/device-login.md,
// docs/architecture/api-contract.md, docs/libraries-api.md, docs/catalog-api.md,
// docs/downloads-api.md, docs/architecture/quality-ladder.md) and, where those leave JSON member
// names open, Silo's Go transport types (internal/apiv2/*.go). It shares no code with any Silo
// client, so a client that drifts from the spec fails against it.
//
// Split by area, one extension per file: this one holds the type, its state and the routing;
// SiloFixtureAuth, SiloFixtureCatalog, SiloFixtureBytes, SiloFixtureDownloads,
// SiloFixtureMonitors and SiloFixtureLog the routes and controls of each area;
// SiloFixtureRequests, SiloFixtureJSON, SiloFixtureHTTP and SiloFixtureEncodings what they share.
// Within each, a route's handler sits beside the doc section and Go type it was written from, so
// a reviewer checks it against one source at a time. What the parts share is internal to this
// module, never public.
//
// Doc references in comments are "file § section". "Go:" names the transport file that fixed a
// member name or status the docs left open.

// MARK: - Public values

/// One request the Silo fixture answered. Token values are never recorded: `credential` only
/// names the kind of credential sent, and a `?token=` query value is replaced by `redacted`.
public struct SiloLoggedRequest: Sendable, Hashable {
    public var id: Int
    public var method: String
    /// The path as sent (including the configured base path), percent-decoded.
    public var path: String
    public var query: [String: String]
    public var range: String?
    public var ifRange: String?
    /// `bearer` (an access token), `api-key` (`Authorization: Bearer sa_…`), `query-token`
    /// (`?token=` on direct-download) or nil.
    public var credential: String?
    public var authorized: Bool
    /// The `X-Silo-Device-Id` header exactly as sent.
    public var deviceId: String?
    /// The optional `X-Silo-Device-Name` and `X-Silo-Device-Platform` headers as sent
    /// (downloads-api.md § 2, device identity headers).
    public var deviceName: String?
    public var devicePlatform: String?
    /// The `X-Profile-Id` header as sent.
    public var profileId: String?
    /// Whether an `X-Profile-Token` header was sent (never its value).
    public var sentProfileToken: Bool
    /// The answer's status (0 until answered).
    public var status: Int
    /// Body bytes written so far (file bodies update while streaming).
    public var bytesSent: Int64
}

/// A read-only view of one download registry row, for assertions.
public struct SiloDownloadSnapshot: Sendable, Hashable {
    public var id: String
    public var contentId: String
    public var episodeId: String?
    public var batchId: String?
    /// nil for an ephemeral (web) row.
    public var deviceId: String?
    public var profileId: String
    public var mediaFileId: String
    public var status: String
    public var quality: String
    public var deliveryFormat: String
    public var revision: Int
}

/// A read-only view of one series monitor (downloads-api.md § 8), for assertions.
public struct SiloSubscriptionSnapshot: Sendable, Hashable {
    public var id: String
    public var seriesId: String
    /// `all`, `future`, `latest_season` or `specific_seasons`.
    public var mode: String
    /// The monitored seasons; empty unless `mode` is `specific_seasons`.
    public var seasonNumbers: [Int]
    /// The latest-season anchor; nil unless `mode` is `latest_season`.
    public var targetSeason: Int?
    public var deleteWatched: Bool
    /// 0 means unlimited.
    public var maxStorageBytes: Int64
    /// false while paused.
    public var active: Bool
    /// The monitor's current validator, quoted, as `ETag` and `etag` carry it.
    public var etag: String
    public var deviceId: String
    public var profileId: String
}

// MARK: - SiloFixture

/// A Silo server fixture on loopback, serving native `/api/v2` for a `FixtureCatalog`.
///
/// Identity: one account (`userId` "1") with two household profiles: `primaryProfileId` "1"
/// (no PIN) and `lockedProfileId` "2" (PIN-locked; unlock with `POST /profiles/2/verify-pin`).
/// Libraries: "1" (movies) and "2" (series). File ids are canonical decimal strings in catalog
/// order. Content ids are `movie:<slug>-<year>`, `series:<slug>`, `series:<slug>-S01` (season),
/// `episode:<slug>-s01e02`.
///
/// Everything the docs mark as a server decision that a test needs to steer has a control:
/// device approval, token expiry, role change, session revocation, file changes, revocation of
/// download entries, preparation, lost answers, injected faults and a failing artwork store
/// (`failArtwork(times:status:)`). Offline side assets (manifest `artwork_urls`, `subtitles`,
/// `chapters`, and the artwork and subtitle proxies) come from the catalog's `movieArtwork`,
/// `episodeThumbs`, `subtitles` and details' `chapters`. Series monitors
/// (`/downloads/subscriptions`) and watch progress (`/progress`) have theirs too: a monitor
/// changed by another client, episodes that arrive later (`hold`/`release`) and watched state.
public final class SiloFixture: Sendable {
    /// What the fixture serves and how fast it moves.
    public struct Configuration: Sendable {
        public var username = "alice"
        public var password = "correct horse battery staple"
        public var email = "alice@example.test"
        /// An API key (`sa_` prefix), sent as `Authorization: Bearer sa_…` (api-keys-api.md).
        public var apiKey = "sa_fixture0123456789abcdef"
        /// `expires_in` of every access token, in seconds.
        public var accessTokenLifetime = 3600
        /// At most this many cards per catalog page, whatever `limit` asks for (a short page is
        /// allowed: clients follow `page.next_cursor` until it is absent).
        public var catalogPageSize = 2
        /// Device sign-in request lifetime (`expires_in`, 900 per auth-api.md § Device sign-in).
        public var deviceCodeLifetime = 900
        /// `interval` on start and `poll_after` on poll, in seconds.
        public var devicePollInterval = 1
        /// A non-original quality preset is `preparing` until the Nth `GET /downloads` that lists
        /// it (then `ready`). `finishPreparations()` skips the wait.
        public var preparationPolls = 2
        /// PIN of the locked profile ("2").
        public var lockedProfilePIN = "1234"
        /// Primary and locked profile names.
        public var primaryProfileName = "Owner"
        public var lockedProfileName = "Kids"
        /// A reverse-proxy path prefix such as "/silo": every route then lives below it.
        public var basePath = ""
        public var serverName = "Silo Fixture"
        /// Series monitors are served (`/downloads/subscriptions`, downloads-api.md § 8) and the
        /// download capability advertises them (`series_monitoring`, `monitoring_modes`,
        /// `subscription_reads`, `subscription_mutations`, `bounded_subscription_sync`). false
        /// advertises none of them and the monitor routes answer `503 dependency_unavailable`, as
        /// a server without the monitor services does (Go: download_subscriptions.go
        /// `unavailable("download subscriptions")`). `setSeriesMonitoring(_:)` flips it later.
        public var seriesMonitoring = true
        /// The resolution Silo's probe found for a media file (FileVersion `resolution`, such as
        /// `360p`), by the file's name; a file not named here is unprobed (`""`).
        public var resolutions: [String: String] = [:]

        public init() {}
    }

    public let configuration: Configuration
    /// `server_id` reported by the device sign-in lookup.
    public let serverId: String
    public let userId = "1"
    public let primaryProfileId = "1"
    public let lockedProfileId = "2"

    /// What the server lists now (`readdLibraries()` replaces it).
    var catalog: SiloCatalog { catalogNow.withLock { $0 } }
    let catalogNow: Mutex<SiloCatalog>
    let source: FixtureCatalog
    let basePath: String
    let cursorKey: [UInt8]
    let state = Mutex(SiloState())
    private let server = Mutex<HTTPServer?>(nil)
    let origin = Mutex("")
    let createHold = Mutex<(armed: Bool, gate: DispatchSemaphore)?>(nil)
    let createHeld = Mutex(false)
    /// Each browse's order (its library, type, search, source and sort), kept between pages.
    let browseOrders = Mutex<[String: [SiloCatalog.Node]]>([:])

    public init(catalog fixtureCatalog: FixtureCatalog, configuration: Configuration = Configuration()) {
        self.configuration = configuration
        self.source = fixtureCatalog
        self.catalogNow = Mutex(SiloCatalog(fixtureCatalog))
        let trimmed = configuration.basePath.trimmingCharacters(in: CharacterSet(charactersIn: "/"))
        self.basePath = trimmed.isEmpty ? "" : "/" + trimmed
        self.serverId = "srv_" + siloRandomHex(8)
        self.cursorKey = siloRandomBytes(32)
        let monitoring = configuration.seriesMonitoring
        state.withLock { $0.seriesMonitoring = monitoring }
    }

    // MARK: Lifecycle

    /// Starts the server and returns its **server base URL**: `http://127.0.0.1:<port>` plus the
    /// configured `basePath`, without `/api/v2`. Silo clients save the server base and append
    /// `/api/v2/...` themselves (auth-api.md: "Unprefixed paths are relative to the server's
    /// `/api/v2` base URL"; `native_start_path` is "the native start's path below the server
    /// base"). `apiBaseURL` is the same plus `/api/v2`.
    @discardableResult
    public func start() throws -> String {
        if let running = server.withLock({ $0 }) { return running.baseURL + basePath }
        let created = try HTTPServer(port: 0) { [weak self] request in
            guard let self else { return HTTPServer.Response(status: 503) }
            return self.handle(request)
        }
        server.withLock { $0 = created }
        origin.withLock { $0 = created.baseURL }
        return created.baseURL + basePath
    }

    /// Stops accepting and closes every open connection.
    public func stop() {
        let running: HTTPServer? = server.withLock { s in
            let value = s
            s = nil
            return value
        }
        running?.stop()
    }

    /// The server base URL (see `start()`); empty before `start()`.
    public var baseURL: String {
        let o = origin.withLock { $0 }
        return o.isEmpty ? "" : o + basePath
    }

    /// The `/api/v2` base URL; empty before `start()`.
    public var apiBaseURL: String {
        let b = baseURL
        return b.isEmpty ? "" : b + "/api/v2"
    }

    // MARK: - Request pipeline

    private func handle(_ request: HTTPServer.Request) -> HTTPServer.Response {
        let (logId, requestId) = beginLog(request)
        var response = respond(request, logId: logId, requestId: requestId)
        // api-contract.md § HTTP representation: every v2 answer carries X-Request-ID, the same
        // id a problem's `instance` names.
        response.headers.append(("X-Request-ID", requestId))
        let status = response.status
        let count: Int64?
        if case .bytes(let bytes) = response.body, request.method != "HEAD" { count = Int64(bytes.count) } else { count = nil }
        state.withLock { s in
            guard let i = s.log.lastIndex(where: { $0.id == logId }) else { return }
            s.log[i].status = status
            if let count { s.log[i].bytesSent = count }
        }
        return response
    }

    private func respond(_ request: HTTPServer.Request, logId: Int, requestId: String) -> HTTPServer.Response {
        var path = request.path
        if !basePath.isEmpty {
            guard path == basePath || path.hasPrefix(basePath + "/") else { return plainNotFound() }
            path = String(path.dropFirst(basePath.count))
        }
        // api-contract.md § What Huma covers: Silo 1.0 answers the whole /api/v1 namespace with
        // 410 Gone, the client_upgrade_required problem and Cache-Control: no-store.
        if path == "/api/v1" || path.hasPrefix("/api/v1/") {
            return problemResponse(
                requestId: requestId, .clientUpgradeRequired,
                "The /api/v1 surface is retired; upgrade the client to /api/v2.")
        }
        // api-contract.md § Foundation: the v2 surface is /api/v2/ and below; the bare namespace
        // root is an ordinary unrouted path.
        guard path.hasPrefix("/api/v2/") else { return plainNotFound() }
        let relative = String(path.dropFirst("/api/v2".count))
        var fault = takeFault([request.path, path, relative])
        if let active = fault {
            switch active {
            case .status(let code):
                // api-contract.md § Problem Details: Retry-After accompanies every 429.
                let retry: [(String, String)] = code == 429 ? [("Retry-After", "1")] : []
                return problemResponse(
                    requestId: requestId, SiloProblem.forStatus(code), "Injected failure.",
                    headers: retry, status: code)
            case .statusRetryAfter(let code, let after):
                return problemResponse(
                    requestId: requestId, SiloProblem.forStatus(code), "Injected failure.",
                    headers: [("Retry-After", after)], status: code)
            case .stall(let seconds):
                Thread.sleep(forTimeInterval: seconds)
                fault = nil
            default:
                break
            }
        }
        let ctx = SiloCtx(
            request: request, requestId: requestId, logId: logId, fault: fault,
            path: String(path.dropFirst("/api/v2/".count)))
        var response: HTTPServer.Response
        do {
            response = try dispatch(ctx)
        } catch let refusal as SiloRefusal {
            response = refusal.response
        } catch {
            response = problemResponse(requestId: requestId, .internalError, "An unexpected error occurred.")
        }
        if let fault, case .bytes(let bytes) = response.body,
            response.headers.contains(where: { $0.0 == "Content-Type" && $0.1.hasPrefix("application/json") })
        {
            switch fault {
            case .malformedJSON: response.body = .bytes(Array("{\"items\": [{\"content_id\": ,".utf8))
            case .truncatedJSON: response.body = .bytes(Array(bytes.prefix(max(1, bytes.count / 2))))
            default: break
            }
        }
        return response
    }

    private func dispatch(_ c: SiloCtx) throws -> HTTPServer.Response {
        // downloads-api.md § 2: on /api/v2 X-Silo-Device-Id must be one device identifier
        // (letters, digits, . _ : -), else 422 at header.x-silo-device-id before any operation runs.
        if let device = c.header("x-silo-device-id") { try validateDeviceHeader(c, device) }
        let segments = c.path.split(separator: "/", omittingEmptySubsequences: false).map(String.init)
        for route in routeTable() {
            guard let params = route.match(segments) else { continue }
            guard let handler = route.handlers[c.method] else {
                // api-contract.md § HTTP representation: HEAD exists only where registered.
                let allow = route.handlers.keys.sorted().joined(separator: ", ")
                throw problem(c, .methodNotAllowed, "This operation does not accept \(c.method).", headers: [("Allow", allow)])
            }
            // api-contract.md § HTTP representation: a request that accepts none of an
            // operation's representations receives 406.
            if !route.raw, let accept = c.header("accept"), !siloAcceptsJSON(accept) {
                throw problem(c, .notAcceptable, "No acceptable representation is available for this operation.")
            }
            return try handler(c, params)
        }
        throw problem(c, .notFound, "No operation is registered at this path.")
    }

    private func routeTable() -> [SiloRoute] {
        func route(
            _ pattern: String, raw: Bool = false,
            _ handlers: [String: (SiloCtx, [String]) throws -> HTTPServer.Response]
        ) -> SiloRoute {
            SiloRoute(pattern: pattern.split(separator: "/").map(String.init), raw: raw, handlers: handlers)
        }
        return [
            route("system/info", ["GET": { c, _ in try self.getSystemInfo(c) }]),
            route("auth/providers", ["GET": { c, _ in try self.listAuthProviders(c) }]),
            route("auth/login", ["POST": { c, _ in try self.login(c) }]),
            route("auth/refresh", ["POST": { c, _ in try self.refreshSession(c) }]),
            route("auth/logout", ["POST": { c, _ in try self.logout(c) }]),
            route("auth/device", ["GET": { c, _ in try self.getDeviceLogin(c) }]),
            route("auth/device/capability", ["GET": { c, _ in try self.getDeviceLoginCapability(c) }]),
            route("auth/device/start", ["POST": { c, _ in try self.startDeviceLogin(c) }]),
            route("auth/device/poll", ["POST": { c, _ in try self.pollDeviceLogin(c) }]),
            route("auth/device/cancel", ["POST": { c, _ in try self.cancelDeviceLogin(c) }]),
            route("auth/device/approve", ["POST": { c, _ in try self.decideDeviceLogin(c, approve: true) }]),
            route("auth/device/deny", ["POST": { c, _ in try self.decideDeviceLogin(c, approve: false) }]),
            route("account/me", ["GET": { c, _ in try self.getCurrentUser(c) }]),
            route("profiles", ["GET": { c, _ in try self.listProfiles(c) }]),
            route("profiles/*/verify-pin", ["POST": { c, p in try self.verifyProfilePIN(c, p[0]) }]),
            route("user/libraries", ["GET": { c, _ in try self.listUserLibraries(c) }]),
            route("catalog", ["GET": { c, _ in try self.listCatalogItems(c) }]),
            route("catalog/items/*", ["GET": { c, p in try self.getCatalogItem(c, p[0]) }]),
            route("catalog/items/*/versions", ["GET": { c, p in try self.listCatalogItemVersions(c, p[0]) }]),
            route("catalog/items/*/episodes", ["GET": { c, p in try self.listCatalogItemEpisodes(c, p[0]) }]),
            route("catalog/series/*/seasons", ["GET": { c, p in try self.listSeriesSeasons(c, p[0]) }]),
            route("catalog/series/*/seasons/*", ["GET": { c, p in try self.getSeriesSeason(c, p[0], p[1]) }]),
            route("catalog/series/*/seasons/*/episodes", ["GET": { c, p in try self.listSeasonEpisodes(c, p[0], p[1]) }]),
            route(
                "direct-download", raw: true,
                [
                    "GET": { c, _ in try self.directDownload(c) },
                    "HEAD": { c, _ in try self.directDownload(c) }
                ]),
            route("capabilities/downloads", ["GET": { c, _ in try self.getDownloadCapability(c) }]),
            route(
                "downloads",
                [
                    "GET": { c, _ in try self.listDownloads(c) },
                    "POST": { c, _ in try self.createDownloads(c) }
                ]),
            // Before "downloads/*": a two- or three-segment subscription path must not be taken for
            // a download id.
            route(
                "downloads/subscriptions",
                [
                    "GET": { c, _ in try self.listDownloadSubscriptions(c) },
                    "POST": { c, _ in try self.createDownloadSubscription(c) }
                ]),
            route("downloads/subscriptions/sync", ["POST": { c, _ in try self.syncDownloadSubscription(c) }]),
            route(
                "downloads/subscriptions/*",
                [
                    "GET": { c, p in try self.getDownloadSubscription(c, p[0]) },
                    "PATCH": { c, p in try self.updateDownloadSubscription(c, p[0]) },
                    "DELETE": { c, p in try self.deleteDownloadSubscription(c, p[0]) }
                ]),
            route("downloads/batches/*/manifests", ["GET": { c, p in try self.listDownloadBatchManifests(c, p[0]) }]),
            route(
                "downloads/*",
                [
                    "PATCH": { c, p in try self.reportDownloadStatus(c, p[0]) },
                    "DELETE": { c, p in try self.deleteDownload(c, p[0]) }
                ]),
            route(
                "downloads/*/file", raw: true,
                [
                    "GET": { c, p in try self.downloadFile(c, p[0]) },
                    "HEAD": { c, p in try self.downloadFile(c, p[0]) }
                ]),
            route("downloads/*/manifest", ["GET": { c, p in try self.getDownloadManifest(c, p[0]) }]),
            // downloads-api.md § 4.8 / § 4.9: GET only (Go registers no HEAD for them), binary answers.
            route("downloads/*/artwork/*", raw: true, ["GET": { c, p in try self.downloadArtwork(c, p[0], p[1]) }]),
            route("downloads/*/subtitles/*", raw: true, ["GET": { c, p in try self.downloadSubtitle(c, p[0], p[1]) }]),
            route("progress", ["GET": { c, _ in try self.listProgress(c) }])
        ]
    }

    // MARK: - System

    // GET /system/info — api-contract.md § Discovery and capability detection ("always
    // registered, unauthenticated"); Go: system.go SystemInfo (server_version, api_major,
    // contract_digest, links.openapi, links.capabilities), Cache-Control: no-cache.
    private func getSystemInfo(_ c: SiloCtx) throws -> HTTPServer.Response {
        try rejectUnknownQuery(c, [])
        let body = SiloJ.obj([
            ("server_version", SiloJ.string("silo-fixture")),
            ("api_major", SiloJ.num(2)),
            ("contract_digest", SiloJ.string(siloHexString(siloSHA256Digest(Array("silo-fixture-contract".utf8))))),
            (
                "links",
                SiloJ.obj([
                    ("openapi", SiloJ.string("/api/v2/openapi.json")),
                    ("capabilities", SiloJ.string("/api/v2/capabilities"))
                ])
            )
        ])
        return json(body, cache: "no-cache")
    }

}

// MARK: - Routing and request context

struct SiloCtx: Sendable {
    let request: HTTPServer.Request
    let requestId: String
    let logId: Int
    let fault: FixtureFault?
    /// The path below `/api/v2/`.
    let path: String

    var method: String { request.method }
    var query: [String: String] { request.query }
    func header(_ name: String) -> String? { request.headers[name] }
}

fileprivate struct SiloRoute {
    let pattern: [String]
    /// Byte routes: no JSON `Accept` negotiation.
    let raw: Bool
    let handlers: [String: (SiloCtx, [String]) throws -> HTTPServer.Response]

    func match(_ segments: [String]) -> [String]? {
        guard segments.count == pattern.count else { return nil }
        var params: [String] = []
        for (expected, actual) in zip(pattern, segments) {
            if expected == "*" {
                guard !actual.isEmpty else { return nil }
                params.append(actual)
            } else if expected != actual {
                return nil
            }
        }
        return params
    }
}

// MARK: - Mutable state

struct SiloState: Sendable {
    var nextLogId = 0
    var log: [SiloLoggedRequest] = []
    var faults: [SiloFaultRule] = []
    var counter = 0
    var sessions: [String: SiloSession] = [:]
    var accessTokens: [String: SiloAccessToken] = [:]
    var refreshTokens: [String: String] = [:]
    var profileTokens: [String: SiloProfileGrant] = [:]
    var roleEpoch = 0
    var deviceRequests: [SiloDeviceRequest] = []
    var downloads: [SiloDownloadRow] = []
    var loseNextCreate = false
    var downloadAllowed = true
    var capabilityRevision = 1
    var modifiedOverride: [String: Date] = [:]
    var hashCache: [String: SiloHashEntry] = [:]
    var manifestHashOverride: [String: String] = [:]
    /// `failArtwork(times:status:)`: the artwork store's answer and how many more reads get it.
    var artworkFailure: (remaining: Int, status: Int)? = nil
    var seriesMonitoring = true
    var subscriptions: [SiloSubscription] = []
    /// Episodes the server does not have yet (`hold(episodeContentId:)`).
    var heldEpisodes: Set<String> = []
    /// When a released episode arrived; episodes never held were there from the start.
    var episodeAddedAt: [String: Date] = [:]
    /// Films the server does not have yet (`hold(movieContentId:)`), and when a released one
    /// arrived.
    var heldMovies: Set<String> = []
    var movieAddedAt: [String: Date] = [:]
    var progress: [SiloProgressRow] = []
    /// `changeSubscriptionAtNextSync(id:mode:)`: armed until a sync arrives.
    var changeAtNextSync: (id: String, mode: String)? = nil
}
