import LabstreamCore

/// Request builders for Plex Media Server (JSON answers) and plex.tv (`/api/v2`). Pure.
/// Every request carries the `X-Plex-*` identity with a per-install client identifier; the
/// token travels only in the `X-Plex-Token` header, never in a URL.
public struct PlexRequests: Sendable {
    public let baseURL: String
    public let identity: ClientIdentity

    public init(baseURL: String, identity: ClientIdentity) {
        var b = baseURL
        while b.hasSuffix("/") { b.removeLast() }
        self.baseURL = b
        self.identity = identity
    }

    func headers(token: String?) -> [HTTPRequest.Header] {
        var h = [
            HTTPRequest.Header("Accept", "application/json"),
            HTTPRequest.Header("X-Plex-Client-Identifier", identity.deviceId),
            HTTPRequest.Header("X-Plex-Product", identity.client),
            HTTPRequest.Header("X-Plex-Version", identity.version),
            HTTPRequest.Header("X-Plex-Platform", "Linux"),
            HTTPRequest.Header("X-Plex-Device", identity.device),
            HTTPRequest.Header("X-Plex-Device-Name", identity.device)
        ]
        if let token { h.append(HTTPRequest.Header("X-Plex-Token", token)) }
        return h
    }

    func get(_ path: String, _ query: [(String, String)] = [], token: String?) -> HTTPRequest {
        let q = query.isEmpty ? "" : "?" + query.map { "\($0.0)=\($0.1.queryEscaped)" }.joined(separator: "&")
        return HTTPRequest(method: "GET", url: baseURL + path + q, headers: headers(token: token))
    }

    // MARK: plex.tv

    /// `POST /api/v2/pins`: a short code the user enters at plex.tv/link.
    public func createPin() -> HTTPRequest {
        var r = get("/api/v2/pins", [("strong", "false")], token: nil)
        r.method = "POST"
        return r
    }

    public func pin(id: Int) -> HTTPRequest { get("/api/v2/pins/\(id)", token: nil) }

    public func resources(token: String) -> HTTPRequest {
        get("/api/v2/resources", [("includeHttps", "1"), ("includeRelay", "1"), ("includeIPv6", "1")], token: token)
    }

    // MARK: Plex Media Server

    public func identityRequest() -> HTTPRequest { get("/identity", token: nil) }

    /// `/library/sections` (the older spec and every real server); `/library/sections/all` is
    /// the newer spec's name for the same list.
    public func sections(token: String, newerPath: Bool = false) -> HTTPRequest {
        get(newerPath ? "/library/sections/all" : "/library/sections", token: token)
    }

    /// One page of a section: `type` 1 = movies, 2 = shows; none: the section's top level.
    public func sectionItems(section: String, type: Int?, start: Int, size: Int, token: String) -> HTTPRequest {
        // includeGuids: the provider ids (imdb://, tmdb://, tvdb://) an `.nfo` names.
        paged(
            get(
                "/library/sections/\(section.queryEscaped)/all",
                (type.map { [("type", String($0))] } ?? []) + [
                    ("includeGuids", "1"), ("X-Plex-Container-Start", String(start)), ("X-Plex-Container-Size", String(size))
                ],
                token: token),
            start: start, size: size)
    }

    /// An image or subtitle at the path the server named for it (`thumb`, `art`, a stream's `key`).
    public func asset(path: String, token: String) -> HTTPRequest? {
        guard path.hasPrefix("/"), !path.contains("..") else { return nil }
        return get(path, token: token)
    }

    /// `includeChapters`: "Include chapter details" (boolean; v0.0.3 spec, GET /library/metadata/{ratingKey}).
    public func metadata(_ ratingKey: String, token: String, chapters: Bool = false) -> HTTPRequest {
        get("/library/metadata/\(ratingKey.queryEscaped)", chapters ? [("includeChapters", "1")] : [], token: token)
    }

    public func children(of ratingKey: String, start: Int, size: Int, token: String) -> HTTPRequest {
        paged(
            get(
                "/library/metadata/\(ratingKey.queryEscaped)/children",
                [("includeGuids", "1"), ("X-Plex-Container-Start", String(start)), ("X-Plex-Container-Size", String(size))], token: token),
            start: start, size: size)
    }

