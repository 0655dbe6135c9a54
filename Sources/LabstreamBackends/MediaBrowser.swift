import LabstreamCore

// Why this file is long (about 500 lines): every request Labstream sends to Jellyfin and Emby and
// every decoder of their answers, for both flavours at once, so that one spec's member names can
// be checked against the other's in one place. The client that sequences them is
// MediaBrowserClient.swift.
/// Who Labstream says it is to a server: the MediaBrowser authorization header, Plex's `X-Plex-*` headers.
public struct ClientIdentity: Sendable, Hashable {
    public var client: String
    public var device: String
    public var deviceId: String
    public var version: String

    public init(client: String = "Labstream", device: String, deviceId: String, version: String = LabstreamVersion.current) {
        self.client = client
        self.device = device
        self.deviceId = deviceId
        self.version = version
    }

    /// `<scheme> [UserId="…", ]Client="…", Device="…", DeviceId="…", Version="…"[, Token="…"]`.
    public func authorization(scheme: String = "MediaBrowser", userId: String? = nil, token: String?) -> String {
        func q(_ s: String) -> String { "\"" + s.filter { $0 != "\"" && $0 != "," && !$0.isNewline } + "\"" }
        var parts = ["Client=\(q(client))", "Device=\(q(device))", "DeviceId=\(q(deviceId))", "Version=\(q(version))"]
        if let userId, !userId.isEmpty { parts.insert("UserId=\(q(userId))", at: 0) }
        if let token { parts.append("Token=\(q(token))") }
        return scheme + " " + parts.joined(separator: ", ")
    }
}

public enum LabstreamVersion {
    public static let current = "0.1.0"
}

/// Jellyfin and Emby share the MediaBrowser API. These are the places where they differ; every
/// difference is spelled out here rather than behind flags elsewhere.
public enum MediaBrowserFlavor: String, Sendable, Hashable {
    case jellyfin, emby

    public var product: String { kind.product }

    public var kind: BackendKind {
        switch self {
        case .jellyfin: .jellyfin
        case .emby: .emby
        }
    }

    /// The flavor of a MediaBrowser kind; nil for a kind that speaks another API.
    public init?(kind: BackendKind) {
        switch kind {
        case .jellyfin: self = .jellyfin
        case .emby: self = .emby
        case .plex, .silo: return nil
        }
    }

    /// Item fields each server is asked for. Emby 4.8 has no `DateLastSaved` in BaseItemDto.
    var itemFields: String {
        // Overview, Genres, Studios, ProviderIds (and Jellyfin's OriginalTitle): what an `.nfo` says; Chapters: its chapters.
        self == .jellyfin
            ? "MediaSources,Path,Etag,DateCreated,DateLastSaved,Overview,Genres,Studios,ProviderIds,OriginalTitle,Chapters"
            : "MediaSources,Path,Etag,Chapters,DateCreated,Overview,Genres,Studios,ProviderIds"
    }
}

/// Request builders for the Jellyfin (10.11, 12.0) and Emby (4.8) APIs, each with the query
/// parameter names its own OpenAPI document uses. Pure.
public struct MediaBrowserRequests: Sendable {
    public let flavor: MediaBrowserFlavor
    public let baseURL: String
    public let identity: ClientIdentity
    /// Emby's authorization header names the user once it is known.
    public var userId: String?

    public init(flavor: MediaBrowserFlavor, baseURL: String, identity: ClientIdentity, userId: String? = nil) {
        var b = baseURL
        while b.hasSuffix("/") { b.removeLast() }
        self.flavor = flavor
        self.baseURL = b
        self.identity = identity
        self.userId = userId
    }

    func get(_ path: String, _ query: [(String, String)] = [], token: String?) -> HTTPRequest {
        let q = query.isEmpty ? "" : "?" + query.map { "\($0.0)=\($0.1.queryEscaped)" }.joined(separator: "&")
        return HTTPRequest(method: "GET", url: baseURL + path + q, headers: headers(token: token) + [HTTPRequest.Header("Accept", "application/json")])
    }

