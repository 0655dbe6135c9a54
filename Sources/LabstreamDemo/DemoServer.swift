import Foundation
import LabstreamCore
import Synchronization

/// The small Jellyfin-compatible server `labstream demo` runs on loopback: the routes
/// Labstream's Jellyfin client asks, as Jellyfin 10.11's OpenAPI document describes them
/// (`PublicSystemInfo`, `AuthenticationResult`, `UserDto`, `BaseItemDtoQueryResult`, ranged
/// `/Items/{itemId}/Download`), over a fixed library and one user. No artwork, subtitles, live
/// streams or faults: the test emulators (the LabstreamFixture target) have those and are not
/// part of `labstream`.
public final class DemoServer: Sendable {
    /// One entry of the library as `BaseItemDto` says it, and its file when it has one.
    struct Entry: Sendable {
        var id: String
        var name: String
        var type: String
        var parent: String
        var year: Int?
        var file: String?
        var container: String?
        var seriesId: String?
        var seriesName: String?
        var seasonId: String?
        var parentIndex: Int?
        var index: Int?
        var album: String?
        var albumArtist: String?
        /// The file's size, read once (the demo's files are made before its server starts).
        var size: Int64 = 0
    }

    static let views: [(name: String, collectionType: String)] = [("Movies", "movies"), ("Shows", "tvshows"), ("Music", "music")]
    /// Every entry was added and last saved then (`DateCreated`).
    static let created = "2024-01-01T00:00:00.0000000Z"

    let user: String
    let password: String
    let serverId = DemoServer.id("server")
    let userId = DemoServer.id("user")
    let token = DemoServer.id("token")
    let entries: [Entry]
    let http = Mutex<HTTPServer?>(nil)

    public init(library: DemoLibrary, user: String, password: String) {
        self.user = user
        self.password = password
        var entries: [Entry] = []
        let (movies, shows, music) = (Self.id("view:Movies"), Self.id("view:Shows"), Self.id("view:Music"))
        for m in library.movies {
            entries.append(
                Entry(id: Self.id("movie:" + m.file), name: m.title, type: "Movie", parent: movies, year: m.year, file: m.file, container: m.container))
        }
        for s in library.series {
            let sid = Self.id("series:" + s.name)
            entries.append(Entry(id: sid, name: s.name, type: "Series", parent: shows, year: s.year))
            for season in Set(s.episodes.map(\.season)).sorted() {
                entries.append(
                    Entry(
                        id: Self.id("season:\(s.name):\(season)"), name: season == 0 ? "Specials" : "Season \(season)", type: "Season", parent: sid,
                        seriesId: sid, seriesName: s.name, index: season))
            }
            for e in s.episodes {
                entries.append(
                    Entry(
                        id: Self.id("episode:" + e.file), name: e.title, type: "Episode", parent: Self.id("season:\(s.name):\(e.season)"),
                        year: s.year, file: e.file, container: e.container, seriesId: sid, seriesName: s.name,
                        seasonId: Self.id("season:\(s.name):\(e.season)"), parentIndex: e.season, index: e.number))
            }
        }
        for t in library.tracks {
            entries.append(
                Entry(
                    id: Self.id("track:" + t.file), name: t.title, type: "Audio", parent: music, year: t.year, file: t.file, container: t.container,
                    parentIndex: t.disc, index: t.number, album: t.album, albumArtist: t.albumArtist))
        }
        self.entries = entries.map { e in
            var sized = e
            sized.size = e.file.flatMap { try? FileManager.default.attributesOfItem(atPath: $0)[.size] as? Int64 } ?? 0
            return sized
        }
    }

    /// Starts listening on a free loopback port; returns the base URL.
    public func start() throws -> String {
        let started = try HTTPServer { [self] request in handle(request) }
        http.withLock {
            $0?.stop()
            $0 = started
        }
        return started.baseURL
    }

    public func stop() {
        http.withLock {
            $0?.stop()
            $0 = nil
        }
    }

    /// A stable 32-hex-digit id, as Jellyfin's are.
    static func id(_ seed: String) -> String {
        func hex(_ v: UInt64) -> String { String(repeating: "0", count: 16 - String(v, radix: 16).count) + String(v, radix: 16) }
        return hex(FNV1a.hash(Array(seed.utf8))) + hex(FNV1a.hash(Array(("demo:" + seed).utf8)))
    }

