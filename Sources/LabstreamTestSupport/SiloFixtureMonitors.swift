import Foundation
import LabstreamDemo
import Synchronization

/// Series monitors and watch progress.
extension SiloFixture {
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
    func createDownloadSubscription(_ c: SiloCtx) throws -> HTTPServer.Response {
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
    func listDownloadSubscriptions(_ c: SiloCtx) throws -> HTTPServer.Response {
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
    func getDownloadSubscription(_ c: SiloCtx, _ id: String) throws -> HTTPServer.Response {
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
    func updateDownloadSubscription(_ c: SiloCtx, _ id: String) throws -> HTTPServer.Response {
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
    func deleteDownloadSubscription(_ c: SiloCtx, _ id: String) throws -> HTTPServer.Response {
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
    func syncDownloadSubscription(_ c: SiloCtx) throws -> HTTPServer.Response {
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
    func listProgress(_ c: SiloCtx) throws -> HTTPServer.Response {
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

/// A series monitor (downloads-api.md § 8; Go: downloads/subscription.go Subscription), keyed on
/// (account, profile, device, series).
struct SiloSubscription: Sendable {
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

struct SiloMonitorCandidate: Sendable {
    let episodeId: String
    let season: Int
    /// "" for an episode without a file.
    let fileId: String
    /// nil when the file is missing.
    let size: Int64?
}

struct SiloProgressRow: Sendable {
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

enum SiloSyncOutcome: Sendable { case notFound, stale, registered(Int) }
fileprivate enum SiloGuardOutcome: Sendable { case notFound, required, stale(String), invalidSeasons, done(SiloSubscription) }
fileprivate enum SiloGuardVerdict: Sendable { case pass, required, stale }

/// downloads-api.md § 8.1 modes (and § 3 `monitoring_modes`).
let siloMonitorModes = ["all", "future", "latest_season", "specific_seasons"]

/// api-contract.md § Optimistic concurrency (RFC 9110 § 13.2.2 order): no If-Match is 428; an
/// If-Match that does not strongly match (an empty one matches nothing) is 412; `*` is a
/// deliberate overwrite; then an If-None-Match that matches, or `*`, is 412.
fileprivate func siloGuard(ifMatch: String?, ifNoneMatch: String?, etag: String) -> SiloGuardVerdict {
    guard let ifMatch else { return .required }
    guard siloETagMatches(ifMatch, etag, weak: false) else { return .stale }
    if let ifNoneMatch, siloETagMatches(ifNoneMatch, etag, weak: true) { return .stale }
    return .pass
}