    /// Jellyfin: `Authorization: MediaBrowser …, Token="…"`. Emby: `Authorization: Emby UserId=…, …`
    /// (also sent as `X-Emby-Authorization`, the name its spec gives) and `X-Emby-Token`.
    func headers(token: String?) -> [HTTPRequest.Header] {
        switch flavor {
        case .jellyfin:
            return [HTTPRequest.Header("Authorization", identity.authorization(scheme: "MediaBrowser", userId: nil, token: token))]
        case .emby:
            let value = identity.authorization(scheme: "Emby", userId: userId, token: token)
            return [HTTPRequest.Header("Authorization", value), HTTPRequest.Header("X-Emby-Authorization", value)]
                + (token.map { [HTTPRequest.Header("X-Emby-Token", $0)] } ?? [])
        }
    }

    /// Query parameter names: camelCase in Jellyfin's spec, PascalCase in Emby's.
    func name(_ camel: String) -> String {
        flavor == .jellyfin ? camel : camel.prefix(1).uppercased() + camel.dropFirst()
    }

    public func publicInfo() -> HTTPRequest { get("/System/Info/Public", token: nil) }

    public func authenticate(user: String, password: String) -> HTTPRequest {
        var body = "{\"Username\":" + jsonString(user) + ",\"Pw\":" + jsonString(password) + "}"
        body.makeContiguousUTF8()
        var r = get("/Users/AuthenticateByName", token: nil)
        r.method = "POST"
        r.headers.append(HTTPRequest.Header("Content-Type", "application/json"))
        r.body = Array(body.utf8)
        return r
    }

    /// The user a token acts for: Jellyfin has `/Users/Me`; Emby needs the id.
    public func me(token: String) -> HTTPRequest {
        switch flavor {
        case .jellyfin: return get("/Users/Me", token: token)
        case .emby: return get("/Users/\((userId ?? "").queryEscaped)", token: token)
        }
    }

    public func users(token: String) -> HTTPRequest {
        flavor == .jellyfin ? get("/Users", token: token) : get("/Users/Query", token: token)
    }

    public func userViews(userId: String, token: String) -> HTTPRequest {
        switch flavor {
        case .jellyfin: return get("/UserViews", [("userId", userId)], token: token)
        case .emby: return get("/Users/\(userId.queryEscaped)/Views", [("IncludeExternalContent", "false")], token: token)
        }
    }

    /// Items of `types` below `parentId`; with `savedSince` (ISO 8601) only those saved since;
    /// `played` true: only those the user has watched.
    public func items(
        userId: String, parentId: String, types: String, startIndex: Int, limit: Int, token: String,
        savedSince: String? = nil, played: Bool = false
    ) -> HTTPRequest {
        var common = [
            ("parentId", parentId), ("recursive", "true"), ("includeItemTypes", types), ("fields", flavor.itemFields),
            ("enableUserData", "true"), ("sortBy", "SortName"), ("startIndex", String(startIndex)), ("limit", String(limit))
        ]
        if let savedSince { common.append(("minDateLastSaved", savedSince)) }
        if played { common.append(("isPlayed", "true")) }
        switch flavor {
        case .jellyfin: return get("/Items", [("userId", userId)] + common, token: token)
        case .emby: return get("/Users/\(userId.queryEscaped)/Items", common.map { (name($0.0), $0.1) }, token: token)
        }
    }

    public func seasons(seriesId: String, userId: String, token: String) -> HTTPRequest {
        get("/Shows/\(seriesId.queryEscaped)/Seasons", [(name("userId"), userId)], token: token)
    }

    public func episodes(seriesId: String, userId: String, startIndex: Int, limit: Int, token: String) -> HTTPRequest {
        get(
            "/Shows/\(seriesId.queryEscaped)/Episodes",
            [("userId", userId), ("fields", flavor.itemFields), ("enableUserData", "true"), ("startIndex", String(startIndex)), ("limit", String(limit))]
                .map { (name($0.0), $0.1) },
            token: token)
    }

