import Foundation
import LabstreamCore

/// (About 500 lines: every request Labstream sends to Silo, and its decoders, in one place to
/// check against the docs.)
///
/// Request builders for Silo's native `/api/v2` (docs: `auth-api.md`, `architecture/device-login.md`,
/// `catalog-api.md`, `libraries-api.md`, `downloads-api.md` § 2 and § 4.10; member names from
/// Silo's `internal/apiv2` transport types). Pure: no network, no state.
public struct SiloRequests: Sendable {
    /// The server's base as the user gave it (a reverse-proxy prefix included); `/api/v2` is added here.
    public let serverBase: String
    public let identity: ClientIdentity
    /// Sent with the profile on every profile-scoped request when the profile has a PIN.
    public let profileToken: String?

    public init(serverBase: String, identity: ClientIdentity, profileToken: String? = nil) {
        self.profileToken = profileToken
        var base = serverBase
        while base.hasSuffix("/") { base.removeLast() }
        if base.hasSuffix("/api/v2") { base.removeLast("/api/v2".count) }
        self.serverBase = base
        self.identity = identity
    }

    var api: String { serverBase + "/api/v2" }

    /// `Authorization: Bearer` (an access token or an `sa_…` API key) and the acting profile.
    func headers(bearer: String?, profile: String?) -> [HTTPRequest.Header] {
        var h = [HTTPRequest.Header("Accept", "application/json")]
        if let bearer, !bearer.isEmpty { h.append(HTTPRequest.Header("Authorization", "Bearer " + bearer)) }
        if let profile, !profile.isEmpty {
            h.append(HTTPRequest.Header("X-Profile-Id", profile))
            if let profileToken, !profileToken.isEmpty { h.append(HTTPRequest.Header("X-Profile-Token", profileToken)) }
        }
        return h
    }

    func post(_ path: String, _ members: [(String, String)], bearer: String? = nil, profile: String? = nil) -> HTTPRequest {
        json(
            "POST", path, "{" + members.map { "\(jsonString($0.0)):\(jsonString($0.1))" }.joined(separator: ",") + "}",
            headers: headers(bearer: bearer, profile: profile))
    }

    /// A request carrying the JSON `body`.
    func json(_ method: String, _ path: String, _ body: String, headers: [HTTPRequest.Header]) -> HTTPRequest {
        HTTPRequest(method: method, url: api + path, headers: headers + [HTTPRequest.Header("Content-Type", "application/json")], body: Array(body.utf8))
    }

    // MARK: Signing in (auth-api.md)

    /// `POST /auth/login`: never replayed after an uncertain answer (it opens a session).
    public func login(user: String, password: String) -> HTTPRequest { post("/auth/login", [("username", user), ("password", password)]) }

    /// `POST /auth/refresh` with the refresh token.
    public func refresh(_ refreshToken: String) -> HTTPRequest { post("/auth/refresh", [("refresh_token", refreshToken)]) }

    public func logout(bearer: String) -> HTTPRequest { post("/auth/logout", [], bearer: bearer) }

    /// `POST /auth/device/start`: the device's name and platform are what the approver sees.
    public func deviceStart() -> HTTPRequest {
        post("/auth/device/start", [("device_name", "Labstream on \(identity.device)"), ("device_platform", "linux")])
    }

    public func devicePoll(_ deviceCode: String) -> HTTPRequest { post("/auth/device/poll", [("device_code", deviceCode)]) }

    public func deviceCancel(_ deviceCode: String) -> HTTPRequest { post("/auth/device/cancel", [("device_code", deviceCode)]) }

    /// `GET /system/info`: public; answers only if this is a Silo server speaking v2.
    public func systemInfo() -> HTTPRequest { HTTPRequest(url: api + "/system/info", headers: headers(bearer: nil, profile: nil)) }

    /// `GET /account/me`: the cheapest read that needs the sign-in (no profile).
    public func me(bearer: String) -> HTTPRequest { HTTPRequest(url: api + "/account/me", headers: headers(bearer: bearer, profile: nil)) }

    public func profiles(bearer: String) -> HTTPRequest { HTTPRequest(url: api + "/profiles", headers: headers(bearer: bearer, profile: nil)) }

    /// `POST /profiles/{id}/verify-pin`: answers `valid` and, when it is, the profile token.
    public func verifyPIN(profile: String, pin: String, bearer: String) -> HTTPRequest {
        post("/profiles/\(profile.queryEscaped)/verify-pin", [("pin", pin)], bearer: bearer)
    }

