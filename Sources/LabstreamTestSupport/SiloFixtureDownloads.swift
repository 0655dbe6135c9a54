import Foundation
import LabstreamDemo
import LabstreamFixture
import Synchronization

/// The download registry: entries, files, manifests, batches and side assets.
extension SiloFixture {
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

    // MARK: - Managed downloads

    // GET /capabilities/downloads — downloads-api.md § 3 Feature detection (requires X-Profile-Id,
    // If-None-Match → 304; members as in the example) and api-contract.md § Discovery and
    // capability detection (revision, state, allowed; Cache-Control: private, no-cache; an ETag);
    // Go: download_registry.go DownloadCapability (adds bulk_quality, monitor_quality,
    // preparation_progress).
    func getDownloadCapability(_ c: SiloCtx) throws -> HTTPServer.Response {
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
    func createDownloads(_ c: SiloCtx) throws -> HTTPServer.Response {
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
    func listDownloads(_ c: SiloCtx) throws -> HTTPServer.Response {
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
    func reportDownloadStatus(_ c: SiloCtx, _ id: String) throws -> HTTPServer.Response {
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
    func deleteDownload(_ c: SiloCtx, _ id: String) throws -> HTTPServer.Response {
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
    func downloadFile(_ c: SiloCtx, _ id: String) throws -> HTTPServer.Response {
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
    func getDownloadManifest(_ c: SiloCtx, _ id: String) throws -> HTTPServer.Response {
        let row = try callersEntry(c, id)
        try requireServable(c, row)
        let manifest = try manifestJSON(c, row)
        return json(manifest)
    }

    // GET /downloads/batches/{batch_id}/manifests — downloads-api.md § 4.7 Batch manifests
    // (limit default 3, maximum 10; skipped reasons revoked, not_found, error, too_large;
    // continue while page.has_more even when items is empty); Go: download_manifests.go
    // DownloadManifestPage {items, skipped, page} (skipped always present).
    func listDownloadBatchManifests(_ c: SiloCtx, _ batchId: String) throws -> HTTPServer.Response {
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
    func downloadArtwork(_ c: SiloCtx, _ id: String, _ kind: String) throws -> HTTPServer.Response {
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
    func downloadSubtitle(_ c: SiloCtx, _ id: String, _ ref: String) throws -> HTTPServer.Response {
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
}

extension SiloState {
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

/// Managed rows are scoped to (profile, device); ephemeral rows (no device) to the account.
fileprivate func siloInScope(_ row: SiloDownloadRow, profileId: String, deviceId: String?) -> Bool {
    guard let deviceId else { return row.deviceId == nil }
    return row.deviceId == deviceId && row.profileId == profileId
}

enum SiloCreateOutcome: Sendable { case conflict, created(SiloDownloadRow, Bool) }
enum SiloBatchOutcome: Sendable { case conflict, page([SiloDownloadRow], [(String, String)], Bool) }
enum SiloStatusOutcome: Sendable { case notFound, conflict(String), entry(SiloDownloadRow) }

struct SiloDownloadRow: Sendable {
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

struct SiloDownloadTarget: Sendable {
    let contentId: String
    let episodeId: String?
    let fileId: String
    let path: String
}

struct SiloBatchCandidate: Sendable {
    let episodeId: String
    let fileId: String
    let path: String
    let size: Int64?
}

struct SiloEntryGuard: Sendable {
    let id: String?
    let revision: Int
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