    /// A live server stream in Matroska: H.264/AAC at `videoBitRate`, or the original streams
    /// copied (`remux`). Forward-only; `playSessionId` names the encoding to stop afterwards.
    public func stream(itemId: String, sourceId: String, remux: Bool, videoBitRate: Int?, playSession: String, token: String) -> HTTPRequest {
        var query = [("static", "false"), ("mediaSourceId", sourceId), ("deviceId", identity.deviceId), ("playSessionId", playSession)]
        if remux {
            query += [("videoCodec", "copy"), ("audioCodec", "copy")]
        } else {
            query += [("videoCodec", "h264"), ("audioCodec", "aac"), ("audioBitRate", "192000"), ("maxAudioChannels", "2")]
            if let videoBitRate { query.append(("videoBitRate", String(max(videoBitRate - 192_000, 100_000)))) }
        }
        return get("/Videos/\(itemId.queryEscaped)/stream.\(DerivedCopy.container)", query.map { (name($0.0), $0.1) }, token: token)
    }

    /// `DELETE /Videos/ActiveEncodings`: ends the server's transcode for this play session.
    public func stopEncoding(playSession: String, token: String) -> HTTPRequest {
        var r = get("/Videos/ActiveEncodings", [("deviceId", identity.deviceId), ("playSessionId", playSession)].map { (name($0.0), $0.1) }, token: token)
        r.method = "DELETE"
        return r
    }

    // MARK: Emby Sync (Convert) jobs

    func post(_ path: String, json body: String, token: String) -> HTTPRequest {
        var r = get(path, token: token)
        r.method = "POST"
        r.headers.append(HTTPRequest.Header("Content-Type", "application/json"))
        r.body = Array(body.utf8)
        return r
    }

    /// `POST /Sync/Jobs`: convert `itemId` for this device at `bitrate` into Matroska.
    public func createSyncJob(itemId: String, userId: String, bitrate: Int, name: String, token: String) -> HTTPRequest {
        post(
            "/Sync/Jobs",
            json: "{\"TargetId\":" + jsonString(identity.deviceId) + ",\"ItemIds\":[" + jsonString(itemId) + "],\"UserId\":"
                + jsonString(userId) + ",\"Bitrate\":\(bitrate),\"Container\":\"mkv\",\"VideoCodec\":\"h264\",\"AudioCodec\":\"aac\",\"Name\":"
                + jsonString(name) + "}", token: token)
    }

    /// `GET /Sync/Jobs`: every Sync job the server has (a `QueryResult<SyncJob>`).
    public func syncJobs(token: String) -> HTTPRequest { get("/Sync/Jobs", token: token) }

    public func readySyncItems(token: String) -> HTTPRequest { get("/Sync/Items/Ready", [("TargetId", identity.deviceId)], token: token) }
    public func syncJob(_ id: String, token: String) -> HTTPRequest { get("/Sync/Jobs/\(id.queryEscaped)", token: token) }

    public func syncJobItemFile(_ id: String, range: ByteRange, validator: Validator?, token: String) -> HTTPRequest {
        var r = HTTPRequest(
            method: "GET", url: baseURL + "/Sync/JobItems/\(id.queryEscaped)/File",
            headers: headers(token: token) + [HTTPRequest.Header("Range", range.httpRange)])
        if let validator { r.headers.append(HTTPRequest.Header("If-Range", validator.headerValue)) }
        return r
    }

    public func syncJobItemTransferred(_ id: String, token: String) -> HTTPRequest {
        post("/Sync/JobItems/\(id.queryEscaped)/Transferred", json: "", token: token)
    }

    public func deleteSyncJob(_ id: String, token: String) -> HTTPRequest {
        var r = get("/Sync/Jobs/\(id.queryEscaped)", token: token)
        r.method = "DELETE"
        return r
    }

    /// The item `/Items/{Id}/Download` takes for `file`: the item its media source names
    /// (`MediaSourceInfo.ItemId`, Emby), else on Jellyfin the source id (Jellyfin has no such
    /// member; an alternate version's source id is its own item's id), on Emby the item's id.
    public func downloadItemId(of file: TreeFile) -> String {
        file.remoteItemId ?? (flavor == .jellyfin ? file.key.sourceId : file.key.itemId)
    }