    // MARK: Browsing (libraries-api.md, catalog-api.md)

    public func libraries(bearer: String, profile: String) -> HTTPRequest {
        HTTPRequest(url: api + "/user/libraries", headers: headers(bearer: bearer, profile: profile))
    }

    /// One page of a library's movies or series (`listCatalogItems`), continuing at `cursor`.
    /// `groups`: rule groups as JSON (catalog-api.md § Rule fields and operators), sent as the
    /// GET form's `groups` parameter.
    public func catalog(library: String, type: String, cursor: String?, limit: Int, groups: String? = nil, bearer: String, profile: String) -> HTTPRequest {
        var query = "library_id=\(library.queryEscaped)&type=\(type.queryEscaped)&limit=\(limit)"
        if let groups { query += "&groups=\(groups.queryEscaped)" }
        if let cursor { query += "&cursor=\(cursor.queryEscaped)" }
        return HTTPRequest(url: api + "/catalog?" + query, headers: headers(bearer: bearer, profile: profile))
    }

    public func versions(of contentId: String, library: String, bearer: String, profile: String) -> HTTPRequest {
        HTTPRequest(
            url: api + "/catalog/items/\(contentId.queryEscaped)/versions?library_id=\(library.queryEscaped)",
            headers: headers(bearer: bearer, profile: profile))
    }

    public func seasons(of seriesId: String, library: String, bearer: String, profile: String) -> HTTPRequest {
        HTTPRequest(
            url: api + "/catalog/series/\(seriesId.queryEscaped)/seasons?library_id=\(library.queryEscaped)&include_artwork=false",
            headers: headers(bearer: bearer, profile: profile))
    }

    public func episodes(of seriesId: String, season: Int, library: String, bearer: String, profile: String) -> HTTPRequest {
        HTTPRequest(
            url: api + "/catalog/series/\(seriesId.queryEscaped)/seasons/\(season)/episodes?library_id=\(library.queryEscaped)",
            headers: headers(bearer: bearer, profile: profile))
    }

    // MARK: Managed downloads (downloads-api.md § 2, § 4.1–4.6)

    /// The profile's headers plus this device's identity, each once: `X-Silo-Device-Id` selects
    /// the managed registry (§ 2; stable per data directory), name and platform are what the
    /// household sees.
    func managedHeaders(bearer: String, profile: String) -> [HTTPRequest.Header] {
        headers(bearer: bearer, profile: profile) + [
            HTTPRequest.Header("X-Silo-Device-Id", identity.deviceId),
            HTTPRequest.Header("X-Silo-Device-Name", "Labstream on \(identity.device)"),
            HTTPRequest.Header("X-Silo-Device-Platform", "linux")
        ]
    }

    /// `POST /downloads` for one film or episode at `quality` (a preset): a new entry only
    /// (`expected_revision` 0, § 4.1); `content_id` is the film or the series, `episode_id` the
    /// episode, `media_file_id` the version shown in the tree.
    public func createDownload(contentId: String, episodeId: String?, mediaFileId: String, quality: String = "original", bearer: String, profile: String)
        -> HTTPRequest
    {
        var members = ["\"content_id\":" + jsonString(contentId)]
        if let episodeId { members.append("\"episode_id\":" + jsonString(episodeId)) }
        members += ["\"media_file_id\":" + jsonString(mediaFileId), "\"quality\":" + jsonString(quality), "\"expected_revision\":0"]
        return json("POST", "/downloads", "{" + members.joined(separator: ",") + "}", headers: managedHeaders(bearer: bearer, profile: profile))
    }

    /// `POST /downloads` for a season page (§ 4.1): `series`, the client's `batch_id` and the
    /// season, original quality only; later pages repeat the body with the page's `cursor`.
    public func createSeasonDownloads(series: String, season: Int, batch: String, cursor: String?, bearer: String, profile: String) -> HTTPRequest {
        let body =
            "{\"content_id\":\(jsonString(series)),\"series\":true,\"season_number\":\(season),\"batch_id\":\(jsonString(batch)),\"quality\":\"original\"}"
        return json("POST", "/downloads" + (cursor.map { "?cursor=" + $0.queryEscaped } ?? ""), body, headers: managedHeaders(bearer: bearer, profile: profile))
    }