    // MARK: Download queue (a server-prepared copy at a capped quality)

    /// `POST /downloadQueue`: this client's queue (created once, then the same one).
    public func createDownloadQueue(token: String) -> HTTPRequest {
        var r = get("/downloadQueue", token: token)
        r.method = "POST"
        return r
    }

    /// `POST /downloadQueue/{id}/add`: one part of one item over http at most `kilobitsPerSecond`
    /// (the spec's bitrates are kbit/s); streams that fit are copied, not transcoded.
    public func addToDownloadQueue(_ queue: Int, key: String, mediaIndex: Int, partIndex: Int, kilobitsPerSecond: Int, token: String) -> HTTPRequest {
        var r = get(
            "/downloadQueue/\(queue)/add",
            [
                ("keys", key), ("mediaIndex", String(mediaIndex)), ("partIndex", String(partIndex)), ("protocol", "http"),
                ("directPlay", "0"), ("directStream", "1"), ("directStreamAudio", "1"), ("location", "lan"),
                ("videoBitrate", String(kilobitsPerSecond)), ("peakBitrate", String(kilobitsPerSecond))
            ], token: token)
        r.method = "POST"
        return r
    }

    public func downloadQueueItem(_ queue: Int, item: Int, token: String) -> HTTPRequest {
        get("/downloadQueue/\(queue)/items/\(item)", token: token)
    }

    /// `GET /downloadQueue/{queueId}/items`: every item of the queue.
    public func downloadQueueItems(_ queue: Int, token: String) -> HTTPRequest {
        get("/downloadQueue/\(queue)/items", token: token)
    }

    /// The prepared file, by range like a part.
    public func downloadQueueMedia(_ queue: Int, item: Int, range: ByteRange, validator: Validator?, token: String) -> HTTPRequest {
        part(key: "/downloadQueue/\(queue)/item/\(item)/media", range: range, validator: validator, token: token)
    }

    /// `DELETE /downloadQueue/{id}/items/{itemId}`: the server may drop the prepared file.
    public func removeDownloadQueueItem(_ queue: Int, item: Int, token: String) -> HTTPRequest {
        var r = get("/downloadQueue/\(queue)/items/\(item)", token: token)
        r.method = "DELETE"
        return r
    }

    /// Paging goes in the query (the spec) and the headers (what Plex clients send).
    func paged(_ request: HTTPRequest, start: Int, size: Int) -> HTTPRequest {
        var r = request
        r.headers += [HTTPRequest.Header("X-Plex-Container-Start", String(start)), HTTPRequest.Header("X-Plex-Container-Size", String(size))]
        return r
    }

    /// The part's original bytes: its `key` (`/library/parts/{id}/{changestamp}/{file}`).
    public func part(key: String, range: ByteRange, validator: Validator?, token: String) -> HTTPRequest {
        let path = key.hasPrefix("/") ? key : "/" + key
        var r = HTTPRequest(
            method: "GET", url: baseURL + path,
            headers: headers(token: token).filter { $0.name != "Accept" } + [HTTPRequest.Header("Range", range.httpRange)])
        if let validator { r.headers.append(HTTPRequest.Header("If-Range", validator.headerValue)) }
        return r
    }
}

/// Decoders for Plex and plex.tv JSON into backend-neutral values. Pure; failures say what.
public enum PlexDecode {
    public struct Pin: Sendable, Hashable {
        public var id: Int
        public var code: String
        public var authToken: String?
        /// Seconds since the epoch, when the server said.
        public var expiresAt: Int64?
    }

    public struct Connection: Sendable, Hashable {
        public var uri: String
        public var isLocal: Bool
        public var isRelay: Bool
        public var isHTTPS: Bool

        public init(uri: String, isLocal: Bool, isRelay: Bool, isHTTPS: Bool) {
            self.uri = uri
            self.isLocal = isLocal
            self.isRelay = isRelay
            self.isHTTPS = isHTTPS
        }
    }

    public struct Resource: Sendable, Hashable {
        public var name: String
        public var clientIdentifier: String
        public var accessToken: String?
        public var httpsRequired: Bool
        public var owned: Bool
        public var connections: [Connection]
    }