    /// The original file, one closed range of it. `If-Range` carries the pinned validator.
    /// An image (`Items/{itemId}/Images/{imageType}[/{imageIndex}]`, with its `tag`) or a text
    /// subtitle stream in its own format (`Videos/{itemId}/{mediaSourceId}/Subtitles/{index}/Stream.{format}`).
    public func asset(_ asset: RemoteAsset, format: String?, token: String) -> HTTPRequest? {
        let parts = asset.ref.split(separator: "/").map(String.init)
        if asset.kind == .subtitle {
            guard parts.count == 3, let format else { return nil }
            return HTTPRequest(
                method: "GET", url: baseURL + "/Videos/\(parts[0].queryEscaped)/\(parts[1].queryEscaped)/Subtitles/\(parts[2].queryEscaped)/Stream.\(format)",
                headers: headers(token: token))
        }
        guard (2...3).contains(parts.count) else { return nil }
        let query = asset.tag.map { "?tag=" + $0.queryEscaped } ?? ""
        return HTTPRequest(
            method: "GET", url: baseURL + "/Items/\(parts[0].queryEscaped)/Images/" + parts.dropFirst().map(\.queryEscaped).joined(separator: "/") + query,
            headers: headers(token: token))
    }

    public func download(itemId: String, range: ByteRange, validator: Validator?, token: String) -> HTTPRequest {
        var r = HTTPRequest(
            method: "GET", url: baseURL + "/Items/\(itemId.queryEscaped)/Download",
            headers: headers(token: token) + [HTTPRequest.Header("Range", range.httpRange)])
        if let validator { r.headers.append(HTTPRequest.Header("If-Range", validator.headerValue)) }
        return r
    }
}

func jsonString(_ s: String) -> String {
    var out = "\""
    for scalar in s.unicodeScalars {
        switch scalar {
        case "\"": out += "\\\""
        case "\\": out += "\\\\"
        case "\n": out += "\\n"
        case "\r": out += "\\r"
        case "\t": out += "\\t"
        default:
            if scalar.value < 0x20 {
                let hex = String(scalar.value, radix: 16)
                out += "\\u" + String(repeating: "0", count: 4 - hex.count) + hex
            } else {
                out.unicodeScalars.append(scalar)
            }
        }
    }
    return out + "\""
}

/// Decoders for Jellyfin and Emby responses into backend-neutral values. Pure; every failure names what
/// was wrong.
public enum MediaBrowserDecode {
    public struct PublicInfo: Sendable, Hashable {
        public var serverId: String
        public var serverName: String
        public var version: String
    }

    public struct Login: Sendable, Hashable {
        public var token: String
        public var userId: String
        public var serverId: String?
    }

    public struct View: Sendable, Hashable {
        public var id: String
        public var name: String
        public var collectionType: String?
    }

    public struct Page: Sendable {
        public var items: [JSONValue]
        public var total: Int
    }

    static func json(_ body: [UInt8], _ what: String) throws(LabstreamError) -> JSONValue {
        do { return try JSONValue.parse(body) } catch {
            throw .malformedResponse("\(what) is not valid JSON (\(body.count) bytes)")
        }
    }

    /// Checks the answer comes from the expected product (`ServerProduct`: Jellyfin names
    /// itself in `ProductName`; Emby 4.8's PublicSystemInfo has none, but its address lists).
    public static func publicInfo(_ body: [UInt8], flavor: MediaBrowserFlavor = .jellyfin, url: String = "this URL") throws(LabstreamError) -> PublicInfo {
        let j = try json(body, "/System/Info/Public")
        guard j.isObject, let id = j["Id"].string, !id.isEmpty, let version = j["Version"].string else {
            throw .malformedResponse("/System/Info/Public has no Id and Version: this does not look like a \(flavor.product) server")
        }
        let found = ServerProduct.mediaBrowser(productName: j["ProductName"].string, fields: Set(j.object?.keys.map { $0 } ?? []))
        if let refusal = ServerProduct.mismatch(asked: flavor.kind, found: found, at: url) {
            throw .invalidArgument(refusal + " (its /System/Info/Public names \(j["ServerName"].string ?? "no server name") \(version))")
        }
        return PublicInfo(serverId: id, serverName: j["ServerName"].string ?? "", version: version)
    }

