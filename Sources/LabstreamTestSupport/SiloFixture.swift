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
// One file of ~4 700 lines on purpose: each route's handler sits beside the doc section and Go
// type it was written from, so a reviewer checks it against one source at a time; split, the
// shared state and problem helpers would need to be public to every part.
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

    private let catalog: SiloCatalog
    private let basePath: String
    private let cursorKey: [UInt8]
    private let state = Mutex(SiloState())
    private let server = Mutex<HTTPServer?>(nil)
    private let origin = Mutex("")
    private let createHold = Mutex<(armed: Bool, gate: DispatchSemaphore)?>(nil)

    public init(catalog fixtureCatalog: FixtureCatalog, configuration: Configuration = Configuration()) {
        self.configuration = configuration
        self.catalog = SiloCatalog(fixtureCatalog)
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

    // MARK: Controls: device sign-in

    /// Approves the newest pending device sign-in request (or the one showing `userCode`, with or
    /// without its dash), as a person would on `/activate`. The device's next poll collects tokens.
    @discardableResult
    public func approveDevice(userCode: String? = nil) -> Bool { decideDevice(userCode, to: "approved") }

    /// Denies the newest pending device sign-in request (or the one showing `userCode`).
    @discardableResult
    public func denyDevice(userCode: String? = nil) -> Bool { decideDevice(userCode, to: "denied") }

    /// Every device sign-in request expires now (`expired` is derived from `expires_at`).
    public func expireDeviceCodes() {
        let past = Date(timeIntervalSinceNow: -1)
        state.withLock { s in
            for i in s.deviceRequests.indices { s.deviceRequests[i].expiresAt = past }
        }
    }

    /// Marks every pending request opened, as an approver's lookup would (device-login.md
    /// § Lifetimes): polls then report `opened: true`.
    public func openDeviceRequests() {
        let now = Date()
        state.withLock { s in
            for i in s.deviceRequests.indices where s.deviceRequests[i].effectiveStatus(now) == "pending" {
                s.deviceRequests[i].opened = true
            }
        }
    }

    // MARK: Controls: tokens and sessions

    /// Every access token issued so far is past its expiry: requests with one answer
    /// `401 invalid_token` ("The credential is invalid or expired", Go: gates.go) until the
    /// client refreshes. Sessions and refresh tokens stay valid.
    public func expireAccessTokens() {
        let past = Date(timeIntervalSinceNow: -1)
        state.withLock { s in
            for key in Array(s.accessTokens.keys) { s.accessTokens[key]?.expiresAt = past }
        }
    }

    /// Simulates an administrator changing the account's role: every access token minted before
    /// now answers `401 token_refresh_required` (auth-api.md § Access tokens after a role change).
    public func requireTokenRefresh() {
        state.withLock { $0.roleEpoch += 1 }
    }

    /// Revokes every login session: access tokens and refresh tokens of them answer
    /// `401 session_expired`.
    public func revokeAllSessions() {
        state.withLock { s in
            for key in Array(s.sessions.keys) { s.sessions[key]?.revoked = true }
        }
    }

    // MARK: Controls: files

    /// Changes a catalog file's `Last-Modified` (at least one second later than before), and its
    /// bytes when `contents` is given (written to disk). `If-Range` with the old date then gets
    /// the whole file (200), and download manifests report the new size and hash.
    public func changeFile(forFile path: String, contents: [UInt8]? = nil) {
        if let contents { _ = FileManager.default.createFile(atPath: path, contents: Data(contents)) }
        let disk = diskInfo(path)?.modified ?? Date()
        let now = Date()
        state.withLock { s in
            let previous = s.modifiedOverride[path] ?? disk
            let later = max(previous, now)
            s.modifiedOverride[path] = Date(timeIntervalSince1970: floor(later.timeIntervalSince1970) + 1)
            s.hashCache[path] = nil
        }
    }

    /// The file ids (canonical decimal strings) the catalog gave a file on disk.
    public func fileIds(forPath path: String) -> [String] {
        catalog.files.values.filter { $0.path == path }.map(\.id).sorted { (Int($0) ?? 0) < (Int($1) ?? 0) }
    }

    /// The content id of a movie, series or episode, for building requests in tests.
    public func movieContentId(title: String) -> String? {
        catalog.movies.first { $0.title == title }?.contentId
    }

    public func seriesContentId(name: String) -> String? {
        catalog.series.first { $0.title == name }?.contentId
    }

    public func episodeContentId(series name: String, season: Int, episode: Int) -> String? {
        catalog.series.first { $0.title == name }?.episodes.first { $0.season == season && $0.number == episode }?.contentId
    }

    // MARK: Controls: downloads

    /// Sets an entry `revoked` (downloads-api.md § 5: "revoked is reserved … clients must handle
    /// it"). Its file and manifest then answer `409 conflict`; listings show `revoked`.
    @discardableResult
    public func revokeEntry(id: String) -> Bool { setStatus(id, "revoked") }

    /// The entry is replaced behind the client's back (as a create with the current
    /// `expected_revision` does, downloads-api.md § 4.1): same file, revision one higher, so a
    /// report naming the old revision answers `409 conflict` (§ 4.3).
    @discardableResult
    public func replaceEntry(id: String) -> Bool {
        state.withLock { s in
            guard let i = s.downloads.firstIndex(where: { $0.id == id }) else { return false }
            s.downloads[i].revision += 1
            s.downloads[i].statusEventAt = nil  // the latest event is per revision (§ 4.3)
            return true
        }
    }

    /// Sets a preparing entry `failed` (the artifact job exhausted its retries).
    @discardableResult
    public func failPreparation(id: String) -> Bool { setStatus(id, "failed") }

    /// Every `preparing` entry becomes `ready` now.
    public func finishPreparations() {
        state.withLock { s in
            for i in s.downloads.indices where s.downloads[i].status == "preparing" {
                s.downloads[i].status = "ready"
                s.downloads[i].pollsUntilReady = 0
            }
        }
    }

    /// The next successful `POST /downloads` creates its entries, then loses its answer: the
    /// status line and headers go out, the body does not, and the connection closes. (The socket
    /// server always writes the head first, so this is as close to "dropped before the answer" as
    /// it gets.) Exercises downloads-api.md § 9.3: reconcile with `GET /downloads`, never replay.
    public func loseNextCreateAnswer() {
        state.withLock { $0.loseNextCreate = true }
    }

    /// The next `POST /downloads` makes its entries, then holds its answer until
    /// `releaseCreateAnswer()` (at most a minute): a client can be stopped between a create and
    /// its answer.
    public func holdNextCreateAnswer() { createHold.withLock { $0 = (true, DispatchSemaphore(value: 0)) } }

    public func releaseCreateAnswer() { createHold.withLock { $0 }?.gate.signal() }

    /// Whether a create's answer is being held now (made, not yet sent).
    public var holdsCreateAnswer: Bool { createHeld.withLock { $0 } }
    private let createHeld = Mutex(false)

    /// Manifests of `fileId` name `hash` as the media file's SHA-256 (a server whose integrity
    /// data disagrees with the bytes it serves).
    public func overrideManifestHash(fileId: String, hash: String) { state.withLock { $0.manifestHashOverride[fileId] = hash } }

    /// Turns the account's download permission on or off; the capability document's revision and
    /// ETag change with it.
    public func setDownloadAllowed(_ allowed: Bool) {
        state.withLock { s in
            s.downloadAllowed = allowed
            s.capabilityRevision += 1
        }
    }

    /// Every download registry row, oldest first.
    public var downloadEntries: [SiloDownloadSnapshot] {
        state.withLock { s in
            s.downloads.map {
                SiloDownloadSnapshot(
                    id: $0.id, contentId: $0.contentId, episodeId: $0.episodeId, batchId: $0.batchId,
                    deviceId: $0.deviceId, profileId: $0.profileId, mediaFileId: $0.mediaFileId,
                    status: $0.status, quality: $0.quality, deliveryFormat: $0.deliveryFormat,
                    revision: $0.revision)
            }
        }
    }

    // MARK: Controls: series monitors

    /// Turns series monitoring on or off (see `Configuration.seriesMonitoring`); the capability
    /// document's revision and ETag change with it.
    public func setSeriesMonitoring(_ enabled: Bool) {
        state.withLock { s in
            s.seriesMonitoring = enabled
            s.capabilityRevision += 1
        }
    }

    /// Every series monitor, oldest first.
    public var subscriptions: [SiloSubscriptionSnapshot] {
        state.withLock { s in
            s.subscriptions.map {
                SiloSubscriptionSnapshot(
                    id: $0.id, seriesId: $0.seriesId, mode: $0.mode, seasonNumbers: $0.seasonNumbers,
                    targetSeason: $0.targetSeason, deleteWatched: $0.deleteWatched,
                    maxStorageBytes: $0.maxStorageBytes, active: $0.active, etag: $0.etag,
                    deviceId: $0.deviceId, profileId: $0.profileId)
            }
        }
    }

    /// Another client of the same device edits the monitor (as its own `PATCH` would, under the
    /// shared mode-change rules of downloads-api.md § 8.3): the monitor gets a new validator even
    /// when nothing else changes, so the client's next `If-Match` answers `412` and a sync under
    /// the old `etag` answers `409`. A switch to `specific_seasons` of a monitor without seasons
    /// monitors every season the series has now. false when no monitor has `id`, `mode` is not a
    /// monitor mode, or the change leaves `specific_seasons` without a season.
    @discardableResult
    public func changeSubscriptionBehindClient(id: String, mode: String? = nil, deleteWatched: Bool? = nil) -> Bool {
        if let mode, !siloMonitorModes.contains(mode) { return false }
        guard let seriesId = state.withLock({ s in s.subscriptions.first(where: { $0.id == id })?.seriesId }) else { return false }
        var latest: Int? = nil
        var seasons: [Int] = []
        if case .series(let show)? = visibleNode(seriesId) {
            latest = show.seasons.max()
            seasons = show.seasons
        }
        let everySeason = seasons
        let latestSeason = latest
        let now = Date()
        return state.withLock { s in
            guard let i = s.subscriptions.firstIndex(where: { $0.id == id }) else { return false }
            let widen: [Int]? = mode == "specific_seasons" && s.subscriptions[i].seasonNumbers.isEmpty ? everySeason : nil
            return s.subscriptions[i].apply(
                mode: mode, seasonNumbers: widen, deleteWatched: deleteWatched, maxStorageBytes: nil,
                active: nil, latestSeason: latestSeason, now: now)
        }
    }

    /// The same change, made by the other client just before this device's next sync of
    /// monitor `id` is answered: the device read the old validator, so its sync answers `409`.
    public func changeSubscriptionAtNextSync(id: String, mode: String) {
        state.withLock { $0.changeAtNextSync = (id, mode) }
    }

    // MARK: Controls: catalog arrivals

    /// The server does not have this episode yet: catalog listings, item, season and episode
    /// routes, version lists, direct download, download creation and monitor syncs do not show
    /// it, nor a season or series it leaves without an episode. Download entries made before stay.
    /// `release(episodeContentId:)` undoes it. false when the id names no episode.
    @discardableResult
    public func hold(episodeContentId: String) -> Bool {
        guard case .episode? = catalog.node(episodeContentId) else { return false }
        state.withLock { _ = $0.heldEpisodes.insert(episodeContentId) }
        return true
    }

    /// The server gains a held episode, added now: its card's `added_at` is now, and a `future`
    /// monitor created before now counts it as new (downloads-api.md § 8.1; Go:
    /// downloads/subscription.go — `future` keeps only episodes that become available after the
    /// monitor's `created_at`). Episodes never held were there before every monitor. false when
    /// the episode was not held.
    @discardableResult
    public func release(episodeContentId: String) -> Bool {
        let now = Date()
        return state.withLock { s in
            guard s.heldEpisodes.remove(episodeContentId) != nil else { return false }
            s.episodeAddedAt[episodeContentId] = now
            return true
        }
    }

    // MARK: Controls: watch progress

    /// The primary profile finished `contentId` (a movie's or an episode's content id, as the
    /// catalog names it: an episode's progress is keyed by the episode, downloads-api.md § 10.9
    /// `media_item_id: "ep_88"`), or with `false` has not (position back to 0). `GET /progress`
    /// lists the change first; a `delete_watched` monitor skips a finished episode (§ 8.2).
    public func markWatched(contentId: String, _ completed: Bool = true) {
        markWatched(contentId: contentId, completed, profileId: primaryProfileId)
    }

    /// `markWatched(contentId:_:)` for `profileId` (e.g. `lockedProfileId`).
    public func markWatched(contentId: String, _ completed: Bool = true, profileId: String) {
        let now = Date()
        state.withLock { s in
            s.recordProgress(profileId: profileId, mediaItemId: contentId, now: now) { row in
                row.completed = completed
                row.positionSeconds = completed ? row.durationSeconds : 0
            }
        }
    }

    /// `profileId` (nil: the primary profile) stopped `contentId` at `positionSeconds` of
    /// `durationSeconds` (0: unknown, as Go's ProgressEntry says). A finished item stays finished
    /// ("Completed is a one-way latch", downloads-api.md § 7.1).
    public func setProgress(contentId: String, positionSeconds: Double, durationSeconds: Double = 0, profileId: String? = nil) {
        let profile = profileId ?? primaryProfileId
        let now = Date()
        state.withLock { s in
            s.recordProgress(profileId: profile, mediaItemId: contentId, now: now) { row in
                row.positionSeconds = positionSeconds
                row.durationSeconds = durationSeconds
            }
        }
    }

    // MARK: Controls: faults and log

    /// Injects `fault` into the next `times` requests (nil: every request) whose path starts with
    /// `pathPrefix`. The prefix is matched against the full path, the path without the base path,
    /// and the path relative to `/api/v2` (so "/downloads" and "/api/v2/downloads" both work).
    /// Status faults answer a problem document before the operation runs; `stall` delays the
    /// answer; `dropAfter`, `stallAfter`, `ignoreRange` and `wrongContentRange` act on byte routes;
    /// `malformedJSON` and `truncatedJSON` corrupt a JSON answer.
    public func inject(_ fault: FixtureFault, pathPrefix: String, times: Int? = 1) {
        if let times, times <= 0 { return }
        state.withLock { $0.faults.append(SiloFaultRule(fault: fault, prefix: pathPrefix, remaining: times)) }
    }

    /// Removes every injected fault, and any `failArtwork(times:status:)` still pending.
    public func clearFaults() {
        state.withLock { s in
            s.faults.removeAll()
            s.artworkFailure = nil
        }
    }

    /// The artwork store behind `GET /downloads/{id}/artwork/{kind}` answers `status` to the next
    /// `times` artwork reads (only reads that pass authorization and name a kind the item has reach
    /// the store). As downloads-api.md § 4.8 says: a 429 or 5xx from the store makes the route answer
    /// `503 dependency_unavailable` with `Retry-After: 5` (retry the same request later); any other
    /// store answer (e.g. 404) is `404 not_found`, which won't succeed on a retry. A later call
    /// replaces a pending one; `clearFaults()` clears it.
    public func failArtwork(times: Int = 1, status: Int = 503) {
        state.withLock { $0.artworkFailure = times > 0 ? (remaining: times, status: status) : nil }
    }

    /// Every request answered so far, oldest first.
    public var requestLog: [SiloLoggedRequest] {
        state.withLock { $0.log }
    }

    public func clearRequestLog() {
        state.withLock { $0.log.removeAll() }
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

    // MARK: - Auth

    // GET /auth/providers — auth-api.md § External sign-in (listAuthProviders: `password_login`
    // says whether any provider takes a password); Go: auth_sessions.go AuthProviderCollection.
    private func listAuthProviders(_ c: SiloCtx) throws -> HTTPServer.Response {
        try rejectUnknownQuery(c, [])
        let local = SiloJ.obj([
            ("id", SiloJ.string("local")),
            ("display_name", SiloJ.string("Local")),
            ("mode", SiloJ.string("credentials")),
            ("default", SiloJ.bool(true))
        ])
        return json(SiloJ.obj([("items", SiloJ.array([local])), ("password_login", SiloJ.bool(true))]))
    }

    // POST /auth/login — auth-api.md § External sign-in table (`login`) and § Ordinary v2
    // authentication (explicit null is 422 at the member); Go: auth.go LoginInput
    // {username, password, provider}, TokenPair {access_token, refresh_token, expires_in, user};
    // wrong credentials are 401 invalid_token.
    private func login(_ c: SiloCtx) throws -> HTTPServer.Response {
        try rejectUnknownQuery(c, [])
        let body = try parseBody(
            c,
            [
                SiloMember("username", .string, required: true, minLength: 1, maxLength: 254),
                SiloMember("password", .string, required: true, minLength: 1, maxLength: 1024),
                SiloMember("provider", .string, maxLength: 64)
            ])
        let username = body["username"]?.stringValue ?? ""
        let password = body["password"]?.stringValue ?? ""
        let provider = body["provider"]?.stringValue ?? ""
        guard provider.isEmpty || provider == "local",
            username == configuration.username, password == configuration.password
        else {
            throw problem(c, .invalidToken, "Invalid username or password.")
        }
        let device = c.header("user-agent") ?? ""
        let lifetime = configuration.accessTokenLifetime
        let now = Date()
        let pair: SiloIssuedPair = state.withLock { s in s.openSession(deviceName: device, now: now, lifetime: lifetime) }
        return json(tokenPairJSON(pair))
    }

    // POST /auth/refresh — auth-api.md § External sign-in table (refreshSession: "A refused
    // account ends the session (401 session_expired)") and § Access tokens after a role change
    // ("only a refused refresh ends the session"); Go: auth_sessions.go RefreshSessionInput
    // {refresh_token}, RefreshedTokens {access_token, refresh_token, expires_in}: a revoked
    // session is 401 session_expired, any other refusal 401 invalid_token.
    // Rotation: every refresh answers a new refresh token. The docs define no reuse detection and
    // refresh is domain-identity retry safe, so an older refresh token of a live session keeps
    // working; only a revoked session refuses it.
    private func refreshSession(_ c: SiloCtx) throws -> HTTPServer.Response {
        try rejectUnknownQuery(c, [])
        let body = try parseBody(c, [SiloMember("refresh_token", .string, required: true, minLength: 1, maxLength: 4096)])
        let token = body["refresh_token"]?.stringValue ?? ""
        let lifetime = configuration.accessTokenLifetime
        let now = Date()
        let outcome: SiloRefreshOutcome = state.withLock { s in
            guard let sessionId = s.refreshTokens[token] else { return .invalid }
            guard let session = s.sessions[sessionId], !session.revoked else { return .revoked }
            return .issued(s.mint(sessionId: sessionId, now: now, lifetime: lifetime))
        }
        switch outcome {
        case .invalid:
            throw problem(c, .invalidToken, "The refresh token is invalid or expired.")
        case .revoked:
            throw problem(c, .sessionExpired, "The session is no longer valid; sign in again.")
        case .issued(let pair):
            return json(
                SiloJ.obj([
                    ("access_token", SiloJ.string(pair.access)),
                    ("refresh_token", SiloJ.string(pair.refresh)),
                    ("expires_in", SiloJ.num(lifetime))
                ]))
        }
    }

    // POST /auth/logout — auth-api.md § Temporary passwords lists `POST /auth/logout`; Go:
    // auth.go `logout` revokes the caller's login session and answers a bodyless 204
    // (api-contract.md § Success responses).
    private func logout(_ c: SiloCtx) throws -> HTTPServer.Response {
        let who = try authenticate(c)
        try rejectUnknownQuery(c, [])
        if let sessionId = who.sessionId {
            state.withLock { s in
                guard var session = s.sessions[sessionId] else { return }
                session.revoked = true
                s.sessions[sessionId] = session
            }
        }
        return noContent()
    }

    // MARK: - Device sign-in

    // GET /auth/device/capability — auth-api.md § Device sign-in ("`cancel` and `opened_signal`
    // report the two additions"); Go: device_login.go DeviceLoginCapability.
    private func getDeviceLoginCapability(_ c: SiloCtx) throws -> HTTPServer.Response {
        try rejectUnknownQuery(c, [])
        return json(
            SiloJ.obj([
                ("revision", SiloJ.string("1")),
                ("state", SiloJ.string("available")),
                ("remote_playback_handoff", SiloJ.bool(false)),
                ("protocol_versions", SiloJ.array([SiloJ.num(2)])),
                ("cancel", SiloJ.bool(true)),
                ("opened_signal", SiloJ.bool(true))
            ]), cache: "no-cache")
    }

    // POST /auth/device/start — auth-api.md § Device sign-in (`user_code` eight digits shown as
    // 4821-7730, `verification_uri_complete` <base>/activate?code=48217730, `expires_in` 900);
    // device-login.md § Codes, § Verification link; Go: device_login.go StartDeviceLoginInput,
    // DeviceLoginStart (201 Created).
    private func startDeviceLogin(_ c: SiloCtx) throws -> HTTPServer.Response {
        try rejectUnknownQuery(c, [])
        let body = try parseBody(
            c,
            [
                SiloMember("device_name", .string, maxLength: 128),
                SiloMember("device_platform", .string, maxLength: 64),
                SiloMember("client_purpose", .string, oneOf: ["device_login", "remote_playback"]),
                SiloMember("temporary", .bool)
            ], bodyOptional: true)
        let purpose = body["client_purpose"]?.stringValue ?? "device_login"
        let temporary = body["temporary"]?.boolValue ?? false
        if purpose == "remote_playback" && !temporary {
            throw validation(c, [("body.temporary", "invalid", "remote_playback requires temporary=true.")])
        }
        let name = body["device_name"]?.stringValue ?? ""
        let platform = body["device_platform"]?.stringValue ?? ""
        let now = Date()
        let lifetime = configuration.deviceCodeLifetime
        let request: SiloDeviceRequest = state.withLock { s in
            var code = siloRandomDigits(8)
            var attempts = 0
            while s.deviceRequests.contains(where: { $0.userCode == code }) && attempts < 5 {
                code = siloRandomDigits(8)
                attempts += 1
            }
            let created = SiloDeviceRequest(
                deviceCode: siloRandomHex(32), userCode: code, browserCode: siloRandomHex(32),
                matchCode: siloMatchWords(), deviceName: name, devicePlatform: platform,
                clientPurpose: purpose, temporary: temporary, createdAt: now,
                expiresAt: now.addingTimeInterval(TimeInterval(lifetime)),
                status: "pending", opened: false)
            s.deviceRequests.append(created)
            return created
        }
        let base = publicBase()
        return json(
            SiloJ.obj([
                ("device_code", SiloJ.string(request.deviceCode)),
                ("user_code", SiloJ.string(siloFormatUserCode(request.userCode))),
                ("match_code", SiloJ.string(request.matchCode)),
                ("verification_uri", SiloJ.string(base + "/activate")),
                ("verification_uri_complete", SiloJ.string(base + "/activate?code=" + request.userCode)),
                ("expires_at", SiloJ.string(siloInstant(request.expiresAt))),
                ("expires_in", SiloJ.num(lifetime)),
                ("interval", SiloJ.num(configuration.devicePollInterval)),
                ("device_name", SiloJ.string(request.deviceName)),
                ("device_platform", SiloJ.string(request.devicePlatform)),
                ("client_purpose", SiloJ.string(request.clientPurpose)),
                ("temporary", SiloJ.bool(request.temporary))
            ]), status: 201)
    }

    // POST /auth/device/poll — auth-api.md § Device sign-in (`opened: true` once an approver
    // looked the request up; a pending answer carries the current `expires_at`; `approved`
    // carries the token pair exactly once; `status` gains `canceled`); device-login.md § States;
    // Go: device_login.go PollDeviceLoginInput {device_code}, DeviceLoginPoll {status, poll_after,
    // tokens, profile_id, profile_token, temporary}; an unknown device code is 404.
    // No `slow_down` exists in the docs: the pacing signal is `poll_after`.
    private func pollDeviceLogin(_ c: SiloCtx) throws -> HTTPServer.Response {
        try rejectUnknownQuery(c, [])
        let body = try parseBody(c, [SiloMember("device_code", .string, required: true, minLength: 1)])
        let code = body["device_code"]?.stringValue ?? ""
        let now = Date()
        let lifetime = configuration.accessTokenLifetime
        let polled: SiloPollOutcome? = state.withLock { s in
            guard let i = s.deviceRequests.firstIndex(where: { $0.deviceCode == code }) else { return nil }
            let status = s.deviceRequests[i].effectiveStatus(now)
            var pair: SiloIssuedPair? = nil
            if status == "approved" {
                let deviceName = s.deviceRequests[i].deviceName
                pair = s.openSession(deviceName: deviceName, now: now, lifetime: lifetime)
                s.deviceRequests[i].status = "consumed"
            }
            return SiloPollOutcome(
                status: status, opened: s.deviceRequests[i].opened,
                expiresAt: s.deviceRequests[i].expiresAt, pair: pair)
        }
        guard let outcome = polled else { throw problem(c, .notFound, "No device sign-in request matches this device code.") }
        var members: [(String, SiloJ?)] = [
            ("status", SiloJ.string(outcome.status)),
            ("poll_after", SiloJ.num(configuration.devicePollInterval)),
            ("opened", SiloJ.bool(outcome.opened))
        ]
        if outcome.status == "pending" { members.append(("expires_at", SiloJ.string(siloInstant(outcome.expiresAt)))) }
        if let pair = outcome.pair { members.append(("tokens", tokenPairJSON(pair))) }
        members.append(("profile_id", SiloJ.string("")))
        members.append(("profile_token", SiloJ.string("")))
        members.append(("temporary", SiloJ.bool(false)))
        return json(SiloJ.obj(members))
    }

    // POST /auth/device/cancel — auth-api.md § Device sign-in (cancelDeviceLogin: withdraws a live
    // pending, or approved but uncollected, request and answers `canceled`; any other request
    // answers its unchanged state or `expired`); Go fixture: device_login_fixtures_test.go
    // (200 DeviceLoginCancellation, {} is 422).
    private func cancelDeviceLogin(_ c: SiloCtx) throws -> HTTPServer.Response {
        try rejectUnknownQuery(c, [])
        let body = try parseBody(c, [SiloMember("device_code", .string, required: true, minLength: 1)])
        let code = body["device_code"]?.stringValue ?? ""
        let now = Date()
        let answered: String? = state.withLock { s in
            guard let i = s.deviceRequests.firstIndex(where: { $0.deviceCode == code }) else { return nil }
            let current = s.deviceRequests[i].effectiveStatus(now)
            if current == "pending" || current == "approved" {
                s.deviceRequests[i].status = "canceled"
                return "canceled"
            }
            return current
        }
        guard let status = answered else { throw problem(c, .notFound, "No device sign-in request matches this device code.") }
        return json(SiloJ.obj([("status", SiloJ.string(status))]))
    }

    // GET /auth/device?code= or ?token= — auth-api.md § Device sign-in (getDeviceLogin adds
    // `requested_at`, `server_name`, `server_id`; a lookup of a pending request marks it opened
    // and holds it at least five more minutes, never past 30 minutes after start);
    // device-login.md § Codes (lookups ignore spaces and dashes); Go: device_login.go DeviceLogin.
    private func getDeviceLogin(_ c: SiloCtx) throws -> HTTPServer.Response {
        try rejectUnknownQuery(c, ["code", "token"])
        let code = c.query["code"].map(siloNormalizeUserCode) ?? ""
        let token = c.query["token"] ?? ""
        guard !code.isEmpty || !token.isEmpty else {
            throw validation(c, [("query.code", "required", "Either token or code is required.")])
        }
        let now = Date()
        let looked: SiloDeviceRequest? = state.withLock { s in
            guard let i = s.deviceRequests.lastIndex(where: { (!code.isEmpty && $0.userCode == code) || (!token.isEmpty && $0.browserCode == token) }) else {
                return nil
            }
            if s.deviceRequests[i].effectiveStatus(now) == "pending" {
                s.deviceRequests[i].opened = true
                let cap = s.deviceRequests[i].createdAt.addingTimeInterval(1800)
                let held = max(s.deviceRequests[i].expiresAt, now.addingTimeInterval(300))
                s.deviceRequests[i].expiresAt = min(held, cap)
            }
            return s.deviceRequests[i]
        }
        guard let found = looked else { throw problem(c, .notFound, "No device sign-in request matches this code.") }
        let status = found.effectiveStatus(now)
        let decidable = status == "pending"
        return json(
            SiloJ.obj([
                ("status", SiloJ.string(status)),
                ("user_code", SiloJ.string(decidable ? siloFormatUserCode(found.userCode) : "")),
                ("match_code", SiloJ.string(found.matchCode)),
                ("device_name", SiloJ.string(found.deviceName)),
                ("device_platform", SiloJ.string(found.devicePlatform)),
                ("ip_address_hint", SiloJ.string("127.0.0.x")),
                ("expires_at", status == "expired" ? nil : SiloJ.string(siloInstant(found.expiresAt))),
                ("client_purpose", SiloJ.string(found.clientPurpose)),
                ("temporary", SiloJ.bool(found.temporary)),
                ("requested_at", SiloJ.string(siloInstant(found.createdAt))),
                ("server_name", SiloJ.string(configuration.serverName)),
                ("server_id", SiloJ.string(serverId))
            ]))
    }

    // POST /auth/device/approve and /auth/device/deny — auth-api.md § Device sign-in (the
    // account's own login session; a canceled request is refused with 409; an API key is 403
    // permission_denied); device-login.md § Who decides; Go: device_login.go
    // DecideDeviceLoginInput {token, code}, DeviceLoginDecision {status}; an expired request is
    // 410 device_login_expired, a decided one 409 conflict, an unknown one 404.
    private func decideDeviceLogin(_ c: SiloCtx, approve: Bool) throws -> HTTPServer.Response {
        let who = try authenticate(c)
        try rejectUnknownQuery(c, [])
        guard who.credential != .apiKey else {
            throw problem(c, .permissionDenied, "An API key cannot approve or deny a device sign-in.")
        }
        let body = try parseBody(c, [SiloMember("token", .string), SiloMember("code", .string)])
        let code = body["code"]?.stringValue.map(siloNormalizeUserCode) ?? ""
        let token = body["token"]?.stringValue ?? ""
        guard !code.isEmpty || !token.isEmpty else {
            throw validation(c, [("body.code", "required", "Either token or code is required.")])
        }
        let now = Date()
        let target = approve ? "approved" : "denied"
        let outcome: String? = state.withLock { s in
            guard let i = s.deviceRequests.lastIndex(where: { (!code.isEmpty && $0.userCode == code) || (!token.isEmpty && $0.browserCode == token) }) else {
                return nil
            }
            let current = s.deviceRequests[i].effectiveStatus(now)
            if current == "pending" { s.deviceRequests[i].status = target }
            return current
        }
        switch outcome {
        case nil: throw problem(c, .notFound, "No device sign-in request matches this code.")
        case "pending"?: return json(SiloJ.obj([("status", SiloJ.string(target))]))
        case "expired"?: throw problem(c, .deviceLoginExpired, "The device sign-in request expired.")
        default: throw problem(c, .conflict, "The device sign-in request was already decided or withdrawn.")
        }
    }

    // MARK: - Account and profiles

    // GET /account/me — api-contract.md § Pilot slice (getCurrentUser, authenticated, no
    // profile); Go: account.go Account {id, username, email, role, permissions, download_allowed}.
    private func getCurrentUser(_ c: SiloCtx) throws -> HTTPServer.Response {
        _ = try authenticate(c)
        try rejectUnknownQuery(c, [])
        return json(accountJSON())
    }

    // GET /profiles — api-contract.md § Pilot slice ("profiles" section: listProfiles, an
    // unpaginated items collection with string ids); Go: profiles.go ProfileCollection
    // {items, avatar_upload_enabled}, Profile members; the header is optional.
    private func listProfiles(_ c: SiloCtx) throws -> HTTPServer.Response {
        let who = try authenticate(c)
        try rejectUnknownQuery(c, [])
        _ = try resolveProfile(c, who, required: false)
        return json(
            SiloJ.obj([
                ("items", SiloJ.array(profiles.map(profileJSON))),
                ("avatar_upload_enabled", SiloJ.bool(false))
            ]))
    }

    // POST /profiles/{id}/verify-pin — api-contract.md § Pilot slice (verifyProfilePIN keeps v1's
    // token semantics: bound to the login session, no-store, `expires_at` a nullable instant);
    // Go: profiles.go ProfilePINCheck {pin}, ProfileVerification {valid, profile_token, expires_at}
    // — a wrong PIN is 200 with valid false. The token is sent as X-Profile-Token with X-Profile-Id.
    private func verifyProfilePIN(_ c: SiloCtx, _ id: String) throws -> HTTPServer.Response {
        let who = try authenticate(c)
        try rejectUnknownQuery(c, [])
        _ = try resolveProfile(c, who, required: false)
        let body = try parseBody(c, [SiloMember("pin", .string, required: true, minLength: 1, maxLength: 72)])
        guard let profile = profiles.first(where: { $0.id == id }) else {
            throw problem(c, .notFound, "The profile does not exist.")
        }
        let pin = body["pin"]?.stringValue ?? ""
        if let expected = profile.pin, expected != pin {
            return json(SiloJ.obj([("valid", SiloJ.bool(false)), ("expires_at", SiloJ.null)]))
        }
        let token = "pvt_" + siloRandomHex(16)
        let binding = who.bindingKey
        state.withLock { s in s.profileTokens[token] = SiloProfileGrant(profileId: id, bindingKey: binding) }
        return json(
            SiloJ.obj([
                ("valid", SiloJ.bool(true)),
                ("profile_token", SiloJ.string(token)),
                ("expires_at", SiloJ.null)
            ]))
    }

    // MARK: - Libraries

    // GET /user/libraries — libraries-api.md § Scoped library discovery (library IDs, names,
    // types, sort order, optional poster URLs); Go: user_libraries.go UserLibrary
    // {id, name, type, sort_order, poster_url}; profile header optional.
    private func listUserLibraries(_ c: SiloCtx) throws -> HTTPServer.Response {
        let who = try authenticate(c)
        try rejectUnknownQuery(c, [])
        _ = try resolveProfile(c, who, required: false)
        return json(
            SiloJ.obj([
                (
                    "items",
                    SiloJ.array([
                        SiloJ.obj([
                            ("id", SiloJ.string("1")), ("name", SiloJ.string(catalog.movieLibraryName)),
                            ("type", SiloJ.string("movies")), ("sort_order", SiloJ.num(0))
                        ]),
                        SiloJ.obj([
                            ("id", SiloJ.string("2")), ("name", SiloJ.string(catalog.showLibraryName)),
                            ("type", SiloJ.string("series")), ("sort_order", SiloJ.num(1))
                        ]),
                        // An audiobook library (catalog-api.md § Search media scopes names `audiobook`): its
                        // catalog holds no films or episodes, and downloads-api.md serves nothing else.
                        SiloJ.obj([
                            ("id", SiloJ.string("3")), ("name", SiloJ.string("Audiobooks")),
                            ("type", SiloJ.string("audiobook")), ("sort_order", SiloJ.num(2))
                        ])
                    ])
                )
            ]))
    }

    // MARK: - Catalog

    private static let catalogBrowseParameters: Set<String> = [
        "source", "scope", "section_id", "library_id", "collection_id", "person_id", "q", "name_prefix",
        "match", "type", "genre", "status", "year_min", "year_max", "content_rating", "sort", "group",
        "skip_total", "image_size", "limit", "cursor", "groups", "query_limit", "seek"
    ]

    // GET /catalog — catalog-api.md § Catalog query windows (cards, `page.next_cursor`,
    // `page.has_more`, `total`, `total_exact`, `window_cursor`; send `next_cursor` unchanged as
    // `cursor`; cursors bound to viewer, filters, page size and sort; 400 invalid_cursor) and
    // api-contract.md § Query and pagination conventions (limit default 50, maximum 200); Go:
    // catalog_items.go CatalogBrowseInput, CatalogBrowseCollection, CatalogItem (catalog_types.go).
    private func listCatalogItems(_ c: SiloCtx) throws -> HTTPServer.Response {
        let who = try authenticate(c)
        try rejectUnknownQuery(c, Self.catalogBrowseParameters)
        let profile = try resolveProfile(c, who, required: true) ?? ""
        let q = c.query
        if let library = q["library_id"] { try requirePositiveID(c, library, location: "query.library_id") }
        if let size = q["image_size"] { try requireOneOf(c, size, ["small", "medium", "large", "original"], "query.image_size") }
        if let source = q["source"] {
            try requireOneOf(
                c, source,
                [
                    "query", "section", "library_collection", "user_collection", "favorites",
                    "watchlist", "history", "person"
                ], "query.source")
        }
        if let skip = q["skip_total"] { try requireBool(c, skip, "query.skip_total") }
        let limit = try parseLimit(c, defaultValue: 50, maximum: 200)
        let sort = q["sort"] ?? ""
        var field = "title"
        var descending = false
        if !sort.isEmpty {
            let term = sort.hasPrefix("-") ? String(sort.dropFirst()) : sort
            guard ["title", "year", "added_at"].contains(term) else {
                throw validation(c, [("query.sort", "invalid_sort_field", "The fixture sorts by title, year or added_at.")])
            }
            field = term
            descending = sort.hasPrefix("-")
        }
        let nodes = visibleNodes(catalog.browse(libraryId: q["library_id"], type: q["type"], query: q["q"], source: q["source"]))
        let ordered = nodes.sorted { lhs, rhs in
            let l = catalog.sortKey(lhs, field), r = catalog.sortKey(rhs, field)
            if l != r { return descending ? l > r : l < r }
            return catalog.contentId(lhs) < catalog.contentId(rhs)
        }
        let scope = [
            "listCatalogItems", userId, profile, q["library_id"] ?? "", q["type"] ?? "", q["q"] ?? "",
            q["source"] ?? "", sort, String(limit)
        ].joined(separator: "\u{0}")
        let offset = try decodeCursor(c, scope: scope)
        let pageSize = min(limit, max(1, configuration.catalogPageSize))
        let end = min(ordered.count, offset + pageSize)
        let slice = offset < ordered.count ? Array(ordered[offset..<end]) : []
        let next: String? = end < ordered.count ? encodeCursor(scope: scope, offset: end) : nil
        return json(
            SiloJ.obj([
                ("window_cursor", SiloJ.string(encodeCursor(scope: scope, offset: 0))),
                ("items", SiloJ.array(slice.map { SiloJ.obj(cardMembers($0)) })),
                ("page", pageJSON(next)),
                ("total", SiloJ.num(ordered.count)),
                ("total_exact", SiloJ.bool(true))
            ]))
    }

    // GET /catalog/items/{id} — catalog-api.md § Library-scoped version lists and § Device-scoped
    // playback answers (getCatalogItem takes library_id and X-Silo-Device-Id); Go:
    // catalog_items.go CatalogItemInput {image_size, library_id, file_id}, CatalogItemDetail
    // (card + cast, crew, versions [FileVersion: file_id, file_name, container, file_size, …],
    // ratings, subtitles; every array present, never null).
    private func getCatalogItem(_ c: SiloCtx, _ id: String) throws -> HTTPServer.Response {
        let who = try authenticate(c)
        try rejectUnknownQuery(c, ["image_size", "library_id", "file_id"])
        _ = try resolveProfile(c, who, required: true)
        try validateItemQuery(c)
        guard let node = visibleNode(id) else { throw problem(c, .notFound, "The item does not exist.") }
        var members = cardMembers(node)
        members.append(("cast", SiloJ.array([])))
        members.append(("crew", SiloJ.array([])))
        switch node {
        case .series(let series):
            members.append(("season_count", SiloJ.num(series.seasons.count)))
            members.append(("episode_count", SiloJ.num(series.episodes.count)))
        case .season(let series, let number):
            members.append(("episode_count", SiloJ.num(series.episodes(inSeason: number).count)))
        default:
            break
        }
        members.append(("versions", SiloJ.array(catalog.files(of: node).map(fileVersionJSON))))
        members.append(("ratings", SiloJ.array([])))
        members.append(("subtitles", SiloJ.array([])))
        return json(SiloJ.obj(members))
    }

    // GET /catalog/items/{id}/versions — catalog-api.md § Library-scoped version lists
    // (listCatalogItemVersions); Go: catalog_items.go FileVersionCollection {items}.
    private func listCatalogItemVersions(_ c: SiloCtx, _ id: String) throws -> HTTPServer.Response {
        let who = try authenticate(c)
        try rejectUnknownQuery(c, ["image_size", "library_id", "file_id"])
        _ = try resolveProfile(c, who, required: true)
        try validateItemQuery(c)
        guard let node = visibleNode(id) else { throw problem(c, .notFound, "The item does not exist.") }
        return json(SiloJ.obj([("items", SiloJ.array(catalog.files(of: node).map(fileVersionJSON)))]))
    }

    // GET /catalog/items/{id}/episodes — catalog-api.md § Episode files (each episode lists its
    // accessible files); Go: catalog_items.go listCatalogItemEpisodes ("The episodes of a season
    // item"), EpisodeCollection {items: [Episode {…, files: [EpisodeFile]}]}.
    private func listCatalogItemEpisodes(_ c: SiloCtx, _ id: String) throws -> HTTPServer.Response {
        let who = try authenticate(c)
        try rejectUnknownQuery(c, ["image_size", "library_id"])
        _ = try resolveProfile(c, who, required: true)
        try validateItemQuery(c)
        guard case .season(let series, let number)? = visibleNode(id) else {
            throw problem(c, .notFound, "The season does not exist.")
        }
        return json(SiloJ.obj([("items", SiloJ.array(series.episodes(inSeason: number).map(episodeJSON)))]))
    }

    // GET /catalog/series/{id}/seasons — catalog-api.md § Season-list artwork (include_artwork,
    // strict booleans, the `items` envelope); Go: catalog_items.go CatalogSeasonsInput,
    // SeasonCollection {items: [Season]}.
    private func listSeriesSeasons(_ c: SiloCtx, _ id: String) throws -> HTTPServer.Response {
        let who = try authenticate(c)
        try rejectUnknownQuery(c, ["image_size", "library_id", "include_artwork"])
        _ = try resolveProfile(c, who, required: true)
        try validateItemQuery(c)
        if let artwork = c.query["include_artwork"] { try requireBool(c, artwork, "query.include_artwork") }
        guard case .series(let series)? = visibleNode(id) else { throw problem(c, .notFound, "The series does not exist.") }
        return json(SiloJ.obj([("items", SiloJ.array(series.seasons.map { seasonJSON(series, $0) }))]))
    }

    // GET /catalog/series/{id}/seasons/{num} — catalog-api.md § Library-scoped version lists
    // (getSeriesSeason); Go: catalog_items.go CatalogSeasonInput (num ≥ 0, 0 is specials), Season.
    private func getSeriesSeason(_ c: SiloCtx, _ id: String, _ num: String) throws -> HTTPServer.Response {
        let who = try authenticate(c)
        try rejectUnknownQuery(c, ["image_size", "library_id"])
        _ = try resolveProfile(c, who, required: true)
        try validateItemQuery(c)
        let number = try seasonNumber(c, num)
        guard case .series(let series)? = visibleNode(id), series.seasons.contains(number) else {
            throw problem(c, .notFound, "The season does not exist.")
        }
        return json(seasonJSON(series, number))
    }

    // GET /catalog/series/{id}/seasons/{num}/episodes — catalog-api.md § Episode files
    // (listSeasonEpisodes); Go: catalog_items.go EpisodeCollection.
    private func listSeasonEpisodes(_ c: SiloCtx, _ id: String, _ num: String) throws -> HTTPServer.Response {
        let who = try authenticate(c)
        try rejectUnknownQuery(c, ["image_size", "library_id"])
        _ = try resolveProfile(c, who, required: true)
        try validateItemQuery(c)
        let number = try seasonNumber(c, num)
        guard case .series(let series)? = visibleNode(id), series.seasons.contains(number) else {
            throw problem(c, .notFound, "The season does not exist.")
        }
        return json(SiloJ.obj([("items", SiloJ.array(series.episodes(inSeason: number).map(episodeJSON)))]))
    }

    // MARK: - Original bytes

    // GET/HEAD /direct-download?file_id= — downloads-api.md § 4.10 Direct download and § 15
    // Direct original delivery (canonical positive decimal `file_id`; `format` absent, empty or
    // `original`; unknown query parameters 422; `?token=` carries the session access token for
    // browser links, without profile; Content-Disposition, MIME type, Last-Modified, HEAD,
    // ranges/206, conditional/304; invalid range 416 retains Content-Range); Go:
    // direct_download_test.go (416 is the range_not_satisfiable problem with `bytes */size`).
    private func directDownload(_ c: SiloCtx) throws -> HTTPServer.Response {
        let who = try authenticate(c, allowQueryToken: true)
        try rejectUnknownQuery(c, ["file_id", "format", "token"])
        if who.credential != .queryToken { _ = try resolveProfile(c, who, required: false) }
        guard let fileId = c.query["file_id"] else {
            throw validation(c, [("query.file_id", "required", "file_id is required.")])
        }
        try requirePositiveID(c, fileId, location: "query.file_id")
        let format = c.query["format"] ?? ""
        guard format.isEmpty || format == "original" else {
            throw validation(c, [("query.format", "invalid", "format may only be original.")])
        }
        guard state.withLock({ $0.downloadAllowed }) else { throw problem(c, .permissionDenied, "Downloads are not allowed.") }
        guard let file = catalog.files[fileId], !isHeldFile(fileId) else { throw problem(c, .notFound, "The file does not exist.") }
        return try serveFile(c, path: file.path, container: file.container)
    }

    // MARK: - Managed downloads

    // GET /capabilities/downloads — downloads-api.md § 3 Feature detection (requires X-Profile-Id,
    // If-None-Match → 304; members as in the example) and api-contract.md § Discovery and
    // capability detection (revision, state, allowed; Cache-Control: private, no-cache; an ETag);
    // Go: download_registry.go DownloadCapability (adds bulk_quality, monitor_quality,
    // preparation_progress).
    private func getDownloadCapability(_ c: SiloCtx) throws -> HTTPServer.Response {
        let who = try authenticate(c)
        try rejectUnknownQuery(c, [])
        _ = try resolveProfile(c, who, required: true)
        let (allowed, revision, monitoring): (Bool, Int, Bool) = state.withLock { s in
            (s.downloadAllowed, s.capabilityRevision, s.seriesMonitoring)
        }
        let presets = allowed ? siloQualityPresets : []
        let options: [SiloJ] = presets.map { preset in
            let info = siloQualityInfo(preset)
            return SiloJ.obj([
                ("preset", SiloJ.string(preset)),
                ("bitrate_kbps", info.kbps > 0 ? SiloJ.num(info.kbps) : nil),
                ("max_height", info.maxHeight > 0 ? SiloJ.num(info.maxHeight) : nil)
            ])
        }
        let body = SiloJ.obj([
            ("revision", SiloJ.string(String(revision))),
            ("state", SiloJ.string("available")),
            ("allowed", SiloJ.bool(allowed)),
            ("enabled", SiloJ.bool(true)),
            ("download_allowed", SiloJ.bool(allowed)),
            ("quality_presets", SiloJ.strings(presets)),
            ("quality_options", SiloJ.array(options)),
            ("transcode_enabled", SiloJ.bool(true)),
            ("transcode_user_allowed", SiloJ.bool(true)),
            ("season_download", SiloJ.bool(true)),
            // § 3: series_monitoring and monitoring_modes; § 15 Subscription reads / Subscription
            // changes and bounded sync: the three monitor operation groups are advertised apart.
            ("series_monitoring", SiloJ.bool(monitoring)),
            ("monitoring_modes", SiloJ.strings(monitoring ? siloMonitorModes : [])),
            ("proxy_delivery", SiloJ.bool(false)),
            ("ordered_status", SiloJ.bool(true)),
            ("file_delivery", SiloJ.bool(true)),
            ("bounded_creation", SiloJ.bool(true)),
            ("bounded_manifests", SiloJ.bool(true)),
            ("subscription_reads", SiloJ.bool(monitoring)),
            ("subscription_mutations", SiloJ.bool(monitoring)),
            ("bounded_subscription_sync", SiloJ.bool(monitoring)),
            ("bulk_quality", SiloJ.bool(false)),
            ("monitor_quality", SiloJ.bool(false)),
            ("preparation_progress", SiloJ.bool(true))
        ])
        let text = Array(body.serialized().utf8)
        let etag = "\"" + String(siloHexString(siloSHA256Digest(text)).prefix(32)) + "\""
        // api-contract.md § Foundation (optimistic concurrency): on a conditional read an
        // If-Match is evaluated first and a mismatch is 412; then If-None-Match answers 304.
        if let ifMatch = c.header("if-match"), !siloETagMatches(ifMatch, etag, weak: false) {
            throw problem(c, .preconditionFailed, "The capability document changed.", headers: [("ETag", etag)])
        }
        if let ifNoneMatch = c.header("if-none-match"), siloETagMatches(ifNoneMatch, etag, weak: true) {
            return HTTPServer.Response(status: 304, headers: [("ETag", etag), ("Cache-Control", "private, no-cache")])
        }
        return HTTPServer.Response(
            status: 200,
            headers: [
                ("Content-Type", "application/json"),
                ("Cache-Control", "private, no-cache"),
                ("ETag", etag)
            ], body: .bytes(text))
    }

    // POST /downloads — downloads-api.md § 4.1 Create a download and § 15 Download creation
    // (202 {items, skipped, page} plus `batch_id`; a managed single request requires
    // `expected_revision`: 0 requires absence, a positive value with `expected_download_id`
    // reuses, revives or replaces; a stale revision is 409; series/season pages with `series`,
    // `batch_id`, `season_number`, `limit` ≤ 100 and `cursor`; `skipped` reports episodes with no
    // file; bulk quality is original only (501 capability_unsupported otherwise); creation is
    // non-retryable); Go: download_create.go DownloadCreateBody / guard checks (400
    // malformed_request), DownloadCreated.
    private func createDownloads(_ c: SiloCtx) throws -> HTTPServer.Response {
        let who = try authenticate(c)
        try rejectUnknownQuery(c, ["limit", "cursor"])
        let profile = try resolveProfile(c, who, required: true) ?? ""
        let device = deviceHeader(c)
        let limit = try parseLimit(c, defaultValue: 50, maximum: 100)
        let body = try parseBody(
            c,
            [
                SiloMember("content_id", .string, required: true, minLength: 1, maxLength: 128),
                SiloMember("episode_id", .string, maxLength: 128),
                SiloMember("media_file_id", .string),
                SiloMember("quality", .string, oneOf: siloQualityPresets),
                SiloMember("series", .bool),
                SiloMember("season_number", .int, minimum: 0, maximum: 9999),
                SiloMember("caps", .object),
                SiloMember("batch_id", .string),
                SiloMember("expected_revision", .int, minimum: 0),
                SiloMember("expected_download_id", .string),
                SiloMember("expected_entries", .object)
            ], maxBytes: 256 << 10)
        let contentId = body["content_id"]?.stringValue ?? ""
        let episodeId = body["episode_id"]?.stringValue
        let mediaFileId = body["media_file_id"]?.stringValue
        let quality = body["quality"]?.stringValue ?? "original"
        let series = body["series"]?.boolValue ?? false
        let season = body["season_number"]?.intValue.map { Int($0) }
        let batchId = body["batch_id"]?.stringValue
        let expectedRevision = body["expected_revision"]?.intValue.map { Int($0) }
        let expectedDownloadId = body["expected_download_id"]?.stringValue
        if let mediaFileId, !siloIsCanonicalPositive(mediaFileId) {
            throw problem(c, .malformedRequest, "media_file_id must be a canonical positive integer string.")
        }
        var guards: [String: SiloEntryGuard]? = nil
        if case .object(let members)? = body["expected_entries"] {
            guard members.count <= 100 else { throw problem(c, .malformedRequest, "At most 100 episode revision guards are allowed.") }
            var parsed: [String: SiloEntryGuard] = [:]
            for (key, value) in members {
                let stated = value["revision"]?.intValue.map { Int($0) }
                let id = value["id"]?.stringValue
                guard !key.isEmpty, key.count <= 128, let revision = stated, revision >= 0,
                    revision == 0 ? id == nil : (id.map { !$0.isEmpty && $0.count <= 128 } ?? false)
                else {
                    throw problem(c, .malformedRequest, "Invalid episode entry guard.")
                }
                parsed[key] = SiloEntryGuard(id: id, revision: revision)
            }
            guards = parsed
        }
        if let expectedRevision {
            let valid =
                expectedRevision == 0
                ? expectedDownloadId == nil
                : (expectedDownloadId.map { !$0.isEmpty && $0.count <= 128 } ?? false)
            guard valid else {
                throw problem(
                    c, .malformedRequest,
                    "A replacement requires its exact expected_download_id and positive expected_revision; absence requires revision zero without an ID.")
            }
        } else if expectedDownloadId != nil {
            throw problem(c, .malformedRequest, "expected_download_id requires expected_revision.")
        }
        if device == nil && (expectedRevision != nil || guards != nil) {
            throw problem(c, .malformedRequest, "Revision guards require a managed device identity.")
        }
        guard state.withLock({ $0.downloadAllowed }) else { throw problem(c, .permissionDenied, "Downloads are not allowed.") }
        let now = Date()
        let polls = configuration.preparationPolls
        if !series {
            if season != nil || batchId != nil || guards != nil || c.query["cursor"] != nil {
                throw problem(c, .malformedRequest, "Batch fields require series=true.")
            }
            if device != nil && expectedRevision == nil {
                throw problem(c, .malformedRequest, "A managed single download requires expected_revision.")
            }
            let target = try resolveTarget(c, contentId: contentId, episodeId: episodeId, mediaFileId: mediaFileId)
            guard let size = fileInfo(target.path)?.size else { throw problem(c, .notFound, "The media file is missing.") }
            let outcome: SiloCreateOutcome = state.withLock { s in
                s.createSingle(
                    profileId: profile, deviceId: device, target: target, quality: quality, size: size,
                    expectedRevision: expectedRevision, expectedDownloadId: expectedDownloadId,
                    now: now, polls: polls)
            }
            guard case .created(let row, let lose) = outcome else {
                throw problem(c, .conflict, "The managed entry changed; reconcile the registry before a new creation request.")
            }
            // § 4.4: creating a download for the episode re-allows it to its monitor.
            if let device, let episode = row.episodeId {
                state.withLock { $0.forgetMonitorExclusions(profileId: profile, deviceId: device, seriesId: row.contentId, episodeIds: [episode]) }
            }
            let held = createHold.withLock { h -> DispatchSemaphore? in
                guard let armed = h, armed.armed else { return nil }
                h = (false, armed.gate)
                return armed.gate
            }
            if let held {
                createHeld.withLock { $0 = true }
                _ = held.wait(timeout: .now() + 60)
                createHeld.withLock { $0 = false }
            }
            return accepted(
                SiloJ.obj([
                    ("items", SiloJ.array([entryJSON(row)])),
                    ("skipped", SiloJ.array([])),
                    ("page", pageJSON(nil))
                ]), lose: lose)
        }
        guard let batch = batchId, !batch.isEmpty, batch.count <= 128, episodeId == nil, mediaFileId == nil,
            expectedRevision == nil
        else {
            throw problem(c, .malformedRequest, "Series pages require batch_id and cannot select one file, episode or revision.")
        }
        guard case .series(let show)? = visibleNode(contentId) else {
            if visibleNode(contentId) != nil { throw problem(c, .malformedRequest, "content_id does not name a series.") }
            throw problem(c, .notFound, "The series does not exist.")
        }
        guard quality == "original" else {
            throw problem(c, .capabilityUnsupported, "Series and season downloads are original quality only.")
        }
        let episodes = season.map { show.episodes(inSeason: $0) } ?? show.episodes
        guard !episodes.isEmpty else { throw problem(c, .notFound, "No downloadable episodes.") }
        let scope = [
            "createDownloads", userId, profile, device ?? "", batch, contentId, quality,
            season.map { String($0) } ?? ""
        ].joined(separator: "\u{0}")
        let offset = try decodeCursor(c, scope: scope)
        let end = min(episodes.count, offset + limit)
        let slice = offset < episodes.count ? Array(episodes[offset..<end]) : []
        let candidates: [SiloBatchCandidate] = slice.map { episode in
            let path = catalog.files[episode.fileId]?.path ?? ""
            return SiloBatchCandidate(
                episodeId: episode.contentId, fileId: episode.fileId, path: path,
                size: path.isEmpty ? nil : fileInfo(path)?.size)
        }
        let entryGuards = guards ?? [:]
        let outcome: SiloBatchOutcome = state.withLock { s in
            s.createBatchPage(
                profileId: profile, deviceId: device, seriesId: show.contentId, batchId: batch,
                candidates: candidates, guards: entryGuards, now: now)
        }
        guard case .page(let rows, let skipped, let lose) = outcome else {
            throw problem(c, .conflict, "A managed entry changed; reconcile the registry before a new creation request.")
        }
        // § 4.4: creating a download for an episode's season or series re-allows the page's
        // episodes to the series monitor (Go: downloads/repo.go ClearMonitorExclusions, for the
        // episodes the device now holds).
        if let device {
            let pageEpisodes = rows.compactMap(\.episodeId)
            state.withLock { $0.forgetMonitorExclusions(profileId: profile, deviceId: device, seriesId: show.contentId, episodeIds: pageEpisodes) }
        }
        let next: String? = end < episodes.count ? encodeCursor(scope: scope, offset: end) : nil
        return accepted(
            SiloJ.obj([
                ("items", SiloJ.array(rows.map(entryJSON))),
                ("batch_id", SiloJ.string(batch)),
                ("skipped", SiloJ.array(skipped.map { SiloJ.obj([("episode_id", SiloJ.string($0.0)), ("reason", SiloJ.string($0.1))]) })),
                ("page", pageJSON(next))
            ]), lose: lose)
    }

    // GET /downloads — downloads-api.md § 4.2 List downloads (with X-Silo-Device-Id: that
    // profile and device's managed entries; without: the account's ephemeral rows; limit default
    // 50, maximum 100; newest first; `page.next_cursor` as `cursor`); Go: download_registry.go
    // DownloadRegistryInput, Collection[DownloadEntry], DownloadEntry, DownloadPreparation.
    private func listDownloads(_ c: SiloCtx) throws -> HTTPServer.Response {
        let who = try authenticate(c)
        try rejectUnknownQuery(c, ["limit", "cursor"])
        let profile = try resolveProfile(c, who, required: true) ?? ""
        let device = deviceHeader(c)
        let limit = try parseLimit(c, defaultValue: 50, maximum: 100)
        let scope = ["listDownloads", userId, profile, device ?? ""].joined(separator: "\u{0}")
        let offset = try decodeCursor(c, scope: scope)
        let rows: [SiloDownloadRow] = state.withLock { s in s.listRows(profileId: profile, deviceId: device) }
        let end = min(rows.count, offset + limit)
        let slice = offset < rows.count ? Array(rows[offset..<end]) : []
        let next: String? = end < rows.count ? encodeCursor(scope: scope, offset: end) : nil
        return json(SiloJ.obj([("items", SiloJ.array(slice.map(entryJSON))), ("page", pageJSON(next))]))
    }

    // PATCH /downloads/{id} — downloads-api.md § 4.3 Confirm local state (managed only; body
    // {status: downloading|completed, updated_at, revision}; 200 with the DownloadEntry; an older
    // or equal event returns the entry unchanged; a different revision is 409; future timestamps
    // are rejected; preparing, failed or revoked entries are not promoted; body ≤ 4 KiB); Go:
    // download_registry.go DownloadStatusInput (X-Silo-Device-Id required), DownloadStatusBody.
    private func reportDownloadStatus(_ c: SiloCtx, _ id: String) throws -> HTTPServer.Response {
        let who = try authenticate(c)
        try rejectUnknownQuery(c, [])
        let profile = try resolveProfile(c, who, required: true) ?? ""
        guard let device = deviceHeader(c) else {
            throw validation(c, [("header.x-silo-device-id", "required", "The X-Silo-Device-Id header is required.")])
        }
        let body = try parseBody(
            c,
            [
                SiloMember("status", .string, required: true, oneOf: ["downloading", "completed"]),
                SiloMember("updated_at", .string, required: true),
                SiloMember("revision", .int, required: true, minimum: 1)
            ], maxBytes: 4096)
        guard let updatedAt = siloParseInstant(body["updated_at"]?.stringValue ?? "") else {
            throw validation(c, [("body.updated_at", "invalid", "expected an RFC 3339 instant")])
        }
        let now = Date()
        guard updatedAt <= now.addingTimeInterval(5) else {
            throw problem(c, .malformedRequest, "updated_at is in the future.")
        }
        let status = body["status"]?.stringValue ?? ""
        let revision = Int(body["revision"]?.intValue ?? 0)
        let outcome: SiloStatusOutcome = state.withLock { s in
            s.reportStatus(
                id: id, profileId: profile, deviceId: device, status: status, updatedAt: updatedAt,
                revision: revision, now: now)
        }
        switch outcome {
        case .notFound: throw problem(c, .notFound, "Download not found.")
        case .conflict(let detail): throw problem(c, .conflict, detail)
        case .entry(let row): return json(entryJSON(row))
        }
    }

    // DELETE /downloads/{id} — downloads-api.md § 4.4 Delete a download (the managed entry of
    // account, profile and header device, or an ephemeral row; bodyless 204; missing or
    // incorrectly scoped entries 404; deleting an episode of a series this device monitors stops
    // that monitor registering it again); Go: download_registry.go DownloadDeleteInput,
    // downloads/repo.go DeleteManaged (the row and its monitor exclusion go together).
    private func deleteDownload(_ c: SiloCtx, _ id: String) throws -> HTTPServer.Response {
        let who = try authenticate(c)
        try rejectUnknownQuery(c, [])
        let profile = try resolveProfile(c, who, required: true) ?? ""
        let device = deviceHeader(c)
        let removed: Bool = state.withLock { s in
            guard let i = s.downloads.firstIndex(where: { $0.id == id && siloInScope($0, profileId: profile, deviceId: device) }) else { return false }
            let row = s.downloads.remove(at: i)
            s.excludeFromMonitors(row)
            return true
        }
        guard removed else { throw problem(c, .notFound, "Download not found.") }
        return noContent()
    }

    // GET/HEAD /downloads/{id}/file — downloads-api.md § 4.5 Serve the media file and § 15 File
    // and asset delivery (ranges/206, 416, conditional requests, bodyless HEAD; 409 revoked or
    // otherwise not servable; 404 outside scope; a preparing artifact is not servable); Go:
    // download_delivery.go (X-Silo-Device-Id optional on file routes; Content-Range,
    // Accept-Ranges, Last-Modified, Content-Disposition headers).
    private func downloadFile(_ c: SiloCtx, _ id: String) throws -> HTTPServer.Response {
        let who = try authenticate(c)
        try rejectUnknownQuery(c, [])
        let profile = try resolveProfile(c, who, required: true) ?? ""
        let device = deviceHeader(c)
        guard let row = state.withLock({ s in s.downloads.first(where: { $0.id == id && siloInScope($0, profileId: profile, deviceId: device) }) }) else {
            throw problem(c, .notFound, "Download not found.")
        }
        guard state.withLock({ $0.downloadAllowed }) else { throw problem(c, .permissionDenied, "Downloads are not allowed.") }
        try requireServable(c, row)
        guard let file = catalog.files[row.mediaFileId] else { throw problem(c, .notFound, "Download not found.") }
        return try serveFile(c, path: file.path, container: file.container)
    }

    // GET /downloads/{id}/manifest — downloads-api.md § 4.6 Offline manifest and § 6
    // OfflineManifest shape (manifest_version 3, string media_file_id, millisecond UTC
    // generated_at, integrity.expected_bytes / media_file_hash / metadata_etag, stable_identity);
    // Go: download_manifests.go DownloadManifest (X-Silo-Device-Id required; marker_segments and
    // subtitles always arrays).
    private func getDownloadManifest(_ c: SiloCtx, _ id: String) throws -> HTTPServer.Response {
        let row = try callersEntry(c, id)
        try requireServable(c, row)
        let manifest = try manifestJSON(c, row)
        return json(manifest)
    }

    // GET /downloads/batches/{batch_id}/manifests — downloads-api.md § 4.7 Batch manifests
    // (limit default 3, maximum 10; skipped reasons revoked, not_found, error, too_large;
    // continue while page.has_more even when items is empty); Go: download_manifests.go
    // DownloadManifestPage {items, skipped, page} (skipped always present).
    private func listDownloadBatchManifests(_ c: SiloCtx, _ batchId: String) throws -> HTTPServer.Response {
        let who = try authenticate(c)
        try rejectUnknownQuery(c, ["limit", "cursor"])
        let profile = try resolveProfile(c, who, required: true) ?? ""
        guard let device = deviceHeader(c) else {
            throw validation(c, [("header.x-silo-device-id", "required", "The X-Silo-Device-Id header is required.")])
        }
        let limit = try parseLimit(c, defaultValue: 3, maximum: 10)
        let scope = ["listDownloadBatchManifests", userId, profile, device, batchId].joined(separator: "\u{0}")
        let offset = try decodeCursor(c, scope: scope)
        let rows: [SiloDownloadRow] = state.withLock { s in
            s.downloads.filter { $0.batchId == batchId && $0.profileId == profile && $0.deviceId == device }
                .sorted { ($0.createdAt, $0.seq) > ($1.createdAt, $1.seq) }
        }
        let end = min(rows.count, offset + limit)
        let slice = offset < rows.count ? Array(rows[offset..<end]) : []
        var items: [SiloJ] = []
        var skipped: [SiloJ] = []
        for row in slice {
            switch row.status {
            case "revoked":
                skipped.append(SiloJ.obj([("download_id", SiloJ.string(row.id)), ("reason", SiloJ.string("revoked"))]))
            case "preparing", "failed":
                skipped.append(SiloJ.obj([("download_id", SiloJ.string(row.id)), ("reason", SiloJ.string("error"))]))
            default:
                if let manifest = try? manifestJSON(c, row) {
                    items.append(manifest)
                } else {
                    skipped.append(SiloJ.obj([("download_id", SiloJ.string(row.id)), ("reason", SiloJ.string("not_found"))]))
                }
            }
        }
        let next: String? = end < rows.count ? encodeCursor(scope: scope, offset: end) : nil
        return json(SiloJ.obj([("items", SiloJ.array(items)), ("skipped", SiloJ.array(skipped)), ("page", pageJSON(next))]))
    }

    // GET /downloads/{id}/artwork/{kind} — downloads-api.md § 4.8 Artwork proxy (kind poster,
    // backdrop or logo; X-Silo-Device-Id required; whole-object, privately cached, no byte ranges;
    // a failing artwork store is 503 dependency_unavailable with Retry-After: 5; other failures
    // such as 404 not_found are not retryable), § 15 File and asset delivery (current content access
    // is checked before delivery; failures before the body are v2 problems), § 12 (access denials
    // are 404). Go: download_delivery.go (GET only; media type image/*), downloads/offline.go
    // ServeArtwork (an unknown kind or a kind the item lacks is not found; Cache-Control
    // "private, max-age=31536000, immutable").
    private func downloadArtwork(_ c: SiloCtx, _ id: String, _ kind: String) throws -> HTTPServer.Response {
        let row = try managedAssetEntry(c, id)
        guard let path = artworkFiles(row).first(where: { $0.kind == kind })?.path else {
            throw problem(c, .notFound, "The download has no such artwork.")
        }
        // § 4.8: the store failing, timing out, or answering 429 or 5xx is 503 dependency_unavailable
        // with Retry-After: 5; any other store failure is 404 not_found.
        let failure: Int? = state.withLock { s in
            guard let pending = s.artworkFailure else { return nil }
            s.artworkFailure = pending.remaining > 1 ? (remaining: pending.remaining - 1, status: pending.status) : nil
            return pending.status
        }
        if let failure {
            if failure == 429 || failure >= 500 {
                throw problem(
                    c, .dependencyUnavailable, "The artwork store is unavailable; retry the same request later.",
                    headers: [("Retry-After", "5")])
            }
            throw problem(c, .notFound, "The artwork could not be read.")
        }
        guard let bytes = FileManager.default.contents(atPath: path) else {
            throw problem(c, .notFound, "The artwork could not be read.")
        }
        return HTTPServer.Response(
            status: 200,
            headers: [
                ("Content-Type", siloImageType(Array(bytes.prefix(8)))),
                ("Cache-Control", "private, max-age=31536000, immutable")
            ], body: .bytes(Array(bytes)))
    }

    // GET /downloads/{id}/subtitles/{ref} — downloads-api.md § 4.9 Subtitle proxy (ref from
    // subtitles[].fetch_url: external:{index}, embedded:{ordinal} or downloaded:{id};
    // X-Silo-Device-Id required; `embedded` names an embedded ASS/SSA or PGS track by subtitle
    // ordinal and returns the complete track as an ASS script or a .sup stream; invalid refs are
    // 422 validation_failed), § 4.8 (assets are whole-object, privately cached, no byte ranges),
    // § 12 (an asset missing is 404 not_found). Go: downloads/offline.go ServeSubtitle (the entry is
    // authorized before the ref is parsed; a well-formed ref naming nothing, or an embedded track
    // that is not ASS/SSA or PGS, is not found), parseSubtitleRef; download_delivery.go media types
    // (application/x-subrip, text/vtt, text/x-ssa, application/octet-stream).
    private func downloadSubtitle(_ c: SiloCtx, _ id: String, _ ref: String) throws -> HTTPServer.Response {
        let row = try managedAssetEntry(c, id)
        let parts = ref.split(separator: ":", maxSplits: 1, omittingEmptySubsequences: false).map(String.init)
        // § 4.9 ref grammar; indexes and ordinals are non-negative decimals, a downloaded id a
        // canonical positive decimal string (§ 15 Canonical decimal string IDs).
        guard parts.count == 2, ["external", "embedded", "downloaded"].contains(parts[0]),
            parts[0] == "downloaded" ? siloIsCanonicalPositive(parts[1]) : (parts[1] == "0" || siloIsCanonicalPositive(parts[1])),
            let number = Int(parts[1])
        else {
            throw validation(c, [("path.ref", "invalid", "expected external:{index}, embedded:{ordinal} or downloaded:{id}")])
        }
        let notFound = problem(c, .notFound, "The download has no such subtitle.")
        let (external, embedded) = subtitleTracks(row.mediaFileId)
        let chosen: (subtitle: FixtureCatalog.Subtitle, format: String)
        switch parts[0] {
        case "external":
            guard external.indices.contains(number) else { throw notFound }
            chosen = (external[number], siloSubtitleFormat(external[number].codec))
        case "embedded":
            // § 4.9: only an embedded ASS/SSA or PGS track is extracted; an embedded SRT or WebVTT
            // track (carried inside the delivered file, § 1 Metadata included offline) is not an
            // asset of this route: 404.
            guard embedded.indices.contains(number), let format = siloSidecarFormat(embedded[number].codec) else { throw notFound }
            chosen = (embedded[number], format)
        default:
            // The fixture stores no downloaded (downloaded:{id}) subtitles.
            throw notFound
        }
        guard let bytes = FileManager.default.contents(atPath: chosen.subtitle.file) else { throw notFound }
        // Validator model of § 4.9 (strong ETag, `Cache-Control: private, no-cache`, If-None-Match →
        // 304), which Go also applies to external sidecars (serveExternalSubtitle); the fixture
        // uses it for embedded sidecars too (the spec only says "privately cached", § 4.8).
        let etag = "\"" + String(siloHexString(siloSHA256Digest(Array(bytes))).prefix(32)) + "\""
        if let ifNoneMatch = c.header("if-none-match"), siloETagMatches(ifNoneMatch, etag, weak: true) {
            return HTTPServer.Response(status: 304, headers: [("ETag", etag), ("Cache-Control", "private, no-cache")])
        }
        return HTTPServer.Response(
            status: 200,
            headers: [
                ("Content-Type", siloSubtitleType(chosen.format)),
                ("Cache-Control", "private, no-cache"),
                ("ETag", etag)
            ], body: .bytes(Array(bytes)))
    }

    /// The caller's entry `id` (authorized on account, profile and X-Silo-Device-Id; a missing
    /// device header is 422, another device's or profile's entry 404), shared by the manifest
    /// and asset routes.
    private func callersEntry(_ c: SiloCtx, _ id: String) throws -> SiloDownloadRow {
        let who = try authenticate(c)
        try rejectUnknownQuery(c, [])
        let profile = try resolveProfile(c, who, required: true) ?? ""
        guard let device = deviceHeader(c) else {
            throw validation(c, [("header.x-silo-device-id", "required", "The X-Silo-Device-Id header is required.")])
        }
        guard let row = state.withLock({ s in s.downloads.first(where: { $0.id == id && $0.profileId == profile && $0.deviceId == device }) }) else {
            throw problem(c, .notFound, "Download not found.")
        }
        return row
    }

    /// The managed entry an asset route serves (downloads-api.md § 4.8 / § 4.9: X-Silo-Device-Id is
    /// required; § 1 Key invariants and § 14 Authorization: the row is authorized on account,
    /// profile and header device, and every managed asset re-checks content access; § 12: denials
    /// are 404). Like the manifest, a missing device header is 422 at header.x-silo-device-id (Go:
    /// download_delivery.go). A revoked entry is 409 conflict, as on the file route (§ 4.5; Go:
    /// offline.go authorizeManagedAsset refuses only revoked entries).
    private func managedAssetEntry(_ c: SiloCtx, _ id: String) throws -> SiloDownloadRow {
        let row = try callersEntry(c, id)
        if row.status == "revoked" { throw problem(c, .conflict, "The download is no longer active.") }
        guard catalog.node(row.episodeId ?? row.contentId) != nil, catalog.files[row.mediaFileId] != nil else {
            throw problem(c, .notFound, "Download not found.")
        }
        return row
    }

    // MARK: - Series monitors

    /// downloads-api.md § 8 ("All subscription endpoints are managed-only") and § 2 (managed
    /// operations require a profile and a device id). Go: download_subscriptions.go and
    /// download_subscription_mutations.go bind `X-Silo-Device-Id` with `required:"true"`, so a
    /// missing header is 422 at header.x-silo-device-id, as on the fixture's other managed routes.
    /// Without the monitor services every monitor route is 503 (Go: `unavailable(...)`; § 12:
    /// series monitoring temporarily unavailable is dependency_unavailable).
    private func managedMonitorScope(_ c: SiloCtx, _ who: SiloPrincipal) throws -> (profile: String, device: String) {
        let profile = try resolveProfile(c, who, required: true) ?? ""
        guard let device = deviceHeader(c) else {
            throw validation(c, [("header.x-silo-device-id", "required", "The X-Silo-Device-Id header is required.")])
        }
        guard state.withLock({ $0.seriesMonitoring }) else {
            throw problem(c, .dependencyUnavailable, "Series monitoring is not available on this server.")
        }
        return (profile, device)
    }

    // POST /downloads/subscriptions — downloads-api.md § 8.1 Create ({series_id, mode,
    // season_numbers required for specific_seasons, delete_watched, max_storage_bytes with 0
    // unlimited}; the answer is the persisted monitor with its `etag`; a monitor this device
    // already has for the series comes back with its options and paused state unchanged, and the
    // episodes the device deleted under it become eligible again), § 15 Subscription changes and
    // bounded sync (nonnegative max_storage_bytes; only season_numbers is optional) and § 12 (a
    // subscription option is 422 validation_failed naming the member). Go:
    // download_subscription_mutations.go DownloadSubscriptionCreateBody (series_id 1…128, mode
    // enum, season_numbers at most 10000 items; delete_watched and max_storage_bytes carry no
    // omitempty, so they are required; body ≤ 128 KiB); createDownloadSubscription sets no
    // DefaultStatus, so a create (new or existing) answers 200, with ETag and Cache-Control:
    // private, no-cache (subscriptionOutput); downloads/subscription_service.go
    // prepareSubscription (403 when the account may not download; seasons 0…9999; a non-series
    // item 400 ErrNotSeries; an unknown series 404; latest_season anchored at the highest season
    // that has episodes). Go answers the season checks its service makes with 400
    // malformed_request; the fixture follows § 12's 422.
    private func createDownloadSubscription(_ c: SiloCtx) throws -> HTTPServer.Response {
        let who = try authenticate(c)
        try rejectUnknownQuery(c, [])
        let (profile, device) = try managedMonitorScope(c, who)
        let body = try parseBody(
            c,
            [
                SiloMember("series_id", .string, required: true, minLength: 1, maxLength: 128),
                SiloMember("mode", .string, required: true, oneOf: siloMonitorModes),
                SiloMember("season_numbers", .array),
                SiloMember("delete_watched", .bool, required: true),
                SiloMember("max_storage_bytes", .int, required: true, minimum: 0)
            ], maxBytes: 128 << 10)
        let seriesId = body["series_id"]?.stringValue ?? ""
        let mode = body["mode"]?.stringValue ?? ""
        let deleteWatched = body["delete_watched"]?.boolValue ?? false
        let maxStorageBytes = body["max_storage_bytes"]?.intValue ?? 0
        guard state.withLock({ $0.downloadAllowed }) else { throw problem(c, .permissionDenied, "Downloads are not allowed.") }
        let seasons = try parseSeasonNumbers(c, body["season_numbers"]) ?? []
        if mode == "specific_seasons" && seasons.isEmpty {
            throw validation(c, [("body.season_numbers", "required", "specific_seasons requires season_numbers.")])
        }
        guard let node = visibleNode(seriesId) else { throw problem(c, .notFound, "The series does not exist.") }
        guard case .series(let show) = node else { throw problem(c, .malformedRequest, "series_id does not name a series.") }
        let target: Int? = mode == "latest_season" ? show.seasons.max() : nil
        let now = Date()
        let monitor: SiloSubscription = state.withLock { s in
            if let i = s.subscriptions.firstIndex(where: { $0.profileId == profile && $0.deviceId == device && $0.seriesId == seriesId }) {
                // § 8.1: returned unchanged (same validator); only its record of deleted episodes goes.
                s.subscriptions[i].excluded.removeAll()
                return s.subscriptions[i]
            }
            s.counter += 1
            let created = SiloSubscription(
                id: "sub_\(s.counter)", seq: s.counter, profileId: profile, deviceId: device,
                seriesId: seriesId, mode: mode,
                seasonNumbers: mode == "specific_seasons" ? seasons : [],
                targetSeason: target, deleteWatched: deleteWatched, maxStorageBytes: maxStorageBytes,
                active: true, createdAt: now, updatedAt: now, version: 1, excluded: [])
            s.subscriptions.append(created)
            return created
        }
        return subscriptionResponse(monitor)
    }

    // GET /downloads/subscriptions — downloads-api.md § 8.3 (`{items, page}`, limit default 50,
    // maximum 100, descending creation time and ID, paused monitors stay visible) and § 15
    // Subscription reads (the cursor binds account, profile, access policy and device; read
    // responses are private and require revalidation); Go: download_subscriptions.go
    // DownloadSubscriptionsInput, Collection[DownloadSubscription], Cache-Control: private,
    // no-cache. The cursor holds the creation sequence of the last monitor emitted (a keyset, as
    // Go's RegistryPosition is), so a monitor deleted between pages shifts nothing.
    private func listDownloadSubscriptions(_ c: SiloCtx) throws -> HTTPServer.Response {
        let who = try authenticate(c)
        try rejectUnknownQuery(c, ["limit", "cursor"])
        let (profile, device) = try managedMonitorScope(c, who)
        let limit = try parseLimit(c, defaultValue: 50, maximum: 100)
        let scope = ["listDownloadSubscriptions", userId, profile, device].joined(separator: "\u{0}")
        let after = try decodeCursor(c, scope: scope)
        let rows: [SiloSubscription] = state.withLock { s in
            s.subscriptions.filter { $0.profileId == profile && $0.deviceId == device && (after == 0 || $0.seq < after) }
                .sorted { $0.seq > $1.seq }
        }
        let slice = Array(rows.prefix(limit))
        let next: String? = rows.count > limit ? slice.last.map { encodeCursor(scope: scope, offset: $0.seq) } : nil
        return json(
            SiloJ.obj([("items", SiloJ.array(slice.map(subscriptionJSON))), ("page", pageJSON(next))]),
            cache: "private, no-cache")
    }

    // GET /downloads/subscriptions/{id} — downloads-api.md § 8.3 and § 15 Subscription reads (the
    // list's item shape plus an `ETag` response header; private, revalidated; a different account,
    // profile or device cannot read the monitor); Go: download_subscriptions.go
    // getDownloadSubscription (ErrSubscriptionNotFound is 404 in download_registry.go
    // downloadProblem). Not registered as a conditional read in Go, so no 304.
    private func getDownloadSubscription(_ c: SiloCtx, _ id: String) throws -> HTTPServer.Response {
        let who = try authenticate(c)
        try rejectUnknownQuery(c, [])
        let (profile, device) = try managedMonitorScope(c, who)
        guard let monitor = findSubscription(id, profile: profile, device: device) else {
            throw problem(c, .notFound, "The monitor does not exist.")
        }
        return subscriptionResponse(monitor)
    }

    // PATCH /downloads/subscriptions/{id} — downloads-api.md § 8.3 (If-Match required; partial:
    // absent members unchanged, explicit null rejected; edits keep the future cutoff and
    // re-anchor latest_season only under the mode-change rules) and § 15; api-contract.md
    // § Optimistic concurrency (no If-Match 428 precondition_required; a stale tag 412
    // precondition_failed with the current ETag; a missing monitor 404 before any precondition;
    // an If-None-Match that matches, or `*`, is 412) and § 12. Go:
    // download_subscription_mutations.go DownloadSubscriptionPatchBody {mode, season_numbers,
    // delete_watched, max_storage_bytes, active}, body ≤ 128 KiB, 200 with ETag and
    // Cache-Control: private, no-cache; downloads/subscription_service.go UpdateSubscription /
    // applySubscriptionPatch (403 when the account may not download; specific_seasons needs
    // seasons; seasons kept only for specific_seasons; latest_season re-anchored when the mode
    // changes to it or it has no anchor; created_at, the future cutoff, never changes). Go answers
    // a null with 400 malformed_request ("Monitor fields cannot be null."); the fixture keeps its
    // strict body rule (null is 422 at the member, api-contract.md § Pilot slice) as § 12 says for
    // a subscription option. Every accepted edit is a new row version, so a new validator.
    private func updateDownloadSubscription(_ c: SiloCtx, _ id: String) throws -> HTTPServer.Response {
        let who = try authenticate(c)
        try rejectUnknownQuery(c, [])
        let (profile, device) = try managedMonitorScope(c, who)
        let body = try parseBody(
            c,
            [
                SiloMember("mode", .string, oneOf: siloMonitorModes),
                SiloMember("season_numbers", .array),
                SiloMember("delete_watched", .bool),
                SiloMember("max_storage_bytes", .int, minimum: 0),
                SiloMember("active", .bool)
            ], maxBytes: 128 << 10)
        let seasons = try parseSeasonNumbers(c, body["season_numbers"])
        let mode = body["mode"]?.stringValue
        let deleteWatched = body["delete_watched"]?.boolValue
        let maxStorageBytes = body["max_storage_bytes"]?.intValue
        let active = body["active"]?.boolValue
        guard state.withLock({ $0.downloadAllowed }) else { throw problem(c, .permissionDenied, "Downloads are not allowed.") }
        guard let current = findSubscription(id, profile: profile, device: device) else {
            throw problem(c, .notFound, "The monitor does not exist.")
        }
        var latest: Int? = nil
        if case .series(let show)? = visibleNode(current.seriesId) { latest = show.seasons.max() }
        let latestSeason = latest
        let ifMatch = c.header("if-match")
        let ifNoneMatch = c.header("if-none-match")
        let now = Date()
        let outcome: SiloGuardOutcome = state.withLock { s in
            guard let i = s.subscriptions.firstIndex(where: { $0.id == id && $0.profileId == profile && $0.deviceId == device }) else {
                return .notFound
            }
            let tag = s.subscriptions[i].etag
            switch siloGuard(ifMatch: ifMatch, ifNoneMatch: ifNoneMatch, etag: tag) {
            case .required: return .required
            case .stale: return .stale(tag)
            case .pass: break
            }
            var edited = s.subscriptions[i]
            guard
                edited.apply(
                    mode: mode, seasonNumbers: seasons, deleteWatched: deleteWatched, maxStorageBytes: maxStorageBytes,
                    active: active, latestSeason: latestSeason, now: now)
            else { return .invalidSeasons }
            s.subscriptions[i] = edited
            return .done(edited)
        }
        let edited = try guardedMonitor(c, outcome)
        return subscriptionResponse(edited)
    }

    // DELETE /downloads/subscriptions/{id} — downloads-api.md § 8.3 (If-Match required; stops
    // monitoring, retains already-registered downloads, forgets the episodes deleted while it
    // existed) and api-contract.md § Optimistic concurrency (404 first, then 428 / 412; a guarded
    // DELETE answers a bodyless 204 without ETag); Go: download_subscription_mutations.go
    // deleteDownloadSubscription (DefaultStatus 204), downloads/subscription_service.go
    // DeleteSubscription (no download-permission check). The registry rows stay as they are.
    private func deleteDownloadSubscription(_ c: SiloCtx, _ id: String) throws -> HTTPServer.Response {
        let who = try authenticate(c)
        try rejectUnknownQuery(c, [])
        let (profile, device) = try managedMonitorScope(c, who)
        let ifMatch = c.header("if-match")
        let ifNoneMatch = c.header("if-none-match")
        let outcome: SiloGuardOutcome = state.withLock { s in
            guard let i = s.subscriptions.firstIndex(where: { $0.id == id && $0.profileId == profile && $0.deviceId == device }) else {
                return .notFound
            }
            let tag = s.subscriptions[i].etag
            switch siloGuard(ifMatch: ifMatch, ifNoneMatch: ifNoneMatch, etag: tag) {
            case .required: return .required
            case .stale: return .stale(tag)
            case .pass: break
            }
            return .done(s.subscriptions.remove(at: i))
        }
        _ = try guardedMonitor(c, outcome)
        return noContent()
    }

    // POST /downloads/subscriptions/sync — downloads-api.md § 8.2 Sync and § 15 Subscription
    // changes and bounded sync: body {subscription_id, etag} with the profile and device headers;
    // query `limit` (default 50, at most 100 examined episodes) and `cursor`; answer
    // {subscription_id, registered, examined, page}; a monitor changed since its validator was
    // read is 409; a repeated page skips registered entries; a paused monitor never registers;
    // episodes the device deleted while monitored and, for delete_watched, episodes the profile
    // completed are skipped; the traversal follows the live catalog. Go:
    // download_subscription_sync.go DownloadSubscriptionSyncInput (body ≤ 4 KiB, both members
    // 1…128; the cursor binds device, monitor and validator; sort season, episode, id), 200;
    // downloads/subscription_sync_page.go SyncSubscriptionPage (403 when the account may not
    // download; 404 for an unknown monitor or an inaccessible series; the validator is checked
    // before the paused check, and a paused monitor answers an empty page: examined 0, no
    // cursor); downloads/subscription_service.go registerSubscriptionItems and
    // capItemsToStorage (rows registered under the monitor's batch, like a series batch's rows;
    // max_storage_bytes soft-gates registration: every managed entry of this profile and device
    // counts, and registration stops at the first episode that would pass the cap);
    // downloads/subscription.go coversEpisode (latest_season covers target_season and every
    // newer season; future only episodes that arrived after created_at).
    private func syncDownloadSubscription(_ c: SiloCtx) throws -> HTTPServer.Response {
        let who = try authenticate(c)
        try rejectUnknownQuery(c, ["limit", "cursor"])
        let (profile, device) = try managedMonitorScope(c, who)
        let limit = try parseLimit(c, defaultValue: 50, maximum: 100)
        let body = try parseBody(
            c,
            [
                SiloMember("subscription_id", .string, required: true, minLength: 1, maxLength: 128),
                SiloMember("etag", .string, required: true, minLength: 1, maxLength: 128)
            ], maxBytes: 4096)
        let subscriptionId = body["subscription_id"]?.stringValue ?? ""
        let etag = body["etag"]?.stringValue ?? ""
        let scope = ["syncDownloadSubscription", userId, profile, device, subscriptionId, etag].joined(separator: "\u{0}")
        let start = try decodeCursor(c, scope: scope)
        if let change = state.withLock({ s in
            defer { s.changeAtNextSync = nil }; return s.changeAtNextSync
        }) {
            changeSubscriptionBehindClient(id: change.id, mode: change.mode)
        }
        guard state.withLock({ $0.downloadAllowed }) else { throw problem(c, .permissionDenied, "Downloads are not allowed.") }
        guard let monitor = findSubscription(subscriptionId, profile: profile, device: device),
            case .series(_)? = visibleNode(monitor.seriesId)
        else {
            throw problem(c, .notFound, "The monitor does not exist.")
        }
        guard monitor.etag == etag else {
            throw problem(c, .conflict, "The monitor changed; reload it before starting a new sync.")
        }
        guard monitor.active else { return syncAnswer(subscriptionId, registered: 0, examined: 0, next: nil) }
        // The page walks the series' whole episode order (season, episode) and steps over episodes
        // the server does not have yet, so the cursor is a keyset position: an episode released
        // behind it is found by a later refresh (§ 15), one released ahead of it on this traversal.
        let held: Set<String> = state.withLock { $0.heldEpisodes }
        let order = catalog.series.first(where: { $0.contentId == monitor.seriesId })?.episodes ?? []
        var index = min(start, order.count)
        var page: [SiloCatalog.Episode] = []
        while index < order.count && page.count < limit {
            if !held.contains(order[index].contentId) { page.append(order[index]) }
            index += 1
        }
        let more = order[index...].contains { !held.contains($0.contentId) }
        let candidates: [SiloMonitorCandidate] = page.map { episode in
            let path = catalog.files[episode.fileId]?.path ?? ""
            return SiloMonitorCandidate(
                episodeId: episode.contentId, season: episode.season, fileId: episode.fileId,
                size: path.isEmpty ? nil : fileInfo(path)?.size)
        }
        let now = Date()
        // Go rechecks the monitor under its lock before registering (subscription_sync_page.go).
        let outcome: SiloSyncOutcome = state.withLock { s in
            s.registerMonitorPage(
                subscriptionId: subscriptionId, profileId: profile, deviceId: device, etag: etag,
                candidates: candidates, now: now)
        }
        switch outcome {
        case .notFound:
            throw problem(c, .notFound, "The monitor does not exist.")
        case .stale:
            throw problem(c, .conflict, "The monitor changed; reload it before starting a new sync.")
        case .registered(let count):
            let next: String? = more ? encodeCursor(scope: scope, offset: index) : nil
            return syncAnswer(subscriptionId, registered: count, examined: page.count, next: next)
        }
    }

    // MARK: - Watch progress

    // GET /progress — downloads-api.md § 7.2 Pull deltas (listProgress requires X-Profile-Id and
    // lists the acting profile's watch progress, newest change first; optional `status`
    // in_progress or completed and `library_id`; {items, page}) and api-contract.md § Pilot slice
    // (limit default 50, maximum 200; an opaque cursor bound to operation, account, profile,
    // filters and sort; offset and since are unknown parameters, 422; has_more is decided after
    // the access and library filters); Go: progress.go ProgressListInput, ProgressEntry
    // {media_item_id, position_seconds, duration_seconds (0 when unknown), completed, updated_at}.
    // An episode's progress is the episode's own content id (§ 10.9 `media_item_id: "ep_88"`).
    // The cursor holds the server sequence of the last entry emitted (§ 1 Key invariants:
    // server-owned progress cursors), a keyset like Go's (updated_at, media_item_id).
    private func listProgress(_ c: SiloCtx) throws -> HTTPServer.Response {
        let who = try authenticate(c)
        try rejectUnknownQuery(c, ["status", "library_id", "limit", "cursor"])
        let profile = try resolveProfile(c, who, required: true) ?? ""
        let status = c.query["status"]
        if let status { try requireOneOf(c, status, ["in_progress", "completed"], "query.status") }
        let library = c.query["library_id"]
        if let library { try requirePositiveID(c, library, location: "query.library_id") }
        let limit = try parseLimit(c, defaultValue: 50, maximum: 200)
        let scope = ["listProgress", userId, profile, status ?? "", library ?? ""].joined(separator: "\u{0}")
        let after = try decodeCursor(c, scope: scope)
        let (rows, held): ([SiloProgressRow], Set<String>) = state.withLock { s in
            (
                s.progress.filter { $0.profileId == profile && (after == 0 || $0.seq < after) }.sorted { $0.seq > $1.seq },
                s.heldEpisodes
            )
        }
        let shown = rows.filter { row in
            if let status, (status == "completed") != row.completed { return false }
            guard let node = catalog.node(row.mediaItemId), let visible = siloVisible(node, held: held) else { return false }
            if let library, siloLibraryId(visible) != library { return false }
            return true
        }
        let slice = Array(shown.prefix(limit))
        let next: String? = shown.count > limit ? slice.last.map { encodeCursor(scope: scope, offset: $0.seq) } : nil
        return json(SiloJ.obj([("items", SiloJ.array(slice.map(progressJSON))), ("page", pageJSON(next))]))
    }

    // MARK: - Monitor and progress helpers

    private func findSubscription(_ id: String, profile: String, device: String) -> SiloSubscription? {
        state.withLock { s in s.subscriptions.first(where: { $0.id == id && $0.profileId == profile && $0.deviceId == device }) }
    }

    /// The problem a guarded monitor mutation earns (api-contract.md § Optimistic concurrency;
    /// downloads-api.md § 12: 428 without If-Match, 412 for a stale validator).
    private func guardedMonitor(_ c: SiloCtx, _ outcome: SiloGuardOutcome) throws -> SiloSubscription {
        switch outcome {
        case .notFound:
            throw problem(c, .notFound, "The monitor does not exist.")
        case .required:
            throw problem(c, .preconditionRequired, "This operation requires If-Match with the monitor's current ETag.")
        case .stale(let tag):
            throw problem(c, .preconditionFailed, "The monitor changed; read it again before changing it.", headers: [("ETag", tag)])
        case .invalidSeasons:
            throw validation(c, [("body.season_numbers", "required", "specific_seasons requires season_numbers.")])
        case .done(let monitor):
            return monitor
        }
    }

    /// Go: DownloadSubscriptionCreateBody `season_numbers []int` (maxItems 10000) and
    /// downloads/subscription_service.go validSeasonNumbers (each 0…9999; 0 is Specials).
    private func parseSeasonNumbers(_ c: SiloCtx, _ value: SiloJ?) throws -> [Int]? {
        guard case .array(let items)? = value else { return nil }
        guard items.count <= 10000 else {
            throw validation(c, [("body.season_numbers", "invalid", "expected at most 10000 season numbers")])
        }
        var numbers: [Int] = []
        for (n, item) in items.enumerated() {
            guard case .int(let number) = item, number >= 0, number <= 9999 else {
                throw validation(c, [("body.season_numbers[\(n)]", "invalid", "expected a season number from 0 to 9999")])
            }
            numbers.append(Int(number))
        }
        return numbers
    }

    /// Go: download_subscriptions.go DownloadSubscription. `season_numbers` is always an array
    /// (never null, api-contract.md § Wire data representation); `target_season` is omitted
    /// unless the monitor is anchored (latest_season).
    private func subscriptionJSON(_ monitor: SiloSubscription) -> SiloJ {
        SiloJ.obj([
            ("id", SiloJ.string(monitor.id)),
            ("series_id", SiloJ.string(monitor.seriesId)),
            ("mode", SiloJ.string(monitor.mode)),
            ("season_numbers", SiloJ.array(monitor.seasonNumbers.map { SiloJ.num($0) })),
            ("target_season", SiloJ.optNum(monitor.targetSeason)),
            ("delete_watched", SiloJ.bool(monitor.deleteWatched)),
            ("max_storage_bytes", SiloJ.int(monitor.maxStorageBytes)),
            ("active", SiloJ.bool(monitor.active)),
            ("created_at", SiloJ.string(siloInstant(monitor.createdAt))),
            ("updated_at", SiloJ.string(siloInstant(monitor.updatedAt))),
            ("etag", SiloJ.string(monitor.etag))
        ])
    }

    /// A single monitor: 200 with its `ETag` and Cache-Control: private, no-cache (Go:
    /// download_subscription_mutations.go subscriptionOutput, download_subscriptions.go).
    private func subscriptionResponse(_ monitor: SiloSubscription) -> HTTPServer.Response {
        HTTPServer.Response(
            status: 200,
            headers: [
                ("Content-Type", "application/json"),
                ("Cache-Control", "private, no-cache"),
                ("ETag", monitor.etag)
            ], body: .bytes(Array(subscriptionJSON(monitor).serialized().utf8)))
    }

    /// Go: download_subscription_sync.go DownloadSubscriptionSync.
    private func syncAnswer(_ id: String, registered: Int, examined: Int, next: String?) -> HTTPServer.Response {
        json(
            SiloJ.obj([
                ("subscription_id", SiloJ.string(id)),
                ("registered", SiloJ.num(registered)),
                ("examined", SiloJ.num(examined)),
                ("page", pageJSON(next))
            ]))
    }

    /// Go: progress.go ProgressEntry.
    private func progressJSON(_ row: SiloProgressRow) -> SiloJ {
        SiloJ.obj([
            ("media_item_id", SiloJ.string(row.mediaItemId)),
            ("position_seconds", SiloJ.double(row.positionSeconds)),
            ("duration_seconds", SiloJ.double(row.durationSeconds)),
            ("completed", SiloJ.bool(row.completed)),
            ("updated_at", SiloJ.string(siloInstant(row.updatedAt)))
        ])
    }

    /// The catalog node as the server shows it now (`hold(episodeContentId:)`).
    private func visibleNode(_ id: String) -> SiloCatalog.Node? {
        guard let node = catalog.node(id) else { return nil }
        let held: Set<String> = state.withLock { $0.heldEpisodes }
        return siloVisible(node, held: held)
    }

    private func visibleNodes(_ nodes: [SiloCatalog.Node]) -> [SiloCatalog.Node] {
        let held: Set<String> = state.withLock { $0.heldEpisodes }
        return nodes.compactMap { siloVisible($0, held: held) }
    }

    /// Whether `fileId` is the file of an episode the server does not have yet.
    private func isHeldFile(_ fileId: String) -> Bool {
        let held: Set<String> = state.withLock { $0.heldEpisodes }
        guard !held.isEmpty else { return false }
        return catalog.series.contains { show in show.episodes.contains { $0.fileId == fileId && held.contains($0.contentId) } }
    }

    // MARK: - Download helpers

    private func requireServable(_ c: SiloCtx, _ row: SiloDownloadRow) throws {
        switch row.status {
        case "preparing": throw problem(c, .conflict, "The download is still being prepared; wait for ready.")
        case "failed": throw problem(c, .conflict, "The download could not be prepared.")
        case "revoked": throw problem(c, .conflict, "The download is no longer active.")
        default: return
        }
    }

    /// Resolves a single download's catalog identity (downloads-api.md § 4.1: `content_id` is a
    /// movie or series id, `episode_id` the episode; explicit selection must match the item).
    private func resolveTarget(_ c: SiloCtx, contentId: String, episodeId: String?, mediaFileId: String?) throws -> SiloDownloadTarget {
        guard let node = visibleNode(contentId) else { throw problem(c, .notFound, "The item does not exist.") }
        let owner: String
        let episode: String?
        let fileIds: [String]
        switch node {
        case .movie(let movie):
            guard episodeId == nil else {
                throw validation(c, [("body.episode_id", "invalid", "A movie has no episodes.")])
            }
            owner = movie.contentId
            episode = nil
            fileIds = movie.fileIds
        case .series(let series):
            guard let episodeId else {
                throw problem(c, .malformedRequest, "content_id names a series: send episode_id, or series=true for a batch.")
            }
            guard let match = series.episodes.first(where: { $0.contentId == episodeId }) else {
                throw problem(c, .notFound, "The episode does not exist.")
            }
            owner = series.contentId
            episode = match.contentId
            fileIds = [match.fileId]
        default:
            throw problem(c, .malformedRequest, "content_id must name a movie or a series.")
        }
        let chosen: String
        if let mediaFileId {
            guard fileIds.contains(mediaFileId) else {
                throw validation(c, [("body.media_file_id", "invalid", "The file is not a version of the requested item.")])
            }
            chosen = mediaFileId
        } else {
            // § 4.1 version choice falls back to the lowest file id (no play history here).
            chosen = fileIds.min { (Int($0) ?? 0) < (Int($1) ?? 0) } ?? ""
        }
        guard let file = catalog.files[chosen] else { throw problem(c, .notFound, "The file does not exist.") }
        return SiloDownloadTarget(contentId: owner, episodeId: episode, fileId: chosen, path: file.path)
    }

    private func accepted(_ body: SiloJ, lose: Bool) -> HTTPServer.Response {
        let bytes = Array(body.serialized().utf8)
        let headers: [(String, String)] = [("Content-Type", "application/json"), ("Cache-Control", "no-store")]
        guard lose else { return HTTPServer.Response(status: 202, headers: headers, body: .bytes(bytes)) }
        // The head (with the full Content-Length) goes out, then the connection closes before
        // any body byte.
        return HTTPServer.Response(status: 202, headers: headers, body: .stream(length: Int64(bytes.count)) { _ in false })
    }

    private func entryJSON(_ row: SiloDownloadRow) -> SiloJ {
        SiloJ.obj([
            ("id", SiloJ.string(row.id)),
            ("content_id", SiloJ.string(row.contentId)),
            ("episode_id", SiloJ.optStr(row.episodeId)),
            ("batch_id", SiloJ.optStr(row.batchId)),
            ("device_id", SiloJ.optStr(row.deviceId)),
            ("media_file_id", SiloJ.string(row.mediaFileId)),
            ("file_size", SiloJ.int(row.fileSize)),
            ("bytes_sent", SiloJ.int(row.deviceId == nil && row.status == "completed" ? row.fileSize : 0)),
            ("kind", SiloJ.string(row.kind)),
            ("status", SiloJ.string(row.status)),
            ("quality", SiloJ.string(row.quality)),
            ("effective_quality", SiloJ.string(row.quality)),
            ("delivery_format", SiloJ.string(row.deliveryFormat)),
            ("target_bitrate_kbps", SiloJ.num(row.targetBitrateKbps)),
            ("revision", SiloJ.num(row.revision)),
            ("created_at", SiloJ.string(siloInstant(row.createdAt))),
            ("completed_at", row.completedAt.map { SiloJ.string(siloInstant($0)) }),
            ("status_event_at", row.statusEventAt.map { SiloJ.string(siloInstant($0)) }),
            (
                "preparation",
                row.status == "preparing"
                    ? SiloJ.obj([("state", SiloJ.string("queued")), ("queue_position", SiloJ.num(1))]) : nil
            )
        ])
    }

    private func manifestJSON(_ c: SiloCtx, _ row: SiloDownloadRow) throws -> SiloJ {
        guard let file = catalog.files[row.mediaFileId], let info = fileInfo(file.path),
            let digest = state.withLock({ $0.manifestHashOverride[row.mediaFileId] }) ?? mediaHash(file.path)
        else {
            throw problem(c, .notFound, "Download not found.")
        }
        var type = "movie"
        var title = ""
        var year: Int? = nil
        var seriesId: String? = nil
        var seriesTitle: String? = nil
        var season: Int? = nil
        var episode: Int? = nil
        switch catalog.node(row.episodeId ?? row.contentId) {
        case .movie(let movie)?:
            title = movie.title
            year = movie.year
        case .episode(let show, let item)?:
            type = "episode"
            title = item.title
            seriesId = show.contentId
            seriesTitle = show.title
            season = item.season
            episode = item.number
        default:
            break
        }
        let metadataTag = siloHexString(siloSHA256Digest(Array("\(row.id)/\(row.revision)/\(info.size)/\(info.modified.timeIntervalSince1970)".utf8)))
        return SiloJ.obj([
            ("download_id", SiloJ.string(row.id)),
            ("content_id", SiloJ.string(row.contentId)),
            ("episode_id", SiloJ.optStr(row.episodeId)),
            ("type", SiloJ.string(type)),
            ("revision", SiloJ.num(row.revision)),
            ("quality", SiloJ.string(row.quality)),
            ("effective_quality", SiloJ.string(row.quality)),
            ("delivery_format", SiloJ.string(row.deliveryFormat)),
            ("target_bitrate_kbps", SiloJ.num(row.targetBitrateKbps)),
            ("media_file_id", SiloJ.string(row.mediaFileId)),
            ("file_size", SiloJ.int(info.size)),
            ("title", SiloJ.string(title)),
            ("year", SiloJ.optNum(year)),
            ("series_id", SiloJ.optStr(seriesId)),
            ("series_title", SiloJ.optStr(seriesTitle)),
            ("season_number", SiloJ.optNum(season)),
            ("episode_number", SiloJ.optNum(episode)),
            // § 6 / § 4.8: only the kinds the item has; always an object (Go: ArtworkURLs struct
            // with omitempty members).
            ("artwork_urls", artworkURLsJSON(row)),
            ("container", SiloJ.string(file.container)),
            ("codec_video", SiloJ.string("")),
            ("codec_audio", SiloJ.string("")),
            ("resolution", SiloJ.string("")),
            ("hdr", SiloJ.bool(false)),
            ("duration_seconds", SiloJ.num(0)),
            // § 6 `chapters` (omitted when the file has none: § 6 Notes; Go `omitempty`).
            ("chapters", chaptersJSON(row)),
            ("marker_segments", SiloJ.array([])),
            // § 6 `subtitles`: always an array (Go: `json:"subtitles"`, no omitempty).
            ("subtitles", subtitlesJSON(row)),
            (
                "stable_identity",
                SiloJ.obj([
                    ("stable_type", SiloJ.string(type)),
                    ("provider_ids", SiloJ.obj([])),
                    ("season", season.map { SiloJ.num($0) } ?? SiloJ.null),
                    ("episode", episode.map { SiloJ.num($0) } ?? SiloJ.null)
                ])
            ),
            (
                "integrity",
                SiloJ.obj([
                    ("expected_bytes", SiloJ.int(info.size)),
                    ("media_file_hash", SiloJ.string(digest)),
                    ("metadata_etag", SiloJ.string(String(metadataTag.prefix(32))))
                ])
            ),
            ("manifest_version", SiloJ.num(3)),
            ("generated_at", SiloJ.string(siloInstant(Date())))
        ])
    }

    /// The entry's images whose files exist, in the order poster, backdrop, logo (an image file
    /// that is missing is not there: no URL, and the route answers 404).
    private func artworkFiles(_ row: SiloDownloadRow) -> [(kind: String, path: String)] {
        let kinds = catalog.artwork[row.episodeId ?? row.contentId] ?? [:]
        return ["poster", "backdrop", "logo"].compactMap { kind in
            guard let path = kinds[kind], FileManager.default.fileExists(atPath: path) else { return nil }
            return (kind, path)
        }
    }

    /// § 6 `artwork_urls` / § 4.8: `/api/v2/downloads/{download_id}/artwork/{kind}` for each kind the
    /// item has. The paths are exactly as § 6 shows them (Go mints them under "/api/v2/downloads/"),
    /// i.e. below the server base, without a reverse proxy's path prefix (`Configuration.basePath`):
    /// a client appends them to its saved server base, as it does `native_start_path`.
    private func artworkURLsJSON(_ row: SiloDownloadRow) -> SiloJ {
        SiloJ.obj(artworkFiles(row).map { ($0.kind, SiloJ.string("/api/v2/downloads/\(row.id)/artwork/\($0.kind)")) })
    }

    /// A media file's subtitles split as the refs of § 4.9 count them: `external` sidecars by their
    /// place among the file's sidecars (external:{index}), and embedded tracks by subtitle ordinal
    /// (embedded:{ordinal}; Go: "its subtitle ordinal (0:s:N)", so every embedded subtitle stream
    /// counts, whatever its codec), both in catalog order.
    private func subtitleTracks(_ fileId: String) -> (external: [FixtureCatalog.Subtitle], embedded: [FixtureCatalog.Subtitle]) {
        let all = catalog.subtitles[fileId] ?? []
        return (all.filter(\.external), all.filter { !$0.external })
    }

    /// § 6 `subtitles[]`: `language`, `format`, `forced`, `hearing_impaired`, `external`,
    /// `fetch_url`, and `file_size` where known (§ 1: "known subtitle file sizes"; Go `omitempty`).
    /// - Every external sidecar, as external:{index}, with its size on disk.
    /// - An embedded ASS/SSA track as an `ass` sidecar and a PGS track as a `sup` sidecar
    ///   (embedded:{ordinal}, no size) — only for a prepared (remux/transcode) entry: § 1 Metadata
    ///   included offline says prepared MP4s list those tracks because MP4 cannot carry them, while an
    ///   original delivery is the source file with its embedded tracks inside (Go: manifest.go
    ///   buildSubtitles lists embedded sidecars only for a prepared artifact).
    /// - An embedded SRT or WebVTT track is never listed: § 1 says a prepared MP4 carries plain-text
    ///   subtitles inside as timed text (and an original file has them inside already), and § 4.9
    ///   extracts only ASS/SSA and PGS.
    /// - DVD and DVB bitmap tracks are not carried (§ 1), so not listed either.
    /// `language`: the catalog's ISO 639-2 codes ("eng", "fre", "ger") become the ISO 639-1 codes
    /// § 6 shows ("en"); a code without a two-letter form is passed as it is, and a subtitle without
    /// a language has "" (Go: `json:"language"`, always present).
    private func subtitlesJSON(_ row: SiloDownloadRow) -> SiloJ {
        let (external, embedded) = subtitleTracks(row.mediaFileId)
        func entry(_ sub: FixtureCatalog.Subtitle, format: String, ref: String, size: Int64?) -> SiloJ {
            SiloJ.obj([
                ("language", SiloJ.string(sub.language.map(siloISO6391) ?? "")),
                ("format", SiloJ.string(format)),
                ("forced", SiloJ.bool(sub.forced)),
                ("hearing_impaired", SiloJ.bool(sub.hearingImpaired)),
                ("external", SiloJ.bool(sub.external)),
                ("fetch_url", SiloJ.string("/api/v2/downloads/\(row.id)/subtitles/\(ref)")),
                ("file_size", size.flatMap { $0 > 0 ? SiloJ.int($0) : nil })
            ])
        }
        var items: [SiloJ] = external.enumerated().map { index, sub in
            entry(sub, format: siloSubtitleFormat(sub.codec), ref: "external:\(index)", size: diskInfo(sub.file)?.size)
        }
        if row.deliveryFormat != "original" {
            for (ordinal, sub) in embedded.enumerated() {
                guard let format = siloSidecarFormat(sub.codec) else { continue }
                items.append(entry(sub, format: format, ref: "embedded:\(ordinal)", size: nil))
            }
        }
        return SiloJ.array(items)
    }

    /// § 6 `chapters[]`: `index` (from 0, in start order), `title` (omitted when the chapter has no
    /// name; Go `omitempty`), `start_seconds`, `end_seconds`. A chapter ends where the next one
    /// starts; the last ends at the item's runtime (Details.runtimeSeconds) when that lies after its
    /// start, else at its own start (the spec does not say how an unknown end is given, and the
    /// fixture does not probe durations). nil (member omitted) without chapters (§ 6 Notes).
    private func chaptersJSON(_ row: SiloDownloadRow) -> SiloJ? {
        let key = row.episodeId ?? row.contentId
        guard let chapters = catalog.chapters[key], !chapters.isEmpty else { return nil }
        let runtime = catalog.runtimes[key].map(Double.init)
        return SiloJ.array(
            chapters.enumerated().map { index, chapter in
                let end: Double
                if index + 1 < chapters.count {
                    end = chapters[index + 1].start
                } else if let runtime, runtime > chapter.start {
                    end = runtime
                } else {
                    end = chapter.start
                }
                return SiloJ.obj([
                    ("index", SiloJ.num(index)),
                    ("title", chapter.name.isEmpty ? nil : SiloJ.string(chapter.name)),
                    ("start_seconds", SiloJ.double(chapter.start)),
                    ("end_seconds", SiloJ.double(end))
                ])
            })
    }

    private func setStatus(_ id: String, _ status: String) -> Bool {
        state.withLock { s in
            guard let i = s.downloads.firstIndex(where: { $0.id == id }) else { return false }
            s.downloads[i].status = status
            return true
        }
    }

    // MARK: - Byte serving

    /// Serves a file the way Go's ServeContent does for Silo's byte routes (downloads-api.md
    /// § 4.5, § 15): Accept-Ranges, Last-Modified (whole seconds), Content-Disposition,
    /// If-Unmodified-Since (412), If-Modified-Since (304), If-Range by date, a single
    /// `bytes=` range as 206 with `Content-Range: bytes a-b/size`, and 416 with
    /// `Content-Range: bytes */size`. HEAD gets the same status and headers without a body.
    private func serveFile(_ c: SiloCtx, path: String, container: String) throws -> HTTPServer.Response {
        guard let info = fileInfo(path) else { throw problem(c, .notFound, "The file does not exist.") }
        let size = info.size
        let modified = info.modified
        let lastModified = siloHTTPDate(modified)
        var headers: [(String, String)] = [
            ("Content-Type", siloMimeType(container: container, path: path)),
            ("Accept-Ranges", "bytes"),
            ("Last-Modified", lastModified),
            ("Content-Disposition", "attachment; filename=\"\(siloFileName(path).replacingOccurrences(of: "\"", with: "_"))\"")
        ]
        if let unmodifiedSince = c.header("if-unmodified-since"), let date = siloParseHTTPDate(unmodifiedSince), modified > date {
            throw problem(c, .preconditionFailed, "The file changed after If-Unmodified-Since.")
        }
        if c.header("if-none-match") == nil, let modifiedSince = c.header("if-modified-since"),
            let date = siloParseHTTPDate(modifiedSince), modified <= date
        {
            return HTTPServer.Response(status: 304, headers: [("Last-Modified", lastModified)])
        }
        var rangeHeader = c.header("range")
        if case .ignoreRange? = c.fault { rangeHeader = nil }
        if rangeHeader != nil, let ifRange = c.header("if-range") {
            // RFC 9110 § 13.1.5: an entity tag never matches (these routes send none); a date
            // matches only the exact Last-Modified. A mismatch serves the whole representation.
            if ifRange.hasPrefix("\"") || ifRange.hasPrefix("W/") || siloParseHTTPDate(ifRange) != modified {
                rangeHeader = nil
            }
        }
        let logId = c.logId
        let sent: @Sendable (Int64) -> Void = { [weak self] count in self?.recordSent(logId, count) }
        var dropAfter: Int64? = nil
        var stall: (after: Int64, seconds: Double)? = nil
        switch c.fault {
        case .dropAfter(let bytes)?: dropAfter = bytes
        case .stallAfter(let after, let seconds)?: stall = (after: after, seconds: seconds)
        default: break
        }
        guard let range = rangeHeader else {
            return HTTPServer.Response(
                status: 200, headers: headers,
                body: FaultyFile.body(path: path, offset: 0, length: size, dropAfter: dropAfter, stall: stall, sent: sent))
        }
        switch siloParseRange(range, size: size) {
        case .whole:
            return HTTPServer.Response(
                status: 200, headers: headers,
                body: FaultyFile.body(path: path, offset: 0, length: size, dropAfter: dropAfter, stall: stall, sent: sent))
        case .unsatisfiable:
            throw problem(
                c, .rangeNotSatisfiable, "The requested range is not satisfiable.",
                headers: [("Content-Range", "bytes */\(size)")])
        case .bytes(let start, let end):
            var shownStart = start
            var shownEnd = end
            if case .wrongContentRange? = c.fault {
                shownStart += 1
                shownEnd += 1
            }
            headers.append(("Content-Range", "bytes \(shownStart)-\(shownEnd)/\(size)"))
            return HTTPServer.Response(
                status: 206, headers: headers,
                body: FaultyFile.body(
                    path: path, offset: start, length: end - start + 1,
                    dropAfter: dropAfter, stall: stall, sent: sent))
        }
    }

    private func recordSent(_ logId: Int, _ count: Int64) {
        state.withLock { s in
            if let i = s.log.lastIndex(where: { $0.id == logId }) { s.log[i].bytesSent = count }
        }
    }

    /// Size and Last-Modified (whole seconds, `changeFile` overrides applied). Never call while
    /// holding the state lock.
    private func fileInfo(_ path: String) -> (size: Int64, modified: Date)? {
        guard let disk = diskInfo(path) else { return nil }
        let overridden: Date? = state.withLock { $0.modifiedOverride[path] }
        let modified = overridden ?? disk.modified
        return (disk.size, Date(timeIntervalSince1970: floor(modified.timeIntervalSince1970)))
    }

    private func diskInfo(_ path: String) -> (size: Int64, modified: Date)? {
        guard let attributes = try? FileManager.default.attributesOfItem(atPath: path) else { return nil }
        let size: Int64
        if let number = attributes[.size] as? NSNumber {
            size = number.int64Value
        } else if let value = attributes[.size] as? Int {
            size = Int64(value)
        } else if let value = attributes[.size] as? UInt64 {
            size = Int64(value)
        } else {
            size = 0
        }
        let modified = (attributes[.modificationDate] as? Date) ?? Date(timeIntervalSince1970: 0)
        return (size, modified)
    }

    /// SHA-256 (lowercase hex) of the bytes the byte routes serve, cached per size and mtime.
    private func mediaHash(_ path: String) -> String? {
        guard let info = fileInfo(path) else { return nil }
        let key = "\(info.size)/\(info.modified.timeIntervalSince1970)"
        let cached: SiloHashEntry? = state.withLock { $0.hashCache[path] }
        if let cached, cached.key == key { return cached.hex }
        guard let digest = siloSHA256File(path) else { return nil }
        state.withLock { $0.hashCache[path] = SiloHashEntry(key: key, hex: digest) }
        return digest
    }

    // MARK: - Authentication

    /// Authenticates the caller (api-keys-api.md: keys are `sa_…` sent as
    /// `Authorization: Bearer`; downloads-api.md § 4.10: `?token=` only where allowed). Refusals
    /// follow Go gates.go: missing → 401 authentication_required; unknown or expired →
    /// 401 invalid_token; revoked session → 401 session_expired; minted before a role change →
    /// 401 token_refresh_required (auth-api.md § Access tokens after a role change).
    private func authenticate(_ c: SiloCtx, allowQueryToken: Bool = false) throws -> SiloPrincipal {
        var presented: String? = nil
        var viaQuery = false
        if let header = c.header("authorization") {
            let parts = header.split(separator: " ", maxSplits: 1).map(String.init)
            guard parts.count == 2, parts[0].lowercased() == "bearer" else {
                throw problem(c, .authenticationRequired, "Authentication is required.")
            }
            presented = parts[1].trimmingCharacters(in: .whitespaces)
        } else if allowQueryToken, let value = c.query["token"], !value.isEmpty {
            presented = value
            viaQuery = true
        }
        guard let token = presented, !token.isEmpty else { throw problem(c, .authenticationRequired, "Authentication is required.") }
        if token.hasPrefix("sa_") {
            guard !viaQuery, token == configuration.apiKey else {
                throw problem(c, .invalidToken, "The credential is invalid or expired.")
            }
            return SiloPrincipal(sessionId: nil, credential: .apiKey)
        }
        let now = Date()
        let verdict: SiloAccessVerdict = state.withLock { s in
            guard let access = s.accessTokens[token], now < access.expiresAt else { return .invalid }
            guard let session = s.sessions[access.sessionId], !session.revoked else { return .sessionGone }
            if access.roleEpoch < s.roleEpoch { return .refreshRequired }
            return .valid(access.sessionId)
        }
        switch verdict {
        case .invalid: throw problem(c, .invalidToken, "The credential is invalid or expired.")
        case .sessionGone: throw problem(c, .sessionExpired, "The session is no longer valid; sign in again.")
        case .refreshRequired: throw problem(c, .tokenRefreshRequired, "The account's role changed; refresh the session and retry.")
        case .valid(let sessionId): return SiloPrincipal(sessionId: sessionId, credential: viaQuery ? .queryToken : .accessToken)
        }
    }

    /// Resolves `X-Profile-Id` (api-contract.md § Credential continuity: X-Profile-Id and
    /// X-Profile-Token keep their security meanings). Missing where required is 422 at
    /// header.x-profile-id (Go: gates.go badRequestProblem); a PIN-locked profile without a
    /// valid X-Profile-Token for this session is 403 profile_verification_required
    /// (downloads-api.md § 12); an unknown profile is 403 permission_denied.
    private func resolveProfile(_ c: SiloCtx, _ who: SiloPrincipal, required: Bool) throws -> String? {
        guard let id = c.header("x-profile-id")?.trimmingCharacters(in: .whitespaces), !id.isEmpty else {
            if required {
                throw validation(c, [("header.x-profile-id", "required", "The X-Profile-Id header is required.")])
            }
            return nil
        }
        guard let profile = profiles.first(where: { $0.id == id }) else {
            throw problem(c, .permissionDenied, "The declared profile does not belong to this account.")
        }
        if profile.pin != nil {
            let token = c.header("x-profile-token") ?? ""
            let binding = who.bindingKey
            let verified: Bool = state.withLock { s in
                guard let grant = s.profileTokens[token] else { return false }
                return grant.profileId == id && grant.bindingKey == binding
            }
            guard verified else {
                throw problem(
                    c, .profileVerificationRequired,
                    "The declared profile is locked; verify it and retry with X-Profile-Token.")
            }
        }
        return id
    }

    // MARK: - Problem documents

    /// api-contract.md § Problem Details; Go: problem.go. Members: type (under
    /// https://siloserver.org/docs/api/v2/problems/, last segment the problem identifier),
    /// title, status, detail, instance (`urn:silo:request:<id>`), and `errors[]` of
    /// {location, code, detail} on validation problems. There is no top-level `code` member.
    private func problem(
        _ c: SiloCtx, _ kind: SiloProblem, _ detail: String, errors: [(String, String, String)] = [],
        headers: [(String, String)] = []
    ) -> SiloRefusal {
        SiloRefusal(response: problemResponse(requestId: c.requestId, kind, detail, errors: errors, headers: headers))
    }

    private func validation(_ c: SiloCtx, _ errors: [(String, String, String)]) -> SiloRefusal {
        problem(c, .validationFailed, "The request did not pass validation; see errors.", errors: errors)
    }

    private func problemResponse(
        requestId: String, _ kind: SiloProblem, _ detail: String,
        errors: [(String, String, String)] = [], headers: [(String, String)] = [],
        status: Int? = nil
    ) -> HTTPServer.Response {
        let code = status ?? kind.status
        var members: [(String, SiloJ?)] = [
            ("type", SiloJ.string("https://siloserver.org/docs/api/v2/problems/" + kind.id)),
            ("title", SiloJ.string(kind.title)),
            ("status", SiloJ.num(code)),
            ("detail", SiloJ.string(detail)),
            ("instance", SiloJ.string("urn:silo:request:" + requestId))
        ]
        if !errors.isEmpty {
            members.append(
                (
                    "errors",
                    SiloJ.array(
                        errors.map {
                            SiloJ.obj([("location", SiloJ.string($0.0)), ("code", SiloJ.string($0.1)), ("detail", SiloJ.string($0.2))])
                        })
                ))
        }
        var all: [(String, String)] = [("Content-Type", "application/problem+json"), ("Cache-Control", "no-store")]
        all.append(contentsOf: headers)
        return HTTPServer.Response(status: code, headers: all, body: .bytes(Array(SiloJ.obj(members).serialized().utf8)))
    }

    private func plainNotFound() -> HTTPServer.Response {
        HTTPServer.Response(
            status: 404, headers: [("Content-Type", "text/plain; charset=utf-8")],
            body: .bytes(Array("404 page not found\n".utf8)))
    }

    // MARK: - Request helpers

    /// api-contract.md § Contract foundation: undeclared query parameters fail with the
    /// validation problem (RejectUnknownQueryParameters).
    private func rejectUnknownQuery(_ c: SiloCtx, _ allowed: Set<String>) throws {
        let unknown = c.query.keys.filter { !allowed.contains($0) }.sorted()
        guard unknown.isEmpty else {
            throw validation(c, unknown.map { ("query." + $0, "unknown_parameter", "This operation does not accept this query parameter.") })
        }
    }

    /// api-contract.md § Query and pagination conventions: limit default per operation, 422 out of range.
    private func parseLimit(_ c: SiloCtx, defaultValue: Int, maximum: Int) throws -> Int {
        guard let raw = c.query["limit"] else { return defaultValue }
        guard let value = Int(raw), value >= 1, value <= maximum else {
            throw validation(c, [("query.limit", "invalid", "limit must be an integer from 1 to \(maximum).")])
        }
        return value
    }

    private func requirePositiveID(_ c: SiloCtx, _ value: String, location: String) throws {
        guard siloIsCanonicalPositive(value) else {
            throw validation(c, [(location, "invalid", "expected a positive integer identifier")])
        }
    }

    private func requireOneOf(_ c: SiloCtx, _ value: String, _ options: [String], _ location: String) throws {
        guard options.contains(value) else {
            throw validation(c, [(location, "invalid", "expected one of " + options.joined(separator: ", "))])
        }
    }

    /// api-contract.md § Query and pagination conventions: booleans accept only lowercase true or false.
    private func requireBool(_ c: SiloCtx, _ value: String, _ location: String) throws {
        guard value == "true" || value == "false" else {
            throw validation(c, [(location, "invalid", "expected true or false")])
        }
    }

    private func validateItemQuery(_ c: SiloCtx) throws {
        if let library = c.query["library_id"] { try requirePositiveID(c, library, location: "query.library_id") }
        if let file = c.query["file_id"] { try requirePositiveID(c, file, location: "query.file_id") }
        if let size = c.query["image_size"] { try requireOneOf(c, size, ["small", "medium", "large", "original"], "query.image_size") }
    }

    private func seasonNumber(_ c: SiloCtx, _ raw: String) throws -> Int {
        guard let number = Int(raw), number >= 0 else {
            throw validation(c, [("path.num", "invalid", "expected a season number of 0 or more")])
        }
        return number
    }

    private func validateDeviceHeader(_ c: SiloCtx, _ raw: String) throws {
        let value = raw.trimmingCharacters(in: .whitespaces)
        if value.isEmpty { return }
        let valid =
            value.count <= 128
            && value.unicodeScalars.allSatisfy { s in
                (s.value >= 48 && s.value <= 57) || (s.value >= 65 && s.value <= 90) || (s.value >= 97 && s.value <= 122)
                    || s == "." || s == "_" || s == ":" || s == "-"
            }
        guard valid else {
            throw validation(
                c,
                [
                    (
                        "header.x-silo-device-id", "invalid",
                        "X-Silo-Device-Id must be one device identifier: letters, digits, '.', '_', ':' or '-', at most 128 characters."
                    )
                ])
        }
    }

    private func deviceHeader(_ c: SiloCtx) -> String? {
        guard let value = c.header("x-silo-device-id")?.trimmingCharacters(in: .whitespaces), !value.isEmpty else { return nil }
        return value
    }

    /// Strict JSON body handling (api-contract.md § Contract foundation and § HTTP representation):
    /// non-identity Content-Encoding and any media type but application/json (charset=utf-8 the
    /// only parameter) are 415; over the byte limit 413; unparseable JSON 400 malformed_request;
    /// unknown members, explicit null, wrong types, missing required members and out-of-range
    /// values 422 validation_failed naming each `body.<member>`.
    private func parseBody(_ c: SiloCtx, _ members: [SiloMember], maxBytes: Int = 1 << 20, bodyOptional: Bool = false) throws -> [String: SiloJ] {
        if let encoding = c.header("content-encoding"),
            !encoding.split(separator: ",").allSatisfy({ $0.trimmingCharacters(in: .whitespaces).lowercased() == "identity" })
        {
            throw problem(c, .unsupportedMediaType, "Compressed request bodies are not supported; send an unencoded application/json body.")
        }
        let declaredType = c.header("content-type")
        if bodyOptional && c.request.body.isEmpty && declaredType == nil { return [:] }
        guard let contentType = declaredType, siloIsJSONMediaType(contentType) else {
            throw problem(c, .unsupportedMediaType, "The request media type is not supported; send application/json.")
        }
        guard c.request.body.count <= maxBytes else {
            throw problem(c, .payloadTooLarge, "The request body exceeds the operation's limit.")
        }
        var parser = SiloJSONParser(c.request.body)
        guard let document = parser.parseDocument() else {
            throw problem(
                c, .malformedRequest, "The request body could not be parsed.",
                errors: [("body", "malformed_json", "The request body is not valid JSON.")])
        }
        guard case .object(let pairs) = document else {
            throw validation(c, [("body", "invalid_type", "expected a JSON object")])
        }
        var values: [String: SiloJ] = [:]
        for (key, value) in pairs { values[key] = value }
        var errors: [(String, String, String)] = []
        let known = Set(members.map(\.name))
        for key in values.keys.sorted() where !known.contains(key) {
            errors.append(("body." + key, "unknown_property", "This member is not part of the request."))
        }
        for member in members {
            let location = "body." + member.name
            guard let value = values[member.name] else {
                if member.required { errors.append((location, "required", "expected required property \(member.name) to be present")) }
                continue
            }
            if case .null = value {
                errors.append((location, "invalid_type", "null is not a value for this member; omit it instead"))
                continue
            }
            switch member.kind {
            case .string:
                guard case .string(let text) = value else {
                    errors.append((location, "invalid_type", "expected a string"))
                    continue
                }
                if text.count < member.minLength {
                    errors.append((location, "invalid", "expected at least \(member.minLength) characters"))
                } else if text.count > member.maxLength {
                    errors.append((location, "invalid", "expected at most \(member.maxLength) characters"))
                } else if let options = member.oneOf, !options.contains(text) {
                    errors.append((location, "invalid", "expected one of " + options.joined(separator: ", ")))
                }
            case .int:
                guard case .int(let number) = value else {
                    errors.append((location, "invalid_type", "expected an integer"))
                    continue
                }
                if let minimum = member.minimum, number < minimum {
                    errors.append((location, "invalid", "expected a value of at least \(minimum)"))
                } else if let maximum = member.maximum, number > maximum {
                    errors.append((location, "invalid", "expected a value of at most \(maximum)"))
                }
            case .bool:
                guard case .bool = value else {
                    errors.append((location, "invalid_type", "expected a boolean"))
                    continue
                }
            case .object:
                guard case .object = value else {
                    errors.append((location, "invalid_type", "expected an object"))
                    continue
                }
            case .array:
                guard case .array = value else {
                    errors.append((location, "invalid_type", "expected an array"))
                    continue
                }
            }
        }
        if !errors.isEmpty { throw validation(c, errors.sorted { $0.0 < $1.0 }) }
        return values
    }

    // MARK: - Cursors

    /// Opaque, tamper-resistant cursors bound to operation, viewer and filters (api-contract.md
    /// § Query and pagination conventions; Go: cursor.go shape `<base64url body>.<base64url mac>`).
    /// A malformed, tampered or foreign cursor is 400 invalid_cursor.
    private func encodeCursor(scope: String, offset: Int) -> String {
        let body = Array("{\"v\":1,\"p\":{\"o\":\(offset)}}".utf8)
        let mac = siloHMACSHA256(key: cursorKey, message: Array(scope.utf8) + [0] + body)
        return siloBase64URL(body) + "." + siloBase64URL(mac)
    }

    private func decodeCursor(_ c: SiloCtx, scope: String) throws -> Int {
        guard let cursor = c.query["cursor"], !cursor.isEmpty else { return 0 }
        let invalid = problem(c, .invalidCursor, "The cursor is malformed, tampered with, or belongs to a different query.")
        let parts = cursor.split(separator: ".", omittingEmptySubsequences: false).map(String.init)
        guard parts.count == 2, let body = siloFromBase64URL(parts[0]), let mac = siloFromBase64URL(parts[1]) else { throw invalid }
        guard siloConstantTimeEqual(mac, siloHMACSHA256(key: cursorKey, message: Array(scope.utf8) + [0] + body)) else { throw invalid }
        var parser = SiloJSONParser(body)
        guard let document = parser.parseDocument(), document["v"]?.intValue == 1,
            let offset = document["p"]?["o"]?.intValue, offset >= 0
        else { throw invalid }
        return Int(offset)
    }

    // MARK: - JSON documents

    private func json(_ value: SiloJ, status: Int = 200, cache: String = "no-store") -> HTTPServer.Response {
        // api-contract.md § HTTP representation: application/json without a charset parameter;
        // § Response caching: structured responses default to Cache-Control: no-store.
        HTTPServer.Response(
            status: status, headers: [("Content-Type", "application/json"), ("Cache-Control", cache)],
            body: .bytes(Array(value.serialized().utf8)))
    }

    private func noContent() -> HTTPServer.Response {
        HTTPServer.Response(status: 204, headers: [("Cache-Control", "no-store")])
    }

    private func pageJSON(_ next: String?) -> SiloJ {
        SiloJ.obj([("has_more", SiloJ.bool(next != nil)), ("next_cursor", SiloJ.optStr(next))])
    }

    private func tokenPairJSON(_ pair: SiloIssuedPair) -> SiloJ {
        SiloJ.obj([
            ("access_token", SiloJ.string(pair.access)),
            ("refresh_token", SiloJ.string(pair.refresh)),
            ("expires_in", SiloJ.num(configuration.accessTokenLifetime)),
            ("user", accountJSON())
        ])
    }

    private func accountJSON() -> SiloJ {
        let allowed: Bool = state.withLock { $0.downloadAllowed }
        return SiloJ.obj([
            ("id", SiloJ.string(userId)),
            ("username", SiloJ.string(configuration.username)),
            ("email", SiloJ.string(configuration.email)),
            ("role", SiloJ.string("user")),
            ("permissions", SiloJ.array([])),
            ("download_allowed", SiloJ.bool(allowed))
        ])
    }

    private var profiles: [SiloProfile] {
        [
            SiloProfile(id: primaryProfileId, name: configuration.primaryProfileName, pin: nil, isPrimary: true, isChild: false),
            SiloProfile(
                id: lockedProfileId, name: configuration.lockedProfileName, pin: configuration.lockedProfilePIN,
                isPrimary: false, isChild: true)
        ]
    }

    private func profileJSON(_ profile: SiloProfile) -> SiloJ {
        let stamp = SiloJ.string(siloInstant(catalog.addedAt))
        return SiloJ.obj([
            ("id", SiloJ.string(profile.id)),
            ("name", SiloJ.string(profile.name)),
            ("avatar", SiloJ.string("")),
            ("avatar_source", SiloJ.string("none")),
            ("has_pin", SiloJ.bool(profile.pin != nil)),
            ("is_child", SiloJ.bool(profile.isChild)),
            ("is_primary", SiloJ.bool(profile.isPrimary)),
            ("max_content_rating", SiloJ.string("")),
            ("quality_preference", SiloJ.string("")),
            ("language", SiloJ.string("")),
            ("preferred_metadata_language", SiloJ.string("")),
            ("subtitle_language", SiloJ.string("")),
            ("subtitle_mode", SiloJ.string("")),
            ("auto_skip_intro", SiloJ.bool(false)),
            ("auto_skip_credits", SiloJ.bool(false)),
            ("auto_skip_recap", SiloJ.bool(false)),
            ("auto_play_next_preview", SiloJ.bool(false)),
            ("show_forced_subtitles", SiloJ.bool(true)),
            ("library_restrictions_enabled", SiloJ.bool(false)),
            ("allowed_library_ids", SiloJ.array([])),
            ("max_playback_quality", SiloJ.string("")),
            ("created_at", stamp),
            ("updated_at", stamp)
        ])
    }

    /// A catalog card (Go: catalog_types.go CatalogItem; genres and keywords never null).
    private func cardMembers(_ node: SiloCatalog.Node) -> [(String, SiloJ?)] {
        let added = SiloJ.string(siloInstant(catalog.addedAt))
        switch node {
        case .movie(let movie):
            return [
                ("content_id", SiloJ.string(movie.contentId)), ("type", SiloJ.string("movie")), ("title", SiloJ.string(movie.title)),
                ("year", SiloJ.optNum(movie.year)), ("genres", SiloJ.array([])), ("keywords", SiloJ.array([])),
                ("status", SiloJ.string("matched")), ("added_at", added)
            ]
        case .series(let series):
            return [
                ("content_id", SiloJ.string(series.contentId)), ("play_content_id", SiloJ.optStr(series.episodes.first?.contentId)),
                ("type", SiloJ.string("series")), ("title", SiloJ.string(series.title)), ("year", SiloJ.optNum(series.year)),
                ("genres", SiloJ.array([])), ("keywords", SiloJ.array([])), ("status", SiloJ.string("matched")), ("added_at", added)
            ]
        case .season(let series, let number):
            return [
                ("content_id", SiloJ.string(series.seasonId(number))),
                ("play_content_id", SiloJ.optStr(series.episodes(inSeason: number).first?.contentId)),
                ("type", SiloJ.string("season")), ("title", SiloJ.string(siloSeasonTitle(number))),
                ("series_id", SiloJ.string(series.contentId)), ("series_title", SiloJ.string(series.title)),
                ("season_number", SiloJ.num(number)), ("genres", SiloJ.array([])), ("keywords", SiloJ.array([])),
                ("status", SiloJ.string("matched")), ("added_at", added)
            ]
        case .episode(let series, let episode):
            // An episode released by `release(episodeContentId:)` was added then.
            let arrived: Date? = state.withLock { $0.episodeAddedAt[episode.contentId] }
            return [
                ("content_id", SiloJ.string(episode.contentId)), ("type", SiloJ.string("episode")), ("title", SiloJ.string(episode.title)),
                ("series_id", SiloJ.string(series.contentId)), ("series_title", SiloJ.string(series.title)),
                ("season_number", SiloJ.num(episode.season)), ("episode_number", SiloJ.num(episode.number)),
                ("genres", SiloJ.array([])), ("keywords", SiloJ.array([])), ("status", SiloJ.string("matched")),
                ("added_at", arrived.map { SiloJ.string(siloInstant($0)) } ?? added)
            ]
        }
    }

    /// Go: catalog_items.go FileVersion. Probe facts the fixture does not know are empty/zero.
    private func fileVersionJSON(_ file: SiloCatalog.File) -> SiloJ {
        SiloJ.obj([
            ("file_id", SiloJ.string(file.id)),
            ("file_name", SiloJ.string(siloFileName(file.path))),
            ("resolution", SiloJ.string(configuration.resolutions[siloFileName(file.path)] ?? "")),
            ("codec_video", SiloJ.string("")),
            ("codec_audio", SiloJ.string("")),
            ("hdr", SiloJ.bool(false)),
            ("container", SiloJ.string(file.container)),
            ("file_size", SiloJ.int(fileInfo(file.path)?.size ?? 0)),
            ("duration", SiloJ.num(0)),
            ("bitrate", SiloJ.num((file.bitrate ?? 0) / 1000)),
            ("added_at", SiloJ.string(siloInstant(catalog.addedAt))),
            ("edition_raw", SiloJ.optStr(file.label))
        ])
    }

    /// Go: catalog_items.go Episode with EpisodeFile rows.
    private func episodeJSON(_ episode: SiloCatalog.Episode) -> SiloJ {
        var files: [SiloJ] = []
        if let file = catalog.files[episode.fileId] {
            files.append(
                SiloJ.obj([
                    ("file_id", SiloJ.string(file.id)),
                    ("hdr", SiloJ.bool(false)),
                    ("container", SiloJ.string(file.container)),
                    ("file_size", SiloJ.int(fileInfo(file.path)?.size ?? 0))
                ]))
        }
        return SiloJ.obj([
            ("content_id", SiloJ.string(episode.contentId)),
            ("season_number", SiloJ.num(episode.season)),
            ("episode_number", SiloJ.num(episode.number)),
            ("title", SiloJ.string(episode.title)),
            ("runtime", SiloJ.num(0)),
            ("files", SiloJ.array(files))
        ])
    }

    /// Go: catalog_items.go Season.
    private func seasonJSON(_ series: SiloCatalog.Series, _ number: Int) -> SiloJ {
        let episodes = series.episodes(inSeason: number)
        return SiloJ.obj([
            ("content_id", SiloJ.string(series.seasonId(number))),
            ("play_content_id", SiloJ.optStr(episodes.first?.contentId)),
            ("season_number", SiloJ.num(number)),
            ("is_specials", number == 0 ? SiloJ.bool(true) : nil),
            ("title", SiloJ.string(siloSeasonTitle(number))),
            ("episode_count", SiloJ.num(episodes.count))
        ])
    }

    private func publicBase() -> String {
        origin.withLock { $0 } + basePath
    }

    // MARK: - Log and faults

    private func beginLog(_ request: HTTPServer.Request) -> (Int, String) {
        var query = request.query
        if query["token"] != nil { query["token"] = "redacted" }
        let credential: String?
        if let authorization = request.headers["authorization"] {
            let value = authorization.split(separator: " ", maxSplits: 1).last.map { String($0) } ?? ""
            credential = value.hasPrefix("sa_") ? "api-key" : "bearer"
        } else if request.query["token"] != nil {
            credential = "query-token"
        } else {
            credential = nil
        }
        let entryQuery = query
        return state.withLock { s in
            s.nextLogId += 1
            let id = s.nextLogId
            s.log.append(
                SiloLoggedRequest(
                    id: id, method: request.method, path: request.path, query: entryQuery,
                    range: request.headers["range"], ifRange: request.headers["if-range"],
                    credential: credential, authorized: credential != nil,
                    deviceId: request.headers["x-silo-device-id"],
                    deviceName: request.headers["x-silo-device-name"],
                    devicePlatform: request.headers["x-silo-device-platform"],
                    profileId: request.headers["x-profile-id"],
                    sentProfileToken: request.headers["x-profile-token"] != nil,
                    status: 0, bytesSent: 0))
            let digits = String(id)
            return (id, String(repeating: "0", count: max(0, 24 - digits.count)) + digits)
        }
    }

    private func takeFault(_ candidates: [String]) -> FixtureFault? {
        state.withLock { s in
            guard let i = s.faults.firstIndex(where: { rule in candidates.contains { $0.hasPrefix(rule.prefix) } }) else { return nil }
            let fault = s.faults[i].fault
            if let remaining = s.faults[i].remaining {
                if remaining <= 1 { s.faults.remove(at: i) } else { s.faults[i].remaining = remaining - 1 }
            }
            return fault
        }
    }

    private func decideDevice(_ userCode: String?, to status: String) -> Bool {
        let wanted = userCode.map(siloNormalizeUserCode)
        let now = Date()
        return state.withLock { s in
            guard let i = s.deviceRequests.lastIndex(where: { $0.effectiveStatus(now) == "pending" && (wanted == nil || $0.userCode == wanted) }) else {
                return false
            }
            s.deviceRequests[i].status = status
            return true
        }
    }
}