    public struct Section: Sendable, Hashable {
        public var key: String
        public var title: String
        public var type: String
        /// LibrarySection.agent: a movie section with no metadata agent holds home videos.
        public var agent: String? = nil
        /// LibrarySection.Location[].path: the section's folders on the server's disk.
        public var locations: [String] = []

        /// Plex's "Other Videos" (personal media): a movie section whose agent fetches nothing.
        public var holdsHomeVideos: Bool {
            type == "movie" && ["tv.plex.agents.none", "com.plexapp.agents.none"].contains(agent ?? "")
        }
    }

    public struct Page: Sendable {
        public var metadata: [JSONValue]
        public var total: Int?
    }

    static func json(_ body: [UInt8], _ what: String) throws(LabstreamError) -> JSONValue {
        do { return try JSONValue.parse(body) } catch {
            throw .malformedResponse("\(what) is not valid JSON (\(body.count) bytes)")
        }
    }

    public static func pin(_ body: [UInt8]) throws(LabstreamError) -> Pin {
        let j = try json(body, "the plex.tv PIN")
        guard let id = j["id"].int, let code = j["code"].string, !code.isEmpty else {
            throw .malformedResponse("the plex.tv PIN answer has no id and code")
        }
        let token = j["authToken"].string.flatMap { $0.isEmpty ? nil : $0 }
        return Pin(id: id, code: code, authToken: token, expiresAt: j["expiresAt"].string.flatMap(ISODate.epochSeconds))
    }

    /// The servers among plex.tv's resources (`provides` includes `server`).
    public static func servers(_ body: [UInt8]) throws(LabstreamError) -> [Resource] {
        let j = try json(body, "plex.tv /resources")
        guard let list = j.array else { throw .malformedResponse("plex.tv /resources is not a list") }
        return list.compactMap { r in
            guard (r["provides"].string ?? "").split(separator: ",").contains("server"),
                let id = r["clientIdentifier"].string, !id.isEmpty
            else { return nil }
            let connections: [Connection] = (r["connections"].array ?? []).compactMap { c in
                guard let uri = c["uri"].string, uri.hasPrefix("http://") || uri.hasPrefix("https://") else { return nil }
                let proto = c["protocol"].string ?? (uri.hasPrefix("https://") ? "https" : "http")
                return Connection(uri: uri, isLocal: c["local"].bool ?? false, isRelay: c["relay"].bool ?? false, isHTTPS: proto == "https")
            }
            return Resource(
                name: r["name"].string ?? id, clientIdentifier: id, accessToken: r["accessToken"].string,
                httpsRequired: r["httpsRequired"].bool ?? false, owned: r["owned"].bool ?? false, connections: connections)
        }
    }

    public static func machineIdentifier(_ body: [UInt8]) throws(LabstreamError) -> (id: String, version: String) {
        let j = try json(body, "/identity")["MediaContainer"]
        guard let id = j["machineIdentifier"].string, !id.isEmpty else {
            throw .malformedResponse("/identity has no machineIdentifier: this does not look like a Plex Media Server")
        }
        return (id, j["version"].string ?? "")
    }

    public static func sections(_ body: [UInt8]) throws(LabstreamError) -> [Section] {
        let j = try json(body, "/library/sections")["MediaContainer"]
        guard j.isObject else { throw .malformedResponse("/library/sections has no MediaContainer") }
        return (j["Directory"].array ?? []).compactMap { d in
            guard let key = d["key"].text, !key.isEmpty, let type = d["type"].string else { return nil }
            return Section(
                key: key, title: d["title"].string ?? key, type: type, agent: d["agent"].string,
                locations: (d["Location"].array ?? []).compactMap { $0["path"].string })
        }
    }

    public static func page(_ body: [UInt8], _ what: String) throws(LabstreamError) -> Page {
        let j = try json(body, what)["MediaContainer"]
        guard j.isObject else { throw .malformedResponse("\(what) has no MediaContainer") }
        let metadata = j["Metadata"]
        guard metadata.isNull || metadata.array != nil else { throw .malformedResponse("\(what) has a Metadata that is not a list") }
        return Page(metadata: metadata.array ?? [], total: j["totalSize"].int)
    }