    public static func login(_ body: [UInt8]) throws(LabstreamError) -> Login {
        let j = try json(body, "the login response")
        guard let token = j["AccessToken"].string, !token.isEmpty, let userId = j["User"]["Id"].string, !userId.isEmpty else {
            throw .malformedResponse("the login response has no AccessToken or User.Id")
        }
        return Login(token: token, userId: userId, serverId: j["ServerId"].string)
    }

    public static func userId(_ body: [UInt8]) throws(LabstreamError) -> String {
        let j = try json(body, "the signed-in user")
        guard let id = j["Id"].string, !id.isEmpty else { throw .malformedResponse("the signed-in user has no Id") }
        return id
    }

    public static func userId(named name: String, in body: [UInt8]) throws(LabstreamError) -> String {
        let j = try json(body, "the user list")
        // Jellyfin's `/Users` is a list; Emby's `/Users/Query` is a QueryResult.
        guard let users = j.array ?? j["Items"].array else { throw .malformedResponse("the user list is not a list") }
        guard let match = users.first(where: { $0["Name"].string?.lowercased() == name.lowercased() }), let id = match["Id"].string else {
            throw .invalidArgument("the server has no user named '\(name)'")
        }
        return id
    }

    public static func page(_ body: [UInt8], _ what: String) throws(LabstreamError) -> Page {
        let j = try json(body, what)
        guard let items = j["Items"].array else { throw .malformedResponse("\(what) has no Items list") }
        let total = j["TotalRecordCount"].int ?? items.count
        return Page(items: items, total: total)
    }

    public static func views(_ body: [UInt8]) throws(LabstreamError) -> [View] {
        try page(body, "/UserViews").items.compactMap { v in
            guard let id = v["Id"].string, !id.isEmpty else { return nil }
            return View(id: id, name: v["Name"].string ?? id, collectionType: v["CollectionType"].string?.lowercased())
        }
    }

    /// A season id → season number map from `/Shows/{id}/Seasons`, and each season's poster
    /// (its `ImageTags.Primary`) as an asset of the series.
    public static func seasons(_ body: [UInt8]) throws(LabstreamError) -> (numbers: [String: Int], posters: [RemoteAsset]) {
        var map: [String: Int] = [:]
        var posters: [RemoteAsset] = []
        for s in try page(body, "/Shows/{id}/Seasons").items {
            guard let id = s["Id"].string, let n = s["IndexNumber"].int else { continue }
            map[id] = n
            if let tag = s["ImageTags"]["Primary"].string {
                posters.append(RemoteAsset(kind: .poster, ref: id + "/Primary", tag: tag, season: n))
            }
        }
        return (map, posters)
    }