    /// `GET /capabilities/downloads` (§ 3), conditional on the copy held.
    public func downloadCapability(etag: String?, bearer: String, profile: String) -> HTTPRequest {
        var r = HTTPRequest(url: api + "/capabilities/downloads", headers: headers(bearer: bearer, profile: profile))
        if let etag { r.headers.append(HTTPRequest.Header("If-None-Match", etag)) }
        return r
    }

    /// `GET /downloads`: this profile and device's entries, one page (§ 4.2, at most 100).
    public func listDownloads(cursor: String?, bearer: String, profile: String) -> HTTPRequest {
        var url = api + "/downloads?limit=100"
        if let cursor { url += "&cursor=" + cursor.queryEscaped }
        return HTTPRequest(url: url, headers: managedHeaders(bearer: bearer, profile: profile))
    }

    /// `PATCH /downloads/{id}`: a revision-bound status event (§ 4.3); `updatedAt` in
    /// milliseconds since the epoch, sent as a millisecond RFC 3339 instant.
    public func reportDownload(id: String, status: String, updatedAt: Int64, revision: Int, bearer: String, profile: String) -> HTTPRequest {
        let body = "{\"status\":\(jsonString(status)),\"updated_at\":\(jsonString(ISODate.string(epochMilliseconds: updatedAt))),\"revision\":\(revision)}"
        return json("PATCH", "/downloads/\(id.queryEscaped)", body, headers: managedHeaders(bearer: bearer, profile: profile))
    }

    /// `DELETE /downloads/{id}` (§ 4.4; bodyless 204, 404 when already gone).
    public func deleteDownload(id: String, bearer: String, profile: String) -> HTTPRequest {
        HTTPRequest(method: "DELETE", url: api + "/downloads/\(id.queryEscaped)", headers: managedHeaders(bearer: bearer, profile: profile))
    }

    /// `GET /downloads/{id}/manifest` (§ 4.6).
    public func manifest(id: String, bearer: String, profile: String) -> HTTPRequest {
        HTTPRequest(url: api + "/downloads/\(id.queryEscaped)/manifest", headers: managedHeaders(bearer: bearer, profile: profile))
    }

    /// An artwork or subtitle proxy path a manifest named (`/api/v2/downloads/{id}/artwork/{kind}`,
    /// `/api/v2/downloads/{id}/subtitles/{ref}`, § 4.8–4.9; X-Silo-Device-Id required); nil for
    /// any other path, so a hostile manifest cannot send the token elsewhere.
    public func downloadAsset(path: String, bearer: String, profile: String) -> HTTPRequest? {
        let parts = path.split(separator: "/", omittingEmptySubsequences: false)
        guard parts.count == 7, parts[0].isEmpty, parts[1] == "api", parts[2] == "v2", parts[3] == "downloads",
            ["artwork", "subtitles"].contains(parts[5]), !parts[4].isEmpty, !parts[6].isEmpty,
            !parts.contains(".."), !path.contains("?"), !path.contains("#")
        else { return nil }
        var r = HTTPRequest(url: serverBase + path, headers: managedHeaders(bearer: bearer, profile: profile))
        r.headers.removeAll { $0.name == "Accept" }  // an image or a subtitle, not JSON
        return r
    }

    /// `GET /downloads/{id}/file` for a closed range (§ 4.5), `If-Range` by the validator held.
    public func downloadFile(id: String, range: ByteRange, validator: Validator?, bearer: String, profile: String) -> HTTPRequest {
        var r = HTTPRequest(
            url: api + "/downloads/\(id.queryEscaped)/file",
            headers: managedHeaders(bearer: bearer, profile: profile) + [HTTPRequest.Header("Range", range.httpRange)])
        r.headers.removeAll { $0.name == "Accept" }  // the file's bytes, not JSON
        if let validator { r.headers.append(HTTPRequest.Header("If-Range", validator.headerValue)) }
        return r
    }

    // MARK: Series monitors (downloads-api.md § 8, § 15 "Subscription reads" and "changes")

    /// The members a monitor's subscription is made or changed with.
    static func subscriptionMembers(_ monitor: SeriesMonitor) -> [String] {
        let mode = SeriesSubscription.modeName(monitor.mode)
        var members = ["\"mode\":" + jsonString(mode.name)]
        if let seasons = mode.seasons { members.append("\"season_numbers\":[" + seasons.map(String.init).joined(separator: ",") + "]") }
        members += ["\"delete_watched\":\(monitor.deleteWatched)", "\"max_storage_bytes\":\(monitor.maxStorage ?? 0)"]
        return members
    }

