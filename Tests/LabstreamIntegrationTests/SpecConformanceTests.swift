import Foundation
import LabstreamBackends
import LabstreamDemo
import LabstreamFixture
import LabstreamHTTP
import Testing

/// The fixtures answer what the published OpenAPI documents describe: every property of every
/// JSON answer Labstream reads is declared by the spec's schema for that route, with its type.
/// A fixture that drifted from the real API would make every other test prove nothing.
@Suite struct SpecConformanceTests {
    /// Extracts of ../shared/specs made by scripts/extract-spec-schemas.py (routes used, and the
    /// schemas they reference, unmodified).
    static let specs = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("Specs").path

    struct Spec {
        let root: [String: Any]

        init(_ file: String) throws {
            root = try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: SpecConformanceTests.specs + "/" + file))) as! [String: Any]
        }

        func resolve(_ schema: [String: Any]) -> [String: Any] {
            guard let ref = schema["$ref"] as? String else { return schema }
            var node: Any = root
            for part in ref.dropFirst(2).split(separator: "/") { node = (node as! [String: Any])[String(part)]! }
            return resolve(node as! [String: Any])
        }

        /// The 200 answer's JSON schema for `method path` (path as the spec spells it).
        func responseSchema(_ method: String, _ path: String) -> [String: Any]? {
            guard let paths = root["paths"] as? [String: Any], let item = paths[path] as? [String: Any],
                let op = item[method] as? [String: Any], let responses = op["responses"] as? [String: Any],
                let ok = responses["200"] as? [String: Any], let content = ok["content"] as? [String: Any],
                let json = content["application/json"] as? [String: Any], let schema = json["schema"] as? [String: Any]
            else { return nil }
            return schema
        }

        /// Problems with `value` against `schema`, as "path: what" lines.
        func check(_ value: Any, _ schema: [String: Any], at path: String, depth: Int = 0) -> [String] {
            let s = resolve(schema)
            if depth > 12 || value is NSNull { return [] }
            if let all = s["allOf"] as? [[String: Any]] {
                // One part (how these specs wrap an enum or a nullable reference): that part.
                if all.count == 1 { return check(value, all[0], at: path, depth: depth + 1) }
                // A scalar with annotations beside it (`[{type: string}, {description: …}]`): each part.
                let parts = all.map(resolve)
                if !parts.contains(where: { $0["properties"] != nil || $0["type"] as? String == "object" || $0["allOf"] != nil }) {
                    return parts.flatMap { check(value, $0, at: path, depth: depth + 1) }
                }
                // Merge the parts' properties: an object must fit their union.
                var merged: [String: Any] = [:]
                for part in all { merged.merge(resolve(part)["properties"] as? [String: Any] ?? [:]) { a, _ in a } }
                return check(value, ["type": "object", "properties": merged], at: path, depth: depth + 1)
            }
            if let variants = (s["oneOf"] ?? s["anyOf"]) as? [[String: Any]] {
                return variants.contains { check(value, $0, at: path, depth: depth + 1).isEmpty } ? [] : ["\(path): fits none of the variants"]
            }
            let type = s["type"] as? String ?? (s["properties"] != nil ? "object" : nil)
            switch (type, value) {
            case ("object", let object as [String: Any]):
                let properties = s["properties"] as? [String: Any] ?? [:]
                if properties.isEmpty { return [] }  // a free-form object
                return object.flatMap { key, v -> [String] in
                    guard let p = properties[key] as? [String: Any] else { return ["\(path).\(key): not in the schema"] }
                    return check(v, p, at: path + "." + key, depth: depth + 1)
                }
            case ("array", let array as [Any]):
                let items = s["items"] as? [String: Any] ?? [:]
                return array.enumerated().flatMap { check($1, items, at: "\(path)[\($0)]", depth: depth + 1) }
            case ("string", let text as String):
                if let allowed = s["enum"] as? [String], !allowed.contains(text) { return ["\(path): '\(text)' is not one of the spec's values"] }
                return []
            case ("boolean", let n as NSNumber) where String(cString: n.objCType) == "c": return []
            case ("integer", let n as NSNumber) where String(cString: n.objCType) != "c" && n.doubleValue.rounded() == n.doubleValue: return []
            case ("number", let n as NSNumber) where String(cString: n.objCType) != "c": return []
            case (nil, _): return []
            default: return ["\(path): \(type!) expected, got \(Swift.type(of: value))"]
            }
        }
    }

    func get(_ url: String, _ headers: [HTTPRequest.Header], method: String = "GET", body: [UInt8]? = nil) throws -> Any {
        let r = try CurlTransport().send(HTTPRequest(method: method, url: url, headers: headers, body: body))
        try #require(r.status == 200 || (method == "POST" && r.status == 201), "\(url) answered \(r.status)")
        return try JSONSerialization.jsonObject(with: Data(r.body))
    }

    @Test(arguments: [ServerFixture.Kind.jellyfin, .emby])
    func mediaBrowserFixturesAnswerAsTheirSpecSays(kind: ServerFixture.Kind) throws {
        let scratch = Scratch("spec-\(kind)")
        var catalog = testCatalog(in: scratch.sub("m"))
        if kind == .emby {
            // Convert jobs need real media.
            try DemoMedia.generate(path: scratch.path + "/m/clip.mkv", seconds: 2, size: "320x240")
            catalog.movies.append(.init(title: "Clip", year: 2020, file: scratch.path + "/m/clip.mkv", container: "mkv"))
        }
        // A home-video library with a folder, a video and a photo.
        writeRandomFile(scratch.path + "/m/beach.jpg", size: 3000, seed: 5)
        writeRandomFile(scratch.path + "/m/cake.mkv", size: 3000, seed: 6)
        catalog.photos = [.init(title: "Beach", folders: ["Trip"], file: scratch.path + "/m/beach.jpg", container: "jpg", width: 64, height: 48)]
        catalog.homeVideos = [.init(title: "Cake", folders: ["Trip"], file: scratch.path + "/m/cake.mkv", container: "mkv")]
        let fixture = try ServerFixture(kind: kind, catalog: catalog, userName: "demo", password: "pw")
        try fixture.start()
        defer { fixture.stop() }
        let spec = try Spec(kind == .jellyfin ? "jellyfin-openapi.json" : "emby-openapi.json")
        let flavor: MediaBrowserFlavor = kind == .jellyfin ? .jellyfin : .emby
        let base = kind == .jellyfin ? fixture.baseURL : fixture.baseURL + "/emby"
        var requests = MediaBrowserRequests(flavor: flavor, baseURL: base, identity: ClientIdentity(device: "t", deviceId: "t"))
        let token = fixture.accessToken, user = fixture.userId
        requests.userId = user
        let login = requests.authenticate(user: "demo", password: "pw")
        // Which spec route each request is, and how Labstream asks it.
        var calls: [(String, String, HTTPRequest)] = [
            ("get", "/System/Info/Public", requests.publicInfo()),
            ("post", "/Users/AuthenticateByName", login)
        ]
        let views = requests.userViews(userId: user, token: token)
        let movies = requests.items(userId: user, parentId: fixtureId("library:movies"), types: "Movie", startIndex: 0, limit: 50, token: token)
        let home = requests.items(
            userId: user, parentId: fixture.homeVideoLibraryId, types: "Folder,PhotoAlbum,Video,Movie,Photo", startIndex: 0, limit: 50, token: token)
        calls += [("get", kind == .jellyfin ? "/Items" : "/Users/{UserId}/Items", home)]
        let series = fixtureId("series:Show:2020")
        let seasons = requests.seasons(seriesId: series, userId: user, token: token)
        let episodes = requests.episodes(seriesId: series, userId: user, startIndex: 0, limit: 50, token: token)
        if kind == .jellyfin {
            calls += [
                ("get", "/UserViews", views), ("get", "/Items", movies), ("get", "/Shows/{seriesId}/Seasons", seasons),
                ("get", "/Shows/{seriesId}/Episodes", episodes), ("get", "/Users/Me", requests.me(token: token))
            ]
        } else {
            // Emby's spec gives /Shows/{Id}/Episodes no schema; its items are checked as /Items's.
            calls += [
                ("get", "/Users/{UserId}/Views", views), ("get", "/Users/{UserId}/Items", movies), ("get", "/Shows/{Id}/Seasons", seasons),
                ("get", "/Users/{UserId}/Items", episodes), ("get", "/Users/{Id}", requests.me(token: token)),
                ("get", "/Users/Query", requests.users(token: token))
            ]
        }
        if kind == .emby {
            // Convert jobs: creation, the ready list (polled until the job is ready), the job.
            let clip = try #require(fixture.itemId(forFile: scratch.path + "/m/clip.mkv"))
            calls += [("post", "/Sync/Jobs", requests.createSyncJob(itemId: clip, userId: user, bitrate: 1_000_000, name: "t", token: token))]
            calls += Array(repeating: ("get", "/Sync/Items/Ready", requests.readySyncItems(token: token)), count: ServerFixture.readyAfterPolls)
            calls += [("get", "/Sync/Jobs/{Id}", requests.syncJob("100", token: token))]
        }
        var checked = 0
        for (method, route, request) in calls {
            let schema = try #require(spec.responseSchema(method, route), "\(kind) spec has no JSON answer for \(method) \(route)")
            let answer = try get(request.url, request.headers, method: request.method, body: request.body)
            let problems = spec.check(answer, schema, at: route)
            #expect(problems.isEmpty, "\(kind) \(route): \(problems.prefix(5))")
            checked += 1
        }
        #expect(checked == calls.count)
        if kind == .emby {
            // The ready list that was checked held the converted item, not just an empty list.
            let ready = try get(requests.readySyncItems(token: token).url, requests.readySyncItems(token: token).headers) as? [Any]
            #expect(fixture.syncJobCount == 1 && ready?.isEmpty == false)
        }
    }

    /// The Plex fixture against the Plex Media Server spec (1.1.1). It has no `/children` route
    /// (the older spec has); children answer the same MediaContainerWithMetadata as
    /// `/library/metadata/{ids}` and are checked against that.
    @Test func thePlexFixtureAnswersAsItsSpecSays() throws {
        let scratch = Scratch("spec-plex")
        var catalog = testCatalog(in: scratch.sub("m"))
        // Download-queue transcodes need real media.
        try DemoMedia.generate(path: scratch.path + "/m/clip.mkv", seconds: 2, size: "320x240")
        catalog.movies.append(.init(title: "Clip", year: 2020, file: scratch.path + "/m/clip.mkv", container: "mkv"))
        // A home-video section (no metadata agent) and a photo section with an album.
        writeRandomFile(scratch.path + "/m/beach.jpg", size: 3000, seed: 5)
        catalog.photos = [.init(title: "Beach", folders: ["Trip"], file: scratch.path + "/m/beach.jpg", container: "jpg", width: 64, height: 48)]
        catalog.homeVideos = [.init(title: "Cake", folders: ["2019"], file: scratch.path + "/m/clip.mkv", container: "mkv")]
        let fixture = try ServerFixture(kind: .plex, catalog: catalog)
        try fixture.start()
        defer { fixture.stop() }
        let spec = try Spec("plex-api-spec.json")
        let requests = PlexRequests(baseURL: fixture.baseURL, identity: ClientIdentity(device: "t", deviceId: "t"))
        let token = fixture.accessToken
        let shows = requests.sectionItems(section: "2", type: 2, start: 0, size: 50, token: token)
        let showList = try get(shows.url, shows.headers) as? [String: Any]
        let show = try #require(((showList?["MediaContainer"] as? [String: Any])?["Metadata"] as? [[String: Any]])?.first?["ratingKey"] as? String)
        let seasons = requests.children(of: show, start: 0, size: 50, token: token)
        let seasonList = try get(seasons.url, seasons.headers) as? [String: Any]
        let season = try #require(((seasonList?["MediaContainer"] as? [String: Any])?["Metadata"] as? [[String: Any]])?.first?["ratingKey"] as? String)
        let photoTop = requests.sectionItems(section: "5", type: nil, start: 0, size: 50, token: token)
        let photoList = try get(photoTop.url, photoTop.headers) as? [String: Any]
        let album = try #require(
            ((photoList?["MediaContainer"] as? [String: Any])?["Metadata"] as? [[String: Any]])?.first { $0["type"] as? String == "photoalbum" }?["ratingKey"]
                as? String)
        let calls: [(String, HTTPRequest)] = [
            ("/identity", requests.identityRequest()),
            ("/library/sections/all", requests.sections(token: token, newerPath: true)),
            ("/library/sections/{sectionId}/all", requests.sectionItems(section: "1", type: 1, start: 0, size: 50, token: token)),
            ("/library/sections/{sectionId}/all", shows),
            ("/library/metadata/{ids}", seasons),
            ("/library/metadata/{ids}", requests.children(of: season, start: 0, size: 50, token: token)),
            ("/library/sections/{sectionId}/all", requests.sectionItems(section: "4", type: 1, start: 0, size: 50, token: token)),
            ("/library/sections/{sectionId}/all", photoTop),
            ("/library/metadata/{ids}", requests.children(of: album, start: 0, size: 50, token: token))
        ]
        for (route, request) in calls {
            let schema = try #require(spec.responseSchema("get", route), "no JSON answer for \(route)")
            let problems = spec.check(try get(request.url, request.headers), schema, at: route)
            #expect(problems.isEmpty, "\(route): \(problems.prefix(5))")
        }
        // The download queue, as the copy at a capped quality drives it: create, add, poll until available.
        let movies = try get(calls[2].1.url, calls[2].1.headers) as? [String: Any]
        let clip = try #require(((movies?["MediaContainer"] as? [String: Any])?["Metadata"] as? [[String: Any]])?.first { $0["title"] as? String == "Clip" })
        let clipKey = try #require(clip["ratingKey"] as? String)
        let create = requests.createDownloadQueue(token: token)
        let queue = try get(create.url, create.headers, method: "POST")
        #expect(spec.check(queue, try #require(spec.responseSchema("post", "/downloadQueue")), at: "/downloadQueue").isEmpty)
        let queueId = try PlexDecode.downloadQueueId(try JSONSerialization.data(withJSONObject: queue).map { $0 })
        let add = requests.addToDownloadQueue(queueId, key: "/library/metadata/\(clipKey)", mediaIndex: 0, partIndex: 0, kilobitsPerSecond: 1000, token: token)
        let added = try get(add.url, add.headers, method: "POST")
        #expect(spec.check(added, try #require(spec.responseSchema("post", "/downloadQueue/{queueId}/add")), at: "add").isEmpty)
        let itemId = try PlexDecode.addedQueueItemId(try JSONSerialization.data(withJSONObject: added).map { $0 })
        let itemSchema = try #require(spec.responseSchema("get", "/downloadQueue/{queueId}/items/{itemId}"))
        var statuses: [String] = []
        for _ in 0..<ServerFixture.readyAfterPolls {
            let poll = requests.downloadQueueItem(queueId, item: itemId, token: token)
            let answer = try get(poll.url, poll.headers)
            let problems = spec.check(answer, itemSchema, at: "items/{itemId}")
            #expect(problems.isEmpty, "\(problems.prefix(5))")
            statuses.append(try PlexDecode.downloadQueueItem(try JSONSerialization.data(withJSONObject: answer).map { $0 }).status)
        }
        #expect(statuses.last == "available", "\(statuses)")

        // The Plex schemas are really consulted: a drifted answer is caught.
        #expect(!spec.check(["MediaContainer": ["DownloadQueueItem": [["status": "ready"]]]], itemSchema, at: "$").isEmpty)
        let metadata = try #require(spec.responseSchema("get", "/library/metadata/{ids}"))
        #expect(!spec.check(["MediaContainer": ["Metadata": [["ratingKey": 5, "frobnicated": true]]]], metadata, at: "$").isEmpty)
    }

    /// plex.tv's PIN and resources answers against the v0.0.3 spec (the one that has them).
    @Test func thePlexTVFixtureAnswersAsItsSpecSays() throws {
        let scratch = Scratch("spec-plextv")
        let server = try ServerFixture(kind: .plex, catalog: testCatalog(in: scratch.sub("m")))
        try server.start()
        let tv = PlexTVFixture(server: server)
        try tv.start()
        defer { server.stop(); tv.stop() }
        tv.approve(onPoll: 2)
        let spec = try Spec("plex-api-spec-v0.0.3-dereferenced.json")
        let requests = PlexRequests(baseURL: tv.baseURL, identity: ClientIdentity(device: "t", deviceId: "t"))
        let created = try get(requests.createPin().url, requests.createPin().headers, method: "POST")
        #expect(spec.check(created, try #require(spec.responseSchema("post", "/pins")), at: "/pins").isEmpty)
        let id = try #require((created as? [String: Any])?["id"] as? Int)
        for _ in 0..<2 {  // pending, then approved with a token
            let polled = try get(requests.pin(id: id).url, requests.pin(id: id).headers)
            let problems = spec.check(polled, try #require(spec.responseSchema("get", "/pins/{pinID}")), at: "/pins/{pinID}")
            #expect(problems.isEmpty, "\(problems.prefix(5))")
        }
        let resources = try get(requests.resources(token: tv.userToken).url, requests.resources(token: tv.userToken).headers)
        let problems = spec.check(resources, try #require(spec.responseSchema("get", "/resources")), at: "/resources")
        #expect(problems.isEmpty, "\(problems.prefix(5))")
    }

    @Test func theCheckerCatchesDrift() throws {
        let spec = try Spec("jellyfin-openapi.json")
        let schema = try #require(spec.responseSchema("get", "/System/Info/Public"))
        #expect(spec.check(["Id": "a", "Version": "10.11.11"], schema, at: "$").isEmpty)
        #expect(spec.check(["Id": 5], schema, at: "$") == ["$.Id: string expected, got __NSCFNumber"] || !spec.check(["Id": 5], schema, at: "$").isEmpty)
        #expect(spec.check(["ServerIdentifier": "a"], schema, at: "$") == ["$.ServerIdentifier: not in the schema"])
        let items = try #require(spec.responseSchema("get", "/Items"))
        #expect(spec.check(["Items": [["Id": "x", "Type": "Movie"]], "TotalRecordCount": 1], items, at: "$").isEmpty)
        #expect(spec.check(["Items": [["Id": "x", "Type": "Film"]]], items, at: "$") == ["$.Items[0].Type: 'Film' is not one of the spec's values"])
    }
}