    /// The artwork (`ImageTags` Primary and Logo, `BackdropImageTags`; a track's album cover)
    /// and text subtitle streams (each media source's `MediaStreams` of Type `Subtitle`) of one BaseItemDto. A ref names
    /// the item the route takes (`<item>/<ImageType>[/<index>]`, `<item>/<source>/<stream index>`).
    static func assets(_ j: JSONValue) -> [RemoteAsset] {
        guard let id = j["Id"].string else { return [] }
        var out: [RemoteAsset] = []
        if j["Type"].string == "Audio" {
            // A track's album cover: its album's Primary image (`AlbumId`, `AlbumPrimaryImageTag`).
            guard let album = j["AlbumId"].string, !album.isEmpty, let tag = j["AlbumPrimaryImageTag"].string else { return [] }
            return [RemoteAsset(kind: .poster, ref: album + "/Primary", tag: tag)]
        }
        let episode = j["Type"].string == "Episode"
        if let tag = j["ImageTags"]["Primary"].string { out.append(RemoteAsset(kind: episode ? .thumb : .poster, ref: id + "/Primary", tag: tag)) }
        if !episode, let tag = j["ImageTags"]["Logo"].string { out.append(RemoteAsset(kind: .logo, ref: id + "/Logo", tag: tag)) }
        if !episode, let tag = j["BackdropImageTags"].array?.first?.string { out.append(RemoteAsset(kind: .fanart, ref: id + "/Backdrop/0", tag: tag)) }
        for source in j["MediaSources"].array ?? [] {
            guard let sid = source["Id"].string else { continue }
            let owner = source["ItemId"].string ?? id
            for stream in source["MediaStreams"].array ?? [] where stream["Type"].string == "Subtitle" {
                // Bitmap subtitles (PGS, VobSub) stay inside the media; text ones are fetched.
                guard stream["IsTextSubtitleStream"].bool ?? (SideAssetPlan.subtitleExtension(stream["Codec"].string) != nil),
                    let index = stream["Index"].int
                else { continue }
                out.append(
                    RemoteAsset(
                        kind: .subtitle, ref: "\(owner)/\(sid)/\(index)", tag: source["ETag"].string ?? j["Etag"].string, sourceId: sid,
                        language: stream["Language"].string, forced: stream["IsForced"].bool ?? false,
                        hearingImpaired: stream["IsHearingImpaired"].bool ?? false, codec: stream["Codec"].string))
            }
        }
        return out
    }

    /// One BaseItemDto to a catalog item; nil for entries that are not movies, episodes or
    /// music tracks (`Audio`) or lack an id. Items with no media source come back with an empty
    /// `sources` list.
    public static func item(
        _ j: JSONValue, series: (id: String, name: String, year: Int?)? = nil, seasons: [String: Int] = [:],
        otherVideos: Bool = false
    ) -> CatalogItem? {
        guard let id = j["Id"].string, !id.isEmpty, let type = j["Type"].string else { return nil }
        let kind: ItemKind
        switch type {
        case "Movie": kind = .movie
        case "Episode": kind = .episode
        case "Audio": kind = .track
        // Only in a library of their kind: a home video, placed by its folders (`folderItems`),
        // and a music video, `Artist/Title (Year).ext` with its artist as its one folder.
        case "Video" where otherVideos, "MusicVideo" where otherVideos: kind = .other
        case "Photo" where otherVideos: kind = .photo
        default: return nil
        }
        var sources: [MediaSource] = (j["MediaSources"].array ?? []).compactMap { s in
            guard let sid = s["Id"].string, !sid.isEmpty else { return nil }
            if let proto = s["Protocol"].string, proto != "File" { return nil }
            return MediaSource(
                id: sid, name: s["Name"].string, container: s["Container"].string ?? j["Container"].string,
                path: s["Path"].string, size: s["Size"].int64,
                // Emby 4.8's MediaSourceInfo has no ETag: its change signal is the item's Etag.
                etag: s["ETag"].string ?? j["Etag"].string,
                bitrate: s["Bitrate"].int, itemId: s["ItemId"].string)
        }
        if kind == .photo && sources.isEmpty && j["LocationType"].string != "Virtual" {
            // A photo has no media sources: the item is its one file (`Path`, Emby's `Size`;
            // Jellyfin says no size, and the client asks the download route for it).
            sources = [MediaSource(id: id, container: j["Container"].string, path: j["Path"].string, size: j["Size"].int64, etag: j["Etag"].string)]
        }
        let modified =
            (j["DateCreated"].string).flatMap(ISODate.epochSeconds)
            ?? (j["PremiereDate"].string).flatMap(ISODate.epochSeconds) ?? 0
        var season = j["ParentIndexNumber"].int
        if season == nil, let sid = j["SeasonId"].string { season = seasons[sid] }
        // A track sits under its album's artist (BaseItemDto.AlbumArtist, else the first of
        // AlbumArtists, else of Artists), on its disc (ParentIndexNumber) at IndexNumber.
        let albumArtist = [j["AlbumArtist"].string, j["AlbumArtists"].array?.first?["Name"].string, j["Artists"].array?.first?.string]
            .compactMap { $0 }.first { !$0.isEmpty }
        return CatalogItem(
            id: id, kind: kind, title: j["Name"].string ?? "", year: j["ProductionYear"].int,
            seriesId: kind == .episode ? (series?.id ?? j["SeriesId"].string) : nil,
            seriesName: kind == .episode ? (series?.name ?? j["SeriesName"].string) : nil,
            seriesYear: kind == .episode ? series?.year : nil,
            seasonNumber: kind == .episode ? season : nil,
            episodeNumber: kind == .episode ? j["IndexNumber"].int : nil,
            album: kind == .track ? j["Album"].string.flatMap { $0.isEmpty ? nil : $0 } : nil,
            albumArtist: kind == .track ? albumArtist : nil,
            discNumber: kind == .track ? j["ParentIndexNumber"].int : nil,
            trackNumber: kind == .track ? j["IndexNumber"].int : nil,
            folders: type == "MusicVideo" ? [j["Artists"].array?.first?.string ?? j["AlbumArtist"].string ?? "Unknown Artist"] : [],
            modified: modified, sources: sources,
            // UserItemDataDto.Played: the signed-in user's watched state (asked with enableUserData).
            played: j["UserData"]["Played"].bool ?? false, details: details(j))
    }