    /// `POST /downloads/subscriptions`: returns the device's existing monitor of the series
    /// unchanged when there is one, so it is read (listed) first rather than resent blindly.
    public func createSubscription(_ monitor: SeriesMonitor, bearer: String, profile: String) -> HTTPRequest {
        let body = "{\"series_id\":" + jsonString(monitor.seriesId) + "," + Self.subscriptionMembers(monitor).joined(separator: ",") + "}"
        return json("POST", "/downloads/subscriptions", body, headers: managedHeaders(bearer: bearer, profile: profile))
    }

    /// `GET /downloads/subscriptions`: one page (at most 100) of this device's monitors.
    public func listSubscriptions(cursor: String?, bearer: String, profile: String) -> HTTPRequest {
        var url = api + "/downloads/subscriptions?limit=100"
        if let cursor { url += "&cursor=" + cursor.queryEscaped }
        return HTTPRequest(url: url, headers: managedHeaders(bearer: bearer, profile: profile))
    }

    /// `PATCH /downloads/subscriptions/{id}` with every setting, under `If-Match`.
    public func updateSubscription(id: String, etag: String, to monitor: SeriesMonitor, bearer: String, profile: String) -> HTTPRequest {
        json(
            "PATCH", "/downloads/subscriptions/\(id.queryEscaped)", "{" + Self.subscriptionMembers(monitor).joined(separator: ",") + "}",
            headers: managedHeaders(bearer: bearer, profile: profile) + [HTTPRequest.Header("If-Match", etag)])
    }

    /// `DELETE /downloads/subscriptions/{id}` under `If-Match` (the entries it registered stay).
    public func deleteSubscription(id: String, etag: String, bearer: String, profile: String) -> HTTPRequest {
        HTTPRequest(
            method: "DELETE", url: api + "/downloads/subscriptions/\(id.queryEscaped)",
            headers: managedHeaders(bearer: bearer, profile: profile) + [HTTPRequest.Header("If-Match", etag)])
    }

    /// `POST /downloads/subscriptions/sync` for one monitor, one page of at most 100 episodes.
    public func syncSubscription(id: String, etag: String, cursor: String?, bearer: String, profile: String) -> HTTPRequest {
        var path = "/downloads/subscriptions/sync?limit=100"
        if let cursor { path += "&cursor=" + cursor.queryEscaped }
        return json(
            "POST", path, "{\"subscription_id\":\(jsonString(id)),\"etag\":\(jsonString(etag))}", headers: managedHeaders(bearer: bearer, profile: profile))
    }

    /// `GET /progress?status=completed` (§ 7.2): one page of what the profile has finished.
    public func completedProgress(cursor: String?, bearer: String, profile: String) -> HTTPRequest {
        var url = api + "/progress?status=completed"
        if let cursor { url += "&cursor=" + cursor.queryEscaped }
        return HTTPRequest(url: url, headers: headers(bearer: bearer, profile: profile))
    }

    // MARK: Bytes (downloads-api.md § 4.10)

    /// `GET /direct-download?file_id=` for a closed range, `If-Range` by the validator held.
    public func directDownload(fileId: String, range: ByteRange, validator: Validator?, bearer: String) -> HTTPRequest {
        var r = HTTPRequest(
            url: api + "/direct-download?file_id=\(fileId.queryEscaped)",
            headers: headers(bearer: bearer, profile: nil) + [HTTPRequest.Header("Range", range.httpRange)])
        r.headers.removeAll { $0.name == "Accept" }  // the file's bytes, not JSON
        if let validator { r.headers.append(HTTPRequest.Header("If-Range", validator.headerValue)) }
        return r
    }
}

/// Decoders for Silo's answers. Pure.
public enum SiloDecode {
    static func json(_ body: [UInt8], _ what: String) throws(LabstreamError) -> JSONValue {
        do { return try JSONValue.parse(body) } catch { throw .malformedResponse("\(what) is not valid JSON (\(body.count) bytes)") }
    }