    func handle(_ request: HTTPServer.Request) -> HTTPServer.Response {
        let parts = request.path.split(separator: "/").map(String.init)
        let get = request.method == "GET"
        if get && parts == ["System", "Info", "Public"] {
            return json([
                "LocalAddress": http.withLock { $0?.baseURL ?? "" }, "ServerName": "Labstream Demo", "Version": "10.11.11", "ProductName": "Jellyfin Server",
                "OperatingSystem": "", "Id": serverId, "StartupWizardCompleted": true
            ])
        }
        if request.method == "POST" && parts == ["Users", "AuthenticateByName"] { return authenticate(request) }
        guard Self.token(in: request.headers["authorization"]) == token else { return .json("", status: 401) }
        switch (request.method, parts) {
        case ("GET", ["Users", "Me"]): return json(userDto)
        case ("GET", ["Users"]): return json([userDto])
        // `userId` is optional (the token's user); another user's id is not this server's.
        case ("GET", ["UserViews"]) where (request.query["userId"] ?? userId) == userId:
            return json(
                page(
                    Self.views.map { ["Id": Self.id("view:" + $0.name), "Name": $0.name, "Type": "CollectionFolder", "CollectionType": $0.collectionType] },
                    request))
        case ("GET", ["Items"]) where (request.query["userId"] ?? userId) == userId: return items(request)
        case ("GET", let p) where p.count == 3 && p[0] == "Shows" && p[2] == "Seasons" && isSeries(p[1]):
            return json(page(entries.filter { $0.type == "Season" && $0.seriesId == p[1] }.map(dto), request))
        case ("GET", let p) where p.count == 3 && p[0] == "Shows" && p[2] == "Episodes" && isSeries(p[1]):
            // Of one season when asked (`seasonId`, else `season` by number).
            let season = request.query["seasonId"], number = request.query["season"].flatMap { Int($0) }
            let episodes = entries.filter { e in
                e.type == "Episode" && e.seriesId == p[1] && (season == nil || e.seasonId == season) && (number == nil || e.parentIndex == number)
            }
            return json(page(episodes.map(dto), request))
        case (let method, let p) where (method == "GET" || method == "HEAD") && p.count == 3 && p[0] == "Items" && p[2] == "Download":
            return download(p[1], request)
        default: return .json("{\"title\":\"Not Found\",\"status\":404}", status: 404)
        }
    }

    func isSeries(_ id: String) -> Bool { entries.contains { $0.id == id && $0.type == "Series" } }

    /// `Authorization: MediaBrowser …, Token="…"` (Jellyfin's `CustomAuthentication`).
    static func token(in header: String?) -> String? {
        guard let header, header.hasPrefix("MediaBrowser ") else { return nil }
        for part in header.dropFirst("MediaBrowser ".count).split(separator: ",") {
            let pair = part.split(separator: "=", maxSplits: 1).map { $0.trimmingCharacters(in: .whitespaces) }
            if pair.count == 2 && pair[0] == "Token" { return pair[1].trimmingCharacters(in: CharacterSet(charactersIn: "\"")) }
        }
        return nil
    }

    var userDto: [String: Any] { ["Id": userId, "Name": user, "ServerId": serverId] }

    /// `AuthenticateUserByName`: `{"Username", "Pw"}` → `AuthenticationResult`.
    func authenticate(_ request: HTTPServer.Request) -> HTTPServer.Response {
        guard let body = try? JSONSerialization.jsonObject(with: Data(request.body)) as? [String: Any],
            (body["Username"] as? String)?.lowercased() == user.lowercased(), body["Pw"] as? String == password
        else { return .json("{\"title\":\"Unauthorized\",\"status\":401}", status: 401) }
        return json(["User": userDto, "AccessToken": token, "ServerId": serverId])
    }

    /// `/Items`: below `parentId` (recursively), of `includeItemTypes`, saved since
    /// `minDateLastSaved`, played when `isPlayed` (nothing is), sorted by name, paged.
    func items(_ request: HTTPServer.Request) -> HTTPServer.Response {
        let types = Set((request.query["includeItemTypes"] ?? "").split(separator: ",").map(String.init))
        let ids = request.query["ids"].map { Set($0.split(separator: ",").map(String.init)) }
        let parent = request.query["parentId"]
        let recursive = request.query["recursive"]?.lowercased() == "true"
        let savedSince = request.query["minDateLastSaved"].flatMap(ISODate.epochSeconds)
        let made = ISODate.epochSeconds(Self.created) ?? 0
        let found = entries.filter { e in
            (types.isEmpty || types.contains(e.type)) && (ids.map { $0.contains(e.id) } ?? true)
                && (parent.map { isBelow(e, $0, recursive: recursive) } ?? true)
                && (savedSince.map { made >= $0 } ?? true) && request.query["isPlayed"]?.lowercased() != "true"
        }
        return json(page(found.sorted { $0.name < $1.name }.map(dto), request))
    }

    func isBelow(_ entry: Entry, _ ancestor: String, recursive: Bool) -> Bool {
        var parent = entry.parent
        while true {
            if parent == ancestor { return true }
            guard recursive, let up = entries.first(where: { $0.id == parent }) else { return false }
            parent = up.parent
        }
    }