    /// A home-video, photo or mixed library's videos, films and photos, each with the names of
    /// the `Folder` (or `PhotoAlbum`) items between it and the library (`root`) as its folders,
    /// outermost first, under its own name. A parent the listing did not include ends the walk.
    public static func folderItems(_ raw: [JSONValue], root: String) -> [CatalogItem] {
        var folders: [String: (name: String, parent: String?)] = [:]
        for j in raw where ["Folder", "PhotoAlbum"].contains(j["Type"].string ?? "") {
            if let id = j["Id"].string { folders[id] = (j["Name"].string ?? id, j["ParentId"].string) }
        }
        return raw.compactMap { j -> CatalogItem? in
            guard ["Video", "Movie", "Photo"].contains(j["Type"].string ?? ""), var item = item(j, otherVideos: true) else { return nil }
            if item.kind != .photo { item.kind = .other }
            var chain: [String] = []
            var parent = j["ParentId"].string
            var seen = Set<String>()
            while let id = parent, id != root, let folder = folders[id], seen.insert(id).inserted {
                chain.insert(folder.name, at: 0)
                parent = folder.parent
            }
            item.folders = chain
            return item
        }
    }

    /// What BaseItemDto says beyond names (`Overview`, `Genres`, `Studios`, `ProviderIds`,
    /// `OriginalTitle`, `CommunityRating`, `PremiereDate`, `RunTimeTicks`); nil when nothing.
    public static func details(_ j: JSONValue) -> ItemDetails? {
        var ids: [String: String] = [:]
        for (provider, value) in j["ProviderIds"].object ?? [:] {
            if let id = value.string, !id.isEmpty { ids[provider.lowercased()] = id }
        }
        let ticks = j["RunTimeTicks"].int64
        return ItemDetails(
            originalTitle: j["OriginalTitle"].string.flatMap { $0.isEmpty || $0 == j["Name"].string ? nil : $0 },
            plot: j["Overview"].string.flatMap { $0.isEmpty ? nil : $0 },
            runtimeSeconds: ticks.map { Double($0) / 10_000_000 },
            genres: (j["Genres"].array ?? []).compactMap(\.string),
            studios: (j["Studios"].array ?? []).compactMap { $0["Name"].string },
            rating: j["CommunityRating"].double,
            premiered: j["PremiereDate"].string.map { String($0.prefix(10)) },
            ids: ids,
            // ChapterInfo: StartPositionTicks (10 000 000 a second) and Name.
            chapters: (j["Chapters"].array ?? []).compactMap { c in
                c["StartPositionTicks"].int64.map { ItemDetails.Chapter(start: Double($0) / 10_000_000, name: c["Name"].string ?? "") }
            }, assets: assets(j)
        ).orNil
    }
}