    /// An RFC 9457 problem document said as a sentence: its code (the last segment of `type`),
    /// title and detail, and where a validation failure points.
    public static func problem(_ body: [UInt8]) -> (code: String?, sentence: String) {
        guard let j = try? JSONValue.parse(body), j.isObject else { return (nil, "") }
        let code = j["type"].string.map { String($0.split(separator: "/").last ?? "") }
        var parts = [j["title"].string, j["detail"].string].compactMap { $0 }.filter { !$0.isEmpty }
        if parts.count == 2, parts[0].trimmingCharacters(in: .punctuationCharacters) == parts[1].trimmingCharacters(in: .punctuationCharacters) {
            parts.removeLast()
        }
        let locations = (j["errors"].array ?? []).compactMap { e in e["location"].string.map { "\($0): \(e["detail"].string ?? e["code"].string ?? "")" } }
        return (code, (parts + locations).joined(separator: " "))
    }

    public struct Tokens: Sendable, Hashable {
        public var access: String
        public var refresh: String
        public var expiresIn: Int
    }

    /// A token pair (`login`, `refresh`, a device poll's `tokens`).
    public static func tokens(_ j: JSONValue, _ what: String) throws(LabstreamError) -> Tokens {
        guard let access = j["access_token"].string, !access.isEmpty, let refresh = j["refresh_token"].string, !refresh.isEmpty else {
            throw .malformedResponse("\(what) answered no access_token/refresh_token pair")
        }
        return Tokens(access: access, refresh: refresh, expiresIn: j["expires_in"].int ?? 3600)
    }

    public struct DeviceStart: Sendable, Hashable {
        public var deviceCode: String
        public var userCode: String
        public var verificationURI: String
        public var verificationURIComplete: String?
        public var interval: Int
        public var expiresIn: Int
    }

    public static func deviceStart(_ body: [UInt8]) throws(LabstreamError) -> DeviceStart {
        let j = try json(body, "/auth/device/start")
        guard let code = j["device_code"].string, let user = j["user_code"].string, let uri = j["verification_uri"].string else {
            throw .malformedResponse("/auth/device/start answered no device_code, user_code or verification_uri")
        }
        return DeviceStart(
            deviceCode: code, userCode: user, verificationURI: uri, verificationURIComplete: j["verification_uri_complete"].string,
            interval: max(j["interval"].int ?? 5, 1), expiresIn: j["expires_in"].int ?? 900)
    }

    public enum DevicePoll: Sendable, Hashable {
        case pending(after: Int)
        case approved(Tokens)
        case ended(String)  // denied, consumed, canceled, expired
    }

    public static func devicePoll(_ body: [UInt8]) throws(LabstreamError) -> DevicePoll {
        let j = try json(body, "/auth/device/poll")
        let status = j["status"].string ?? ""
        switch status {
        case "pending": return .pending(after: max(j["poll_after"].int ?? 5, 1))
        case "approved": return .approved(try tokens(j["tokens"], "/auth/device/poll"))
        case "denied", "consumed", "canceled", "expired": return .ended(status)
        default: throw .malformedResponse("/auth/device/poll answered status '\(status)'")
        }
    }

    public struct Profile: Sendable, Hashable {
        public var id: String
        public var name: String
        public var hasPIN: Bool
        public var isPrimary: Bool
    }

    public static func profiles(_ body: [UInt8]) throws(LabstreamError) -> [Profile] {
        guard let items = try json(body, "/profiles")["items"].array else { throw .malformedResponse("/profiles has no items") }
        return items.compactMap { p in
            guard let id = p["id"].text, let name = p["name"].string else { return nil }
            return Profile(id: id, name: name, hasPIN: p["has_pin"].bool ?? false, isPrimary: p["is_primary"].bool ?? false)
        }
    }

    public struct Library: Sendable, Hashable {
        public var id: String
        public var name: String
        public var type: String
    }

    /// A PIN verification: the profile token, or nil when the PIN was wrong.
    public static func verifiedPIN(_ body: [UInt8]) throws(LabstreamError) -> String? {
        let j = try json(body, "/profiles/{id}/verify-pin")
        guard j["valid"].bool == true else { return nil }
        guard let token = j["profile_token"].string, !token.isEmpty else {
            throw .malformedResponse("/profiles/{id}/verify-pin answered valid without a profile_token")
        }
        return token
    }

    public static func libraries(_ body: [UInt8]) throws(LabstreamError) -> [Library] {
        guard let items = try json(body, "/user/libraries")["items"].array else { throw .malformedResponse("/user/libraries has no items") }
        return items.compactMap { l in l["id"].text.map { Library(id: $0, name: l["name"].string ?? $0, type: l["type"].string ?? "") } }
    }