// MARK: - Routing and request context

fileprivate struct SiloCtx: Sendable {
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

/// A refusal carries its finished problem response through `throws`.
fileprivate struct SiloRefusal: Error {
    let response: HTTPServer.Response
}

fileprivate struct SiloMember {
    /// `array` checks only that the member is a JSON array; the handler checks its items.
    enum Kind { case string, int, bool, object, array }

    let name: String
    let kind: Kind
    let required: Bool
    let minLength: Int
    let maxLength: Int
    let oneOf: [String]?
    let minimum: Int64?
    let maximum: Int64?

    init(
        _ name: String, _ kind: Kind, required: Bool = false, minLength: Int = 0, maxLength: Int = .max,
        oneOf: [String]? = nil, minimum: Int64? = nil, maximum: Int64? = nil
    ) {
        self.name = name
        self.kind = kind
        self.required = required
        self.minLength = minLength
        self.maxLength = maxLength
        self.oneOf = oneOf
        self.minimum = minimum
        self.maximum = maximum
    }
}

/// The shared problem catalog (Go: problem.go; token_refresh_required from auth-api.md).
fileprivate struct SiloProblem: Sendable {
    let id: String
    let status: Int
    let title: String

    static let malformedRequest = SiloProblem(id: "malformed_request", status: 400, title: "Malformed request")
    static let invalidCursor = SiloProblem(id: "invalid_cursor", status: 400, title: "Invalid cursor")
    static let authenticationRequired = SiloProblem(id: "authentication_required", status: 401, title: "Authentication required")
    static let invalidToken = SiloProblem(id: "invalid_token", status: 401, title: "Invalid token")
    static let sessionExpired = SiloProblem(id: "session_expired", status: 401, title: "Session expired")
    static let tokenRefreshRequired = SiloProblem(id: "token_refresh_required", status: 401, title: "Token refresh required")
    static let permissionDenied = SiloProblem(id: "permission_denied", status: 403, title: "Permission denied")
    static let profileVerificationRequired = SiloProblem(id: "profile_verification_required", status: 403, title: "Profile verification required")
    static let notFound = SiloProblem(id: "not_found", status: 404, title: "Not found")
    static let methodNotAllowed = SiloProblem(id: "method_not_allowed", status: 405, title: "Method not allowed")
    static let notAcceptable = SiloProblem(id: "not_acceptable", status: 406, title: "Not acceptable")
    static let requestTimeout = SiloProblem(id: "request_timeout", status: 408, title: "Request timeout")
    static let conflict = SiloProblem(id: "conflict", status: 409, title: "Conflict")
    static let deviceLoginExpired = SiloProblem(id: "device_login_expired", status: 410, title: "Device login expired")
    static let clientUpgradeRequired = SiloProblem(id: "client_upgrade_required", status: 410, title: "Client upgrade required")
    static let preconditionFailed = SiloProblem(id: "precondition_failed", status: 412, title: "Precondition failed")
    static let payloadTooLarge = SiloProblem(id: "payload_too_large", status: 413, title: "Payload too large")
    static let unsupportedMediaType = SiloProblem(id: "unsupported_media_type", status: 415, title: "Unsupported media type")
    static let rangeNotSatisfiable = SiloProblem(id: "range_not_satisfiable", status: 416, title: "Range not satisfiable")
    static let validationFailed = SiloProblem(id: "validation_failed", status: 422, title: "Validation failed")
    static let preconditionRequired = SiloProblem(id: "precondition_required", status: 428, title: "Precondition required")
    static let rateLimited = SiloProblem(id: "rate_limited", status: 429, title: "Rate limited")
    static let internalError = SiloProblem(id: "internal_error", status: 500, title: "Internal error")
    static let capabilityUnsupported = SiloProblem(id: "capability_unsupported", status: 501, title: "Capability unsupported")
    static let dependencyUnavailable = SiloProblem(id: "dependency_unavailable", status: 503, title: "Dependency unavailable")

    /// The catalog type a bare status maps to (Go: problem.go TypeForStatus), for injected faults.
    static func forStatus(_ status: Int) -> SiloProblem {
        switch status {
        case 400: return .malformedRequest
        case 401: return .authenticationRequired
        case 403: return .permissionDenied
        case 404: return .notFound
        case 405: return .methodNotAllowed
        case 406: return .notAcceptable
        case 408: return .requestTimeout
        case 409: return .conflict
        case 410: return .clientUpgradeRequired
        case 412: return .preconditionFailed
        case 413: return .payloadTooLarge
        case 415: return .unsupportedMediaType
        case 416: return .rangeNotSatisfiable
        case 422: return .validationFailed
        case 428: return .preconditionRequired
        case 429: return .rateLimited
        case 501: return .capabilityUnsupported
        case 503: return .dependencyUnavailable
        default: return .internalError
        }
    }
}

// MARK: - Mutable state

fileprivate struct SiloState: Sendable {
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
    var progress: [SiloProgressRow] = []
    /// `changeSubscriptionAtNextSync(id:mode:)`: armed until a sync arrives.
    var changeAtNextSync: (id: String, mode: String)? = nil

    mutating func openSession(deviceName: String, now: Date, lifetime: Int) -> SiloIssuedPair {
        counter += 1
        let sessionId = "ses_\(counter)_" + siloRandomHex(6)
        sessions[sessionId] = SiloSession(id: sessionId, deviceName: deviceName, createdAt: now, revoked: false)
        return mint(sessionId: sessionId, now: now, lifetime: lifetime)
    }

    mutating func mint(sessionId: String, now: Date, lifetime: Int) -> SiloIssuedPair {
        let access = "at_" + siloRandomHex(24)
        let refresh = "rt_" + siloRandomHex(24)
        accessTokens[access] = SiloAccessToken(
            sessionId: sessionId, expiresAt: now.addingTimeInterval(TimeInterval(lifetime)),
            roleEpoch: roleEpoch)
        refreshTokens[refresh] = sessionId
        return SiloIssuedPair(access: access, refresh: refresh)
    }

    mutating func newRow(
        profileId: String, deviceId: String?, contentId: String, episodeId: String?, fileId: String,
        quality: String, size: Int64, batchId: String?, now: Date, polls: Int
    ) -> SiloDownloadRow {
        counter += 1
        let original = quality == "original"
        return SiloDownloadRow(
            id: "dl_\(counter)", contentId: contentId, episodeId: episodeId, batchId: batchId,
            deviceId: deviceId, profileId: profileId, mediaFileId: fileId, fileSize: size,
            kind: deviceId == nil ? "direct" : "queued", status: original ? "ready" : "preparing",
            quality: quality, deliveryFormat: original ? "original" : "transcode",
            targetBitrateKbps: siloQualityInfo(quality).kbps, revision: 1, createdAt: now, seq: counter,
            completedAt: nil, statusEventAt: nil, pollsUntilReady: original ? 0 : max(1, polls))
    }

    /// downloads-api.md § 4.1 / § 15 Download creation: the managed single-item guard.
    mutating func createSingle(
        profileId: String, deviceId: String?, target: SiloDownloadTarget, quality: String, size: Int64,
        expectedRevision: Int?, expectedDownloadId: String?, now: Date, polls: Int
    ) -> SiloCreateOutcome {
        let lose = loseNextCreate
        guard let deviceId else {
            let row = newRow(
                profileId: profileId, deviceId: nil, contentId: target.contentId, episodeId: target.episodeId,
                fileId: target.fileId, quality: quality, size: size, batchId: nil, now: now, polls: polls)
            downloads.append(row)
            loseNextCreate = false
            return .created(row, lose)
        }
        let existing = downloads.firstIndex {
            $0.profileId == profileId && $0.deviceId == deviceId && $0.contentId == target.contentId && $0.episodeId == target.episodeId
        }
        let expected = expectedRevision ?? 0
        if expected == 0 {
            guard existing == nil else { return .conflict }
            let row = newRow(
                profileId: profileId, deviceId: deviceId, contentId: target.contentId, episodeId: target.episodeId,
                fileId: target.fileId, quality: quality, size: size, batchId: nil, now: now, polls: polls)
            downloads.append(row)
            loseNextCreate = false
            return .created(row, lose)
        }
        guard let i = existing, downloads[i].id == expectedDownloadId, downloads[i].revision == expected else { return .conflict }
        let current = downloads[i]
        if current.mediaFileId == target.fileId && current.quality == quality && current.status != "revoked" && current.status != "failed" {
            loseNextCreate = false
            return .created(current, lose)
        }
        var replaced = current
        let original = quality == "original"
        replaced.revision += 1
        replaced.mediaFileId = target.fileId
        replaced.fileSize = size
        replaced.quality = quality
        replaced.deliveryFormat = original ? "original" : "transcode"
        replaced.targetBitrateKbps = siloQualityInfo(quality).kbps
        replaced.status = original ? "ready" : "preparing"
        replaced.pollsUntilReady = original ? 0 : max(1, polls)
        replaced.completedAt = nil
        replaced.statusEventAt = nil
        downloads[i] = replaced
        loseNextCreate = false
        return .created(replaced, lose)
    }

    /// downloads-api.md § 4.1 / § 15: one bounded batch page. Existing entries are preserved
    /// unless `expected_entries` guards them; episodes without a file are skipped as `no_file`.
    mutating func createBatchPage(
        profileId: String, deviceId: String?, seriesId: String, batchId: String,
        candidates: [SiloBatchCandidate], guards: [String: SiloEntryGuard], now: Date
    ) -> SiloBatchOutcome {
        let lose = loseNextCreate
        var rows: [SiloDownloadRow] = []
        var skipped: [(String, String)] = []
        for candidate in candidates {
            guard let size = candidate.size else {
                skipped.append((candidate.episodeId, "no_file"))
                continue
            }
            let existing = downloads.firstIndex {
                $0.profileId == profileId && $0.deviceId == deviceId && $0.contentId == seriesId && $0.episodeId == candidate.episodeId
            }
            if let entryGuard = guards[candidate.episodeId] {
                if entryGuard.revision == 0 {
                    guard existing == nil else { return .conflict }
                } else {
                    guard let i = existing, downloads[i].id == entryGuard.id, downloads[i].revision == entryGuard.revision else {
                        return .conflict
                    }
                    var replaced = downloads[i]
                    replaced.revision += 1
                    replaced.batchId = batchId
                    replaced.mediaFileId = candidate.fileId
                    replaced.fileSize = size
                    replaced.quality = "original"
                    replaced.deliveryFormat = "original"
                    replaced.targetBitrateKbps = 0
                    replaced.status = "ready"
                    replaced.pollsUntilReady = 0
                    replaced.completedAt = nil
                    replaced.statusEventAt = nil
                    downloads[i] = replaced
                    rows.append(replaced)
                    continue
                }
            } else if let i = existing {
                rows.append(downloads[i])
                continue
            }
            let row = newRow(
                profileId: profileId, deviceId: deviceId, contentId: seriesId, episodeId: candidate.episodeId,
                fileId: candidate.fileId, quality: "original", size: size, batchId: batchId, now: now, polls: 0)
            downloads.append(row)
            rows.append(row)
        }
        loseNextCreate = false
        return .page(rows, skipped, lose)
    }

    /// The rows a list shows (managed: profile and device; ephemeral: the account's device-less
    /// rows), newest first. Each listing moves preparing rows one poll closer to ready.
    mutating func listRows(profileId: String, deviceId: String?) -> [SiloDownloadRow] {
        for i in downloads.indices where siloInScope(downloads[i], profileId: profileId, deviceId: deviceId) && downloads[i].status == "preparing" {
            downloads[i].pollsUntilReady -= 1
            if downloads[i].pollsUntilReady <= 0 { downloads[i].status = "ready" }
        }
        return downloads.filter { siloInScope($0, profileId: profileId, deviceId: deviceId) }
            .sorted { ($0.createdAt, $0.seq) > ($1.createdAt, $1.seq) }
    }

    /// downloads-api.md § 4.3: a revision-bound, last-write-wins status event.
    mutating func reportStatus(
        id: String, profileId: String, deviceId: String, status: String, updatedAt: Date,
        revision: Int, now: Date
    ) -> SiloStatusOutcome {
        guard let i = downloads.firstIndex(where: { $0.id == id && $0.profileId == profileId && $0.deviceId == deviceId }) else {
            return .notFound
        }
        let row = downloads[i]
        guard row.revision == revision else {
            return .conflict("The download revision changed; reload the registry before reporting new events.")
        }
        guard row.status != "preparing", row.status != "failed", row.status != "revoked" else {
            return .conflict("The download is not in a state a client event can change.")
        }
        if let last = row.statusEventAt, updatedAt <= last { return .entry(row) }
        downloads[i].status = status
        downloads[i].statusEventAt = updatedAt
        if status == "completed" { downloads[i].completedAt = now }
        return .entry(downloads[i])
    }
}

extension SiloState {
    /// downloads-api.md § 4.4: deleting an episode of a series this device monitors stops that
    /// monitor registering it again (Go: downloads/repo.go DeleteManaged records the exclusion
    /// with the delete). Exclusions are not part of the monitor's validator.
    mutating func excludeFromMonitors(_ row: SiloDownloadRow) {
        guard let deviceId = row.deviceId, let episodeId = row.episodeId else { return }
        for i in subscriptions.indices
        where subscriptions[i].profileId == row.profileId && subscriptions[i].deviceId == deviceId && subscriptions[i].seriesId == row.contentId {
            subscriptions[i].excluded.insert(episodeId)
        }
    }

    /// downloads-api.md § 4.4: "Creating a download for the episode, its season or its series
    /// re-allows it" (Go: downloads/repo.go ClearMonitorExclusions).
    mutating func forgetMonitorExclusions(profileId: String, deviceId: String, seriesId: String, episodeIds: [String]) {
        guard !episodeIds.isEmpty else { return }
        for i in subscriptions.indices
        where subscriptions[i].profileId == profileId && subscriptions[i].deviceId == deviceId && subscriptions[i].seriesId == seriesId {
            subscriptions[i].excluded.subtract(episodeIds)
        }
    }

    /// One bounded sync page (downloads-api.md § 8.2, § 15; Go: downloads/subscription_sync_page.go
    /// SyncSubscriptionPage under the monitor lock, subscription_service.go
    /// registerSubscriptionItems and capItemsToStorage): the monitor must still carry `etag`; an
    /// episode registers when the monitor covers it, it has a file, the device has no entry for it,
    /// it was not deleted under the monitor and (delete_watched) the profile has not completed it,
    /// while the cap admits it — the first episode past the cap ends the page's registrations.
    mutating func registerMonitorPage(
        subscriptionId: String, profileId: String, deviceId: String, etag: String,
        candidates: [SiloMonitorCandidate], now: Date
    ) -> SiloSyncOutcome {
        guard let monitor = subscriptions.first(where: { $0.id == subscriptionId && $0.profileId == profileId && $0.deviceId == deviceId }) else {
            return .notFound
        }
        guard monitor.etag == etag else { return .stale }
        guard monitor.active else { return .registered(0) }
        var used: Int64 = downloads.filter { $0.profileId == profileId && $0.deviceId == deviceId }.reduce(0) { $0 + $1.fileSize }
        var registered = 0
        for candidate in candidates {
            guard monitor.covers(season: candidate.season, addedAt: episodeAddedAt[candidate.episodeId]),
                !candidate.fileId.isEmpty, let size = candidate.size
            else { continue }
            if monitor.excluded.contains(candidate.episodeId) { continue }
            if monitor.deleteWatched
                && progress.contains(where: {
                    $0.profileId == profileId && $0.mediaItemId == candidate.episodeId && $0.completed
                })
            {
                continue
            }
            if downloads.contains(where: {
                $0.profileId == profileId && $0.deviceId == deviceId && $0.contentId == monitor.seriesId && $0.episodeId == candidate.episodeId
            }) {
                continue
            }
            if monitor.maxStorageBytes > 0 && used + size > monitor.maxStorageBytes { break }
            used += size
            let row = newRow(
                profileId: profileId, deviceId: deviceId, contentId: monitor.seriesId, episodeId: candidate.episodeId,
                fileId: candidate.fileId, quality: "original", size: size, batchId: monitor.id, now: now, polls: 0)
            downloads.append(row)
            registered += 1
        }
        return .registered(registered)
    }

    /// Creates or updates `profileId`'s progress on `mediaItemId` through `change`, stamped now and
    /// moved to the front of listProgress's order.
    mutating func recordProgress(profileId: String, mediaItemId: String, now: Date, _ change: (inout SiloProgressRow) -> Void) {
        counter += 1
        let index: Int
        if let found = progress.firstIndex(where: { $0.profileId == profileId && $0.mediaItemId == mediaItemId }) {
            index = found
        } else {
            progress.append(
                SiloProgressRow(
                    profileId: profileId, mediaItemId: mediaItemId, positionSeconds: 0, durationSeconds: 0,
                    completed: false, updatedAt: now, seq: counter))
            index = progress.count - 1
        }
        change(&progress[index])
        progress[index].updatedAt = now
        progress[index].seq = counter
    }
}

/// Managed rows are scoped to (profile, device); ephemeral rows (no device) to the account.
fileprivate func siloInScope(_ row: SiloDownloadRow, profileId: String, deviceId: String?) -> Bool {
    guard let deviceId else { return row.deviceId == nil }
    return row.deviceId == deviceId && row.profileId == profileId
}

fileprivate struct SiloFaultRule: Sendable {
    let fault: FixtureFault
    let prefix: String
    var remaining: Int?
}

fileprivate struct SiloSession: Sendable {
    let id: String
    let deviceName: String
    let createdAt: Date
    var revoked: Bool
}

fileprivate struct SiloAccessToken: Sendable {
    let sessionId: String
    var expiresAt: Date
    let roleEpoch: Int
}

fileprivate struct SiloProfileGrant: Sendable {
    let profileId: String
    let bindingKey: String
}

fileprivate struct SiloHashEntry: Sendable {
    let key: String
    let hex: String
}

fileprivate struct SiloIssuedPair: Sendable {
    let access: String
    let refresh: String
}

fileprivate enum SiloCredentialKind: Sendable { case accessToken, apiKey, queryToken }

fileprivate struct SiloPrincipal: Sendable {
    /// nil for an API key (it has no login session).
    let sessionId: String?
    let credential: SiloCredentialKind
    /// What a profile token is bound to: the login session, or the API key.
    var bindingKey: String { sessionId ?? "api-key" }
}

fileprivate enum SiloAccessVerdict: Sendable { case valid(String), invalid, sessionGone, refreshRequired }
fileprivate enum SiloRefreshOutcome: Sendable { case invalid, revoked, issued(SiloIssuedPair) }
fileprivate enum SiloCreateOutcome: Sendable { case conflict, created(SiloDownloadRow, Bool) }
fileprivate enum SiloBatchOutcome: Sendable { case conflict, page([SiloDownloadRow], [(String, String)], Bool) }
fileprivate enum SiloStatusOutcome: Sendable { case notFound, conflict(String), entry(SiloDownloadRow) }

fileprivate struct SiloPollOutcome: Sendable {
    let status: String
    let opened: Bool
    let expiresAt: Date
    let pair: SiloIssuedPair?
}

fileprivate struct SiloDeviceRequest: Sendable {
    let deviceCode: String
    /// Eight digits, no separator (shown as 4821-7730).
    let userCode: String
    let browserCode: String
    let matchCode: String
    let deviceName: String
    let devicePlatform: String
    let clientPurpose: String
    let temporary: Bool
    let createdAt: Date
    var expiresAt: Date
    /// pending, approved, denied, consumed or canceled; `expired` is derived (device-login.md § States).
    var status: String
    var opened: Bool

    func effectiveStatus(_ now: Date) -> String {
        if (status == "pending" || status == "approved") && now >= expiresAt { return "expired" }
        return status
    }
}

fileprivate struct SiloDownloadRow: Sendable {
    var id: String
    var contentId: String
    var episodeId: String?
    var batchId: String?
    var deviceId: String?
    var profileId: String
    var mediaFileId: String
    var fileSize: Int64
    var kind: String
    var status: String
    var quality: String
    var deliveryFormat: String
    var targetBitrateKbps: Int
    var revision: Int
    var createdAt: Date
    var seq: Int
    var completedAt: Date?
    var statusEventAt: Date?
    var pollsUntilReady: Int
}

fileprivate struct SiloDownloadTarget: Sendable {
    let contentId: String
    let episodeId: String?
    let fileId: String
    let path: String
}

fileprivate struct SiloBatchCandidate: Sendable {
    let episodeId: String
    let fileId: String
    let path: String
    let size: Int64?
}

fileprivate struct SiloEntryGuard: Sendable {
    let id: String?
    let revision: Int
}

/// A series monitor (downloads-api.md § 8; Go: downloads/subscription.go Subscription), keyed on
/// (account, profile, device, series).
fileprivate struct SiloSubscription: Sendable {
    let id: String
    /// Creation order, the list's keyset.
    let seq: Int
    let profileId: String
    let deviceId: String
    let seriesId: String
    var mode: String
    /// Only for specific_seasons, else empty (Go: normalizeSeasons).
    var seasonNumbers: [Int]
    /// Only for latest_season: the highest season with episodes when anchored.
    var targetSeason: Int?
    var deleteWatched: Bool
    var maxStorageBytes: Int64
    var active: Bool
    /// Also the `future` cutoff, which edits preserve (§ 8.3).
    let createdAt: Date
    var updatedAt: Date
    /// The row version: one higher on every accepted change.
    var version: Int
    /// Episodes this device deleted while monitored (§ 4.4).
    var excluded: Set<String>

    /// The validator: a strong quoted tag over the whole persisted row, identity and full
    /// timestamp precision included (Go: download_subscriptions.go downloadSubscriptionOf hashes
    /// the row with SHA-256; api-contract.md § Optimistic concurrency: opaque, quoted, strong).
    var etag: String {
        var fields: [String] = [id, profileId, deviceId, seriesId, mode]
        fields.append(seasonNumbers.map { String($0) }.joined(separator: ","))
        fields.append(targetSeason.map { String($0) } ?? "-")
        fields.append(deleteWatched ? "1" : "0")
        fields.append(String(maxStorageBytes))
        fields.append(active ? "1" : "0")
        fields.append(String(createdAt.timeIntervalSince1970))
        fields.append(String(updatedAt.timeIntervalSince1970))
        fields.append(String(version))
        let digest = siloHexString(siloSHA256Digest(Array(fields.joined(separator: "\u{0}").utf8)))
        return "\"" + digest + "\""
    }

    /// Go: downloads/subscription.go CoversSeason and coversEpisode. `future` keeps only episodes
    /// that arrived after the monitor was created; an episode with no arrival time was there before.
    func covers(season: Int, addedAt: Date?) -> Bool {
        switch mode {
        case "all":
            return true
        case "future":
            guard let addedAt else { return false }
            return addedAt > createdAt
        case "latest_season":
            guard let target = targetSeason else { return false }
            return season >= target
        case "specific_seasons":
            return seasonNumbers.contains(season)
        default:
            return false
        }
    }

    /// A partial edit under the shared mode-change rules (downloads-api.md § 8.3; Go:
    /// downloads/subscription_service.go applySubscriptionPatch): seasons are kept only for
    /// specific_seasons, latest_season is re-anchored when the mode changes to it or it has no
    /// anchor, created_at stays. false (nothing changed) when specific_seasons would have no season.
    mutating func apply(
        mode newMode: String?, seasonNumbers newSeasons: [Int]?, deleteWatched newDeleteWatched: Bool?,
        maxStorageBytes newMaxStorageBytes: Int64?, active newActive: Bool?, latestSeason: Int?, now: Date
    ) -> Bool {
        var next = self
        var modeChanged = false
        if let newMode {
            modeChanged = newMode != next.mode
            next.mode = newMode
        }
        if let newSeasons { next.seasonNumbers = newSeasons }
        if let newDeleteWatched { next.deleteWatched = newDeleteWatched }
        if let newMaxStorageBytes { next.maxStorageBytes = newMaxStorageBytes }
        if let newActive { next.active = newActive }
        if next.mode == "specific_seasons" && next.seasonNumbers.isEmpty { return false }
        if next.mode != "specific_seasons" { next.seasonNumbers = [] }
        if next.mode == "latest_season" {
            if modeChanged || next.targetSeason == nil { next.targetSeason = latestSeason }
        } else {
            next.targetSeason = nil
        }
        next.updatedAt = max(now, updatedAt)
        next.version += 1
        self = next
        return true
    }
}

fileprivate struct SiloMonitorCandidate: Sendable {
    let episodeId: String
    let season: Int
    /// "" for an episode without a file.
    let fileId: String
    /// nil when the file is missing.
    let size: Int64?
}

fileprivate struct SiloProgressRow: Sendable {
    let profileId: String
    /// The movie's or episode's content id.
    let mediaItemId: String
    var positionSeconds: Double
    var durationSeconds: Double
    var completed: Bool
    var updatedAt: Date
    /// Server sequence of the latest change (listProgress order and cursor).
    var seq: Int
}

fileprivate enum SiloSyncOutcome: Sendable { case notFound, stale, registered(Int) }
fileprivate enum SiloGuardOutcome: Sendable { case notFound, required, stale(String), invalidSeasons, done(SiloSubscription) }
fileprivate enum SiloGuardVerdict: Sendable { case pass, required, stale }

/// downloads-api.md § 8.1 modes (and § 3 `monitoring_modes`).
fileprivate let siloMonitorModes = ["all", "future", "latest_season", "specific_seasons"]

/// api-contract.md § Optimistic concurrency (RFC 9110 § 13.2.2 order): no If-Match is 428; an
/// If-Match that does not strongly match (an empty one matches nothing) is 412; `*` is a
/// deliberate overwrite; then an If-None-Match that matches, or `*`, is 412.
fileprivate func siloGuard(ifMatch: String?, ifNoneMatch: String?, etag: String) -> SiloGuardVerdict {
    guard let ifMatch else { return .required }
    guard siloETagMatches(ifMatch, etag, weak: false) else { return .stale }
    if let ifNoneMatch, siloETagMatches(ifNoneMatch, etag, weak: true) { return .stale }
    return .pass
}

fileprivate struct SiloProfile: Sendable {
    let id: String
    let name: String
    let pin: String?
    let isPrimary: Bool
    let isChild: Bool
}

// MARK: - Quality presets

/// downloads-api.md § 1 Quality vs delivery format and § 3 (quality_options), with the ladder of
/// architecture/quality-ladder.md.
fileprivate let siloQualityPresets = ["original", "20mbps", "10mbps", "5mbps", "2mbps", "1mbps"]

fileprivate func siloQualityInfo(_ preset: String) -> (kbps: Int, maxHeight: Int) {
    switch preset {
    case "20mbps": return (20000, 2160)
    case "10mbps": return (10000, 1080)
    case "5mbps": return (5000, 1080)
    case "2mbps": return (2000, 720)
    case "1mbps": return (1000, 480)
    default: return (0, 0)
    }
}

// MARK: - Catalog model

/// The fixture catalog as Silo identities: libraries "1" (movies) and "2" (series), decimal file
/// ids, deterministic content ids.
fileprivate struct SiloCatalog: Sendable {
    struct File: Sendable {
        let id: String
        let path: String
        let container: String
        let label: String?
        let bitrate: Int?
    }

    struct Movie: Sendable {
        let contentId: String
        let title: String
        let year: Int?
        let fileIds: [String]
    }

    struct Episode: Sendable {
        let contentId: String
        let season: Int
        let number: Int
        let title: String
        let fileId: String
    }

    struct Series: Sendable {
        let contentId: String
        let title: String
        let year: Int?
        let episodes: [Episode]

        var seasons: [Int] { Array(Set(episodes.map(\.season))).sorted() }

        func seasonId(_ number: Int) -> String { contentId + "-S" + siloPad2(number) }

        func episodes(inSeason number: Int) -> [Episode] {
            episodes.filter { $0.season == number }.sorted { $0.number < $1.number }
        }
    }

    enum Node: Sendable {
        case movie(Movie)
        case series(Series)
        case season(Series, Int)
        case episode(Series, Episode)
    }

    let movieLibraryName: String
    let showLibraryName: String
    let movies: [Movie]
    let series: [Series]
    let files: [String: File]
    let addedAt: Date
    /// Offline artwork (downloads-api.md § 4.8 kinds `poster`, `backdrop`, `logo`) by a movie's or
    /// an episode's content id: kind → image file. See `init` for where each kind comes from.
    let artwork: [String: [String: String]]
    /// A media file's subtitles (FixtureCatalog.subtitles of its path), by file id, in catalog order.
    let subtitles: [String: [FixtureCatalog.Subtitle]]
    /// A movie's or episode's chapters in start order (those starting together in catalog order),
    /// by content id.
    let chapters: [String: [FixtureCatalog.Chapter]]
    /// Details.runtimeSeconds by movie or episode content id (ends the last chapter).
    let runtimes: [String: Int]

    init(_ source: FixtureCatalog) {
        var files: [String: File] = [:]
        var nextFileId = 1
        var usedIds = Set<String>()
        func unique(_ base: String) -> String {
            var id = base
            var n = 2
            while usedIds.contains(id) {
                id = base + "-\(n)"
                n += 1
            }
            usedIds.insert(id)
            return id
        }
        func addFile(_ path: String, _ container: String, _ label: String?, _ bitrate: Int?) -> String {
            let id = String(nextFileId)
            nextFileId += 1
            files[id] = File(id: id, path: path, container: container, label: label, bitrate: bitrate)
            return id
        }
        var artwork: [String: [String: String]] = [:]
        var subtitles: [String: [FixtureCatalog.Subtitle]] = [:]
        var chapters: [String: [FixtureCatalog.Chapter]] = [:]
        var runtimes: [String: Int] = [:]
        func addDetails(_ contentId: String, _ details: FixtureCatalog.Details) {
            if !details.chapters.isEmpty {
                chapters[contentId] = details.chapters.enumerated()
                    .sorted { ($0.element.start, $0.offset) < ($1.element.start, $1.offset) }.map(\.element)
            }
            if let runtime = details.runtimeSeconds { runtimes[contentId] = runtime }
        }
        func addSubtitles(_ fileId: String, _ path: String) {
            if let subs = source.subtitles[path], !subs.isEmpty { subtitles[fileId] = subs }
        }
        var movies: [Movie] = []
        for movie in source.movies {
            let contentId = unique("movie:" + siloSlug(movie.title) + (movie.year.map { "-\($0)" } ?? ""))
            var ids = [addFile(movie.file, movie.container, nil, movie.bitrate)]
            addSubtitles(ids[0], movie.file)
            for version in movie.versions {
                let ext = URL(fileURLWithPath: version.file).pathExtension
                ids.append(addFile(version.file, ext.isEmpty ? movie.container : ext, version.label, nil))
                addSubtitles(ids[ids.count - 1], version.file)
            }
            movies.append(Movie(contentId: contentId, title: movie.title, year: movie.year, fileIds: ids))
            // A movie's own images (the first of each kind, as the other fixtures serve them):
            // poster → `poster`, fanart → `backdrop`, logo → `logo` (downloads-api.md § 4.8).
            var kinds: [String: String] = [:]
            for art in source.movieArtwork[movie.file] ?? [] {
                let kind: String
                switch art.kind {
                case .poster: kind = "poster"
                case .fanart: kind = "backdrop"
                case .logo: kind = "logo"
                }
                if kinds[kind] == nil { kinds[kind] = art.file }
            }
            if !kinds.isEmpty { artwork[contentId] = kinds }
            addDetails(contentId, movie.details)
        }
        var series: [Series] = []
        for show in source.series {
            let contentId = unique("series:" + siloSlug(show.name))
            let stem = String(contentId.dropFirst("series:".count))
            var episodes: [Episode] = []
            for episode in show.episodes {
                let episodeId = unique("episode:" + stem + "-s" + siloPad2(episode.season) + "e" + siloPad2(episode.number))
                // An episode with no file ("" in the catalog) is listed with no files (catalog-api.md).
                let fileId = episode.file.isEmpty ? "" : addFile(episode.file, episode.container, nil, nil)
                episodes.append(
                    Episode(
                        contentId: episodeId, season: episode.season, number: episode.number, title: episode.title,
                        fileId: fileId))
                if !fileId.isEmpty { addSubtitles(fileId, episode.file) }
                // An episode's artwork: downloads-api.md says only "poster, backdrop, and logo when
                // available" (§ 1, § 4.8, § 6) and nothing of which image an episode's poster is.
                // Followed Go (internal/apiv2/download_manifests.go DownloadManifest: "poster is the
                // episode still"; internal/downloads/manifest.go uses the episode's own item
                // detail): `poster` is the episode's thumbnail; the catalog has no episode backdrop
                // or logo, so those are absent. Go's extra `series_poster` kind is not in the spec's
                // kinds (§ 4.8), so the fixture has none (the spec wins).
                if !episode.file.isEmpty, let thumb = source.episodeThumbs[episode.file] { artwork[episodeId] = ["poster": thumb] }
                addDetails(episodeId, episode.details)
            }
            episodes.sort { ($0.season, $0.number) < ($1.season, $1.number) }
            series.append(Series(contentId: contentId, title: show.name, year: show.year, episodes: episodes))
        }
        self.movieLibraryName = source.movieLibrary
        self.showLibraryName = source.showLibrary
        self.movies = movies
        self.series = series
        self.files = files
        self.addedAt = Date(timeIntervalSince1970: 1_767_225_600)
        self.artwork = artwork
        self.subtitles = subtitles
        self.chapters = chapters
        self.runtimes = runtimes
    }

    func node(_ id: String) -> Node? {
        if let movie = movies.first(where: { $0.contentId == id }) { return .movie(movie) }
        for show in series {
            if show.contentId == id { return .series(show) }
            if let episode = show.episodes.first(where: { $0.contentId == id }) { return .episode(show, episode) }
            for number in show.seasons where show.seasonId(number) == id { return .season(show, number) }
        }
        return nil
    }

    func files(of node: Node) -> [File] {
        switch node {
        case .movie(let movie): return movie.fileIds.compactMap { files[$0] }
        case .episode(_, let episode): return files[episode.fileId].map { [$0] } ?? []
        default: return []
        }
    }

    /// The cards a browse lists: movies in library "1", series in library "2" (an unscoped
    /// browse lists no episodes, catalog-api.md § Search media scopes).
    func browse(libraryId: String?, type: String?, query: String?, source: String?) -> [Node] {
        if let source, source != "query" { return [] }
        let wantMovies = libraryId == nil || libraryId == "1"
        let wantSeries = libraryId == nil || libraryId == "2"
        var nodes: [Node] = []
        switch type ?? "" {
        case "", "video", "video_with_episodes":
            if wantMovies { nodes += movies.map { Node.movie($0) } }
            if wantSeries { nodes += series.map { Node.series($0) } }
        case "movie":
            if wantMovies { nodes += movies.map { Node.movie($0) } }
        case "series":
            if wantSeries { nodes += series.map { Node.series($0) } }
        default:
            break
        }
        if let needle = query?.lowercased(), !needle.isEmpty {
            nodes = nodes.filter { title($0).lowercased().contains(needle) }
        }
        return nodes
    }

    func title(_ node: Node) -> String {
        switch node {
        case .movie(let movie): return movie.title
        case .series(let show): return show.title
        case .season(_, let number): return siloSeasonTitle(number)
        case .episode(_, let episode): return episode.title
        }
    }

    func contentId(_ node: Node) -> String {
        switch node {
        case .movie(let movie): return movie.contentId
        case .series(let show): return show.contentId
        case .season(let show, let number): return show.seasonId(number)
        case .episode(_, let episode): return episode.contentId
        }
    }

    func sortKey(_ node: Node, _ field: String) -> String {
        switch field {
        case "year":
            let year: Int
            switch node {
            case .movie(let movie): year = movie.year ?? 0
            case .series(let show): year = show.year ?? 0
            default: year = 0
            }
            let digits = String(year)
            return String(repeating: "0", count: max(0, 6 - digits.count)) + digits + title(node).lowercased()
        case "added_at":
            return ""
        default:
            return title(node).lowercased()
        }
    }
}

fileprivate func siloSeasonTitle(_ number: Int) -> String { number == 0 ? "Specials" : "Season \(number)" }

/// `node` as the server shows it while `held` episodes are not there yet: a season or series they
/// leave without an episode is not there either. Nothing held: unchanged.
fileprivate func siloVisible(_ node: SiloCatalog.Node, held: Set<String>) -> SiloCatalog.Node? {
    if held.isEmpty { return node }
    switch node {
    case .movie:
        return node
    case .series(let show):
        guard let shown = siloVisibleSeries(show, held) else { return nil }
        return SiloCatalog.Node.series(shown)
    case .season(let show, let number):
        guard let shown = siloVisibleSeries(show, held), shown.seasons.contains(number) else { return nil }
        return SiloCatalog.Node.season(shown, number)
    case .episode(let show, let episode):
        guard !held.contains(episode.contentId), let shown = siloVisibleSeries(show, held) else { return nil }
        return SiloCatalog.Node.episode(shown, episode)
    }
}

fileprivate func siloVisibleSeries(_ show: SiloCatalog.Series, _ held: Set<String>) -> SiloCatalog.Series? {
    guard show.episodes.contains(where: { held.contains($0.contentId) }) else { return show }
    let kept = show.episodes.filter { !held.contains($0.contentId) }
    if kept.isEmpty { return nil }
    return SiloCatalog.Series(contentId: show.contentId, title: show.title, year: show.year, episodes: kept)
}

/// libraries-api.md via the fixture's libraries: "1" holds the movies, "2" the series.
fileprivate func siloLibraryId(_ node: SiloCatalog.Node) -> String {
    if case .movie = node { return "1" }
    return "2"
}

// MARK: - JSON

/// A JSON value that keeps member order, for exact, deterministic documents.
fileprivate enum SiloJ: Sendable {
    case null
    case bool(Bool)
    case int(Int64)
    case double(Double)
    case string(String)
    case array([SiloJ])
    case object([(String, SiloJ)])

    /// An object; nil members are omitted (Go `omitempty`), `J.null` members are written.
    static func obj(_ members: [(String, SiloJ?)]) -> SiloJ {
        .object(members.compactMap { member in member.1.map { (member.0, $0) } })
    }

    static func num(_ value: Int) -> SiloJ { .int(Int64(value)) }
    static func optNum(_ value: Int?) -> SiloJ? { value.map { SiloJ.int(Int64($0)) } }
    static func optStr(_ value: String?) -> SiloJ? { value.map { SiloJ.string($0) } }
    static func strings(_ values: [String]) -> SiloJ { SiloJ.array(values.map { SiloJ.string($0) }) }

    subscript(key: String) -> SiloJ? {
        guard case .object(let members) = self else { return nil }
        return members.last(where: { $0.0 == key })?.1
    }

    var stringValue: String? {
        if case .string(let value) = self { return value }
        return nil
    }

    var intValue: Int64? {
        if case .int(let value) = self { return value }
        return nil
    }

    var boolValue: Bool? {
        if case .bool(let value) = self { return value }
        return nil
    }

    func serialized() -> String {
        var out = ""
        write(into: &out)
        return out
    }

    func write(into out: inout String) {
        switch self {
        case .null:
            out += "null"
        case .bool(let value):
            out += value ? "true" : "false"
        case .int(let value):
            out += String(value)
        case .double(let value):
            if !value.isFinite {
                out += "null"
            } else if value == value.rounded() && abs(value) < 1e15 {
                out += String(Int64(value))
            } else {
                out += String(value)
            }
        case .string(let value):
            SiloJ.writeString(value, into: &out)
        case .array(let items):
            out += "["
            for (n, item) in items.enumerated() {
                if n > 0 { out += "," }
                item.write(into: &out)
            }
            out += "]"
        case .object(let members):
            out += "{"
            for (n, member) in members.enumerated() {
                if n > 0 { out += "," }
                SiloJ.writeString(member.0, into: &out)
                out += ":"
                member.1.write(into: &out)
            }
            out += "}"
        }
    }

    static func writeString(_ value: String, into out: inout String) {
        let digits = Array("0123456789abcdef")
        out += "\""
        for scalar in value.unicodeScalars {
            switch scalar {
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            case "\n": out += "\\n"
            case "\r": out += "\\r"
            case "\t": out += "\\t"
            default:
                if scalar.value < 0x20 {
                    out += "\\u00" + String(digits[Int(scalar.value >> 4)]) + String(digits[Int(scalar.value & 0x0F)])
                } else {
                    out.unicodeScalars.append(scalar)
                }
            }
        }
        out += "\""
    }
}

/// A strict RFC 8259 parser that keeps null distinct from absence and ints distinct from floats.
fileprivate struct SiloJSONParser {
    private let bytes: [UInt8]
    private var index = 0
    private var depth = 0

    init(_ bytes: [UInt8]) { self.bytes = bytes }

    mutating func parseDocument() -> SiloJ? {
        skipWhitespace()
        guard let value = parseValue() else { return nil }
        skipWhitespace()
        return index == bytes.count ? value : nil
    }

    private mutating func skipWhitespace() {
        while index < bytes.count {
            let byte = bytes[index]
            guard byte == 0x20 || byte == 0x0A || byte == 0x0D || byte == 0x09 else { return }
            index += 1
        }
    }

    private mutating func parseValue() -> SiloJ? {
        guard index < bytes.count else { return nil }
        switch bytes[index] {
        case 0x7B: return parseObject()
        case 0x5B: return parseArray()
        case 0x22: return parseString().map { SiloJ.string($0) }
        case 0x74: return parseLiteral("true", .bool(true))
        case 0x66: return parseLiteral("false", .bool(false))
        case 0x6E: return parseLiteral("null", .null)
        default: return parseNumber()
        }
    }

    private mutating func parseLiteral(_ word: String, _ value: SiloJ) -> SiloJ? {
        let expected = Array(word.utf8)
        guard index + expected.count <= bytes.count, Array(bytes[index..<(index + expected.count)]) == expected else { return nil }
        index += expected.count
        return value
    }

    private mutating func parseObject() -> SiloJ? {
        depth += 1
        defer { depth -= 1 }
        guard depth <= 64 else { return nil }
        index += 1
        var members: [(String, SiloJ)] = []
        skipWhitespace()
        if index < bytes.count, bytes[index] == 0x7D {
            index += 1
            return .object(members)
        }
        while index < bytes.count {
            skipWhitespace()
            guard index < bytes.count, bytes[index] == 0x22, let key = parseString() else { return nil }
            skipWhitespace()
            guard index < bytes.count, bytes[index] == 0x3A else { return nil }
            index += 1
            skipWhitespace()
            guard let value = parseValue() else { return nil }
            members.append((key, value))
            skipWhitespace()
            guard index < bytes.count else { return nil }
            if bytes[index] == 0x2C {
                index += 1
                continue
            }
            if bytes[index] == 0x7D {
                index += 1
                return .object(members)
            }
            return nil
        }
        return nil
    }

    private mutating func parseArray() -> SiloJ? {
        depth += 1
        defer { depth -= 1 }
        guard depth <= 64 else { return nil }
        index += 1
        var items: [SiloJ] = []
        skipWhitespace()
        if index < bytes.count, bytes[index] == 0x5D {
            index += 1
            return .array(items)
        }
        while index < bytes.count {
            skipWhitespace()
            guard let value = parseValue() else { return nil }
            items.append(value)
            skipWhitespace()
            guard index < bytes.count else { return nil }
            if bytes[index] == 0x2C {
                index += 1
                continue
            }
            if bytes[index] == 0x5D {
                index += 1
                return .array(items)
            }
            return nil
        }
        return nil
    }

    private mutating func parseString() -> String? {
        index += 1
        var out: [UInt8] = []
        while index < bytes.count {
            let byte = bytes[index]
            index += 1
            switch byte {
            case 0x22:
                return String(decoding: out, as: UTF8.self)
            case 0x5C:
                guard index < bytes.count else { return nil }
                let escape = bytes[index]
                index += 1
                switch escape {
                case 0x22: out.append(0x22)
                case 0x5C: out.append(0x5C)
                case 0x2F: out.append(0x2F)
                case 0x62: out.append(0x08)
                case 0x66: out.append(0x0C)
                case 0x6E: out.append(0x0A)
                case 0x72: out.append(0x0D)
                case 0x74: out.append(0x09)
                case 0x75:
                    guard var scalar = parseHex4() else { return nil }
                    if scalar >= 0xD800 && scalar < 0xDC00 {
                        guard index + 1 < bytes.count, bytes[index] == 0x5C, bytes[index + 1] == 0x75 else { return nil }
                        index += 2
                        guard let low = parseHex4(), low >= 0xDC00, low < 0xE000 else { return nil }
                        scalar = 0x10000 + ((scalar - 0xD800) << 10) + (low - 0xDC00)
                    }
                    guard let unicode = Unicode.Scalar(scalar) else { return nil }
                    out.append(contentsOf: Array(String(Character(unicode)).utf8))
                default:
                    return nil
                }
            default:
                if byte < 0x20 { return nil }
                out.append(byte)
            }
        }
        return nil
    }

    private mutating func parseHex4() -> UInt32? {
        guard index + 4 <= bytes.count else { return nil }
        var value: UInt32 = 0
        for _ in 0..<4 {
            let c = bytes[index]
            index += 1
            let digit: UInt32
            switch c {
            case 0x30...0x39: digit = UInt32(c - 0x30)
            case 0x41...0x46: digit = UInt32(c - 0x37)
            case 0x61...0x66: digit = UInt32(c - 0x57)
            default: return nil
            }
            value = (value << 4) | digit
        }
        return value
    }

    private mutating func parseNumber() -> SiloJ? {
        let start = index
        while index < bytes.count {
            let byte = bytes[index]
            let numeric = (byte >= 0x30 && byte <= 0x39) || byte == 0x2D || byte == 0x2B || byte == 0x2E || byte == 0x65 || byte == 0x45
            guard numeric else { break }
            index += 1
        }
        guard index > start else { return nil }
        let text = String(decoding: bytes[start..<index], as: UTF8.self)
        if !text.contains(where: { $0 == "." || $0 == "e" || $0 == "E" }), let value = Int64(text) { return .int(value) }
        if let value = Double(text), value.isFinite { return .double(value) }
        return nil
    }
}

// MARK: - HTTP helpers

/// api-contract.md § HTTP representation: missing Accept or */* accepts JSON; the most specific
/// matching media range decides (Go: gates.go acceptsJSON).
fileprivate func siloAcceptsJSON(_ accept: String) -> Bool {
    var bestSpecificity = 0
    var bestQuality = 0.0
    for part in accept.split(separator: ",") {
        let fields = part.split(separator: ";")
        guard let first = fields.first else { continue }
        let mediaType = first.trimmingCharacters(in: .whitespaces).lowercased()
        var quality = 1.0
        for parameter in fields.dropFirst() {
            let trimmed = parameter.trimmingCharacters(in: .whitespaces)
            if trimmed.hasPrefix("q="), let value = Double(trimmed.dropFirst(2)) { quality = value }
        }
        let specificity: Int
        switch mediaType {
        case "application/json": specificity = 3
        case "application/*": specificity = 2
        case "*/*": specificity = 1
        default: continue
        }
        if specificity > bestSpecificity {
            bestSpecificity = specificity
            bestQuality = quality
        }
    }
    return bestSpecificity > 0 && bestQuality > 0
}

fileprivate func siloIsJSONMediaType(_ value: String) -> Bool {
    let parts = value.split(separator: ";")
    guard let first = parts.first, first.trimmingCharacters(in: .whitespaces).lowercased() == "application/json" else { return false }
    for parameter in parts.dropFirst() {
        let pair = parameter.split(separator: "=", maxSplits: 1).map { $0.trimmingCharacters(in: .whitespaces).lowercased() }
        guard pair.count == 2, pair[0] == "charset",
            pair[1].trimmingCharacters(in: CharacterSet(charactersIn: "\"")) == "utf-8"
        else { return false }
    }
    return true
}

/// RFC 9110 § 13.1.1 / § 13.1.2 list matching: `*`, strong comparison for If-Match, weak for
/// If-None-Match.
fileprivate func siloETagMatches(_ header: String, _ etag: String, weak: Bool) -> Bool {
    for part in header.split(separator: ",") {
        var tag = part.trimmingCharacters(in: .whitespaces)
        if tag == "*" { return true }
        if tag.hasPrefix("W/") {
            guard weak else { continue }
            tag = String(tag.dropFirst(2))
        }
        if tag == etag { return true }
    }
    return false
}

fileprivate enum SiloRangeRequest {
    case whole
    case unsatisfiable
    case bytes(Int64, Int64)
}

/// One `bytes=` range. Several ranges (multipart/byteranges) are answered with the whole file.
fileprivate func siloParseRange(_ header: String, size: Int64) -> SiloRangeRequest {
    let value = header.trimmingCharacters(in: .whitespaces)
    guard value.lowercased().hasPrefix("bytes=") else { return .unsatisfiable }
    let spec = value.dropFirst(6)
    if spec.firstIndex(of: ",") != nil { return .whole }
    let parts = spec.split(separator: "-", maxSplits: 1, omittingEmptySubsequences: false)
        .map { $0.trimmingCharacters(in: .whitespaces) }
    guard parts.count == 2 else { return .unsatisfiable }
    if parts[0].isEmpty {
        guard let suffix = Int64(parts[1]), suffix > 0, size > 0 else { return .unsatisfiable }
        return .bytes(max(0, size - suffix), size - 1)
    }
    guard let start = Int64(parts[0]), start >= 0, start < size else { return .unsatisfiable }
    if parts[1].isEmpty { return .bytes(start, size - 1) }
    guard let end = Int64(parts[1]), end >= start else { return .unsatisfiable }
    return .bytes(start, min(end, size - 1))
}

fileprivate func siloMimeType(container: String, path: String) -> String {
    let key = (container.isEmpty ? URL(fileURLWithPath: path).pathExtension : container).lowercased()
    switch key {
    case "mp4", "m4v": return "video/mp4"
    case "mkv", "matroska": return "video/x-matroska"
    case "webm": return "video/webm"
    case "mov": return "video/quicktime"
    case "avi": return "video/x-msvideo"
    case "ts", "m2ts": return "video/mp2t"
    case "mp3": return "audio/mpeg"
    case "m4a": return "audio/mp4"
    default: return "application/octet-stream"
    }
}

/// An image's Content-Type from its first bytes (image/jpeg: FF D8 FF; image/png: the PNG
/// signature; image/gif: GIF8), else application/octet-stream. Go: download_delivery.go declares image/*.
fileprivate func siloImageType(_ head: [UInt8]) -> String {
    if head.starts(with: [0xFF, 0xD8, 0xFF]) { return "image/jpeg" }
    if head.starts(with: [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A]) { return "image/png" }
    if head.starts(with: Array("GIF8".utf8)) { return "image/gif" }
    return "application/octet-stream"
}

/// A subtitle's `format` (downloads-api.md § 6 shows "srt") from the catalog codec: srt (also
/// subrip), ass, ssa, vtt (webvtt), sup (pgssub, PGS: § 1 names a PGS sidecar `sup`), else the codec
/// lowercased.
fileprivate func siloSubtitleFormat(_ codec: String) -> String {
    switch codec.lowercased() {
    case "srt", "subrip": return "srt"
    case "webvtt", "vtt": return "vtt"
    case "pgssub", "pgs", "hdmv_pgs_subtitle", "sup": return "sup"
    case let other: return other
    }
}

/// The sidecar an embedded track is extracted as (downloads-api.md § 1 and § 4.9): ASS/SSA → `ass`,
/// PGS → `sup`; nil for every other codec (SRT and WebVTT travel inside the file; DVD and DVB
/// bitmaps are not carried).
fileprivate func siloSidecarFormat(_ codec: String) -> String? {
    switch codec.lowercased() {
    case "ass", "ssa": return "ass"
    case "pgssub", "pgs", "hdmv_pgs_subtitle": return "sup"
    default: return nil
    }
}

/// A subtitle answer's Content-Type, from the media types Go declares for the route
/// (download_delivery.go: application/x-subrip, text/vtt, text/x-ssa, application/octet-stream).
fileprivate func siloSubtitleType(_ format: String) -> String {
    switch format {
    case "srt": return "application/x-subrip; charset=utf-8"
    case "vtt": return "text/vtt; charset=utf-8"
    case "ass", "ssa": return "text/x-ssa; charset=utf-8"
    default: return "application/octet-stream"
    }
}

/// ISO 639-2 (bibliographic or terminology) → ISO 639-1, for `subtitles[].language` (downloads-api.md
/// § 6 shows "en"). A two-letter code is kept; a code this table does not know is passed as it is.
fileprivate func siloISO6391(_ code: String) -> String {
    let lower = code.lowercased()
    if lower.count == 2 { return lower }
    let table: [String: String] = [
        "eng": "en", "fre": "fr", "fra": "fr", "ger": "de", "deu": "de", "spa": "es", "ita": "it", "por": "pt",
        "dut": "nl", "nld": "nl", "swe": "sv", "nor": "no", "nob": "nb", "nno": "nn", "dan": "da", "fin": "fi",
        "ice": "is", "isl": "is", "pol": "pl", "cze": "cs", "ces": "cs", "slo": "sk", "slk": "sk", "slv": "sl",
        "hun": "hu", "rum": "ro", "ron": "ro", "bul": "bg", "hrv": "hr", "srp": "sr", "bos": "bs", "mac": "mk",
        "mkd": "mk", "alb": "sq", "sqi": "sq", "gre": "el", "ell": "el", "tur": "tr", "rus": "ru", "ukr": "uk",
        "bel": "be", "est": "et", "lav": "lv", "lit": "lt", "cat": "ca", "baq": "eu", "eus": "eu", "glg": "gl",
        "wel": "cy", "cym": "cy", "gle": "ga", "ara": "ar", "heb": "he", "per": "fa", "fas": "fa", "hin": "hi",
        "ben": "bn", "tam": "ta", "tel": "te", "urd": "ur", "tha": "th", "vie": "vi", "ind": "id", "may": "ms",
        "msa": "ms", "tgl": "tl", "chi": "zh", "zho": "zh", "jpn": "ja", "kor": "ko", "lat": "la"
    ]
    return table[lower] ?? code
}

fileprivate func siloFileName(_ path: String) -> String { URL(fileURLWithPath: path).lastPathComponent }

/// api-contract.md § Wire data representation: RFC 3339 UTC with `Z` and millisecond precision.
fileprivate func siloInstant(_ date: Date) -> String {
    let formatter = ISO8601DateFormatter()
    formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
    formatter.timeZone = TimeZone(secondsFromGMT: 0)
    return formatter.string(from: date)
}

fileprivate func siloParseInstant(_ text: String) -> Date? {
    let formatter = ISO8601DateFormatter()
    formatter.timeZone = TimeZone(secondsFromGMT: 0)
    formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
    if let date = formatter.date(from: text) { return date }
    formatter.formatOptions = [.withInternetDateTime]
    return formatter.date(from: text)
}

fileprivate func siloHTTPDateFormatter() -> DateFormatter {
    let formatter = DateFormatter()
    formatter.locale = Locale(identifier: "en_US_POSIX")
    formatter.timeZone = TimeZone(secondsFromGMT: 0)
    formatter.dateFormat = "EEE, dd MMM yyyy HH:mm:ss 'GMT'"
    return formatter
}

fileprivate func siloHTTPDate(_ date: Date) -> String { siloHTTPDateFormatter().string(from: date) }

fileprivate func siloParseHTTPDate(_ text: String) -> Date? {
    siloHTTPDateFormatter().date(from: text.trimmingCharacters(in: .whitespaces))
}

// MARK: - Identifiers and encodings

fileprivate func siloIsCanonicalPositive(_ text: String) -> Bool {
    guard let value = Int(text), value > 0 else { return false }
    return String(value) == text
}

fileprivate func siloNormalizeUserCode(_ code: String) -> String {
    code.filter { $0 != " " && $0 != "-" }
}

fileprivate func siloFormatUserCode(_ code: String) -> String {
    code.count == 8 ? String(code.prefix(4)) + "-" + String(code.suffix(4)) : code
}

fileprivate func siloMatchWords() -> String {
    let words = ["amber", "birch", "cobalt", "delta", "ember", "fable", "garnet", "harbor", "indigo", "juniper"]
    return (words.randomElement() ?? "amber") + " " + (words.randomElement() ?? "birch")
}

fileprivate func siloSlug(_ text: String) -> String {
    var out = ""
    var lastDash = false
    for scalar in text.lowercased().unicodeScalars {
        if (scalar.value >= 48 && scalar.value <= 57) || (scalar.value >= 97 && scalar.value <= 122) {
            out.unicodeScalars.append(scalar)
            lastDash = false
        } else if !lastDash && !out.isEmpty {
            out += "-"
            lastDash = true
        }
    }
    while out.hasSuffix("-") { out.removeLast() }
    return out.isEmpty ? "item" : out
}

fileprivate func siloPad2(_ value: Int) -> String { value >= 0 && value < 10 ? "0\(value)" : "\(value)" }

fileprivate func siloRandomBytes(_ count: Int) -> [UInt8] {
    (0..<count).map { _ in UInt8.random(in: UInt8.min...UInt8.max) }
}

fileprivate func siloRandomHex(_ byteCount: Int) -> String { siloHexString(siloRandomBytes(byteCount)) }

fileprivate func siloRandomDigits(_ count: Int) -> String {
    (0..<count).map { _ in String(Int.random(in: 0...9)) }.joined()
}

fileprivate func siloHexString(_ bytes: [UInt8]) -> String {
    let digits = Array("0123456789abcdef".utf8)
    var out: [UInt8] = []
    out.reserveCapacity(bytes.count * 2)
    for byte in bytes {
        out.append(digits[Int(byte >> 4)])
        out.append(digits[Int(byte & 0x0F)])
    }
    return String(decoding: out, as: UTF8.self)
}

fileprivate func siloBase64URL(_ bytes: [UInt8]) -> String {
    Data(bytes).base64EncodedString()
        .replacingOccurrences(of: "+", with: "-")
        .replacingOccurrences(of: "/", with: "_")
        .replacingOccurrences(of: "=", with: "")
}

fileprivate func siloFromBase64URL(_ text: String) -> [UInt8]? {
    var standard = text.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
    while standard.count % 4 != 0 { standard += "=" }
    guard let data = Data(base64Encoded: standard) else { return nil }
    return [UInt8](data)
}

fileprivate func siloConstantTimeEqual(_ a: [UInt8], _ b: [UInt8]) -> Bool {
    guard a.count == b.count else { return false }
    var difference: UInt8 = 0
    for i in a.indices { difference |= a[i] ^ b[i] }
    return difference == 0
}

// MARK: - SHA-256 and HMAC (FIPS 180-4, RFC 2104; CryptoKit is not on Linux)

fileprivate struct SiloSHA256 {
    private static let k: [UInt32] = [
        0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
        0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
        0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
        0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
        0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
        0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
        0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
        0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2
    ]

    private var h: [UInt32] = [0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a, 0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19]
    private var pending: [UInt8] = []
    private var total: UInt64 = 0

    mutating func update(_ bytes: [UInt8]) {
        total &+= UInt64(bytes.count)
        var i = 0
        if !pending.isEmpty {
            let take = min(64 - pending.count, bytes.count)
            pending.append(contentsOf: bytes[0..<take])
            i = take
            if pending.count == 64 {
                compress(pending, at: 0)
                pending.removeAll(keepingCapacity: true)
            }
        }
        while bytes.count - i >= 64 {
            compress(bytes, at: i)
            i += 64
        }
        if i < bytes.count { pending.append(contentsOf: bytes[i...]) }
    }

    mutating func finalize() -> [UInt8] {
        let bitLength = total &* 8
        var tail = pending
        tail.append(0x80)
        while tail.count % 64 != 56 { tail.append(0) }
        for shift in stride(from: 56, through: 0, by: -8) {
            tail.append(UInt8(truncatingIfNeeded: bitLength >> UInt64(shift)))
        }
        var offset = 0
        while offset < tail.count {
            compress(tail, at: offset)
            offset += 64
        }
        var out: [UInt8] = []
        out.reserveCapacity(32)
        for word in h {
            out.append(UInt8(truncatingIfNeeded: word >> 24))
            out.append(UInt8(truncatingIfNeeded: word >> 16))
            out.append(UInt8(truncatingIfNeeded: word >> 8))
            out.append(UInt8(truncatingIfNeeded: word))
        }
        return out
    }

    private static func rotr(_ x: UInt32, _ n: UInt32) -> UInt32 { (x >> n) | (x << (32 - n)) }

    private mutating func compress(_ block: [UInt8], at offset: Int) {
        var w = [UInt32](repeating: 0, count: 64)
        for t in 0..<16 {
            let i = offset + t * 4
            let b0 = UInt32(block[i]) << 24
            let b1 = UInt32(block[i + 1]) << 16
            let b2 = UInt32(block[i + 2]) << 8
            let b3 = UInt32(block[i + 3])
            w[t] = b0 | b1 | b2 | b3
        }
        for t in 16..<64 {
            let s0 = SiloSHA256.rotr(w[t - 15], 7) ^ SiloSHA256.rotr(w[t - 15], 18) ^ (w[t - 15] >> 3)
            let s1 = SiloSHA256.rotr(w[t - 2], 17) ^ SiloSHA256.rotr(w[t - 2], 19) ^ (w[t - 2] >> 10)
            w[t] = w[t - 16] &+ s0 &+ w[t - 7] &+ s1
        }
        var a = h[0]
        var b = h[1]
        var c = h[2]
        var d = h[3]
        var e = h[4]
        var f = h[5]
        var g = h[6]
        var hh = h[7]
        for t in 0..<64 {
            let bigS1 = SiloSHA256.rotr(e, 6) ^ SiloSHA256.rotr(e, 11) ^ SiloSHA256.rotr(e, 25)
            let choose = (e & f) ^ (~e & g)
            let t1 = hh &+ bigS1 &+ choose &+ SiloSHA256.k[t] &+ w[t]
            let bigS0 = SiloSHA256.rotr(a, 2) ^ SiloSHA256.rotr(a, 13) ^ SiloSHA256.rotr(a, 22)
            let majority = (a & b) ^ (a & c) ^ (b & c)
            let t2 = bigS0 &+ majority
            hh = g
            g = f
            f = e
            e = d &+ t1
            d = c
            c = b
            b = a
            a = t1 &+ t2
        }
        h[0] = h[0] &+ a
        h[1] = h[1] &+ b
        h[2] = h[2] &+ c
        h[3] = h[3] &+ d
        h[4] = h[4] &+ e
        h[5] = h[5] &+ f
        h[6] = h[6] &+ g
        h[7] = h[7] &+ hh
    }
}

fileprivate func siloSHA256Digest(_ bytes: [UInt8]) -> [UInt8] {
    var hasher = SiloSHA256()
    hasher.update(bytes)
    return hasher.finalize()
}

/// Lowercase hex SHA-256 of a file, read in 1 MiB chunks.
fileprivate func siloSHA256File(_ path: String) -> String? {
    guard let handle = FileHandle(forReadingAtPath: path) else { return nil }
    defer { try? handle.close() }
    var hasher = SiloSHA256()
    while true {
        let chunk = handle.readData(ofLength: 1 << 20)
        if chunk.isEmpty { break }
        hasher.update([UInt8](chunk))
    }
    return siloHexString(hasher.finalize())
}

fileprivate func siloHMACSHA256(key: [UInt8], message: [UInt8]) -> [UInt8] {
    var block = key.count > 64 ? siloSHA256Digest(key) : key
    block += [UInt8](repeating: 0, count: 64 - block.count)
    var inner = SiloSHA256()
    inner.update(block.map { $0 ^ 0x36 })
    inner.update(message)
    let innerDigest = inner.finalize()
    var outer = SiloSHA256()
    outer.update(block.map { $0 ^ 0x5c })
    outer.update(innerDigest)
    return outer.finalize()
}