    /// A movie, episode or music track with its parts as media sources. Each part is a file: several
    /// `Media` are versions (labelled by resolution), several `Part`s of one `Media` are the
    /// pieces of a stacked file. The part `key` embeds the changestamp, so it is the source's
    /// identity tag: a new key means new bytes.
    /// `placedBelow`: the section's folders on disk (`Location` paths) when the item is placed
    /// by where its file lies below them (home videos), not by its metadata.
    public static func item(_ j: JSONValue, show: (id: String, title: String, year: Int?)? = nil, placedBelow roots: [String]? = nil) -> CatalogItem? {
        guard let id = j["ratingKey"].text, !id.isEmpty, let type = j["type"].string else { return nil }
        var kind: ItemKind
        switch type {
        case "movie": kind = .movie
        case "episode": kind = .episode
        case "track": kind = .track
        // A photo section's pictures and videos (`clip`), placed in their albums by the caller.
        case "photo": kind = .photo
        case "clip": kind = .other
        default: return nil
        }
        if roots != nil && kind != .photo { kind = .other }
        let media = j["Media"].array ?? []
        var sources: [MediaSource] = []
        for (mediaIndex, m) in media.enumerated() {
            let parts = m["Part"].array ?? []
            for (partIndex, p) in parts.enumerated() {
                guard let partId = p["id"].text, let key = p["key"].string, !key.isEmpty else { continue }
                var label = media.count > 1 ? versionLabel(m, index: mediaIndex) : nil
                if parts.count > 1 { label = [label, "Part \(partIndex + 1)"].compactMap { $0 }.joined(separator: " - ") }
                sources.append(
                    MediaSource(
                        id: partId, name: label, container: p["container"].string ?? m["container"].string,
                        path: p["file"].string, size: p["size"].int64, etag: key,
                        bitrate: m["bitrate"].int.map { $0 * 1000 }))  // Plex reports kbit/s
            }
        }
        let modified = Int64(j["updatedAt"].int ?? j["addedAt"].int ?? 0)
        return CatalogItem(
            id: id, kind: kind, title: j["title"].string ?? "", year: kind == .track ? j["parentYear"].int ?? j["year"].int : j["year"].int,
            seriesId: kind == .episode ? (show?.id ?? j["grandparentRatingKey"].text) : nil,
            seriesName: kind == .episode ? (show?.title ?? j["grandparentTitle"].string) : nil,
            seriesYear: kind == .episode ? show?.year : nil,
            seasonNumber: kind == .episode ? j["parentIndex"].int : nil,
            episodeNumber: kind == .episode ? j["index"].int : nil,
            // A track: its album (parentTitle), the album's artist (grandparentTitle), its disc
            // (absoluteIndex: "the disc number for a track on multi-disc albums", present only
            // there; parentIndex is the album's own index) and number (index).
            album: kind == .track ? j["parentTitle"].string.flatMap { $0.isEmpty ? nil : $0 } : nil,
            albumArtist: kind == .track ? [j["grandparentTitle"].string, j["originalTitle"].string].compactMap { $0 }.first { !$0.isEmpty } : nil,
            discNumber: kind == .track ? j["absoluteIndex"].int : nil,
            trackNumber: kind == .track ? j["index"].int : nil,
            folders: roots.map { folders(of: sources.first?.path, below: $0) } ?? [],
            modified: modified, sources: sources,
            // Metadata.viewCount: how often the signed-in user played it (absent when never).
            played: (j["viewCount"].int ?? 0) > 0, details: details(j))
    }