    /// A catalog page: its cards and where the next page starts (nil: the last page).
    public static func catalogPage(_ body: [UInt8]) throws(LabstreamError) -> (cards: [JSONValue], next: String?) {
        let j = try json(body, "/catalog")
        guard let items = j["items"].array else { throw .malformedResponse("/catalog has no items") }
        let next = j["page"]["next_cursor"].string.flatMap { $0.isEmpty ? nil : $0 }
        return (items, next)
    }

    /// A catalog page's `total`: the whole result's count (nil unless `total_exact`).
    public static func catalogTotal(_ body: [UInt8]) throws(LabstreamError) -> Int? {
        let j = try json(body, "/catalog")
        return j["total_exact"].bool == true ? j["total"].int : nil
    }

    /// One rule group matching titles whose `field` (`added_at`, `latest_episode_added`) is after
    /// `instant` (catalog-api.md § Rule fields and operators: `gt` takes an ISO date).
    public static func addedAfter(_ field: String, _ instant: String) -> String {
        "[{\"match\":\"all\",\"rules\":[{\"field\":\"\(field)\",\"op\":\"gt\",\"value\":\"\(instant)\"}]}]"
    }

    /// A download entry (`DownloadEntry`, downloads-api.md § 5) as Labstream keeps it: the
    /// item is the episode for an episode row, else the content.
    public static func entry(_ e: JSONValue) -> ManagedEntry? {
        guard let id = e["id"].string, !id.isEmpty, let content = e["content_id"].string, let file = e["media_file_id"].text else { return nil }
        let episode = e["episode_id"].string.flatMap { $0.isEmpty ? nil : $0 }
        let quality = e["quality"].string ?? "original"
        return ManagedEntry(
            itemId: episode ?? content, sourceId: file, kind: ManagedEntry.kind(preset: quality), id: id,
            revision: e["revision"].int ?? 0, status: e["status"].string ?? "", deliveryFormat: e["delivery_format"].string ?? "original")
    }

    /// A `DownloadSubscription` (§ 8.3); nil without an id, series, validator or a mode Labstream knows.
    public static func subscription(_ j: JSONValue) -> SeriesSubscription? {
        guard let id = j["id"].text, let series = j["series_id"].text, let etag = j["etag"].string,
            let mode = SeriesSubscription.mode(named: j["mode"].string ?? "", seasons: (j["season_numbers"].array ?? []).compactMap(\.int))
        else { return nil }
        let cap = j["max_storage_bytes"].int64 ?? 0
        return SeriesSubscription(
            id: id, seriesId: series, mode: mode, deleteWatched: j["delete_watched"].bool ?? false,
            maxStorage: cap > 0 ? cap : nil, active: j["active"].bool ?? true, etag: etag)
    }

    /// A create's answer (`202 {items, skipped, page}`): its one entry.
    public static func created(_ body: [UInt8]) throws(LabstreamError) -> ManagedEntry {
        let j = try json(body, "/downloads")
        guard let first = j["items"].array?.first, let made = entry(first) else {
            let skipped = j["skipped"].array?.first?["reason"].string
            throw .refused("Silo made no download entry" + (skipped.map { " (\($0))" } ?? ""))
        }
        return made
    }

    /// The presets this profile may ask for now (§ 3: `quality_presets`, empty when `enabled`
    /// or `allowed` is false).
    public static func offeredPresets(_ body: [UInt8]) throws(LabstreamError) -> [String] {
        try downloadCapability(body).presets
    }

    /// The download capability (§ 3): the presets offered, and whether series monitors can be
    /// read, made and synced (`series_monitoring`, `subscription_reads`,
    /// `subscription_mutations`, `bounded_subscription_sync`; an absent flag is no).
    public static func downloadCapability(_ body: [UInt8]) throws(LabstreamError) -> (presets: [String], monitors: Bool) {
        let j = try json(body, "/capabilities/downloads")
        guard let presets = j["quality_presets"].array?.compactMap(\.string) else {
            throw .malformedResponse("/capabilities/downloads has no quality_presets")
        }
        let off = j["enabled"].bool == false || j["allowed"].bool == false
        let monitors = ["series_monitoring", "subscription_reads", "subscription_mutations", "bounded_subscription_sync"].allSatisfy { j[$0].bool == true }
        return (off ? [] : presets, !off && monitors)
    }

    /// A season page's answer: its entries, the episodes skipped and why, and the next page.
    public static func seasonPage(_ body: [UInt8]) throws(LabstreamError) -> (made: [ManagedEntry], skipped: [(episode: String, reason: String)], next: String?)
    {
        let (items, next, j) = try cursorPage(body, "/downloads")
        let skipped = (j["skipped"].array ?? []).compactMap { s in s["episode_id"].string.map { ($0, s["reason"].string ?? "skipped") } }
        return (items.compactMap(entry), skipped, next)
    }

