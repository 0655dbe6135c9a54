import Foundation
import LabstreamDemo
import Synchronization

/// Sign-in: password and device sign-in, tokens and sessions, the account and its profiles.
extension SiloFixture {
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

    // MARK: - Auth

    // GET /auth/providers — auth-api.md § External sign-in (listAuthProviders: `password_login`
    // says whether any provider takes a password); Go: auth_sessions.go AuthProviderCollection.
    func listAuthProviders(_ c: SiloCtx) throws -> HTTPServer.Response {
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
    func login(_ c: SiloCtx) throws -> HTTPServer.Response {
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
    func refreshSession(_ c: SiloCtx) throws -> HTTPServer.Response {
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
    func logout(_ c: SiloCtx) throws -> HTTPServer.Response {
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
    func getDeviceLoginCapability(_ c: SiloCtx) throws -> HTTPServer.Response {
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
    func startDeviceLogin(_ c: SiloCtx) throws -> HTTPServer.Response {
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
    func pollDeviceLogin(_ c: SiloCtx) throws -> HTTPServer.Response {
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
    func cancelDeviceLogin(_ c: SiloCtx) throws -> HTTPServer.Response {
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
    func getDeviceLogin(_ c: SiloCtx) throws -> HTTPServer.Response {
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
    func decideDeviceLogin(_ c: SiloCtx, approve: Bool) throws -> HTTPServer.Response {
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
    func getCurrentUser(_ c: SiloCtx) throws -> HTTPServer.Response {
        _ = try authenticate(c)
        try rejectUnknownQuery(c, [])
        return json(accountJSON())
    }

    // GET /profiles — api-contract.md § Pilot slice ("profiles" section: listProfiles, an
    // unpaginated items collection with string ids); Go: profiles.go ProfileCollection
    // {items, avatar_upload_enabled}, Profile members; the header is optional.
    func listProfiles(_ c: SiloCtx) throws -> HTTPServer.Response {
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
    func verifyProfilePIN(_ c: SiloCtx, _ id: String) throws -> HTTPServer.Response {
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

    // MARK: - Authentication

    /// Authenticates the caller (api-keys-api.md: keys are `sa_…` sent as
    /// `Authorization: Bearer`; downloads-api.md § 4.10: `?token=` only where allowed). Refusals
    /// follow Go gates.go: missing → 401 authentication_required; unknown or expired →
    /// 401 invalid_token; revoked session → 401 session_expired; minted before a role change →
    /// 401 token_refresh_required (auth-api.md § Access tokens after a role change).
    func authenticate(_ c: SiloCtx, allowQueryToken: Bool = false) throws -> SiloPrincipal {
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
    func resolveProfile(_ c: SiloCtx, _ who: SiloPrincipal, required: Bool) throws -> String? {
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

    private func publicBase() -> String {
        origin.withLock { $0 } + basePath
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

extension SiloState {
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
}

struct SiloSession: Sendable {
    let id: String
    let deviceName: String
    let createdAt: Date
    var revoked: Bool
}

struct SiloAccessToken: Sendable {
    let sessionId: String
    var expiresAt: Date
    let roleEpoch: Int
}

struct SiloProfileGrant: Sendable {
    let profileId: String
    let bindingKey: String
}

struct SiloIssuedPair: Sendable {
    let access: String
    let refresh: String
}

enum SiloCredentialKind: Sendable { case accessToken, apiKey, queryToken }

struct SiloPrincipal: Sendable {
    /// nil for an API key (it has no login session).
    let sessionId: String?
    let credential: SiloCredentialKind
    /// What a profile token is bound to: the login session, or the API key.
    var bindingKey: String { sessionId ?? "api-key" }
}

fileprivate enum SiloAccessVerdict: Sendable { case valid(String), invalid, sessionGone, refreshRequired }
fileprivate enum SiloRefreshOutcome: Sendable { case invalid, revoked, issued(SiloIssuedPair) }

fileprivate struct SiloPollOutcome: Sendable {
    let status: String
    let opened: Bool
    let expiresAt: Date
    let pair: SiloIssuedPair?
}

struct SiloDeviceRequest: Sendable {
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

fileprivate struct SiloProfile: Sendable {
    let id: String
    let name: String
    let pin: String?
    let isPrimary: Bool
    let isChild: Bool
}