    /// A `BaseItemDtoQueryResult` of `startIndex`/`limit` of `all`.
    func page(_ all: [[String: Any]], _ request: HTTPServer.Request) -> [String: Any] {
        let start = min(max(Int(request.query["startIndex"] ?? "") ?? 0, 0), all.count)
        let limit = max(Int(request.query["limit"] ?? "") ?? all.count, 0)
        return ["Items": Array(all[start..<min(start + limit, all.count)]), "TotalRecordCount": all.count, "StartIndex": start]
    }

    /// A strong entity tag (RFC 9110: quoted).
    func etag(_ e: Entry) -> String { "\"" + Self.id("etag:" + e.id + ":\(e.size)") + "\"" }

    func dto(_ e: Entry) -> [String: Any] {
        var d: [String: Any] = ["Id": e.id, "Name": e.name, "Type": e.type, "ParentId": e.parent, "ServerId": serverId, "DateCreated": Self.created]
        d["ProductionYear"] = e.year
        d["SeriesId"] = e.seriesId
        d["SeriesName"] = e.seriesName
        d["SeasonId"] = e.seasonId
        d["ParentIndexNumber"] = e.parentIndex
        d["IndexNumber"] = e.index
        if e.type == "Audio" {
            d["Album"] = e.album
            d["AlbumArtist"] = e.albumArtist
            d["Artists"] = [e.albumArtist ?? ""]
        }
        if let file = e.file {
            let path = "/media/demo/" + (file as NSString).lastPathComponent
            d["Path"] = path
            d["Container"] = e.container
            d["Etag"] = etag(e)
            d["UserData"] = ["Played": false, "PlayCount": 0, "IsFavorite": false]
            d["MediaSources"] = [
                [
                    "Protocol": "File", "Id": e.id, "Path": path, "Type": "Default", "Container": e.container ?? "", "Size": e.size,
                    "Name": e.name, "IsRemote": false, "ETag": etag(e)
                ]
            ]
        }
        return d
    }

    /// The item's file with `Range` and `If-Range` (RFC 9110): 206 for one satisfiable range
    /// (`first-last`, `first-`, or the last N bytes `-N`), 416 for one past the end, and the whole
    /// file when `If-Range` names another version or the range is not one this server serves
    /// (several ranges, a malformed one).
    func download(_ id: String, _ request: HTTPServer.Request) -> HTTPServer.Response {
        guard let entry = entries.first(where: { $0.id == id }), let file = entry.file else {
            return .json("{\"title\":\"Not Found\",\"status\":404}", status: 404)
        }
        let size = entry.size, tag = etag(entry)
        let type = ["mkv": "video/x-matroska", "mp4": "video/mp4", "flac": "audio/flac"][entry.container ?? ""] ?? "application/octet-stream"
        var headers: [(String, String)] = [("Content-Type", type), ("Accept-Ranges", "bytes"), ("ETag", tag)]
        let sameVersion = request.headers["if-range"].map { $0 == tag } ?? true
        if sameVersion, let asked = request.headers["range"].flatMap({ Self.range($0, size: size) }) {
            guard let (first, last) = asked else {
                return HTTPServer.Response(status: 416, headers: headers + [("Content-Range", "bytes */\(size)")])
            }
            headers.append(("Content-Range", "bytes \(first)-\(last)/\(size)"))
            return HTTPServer.Response(
                status: 206, headers: headers, body: .file(path: file, offset: first, length: last - first + 1))
        }
        return HTTPServer.Response(status: 200, headers: headers, body: .file(path: file, offset: 0, length: size))
    }

    /// One `Range` of a file of `size` bytes: nil when it is not one this server serves (the
    /// whole file is sent), `.some(nil)` when it is past the end (416), else its bounds.
    static func range(_ header: String, size: Int64) -> (Int64, Int64)?? {
        guard header.hasPrefix("bytes="), !header.contains(",") else { return nil }
        let halves = header.dropFirst("bytes=".count).split(separator: "-", omittingEmptySubsequences: false)
        guard halves.count == 2 else { return nil }
        switch (Int64(halves[0]), Int64(halves[1]), halves[1].isEmpty) {
        case (let first?, let last?, _) where last >= first: return .some(first < size ? (first, min(last, size - 1)) : nil)
        case (let first?, nil, true): return .some(first < size ? (first, size - 1) : nil)
        case (nil, let suffix?, _) where halves[0].isEmpty && suffix > 0: return .some(size > 0 ? (max(size - suffix, 0), size - 1) : nil)
        default: return nil
        }
    }

    func json(_ object: Any) -> HTTPServer.Response {
        guard let data = try? JSONSerialization.data(withJSONObject: object) else { return .json("{}", status: 500) }
        return HTTPServer.Response(status: 200, headers: [("Content-Type", "application/json; charset=utf-8")], body: .bytes(Array(data)))
    }
}