    /// A page of `GET /downloads`: its entries and where the next page starts.
    public static func entriesPage(_ body: [UInt8]) throws(LabstreamError) -> (entries: [ManagedEntry], next: String?) {
        let (items, next, _) = try cursorPage(body, "/downloads")
        return (items.compactMap(entry), next)
    }

    /// A cursor page (`{items, page: {has_more, next_cursor}}`: `/downloads` § 4.1–4.2,
    /// subscriptions § 8.3, `/progress` § 7.2): its items and the next cursor. The callers read
    /// absence as "gone": a page that says it has more but gives no cursor is an error, never a
    /// short answer.
    static func cursorPage(_ body: [UInt8], _ what: String) throws(LabstreamError) -> (items: [JSONValue], next: String?, document: JSONValue) {
        let j = try json(body, what)
        guard let items = j["items"].array else { throw .malformedResponse("\(what) answered no items") }
        let more = j["page"]["has_more"].bool
        let next = more == false ? nil : j["page"]["next_cursor"].string.flatMap { $0.isEmpty ? nil : $0 }
        if more == true && next == nil { throw .malformedResponse("\(what) says it has more but gives no cursor") }
        return (items, next, j)
    }

    /// A v3 manifest's integrity data (`integrity.expected_bytes`, `integrity.media_file_hash`,
    /// § 6) and the entry revision it describes.
    public static func integrity(_ body: [UInt8]) throws(LabstreamError) -> (integrity: Integrity, revision: Int?) {
        let j = try json(body, "/downloads/{id}/manifest")
        guard j.isObject, j["download_id"].string != nil else { throw .malformedResponse("/downloads/{id}/manifest is not a manifest") }
        return (Integrity(expectedBytes: j["integrity"]["expected_bytes"].int64, hash: j["integrity"]["media_file_hash"].string), j["revision"].int)
    }

    /// What an offline manifest (§ 6) adds beside the media: a film's `artwork_urls` (poster,
    /// backdrop, logo), every entry's `subtitles` (`fetch_url`, `language` as ISO 639-1,
    /// `format`, `forced`, `hearing_impaired`; a downloaded one's `revision` changes with its
    /// bytes) and `chapters` (`title`, `start_seconds`). Tags carry `integrity.metadata_etag`,
    /// so changed metadata fetches the assets anew. An episode's `poster` is its still (Silo's
    /// `internal/downloads/manifest.go`: "poster is the episode still"), kept as its thumbnail.
    public static func extras(_ body: [UInt8]) throws(LabstreamError) -> ItemDetails? {
        let j = try json(body, "/downloads/{id}/manifest")
        guard j.isObject, j["download_id"].string != nil else { throw .malformedResponse("/downloads/{id}/manifest is not a manifest") }
        let stamp = j["integrity"]["metadata_etag"].string ?? j["revision"].int.map { "r\($0)" } ?? ""
        var assets: [RemoteAsset] = []
        let kinds: [(String, RemoteAsset.Kind)] =
            j["type"].string == "episode" ? [("poster", .thumb)] : [("poster", .poster), ("backdrop", .fanart), ("logo", .logo)]
        for (key, kind) in kinds {
            if let path = j["artwork_urls"][key].string, path.hasPrefix("/") { assets.append(RemoteAsset(kind: kind, ref: path, tag: path + "#" + stamp)) }
        }
        for sub in j["subtitles"].array ?? [] {
            guard let path = sub["fetch_url"].string, path.hasPrefix("/") else { continue }
            assets.append(
                RemoteAsset(
                    kind: .subtitle, ref: path, tag: path + "#" + (sub["revision"].string ?? stamp), sourceId: j["media_file_id"].text,
                    language: sub["language"].string, forced: sub["forced"].bool ?? false,
                    hearingImpaired: sub["hearing_impaired"].bool ?? false, codec: sub["format"].string))
        }
        let chapters = (j["chapters"].array ?? []).compactMap { c -> ItemDetails.Chapter? in
            c["start_seconds"].double.map { ItemDetails.Chapter(start: $0, name: c["title"].string ?? "") }
        }.sorted { $0.start < $1.start }
        return ItemDetails(chapters: chapters, assets: assets).orNil
    }