    /// The artwork (`thumb`, `art`, an `Image` of type `clearLogo`) and external text subtitles
    /// (`Part.Stream` of streamType 3 with a `key`) of one Metadata. A ref is the path the
    /// server serves it at; a new stamp in it is a new tag.
    static func assets(_ j: JSONValue) -> [RemoteAsset] {
        var out: [RemoteAsset] = []
        if j["type"].string == "track" {
            // A track's album cover: its album's (parent's) thumb.
            guard let cover = j["parentThumb"].string ?? j["thumb"].string, cover.hasPrefix("/") else { return [] }
            return [RemoteAsset(kind: .poster, ref: cover, tag: cover)]
        }
        let episode = j["type"].string == "episode"
        if let thumb = j["thumb"].string, thumb.hasPrefix("/") { out.append(RemoteAsset(kind: episode ? .thumb : .poster, ref: thumb, tag: thumb)) }
        if !episode, let art = j["art"].string, art.hasPrefix("/") { out.append(RemoteAsset(kind: .fanart, ref: art, tag: art)) }
        if !episode, let logo = (j["Image"].array ?? []).first(where: { $0["type"].string == "clearLogo" })?["url"].string, logo.hasPrefix("/") {
            out.append(RemoteAsset(kind: .logo, ref: logo, tag: logo))
        }
        for media in j["Media"].array ?? [] {
            for part in media["Part"].array ?? [] {
                guard let partId = part["id"].text else { continue }
                for stream in part["Stream"].array ?? [] where stream["streamType"].int == 3 {
                    guard let key = stream["key"].string, key.hasPrefix("/") else { continue }  // embedded: only through the transcoder
                    out.append(
                        RemoteAsset(
                            kind: .subtitle, ref: key, tag: key, sourceId: partId,
                            language: stream["languageCode"].string ?? stream["languageTag"].string,
                            forced: stream["forced"].bool ?? (stream["forced"].int == 1),
                            hearingImpaired: stream["hearingImpaired"].bool ?? (stream["hearingImpaired"].int == 1),
                            codec: stream["codec"].string))
                }
            }
        }
        return out
    }

    /// What an item's own Metadata adds to its listing: its parts' text subtitle streams and its
    /// `Chapter`s (`startTimeOffset` in ms; the name is `tag`, which the spec's Chapter does not
    /// list, else "Chapter <index>"); nil when neither.
    public static func extras(_ j: JSONValue) -> ItemDetails? {
        let chapters = (j["Chapter"].array ?? []).compactMap { c -> ItemDetails.Chapter? in
            guard let start = c["startTimeOffset"].double else { return nil }
            let name = c["tag"].string.flatMap { $0.isEmpty ? nil : $0 } ?? c["index"].int.map { "Chapter \($0)" } ?? ""
            return ItemDetails.Chapter(start: start / 1000, name: name)
        }.sorted { $0.start < $1.start }
        return ItemDetails(chapters: chapters, assets: assets(j).filter { $0.kind == .subtitle }).orNil
    }

    /// The directories between the deepest of `roots` that holds `file` and the file, outermost
    /// first; none when no root holds it.
    static func folders(of file: String?, below roots: [String]) -> [String] {
        guard let file else { return [] }
        let directories = file.split(separator: "/", omittingEmptySubsequences: true).dropLast().map(String.init)
        let holding = roots.map { $0.split(separator: "/", omittingEmptySubsequences: true).map(String.init) }
            .filter { $0.count <= directories.count && Array(directories.prefix($0.count)) == $0 }
        guard let root = holding.max(by: { $0.count < $1.count }) else { return [] }
        return Array(directories.dropFirst(root.count))
    }

    /// What Metadata says beyond names (`summary`, `originalTitle`, `Genre`, `studio`, `Guid`,
    /// `audienceRating`/`rating`, `originallyAvailableAt`, `duration` in ms); nil when nothing.
    public static func details(_ j: JSONValue) -> ItemDetails? {
        var ids: [String: String] = [:]
        for guid in j["Guid"].array ?? [] {
            // `imdb://tt0111161`, `tmdb://278`, `tvdb://…`
            guard let text = guid["id"].string, let split = text.range(of: "://") else { continue }
            let value = String(text[split.upperBound...])
            if !value.isEmpty { ids[String(text[..<split.lowerBound]).lowercased()] = value }
        }
        return ItemDetails(
            originalTitle: j["originalTitle"].string.flatMap { $0.isEmpty ? nil : $0 },
            plot: j["summary"].string.flatMap { $0.isEmpty ? nil : $0 },
            runtimeSeconds: j["duration"].double.map { $0 / 1000 },
            genres: (j["Genre"].array ?? []).compactMap { $0["tag"].string },
            studios: j["studio"].string.map { [$0] } ?? [],
            rating: j["audienceRating"].double ?? j["rating"].double,
            premiered: j["originallyAvailableAt"].string.map { String($0.prefix(10)) },
            ids: ids, assets: assets(j)
        ).orNil
    }