    /// A file version (`FileVersion`, or an episode's `EpisodeFile`) as a media source. Silo
    /// reports bitrates in kilobits per second (0: not known, never "fits every cap").
    public static func source(_ f: JSONValue, labelled: Bool) -> MediaSource? {
        guard let id = f["file_id"].text, let size = f["file_size"].int64, size >= 0, f["unreadable"].bool != true else { return nil }
        let label = labelled ? versionLabel(resolution: f["resolution"].string, edition: f["edition_raw"].string) : ""
        return MediaSource(
            id: id, name: label.isEmpty ? nil : label, container: f["container"].string.map { $0.lowercased() },
            path: f["file_name"].string, size: size, etag: nil, bitrate: f["bitrate"].int.flatMap { $0 > 0 ? $0 * 1000 : nil })
    }

    /// A version's label: its resolution and its edition (`edition_raw`), each said once. The
    /// edition may name the resolution too (a `360p` file whose edition is `360p` was shown as
    /// `Film - 360p 360p.mp4`): then the edition alone is the label.
    public static func versionLabel(resolution: String?, edition: String?) -> String {
        let resolution = (resolution ?? "").trimmingCharacters(in: .whitespaces), edition = (edition ?? "").trimmingCharacters(in: .whitespaces)
        guard !resolution.isEmpty else { return edition }
        let words = edition.lowercased().split { !$0.isLetter && !$0.isNumber }
        return words.contains(Substring(resolution.lowercased())) ? edition : [resolution, edition].filter { !$0.isEmpty }.joined(separator: " ")
    }

    public static func versions(_ body: [UInt8], _ what: String) throws(LabstreamError) -> [MediaSource] {
        guard let items = try json(body, what)["items"].array else { throw .malformedResponse("\(what) has no items") }
        return items.compactMap { source($0, labelled: items.count > 1) }
    }

    public static func seasons(_ body: [UInt8], _ what: String) throws(LabstreamError) -> [Int] {
        guard let items = try json(body, what)["items"].array else { throw .malformedResponse("\(what) has no items") }
        return items.compactMap { $0["season_number"].int }
    }

    /// A catalog card's `added_at` (catalog_types.go CatalogItem: an instant, UTC with
    /// milliseconds; absent on some surfaces) in seconds since the epoch; 0 when absent.
    public static func addedAt(_ card: JSONValue) -> Int64 { card["added_at"].string.flatMap(ISODate.epochSeconds) ?? 0 }

    /// A season's episodes; an episode without a file is not listed. A season listing's rows
    /// (catalog_items.go Episode, EpisodeFile) carry no added date: an episode carries its
    /// series card's, `added`. Nor does an episode's file carry its name or path (catalog-api.md
    /// § Episode files; EpisodeFile: `file_id`, `container`, `file_size`…), but the row carries
    /// the episode's own provider ids when the server knows them (Episode `imdb_id`, `tmdb_id`,
    /// `tvdb_id`, omitted when empty, the ids downloads-api.md § 6 `stable_identity` says are for
    /// rescan recovery): what knows a stored episode again once a rebuilt library gave it new
    /// content and file ids (`IdentityMatch`), at no request of its own.
    public static func episodes(
        _ body: [UInt8], _ what: String, series: (id: String, title: String, year: Int?), added: Int64 = 0
    ) throws(LabstreamError) -> [CatalogItem] {
        guard let items = try json(body, what)["items"].array else { throw .malformedResponse("\(what) has no items") }
        return items.compactMap { e in
            guard let id = e["content_id"].string else { return nil }
            let files = e["files"].array ?? []
            // A managed download of an episode names its series as the content (downloads-api.md § 4.1).
            let sources = files.compactMap { source($0, labelled: files.count > 1) }.map {
                var s = $0; s.itemId = series.id; return s
            }
            guard !sources.isEmpty else { return nil }
            var ids: [String: String] = [:]
            for provider in ["imdb", "tmdb", "tvdb"] {
                if let value = e[provider + "_id"].text, !value.isEmpty { ids[provider] = value }
            }
            return CatalogItem(
                id: id, kind: .episode, title: e["title"].string ?? "", seriesId: series.id, seriesName: series.title,
                seriesYear: series.year, seasonNumber: e["season_number"].int, episodeNumber: e["episode_number"].int,
                modified: added, sources: sources, details: ids.isEmpty ? nil : ItemDetails(ids: ids))
        }
    }
}