    /// Where a part sits in its item: the `mediaIndex` and `partIndex` the download queue takes.
    /// The key of part `partId` in an item's metadata (`Media[].Part[].key`).
    public static func partKey(_ body: [UInt8], partId: String) throws(LabstreamError) -> String {
        let item = try page(body, "/library/metadata/{id}").metadata.first ?? JSONValue(raw: nil)
        for media in item["Media"].array ?? [] {
            for part in media["Part"].array ?? [] where part["id"].text == partId {
                if let key = part["key"].string, !key.isEmpty { return key }
            }
        }
        throw .malformedResponse("/library/metadata/{id} no longer lists part \(partId)")
    }

    public static func partPosition(_ body: [UInt8], partId: String) throws(LabstreamError) -> (media: Int, part: Int) {
        let item = try page(body, "/library/metadata/{id}").metadata.first ?? JSONValue(raw: nil)
        for (m, media) in (item["Media"].array ?? []).enumerated() {
            for (p, part) in (media["Part"].array ?? []).enumerated() where part["id"].text == partId { return (m, p) }
        }
        throw .malformedResponse("/library/metadata/{id} no longer lists part \(partId): sync the catalog and pin again")
    }

    public static func downloadQueueId(_ body: [UInt8]) throws(LabstreamError) -> Int {
        guard let id = try json(body, "/downloadQueue")["MediaContainer"]["DownloadQueue"].array?.first?["id"].int else {
            throw .malformedResponse("/downloadQueue answered no DownloadQueue id")
        }
        return id
    }

    public static func addedQueueItemId(_ body: [UInt8]) throws(LabstreamError) -> Int {
        guard let id = try json(body, "/downloadQueue/{id}/add")["MediaContainer"]["AddedQueueItems"].array?.first?["id"].int else {
            throw .malformedResponse("/downloadQueue/{id}/add answered no AddedQueueItems id")
        }
        return id
    }

    public struct QueueItem: Sendable, Hashable {
        /// deciding, waiting, processing, available, error or expired.
        public var status: String
        public var error: String?
        public var progress: Double?
    }

    public static func downloadQueueItem(_ body: [UInt8]) throws(LabstreamError) -> QueueItem {
        let item = try json(body, "/downloadQueue/{id}/items/{itemId}")["MediaContainer"]["DownloadQueueItem"].array?.first ?? JSONValue(raw: nil)
        guard let status = item["status"].string else {
            throw .malformedResponse("/downloadQueue/{id}/items/{itemId} answered no DownloadQueueItem status")
        }
        return QueueItem(status: status, error: item["error"].string, progress: item["TranscodeSession"]["progress"].double)
    }

    /// The items of a download queue: id, the key each was added with, its status and the
    /// bitrate it was added at (kbit/s, `DecisionResult.availableBandwidth`).
    public static func downloadQueueItems(_ body: [UInt8]) throws(LabstreamError) -> [(id: Int, key: String, status: String, kbps: Int?)] {
        let container = try json(body, "/downloadQueue/{id}/items")["MediaContainer"]
        return (container["DownloadQueueItem"].array ?? []).compactMap { item in
            guard let id = item["id"].int, let key = item["key"].string else { return nil }
            return (id, key, item["status"].string ?? "", item["DecisionResult"]["availableBandwidth"].int)
        }
    }

    /// "1080p", "4K", "SD"… from `videoResolution`, else "Version N".
    static func versionLabel(_ media: JSONValue, index: Int) -> String {
        guard let r = media["videoResolution"].text?.lowercased(), !r.isEmpty else { return "Version \(index + 1)" }
        if r == "4k" { return "4K" }
        if r == "sd" { return "SD" }
        return r.allSatisfy(\.isNumber) ? r + "p" : r
    }
}

/// Which of a server's advertised connections to try, in order: local before remote, relay
/// last; plain http dropped when the server requires https. Pure.
public enum PlexConnectionPolicy {
    public static func order(_ resource: PlexDecode.Resource) -> [PlexDecode.Connection] {
        let usable = resource.connections.filter { !resource.httpsRequired || $0.isHTTPS }
        func rank(_ c: PlexDecode.Connection) -> Int { c.isRelay ? 2 : (c.isLocal ? 0 : 1) }
        return usable.enumerated().sorted {
            (rank($0.element), $0.element.isHTTPS ? 0 : 1, $0.offset) < (rank($1.element), $1.element.isHTTPS ? 0 : 1, $1.offset)
        }
        .map(\.element)
    }
}
