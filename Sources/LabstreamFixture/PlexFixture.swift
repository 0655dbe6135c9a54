import Foundation
import LabstreamCore
import LabstreamDemo
import Synchronization

/// A stable decimal number for a fixture id (Plex rating keys and part ids are integers).
func plexNumber(_ id: String) -> String { String(UInt64(id.prefix(12), radix: 16) ?? 0) }

/// (Over 500 lines: one extension of `ServerFixture` per server flavour keeps each flavour's
/// routes together with the spec text they follow.)
///
/// The Plex Media Server side of `ServerFixture`, from the Plex OpenAPI documents: `/identity`,
/// `/library/sections` (and the newer `/library/sections/all`), paged section listings,
/// `/library/metadata/{key}/children`, and parts at `/library/parts/{id}/{changestamp}/{file}`.
/// With `catalog.tracks`, section 3 is a music library: artists, albums (`type=9`) and tracks
/// (`type=10`), each track's part served like a movie's. With `catalog.homeVideos`, section 4 lists
/// them as movies (`type=1`); with `catalog.photos`, section 5 is a photo library: albums (`type=8`)
/// and photos (`type=9`), each photo's part served like a movie's. Catalog artwork is served at
/// `/library/metadata/{key}/{element}/{timestamp}`, sidecar subtitles at `/library/streams/{id}`.
extension ServerFixture {
    var plexCodes: [String: Int] { ["movies": 1, "shows": 2] }

    func plexRoute(_ request: HTTPServer.Request, parts: [String], authorized: Bool, fault: FixtureFault?, logIndex: Int) -> HTTPServer.Response? {
        let m = request.method
        if m == "GET" && parts == ["identity"] {
            return plexJSON(["MediaContainer": ["size": 0, "claimed": true, "machineIdentifier": serverId, "version": "1.41.3.9314-a0bfb8370"]])
        }
        guard authorized else { return .json("{\"errors\":[{\"code\":1001,\"message\":\"User could not be authenticated\",\"status\":401}]}", status: 401) }
        guard request.headers["x-plex-client-identifier"]?.isEmpty == false else {
            return .json("{\"errors\":[{\"code\":1000,\"message\":\"X-Plex-Client-Identifier is required\",\"status\":400}]}", status: 400)
        }
        if m == "GET" && parts == [":", "eventsource", "notifications"] { return eventSource() }
        if (m == "GET" || m == "HEAD") && parts.count == 5 && parts[0] == "library" && parts[1] == "parts" {
            guard let id = idsByPlexNumber[parts[2]], parts[3] == changestamp(id) else {
                // plex-api-spec.yaml: a part's 404 is text/html, not the JSON error body of other routes.
                return HTTPServer.Response(
                    status: 404, headers: [("Content-Type", "text/html")], body: .bytes(Array("<html><body><h1>404 Not Found</h1></body></html>".utf8)))
            }
            return download(id, request, fault, logIndex: logIndex)
        }
        if (m == "GET" || m == "HEAD") && parts.count == 5 && parts[0] == "library" && parts[1] == "metadata" {
            return plexImageAnswer(key: parts[2], element: parts[3], timestamp: parts[4])
        }
        if (m == "GET" || m == "HEAD") && parts.count == 3 && parts[0] == "library" && parts[1] == "streams" {
            return plexStreamAnswer(parts[2])
        }
        guard m == "GET" else { return nil }
        guard (request.headers["accept"] ?? "").contains("application/json") else {
            return .json("{\"errors\":[{\"message\":\"this fixture answers application/json only\"}]}", status: 406)
        }
        if parts == ["library", "sections"] || parts == ["library", "sections", "all"] {
            var sections: [[String: Any]] = []
            if !catalog.movies.isEmpty && !state.withLock({ $0.movieLibraryRemoved }) { sections.append(section("1", catalog.movieLibrary, "movie")) }
            if !catalog.series.isEmpty { sections.append(section("2", catalog.showLibrary, "show")) }
            // LibrarySection.title: the music library's name once it has tracks (before, always "Music");
            // LibrarySection.type "artist" (MediaTypeString) for a music library.
            sections.append(section("3", catalog.tracks.isEmpty ? "Music" : catalog.musicLibraryName, "artist"))
            // Home videos: a LibrarySection of type "movie" (MediaTypeString) kept as its files are, as a
            // server's "Other Videos" library is (the agent that fetches nothing, the plain video scanner).
            if !catalog.homeVideos.isEmpty {
                sections.append(
                    section(
                        "4", catalog.homeVideoLibraryName, "movie", agent: "tv.plex.agents.none",
                        scanner: "Plex Video Files Scanner", location: "/media/homevideos"))
            }
            // Photos: a LibrarySection of type "photo" (MediaTypeString), with Plex's photo agent and scanner.
            if !catalog.photos.isEmpty {
                sections.append(
                    section(
                        "5", catalog.photoLibraryName, "photo", agent: "com.plexapp.agents.none",
                        scanner: "Plex Photo Scanner", location: "/media/photos"))
            }
            return plexJSON(["MediaContainer": ["size": sections.count, "allowSync": false, "title1": "Plex Library", "Directory": sections]])
        }
        // Held-back items (not on the server yet) go wherever removed ones do; a held-back parent's
        // children answer 404 too (a removed one's are still listed, as before holds).
        let back = heldBack()
        let removed = state.withLock { $0.removed }.union(back)
        if parts.count == 4 && parts[0] == "library" && parts[1] == "sections" && parts[3] == "all" {
            let type = request.query["type"]
            // Sections 4 and 5 are there only with home videos and photos (as `/library/sections` lists them).
            if (parts[2] == "4" && catalog.homeVideos.isEmpty) || (parts[2] == "5" && catalog.photos.isEmpty)
                || (parts[2] == "1" && state.withLock({ $0.movieLibraryRemoved }))
            {
                return .json("", status: 404)
            }
            let selected: [[String: Any]]
            switch (parts[2], type) {
            case ("1", "1"?), ("1", nil): selected = itemsById.values.filter { $0["Type"] as? String == "Movie" }
            case ("2", _) where state.withLock({ $0.flatShowSections }): selected = itemsById.values.filter { $0["Type"] as? String == "Episode" }
            case ("2", "2"?), ("2", nil): selected = itemsById.values.filter { $0["Type"] as? String == "Series" }
            // Home videos: their `Video` items, answered as Metadata type "movie" (`type` 1, as section 1's).
            case ("4", "1"?), ("4", nil): selected = itemsById.values.filter { $0["Type"] as? String == "Video" }
            case ("1", _), ("2", _), ("4", _): selected = []
            case ("5", _):
                // `type` (components/parameters/type, the MediaType enum): 8 = photo_album, 9 = photo; any
                // other lists nothing. No type lists the section's top level: the albums not inside
                // another and the photos in no album (albums first, as `/children` lists an album's).
                guard let type else { return plexPage(plexPhotoChildren(of: nil, removed: removed), request) }
                let wanted = ["8": "PhotoAlbum", "9": "Photo"][type]
                selected = itemsById.values.filter { wanted != nil && $0["Type"] as? String == wanted }
            case ("3", _):
                // GET /library/sections/{sectionId}/all `type` (MediaQuery.type). The spec's MediaType enum says
                // 5/6/7 for artist/album/track, but its own examples for this path (PUT `type=10` tracks,
                // `type=9` albums) and `/library/sections/{sectionId}/nearest` ("should be 10 for audio
                // track") use Plex's numbers, which a real server answers: 8 artist, 9 album, 10 track.
                // No type lists the section's top level (artists); any other type lists nothing. An
                // empty music section lists nothing either (a section that exists answers, empty).
                // `numberMusicByTheSpecsEnum` turns it into a server written from the enum alone: 5/6/7, and
                // Plex's own numbers refused as values outside it (400).
                let specEnum = state.withLock { $0.musicBySpecEnum }
                if specEnum, let type, !["5", "6", "7"].contains(type) {
                    return .json("{\"errors\":[{\"code\":1000,\"message\":\"type is not a MediaType\",\"status\":400}]}", status: 400)
                }
                let numbers = specEnum ? ["5": "MusicArtist", "6": "MusicAlbum", "7": "Audio"] : ["8": "MusicArtist", "9": "MusicAlbum", "10": "Audio"]
                let wanted = numbers[type ?? (specEnum ? "5" : "8")]
                selected = itemsById.values.filter { wanted != nil && $0["Type"] as? String == wanted }
            default: return .json("", status: 404)
            }
            return plexPage(selected.filter { !removed.contains($0["Id"] as! String) }.sorted { Self.sortKey($0) < Self.sortKey($1) }, request)
        }
        if parts.count == 3 && parts[0] == "library" && parts[1] == "metadata" {
            guard let id = idsByPlexNumber[parts[2]], let node = itemsById[id], !removed.contains(id) else { return .json("", status: 404) }
            // An item's own metadata carries its Guids unasked (no includeGuids on this path), and a
            // movie's or episode's Chapter with `includeChapters` ("Include chapter details", boolean:
            // v0.0.3 spec, GET /library/metadata/{ratingKey}; the 1.1.1 spec has neither).
            let chapters = ["1", "true"].contains(request.query["includeChapters"]?.lowercased() ?? "")
            // And its parts' Stream (see `plexPart`), which listings leave out.
            return plexPage([node], request, guids: true, chapters: chapters, streams: true)
        }
        if parts.count == 4 && parts[0] == "library" && parts[1] == "metadata" && parts[3] == "children" {
            guard let parent = idsByPlexNumber[parts[2]], let node = itemsById[parent], !back.contains(parent) else { return .json("", status: 404) }
            if let music = plexMusicChildren(of: parent, node, removed: removed) { return plexPage(music, request) }
            if node["Type"] as? String == "PhotoAlbum" { return plexPage(plexPhotoChildren(of: parent, removed: removed), request) }
            let childType = node["Type"] as? String == "Series" ? "Season" : "Episode"
            let children = itemsById.values.filter {
                $0["Type"] as? String == childType && $0["ParentId"] as? String == parent && !removed.contains($0["Id"] as! String)
            }.sorted { (($0["IndexNumber"] as? Int) ?? 0) < (($1["IndexNumber"] as? Int) ?? 0) }
            return plexPage(children, request)
        }
        return nil
    }

    /// From now on show sections list episodes whatever `type` asks (a server that ignores it).
    public func listEpisodesInShowSections() { state.withLock { $0.flatShowSections = true } }

    /// From now on the music section takes the spec's MediaType enum (5 artist, 6 album, 7 track)
    /// and refuses any other `type`.
    public func numberMusicByTheSpecsEnum() { state.withLock { $0.musicBySpecEnum = true } }

    /// The `ratingKey` (Metadata.ratingKey) of the movie, episode or track whose Media holds
    /// `file`: what `markPlayed`, `hold` and `release` take on Plex, besides `itemId(forFile:)`.
    /// A movie's other version is a part of the same metadata item, so it names that item.
    public func ratingKey(forFile file: String) -> String? {
        guard let id = itemId(forFile: file) else { return nil }
        if itemsById[id] != nil { return plexNumber(id) }
        let owner = itemsById.first { entry in
            ((entry.value["_versions"] as? [[String: Any]]) ?? []).contains { $0["Id"] as? String == id }
        }
        return owner.map { plexNumber($0.key) }
    }

    /// Metadata.viewCount ("the number of consumptions", only once watched: an unwatched item has
    /// none) and Metadata.lastViewedAt (PlexDateTime, epoch seconds) of a movie (home videos are
    /// movies here), episode or track.
    func plexWatched(_ raw: [String: Any]) -> [String: Any] {
        guard let id = raw["Id"] as? String, ["Movie", "Episode", "Audio", "Video"].contains(raw["Type"] as? String ?? "") else { return [:] }
        let (count, last) = state.withLock { ($0.playCounts[id] ?? 0, $0.lastPlayed[id]) }
        guard count > 0 else { return [:] }
        var out: [String: Any] = ["viewCount": count]
        if let last { out["lastViewedAt"] = Int(last) }
        return out
    }

    /// A LibrarySection. `agent` and `scanner` (strings): the type's own unless given; `Location`
    /// (array of `id` (integer), `path`: "a top-level location on disk where media in this library
    /// section is stored"): one, numbered as the section, only when `location` is given.
    func section(
        _ key: String, _ title: String, _ type: String, agent: String? = nil, scanner: String? = nil,
        location: String? = nil
    ) -> [String: Any] {
        var out: [String: Any] = [
            "key": key, "title": title, "type": type, "agent": agent ?? "tv.plex.agents.\(type)", "scanner": scanner ?? "Plex \(type.capitalized)",
            "language": "en-US", "uuid": fixtureId("section:\(key)"), "allowSync": true, "content": true, "directory": true,
            "filters": true, "hidden": false, "refreshing": false, "updatedAt": 1_700_000_000, "createdAt": 1_690_000_000,
            "scannedAt": 1_700_000_000, "contentChangedAt": 1_700_000_000
        ]
        if let location { out["Location"] = [["id": Int(key)!, "path": location]] }
        return out
    }

    func changestamp(_ id: String) -> String { String(1_700_000_000 + state.withLock { $0.validatorGeneration[id] ?? 0 }) }

    /// `X-Plex-Container-Start/Size` from the query (the spec) or the headers (what clients send).
    /// `guids`: the items carry their Metadata.Guid whatever the query says (an item's own
    /// metadata); else only with `includeGuids=1`, which "Adds the Guid object to the response"
    /// (GET /library/sections/{sectionId}/all, BoolInt). Listings of children are taken to honour
    /// it the same way (the 1.1.1 spec has no such path; v0.0.3's lists no Guid there).
    /// `chapters`: the items carry their Metadata.Chapter (see `plexDetails`); listings never do.
    /// `streams`: their parts carry Part.Stream (see `plexPart`); listings never do.
    func plexPage(
        _ all: [[String: Any]], _ request: HTTPServer.Request, guids: Bool = false, chapters: Bool = false,
        streams: Bool = false
    ) -> HTTPServer.Response {
        func value(_ name: String) -> Int? { Int(request.query[name] ?? request.headers[name.lowercased()] ?? "") }
        let start = max(value("X-Plex-Container-Start") ?? 0, 0)
        let size = max(value("X-Plex-Container-Size") ?? 50, 0)  // the spec's default page
        let slice = start < all.count ? Array(all[start..<min(all.count, start + size)]) : []
        let withGuids = guids || request.query["includeGuids"] == "1"
        var response = plexJSON([
            "MediaContainer": [
                "size": slice.count, "totalSize": all.count, "offset": start,
                "Metadata": slice.map { plexMetadata($0, guids: withGuids, chapters: chapters, streams: streams) }
            ] as [String: Any]
        ])
        response.headers += [("X-Plex-Container-Start", String(start)), ("X-Plex-Container-Total-Size", String(all.count))]
        return response
    }

    /// `guids`: whether the item carries its Metadata.Guid (see `plexPage`); `chapters` its Chapter;
    /// `streams` its parts' Stream.
    func plexMetadata(_ raw: [String: Any], guids: Bool = false, chapters: Bool = false, streams: Bool = false) -> [String: Any] {
        let id = raw["Id"] as! String
        let key = plexNumber(id)
        // Metadata.addedAt: a released item was added to the library when it arrived (and so
        // updated no earlier).
        let addedAt: Int = state.withLock { $0.added[id] }.map { Int($0) } ?? 1_700_000_000
        let updatedAt: Int = max(addedAt, 1_700_000_000)
        // Metadata.guid, "the globally unique identifier for the media item" (24 hex digits in the
        // spec's example): the agent's, so a section added again keeps it where ratingKey changes.
        var out: [String: Any] = [
            "ratingKey": key, "key": "/library/metadata/\(key)" + ((raw["IsFolder"] as? Bool) == true ? "/children" : ""),
            "guid": "plex://\(raw["Type"] as! String)/\(id.prefix(24))", "title": raw["Name"] as? String ?? "",
            "addedAt": addedAt, "updatedAt": updatedAt
        ]
        out.merge(plexWatched(raw)) { _, new in new }
        out.merge(plexImageMembers(raw, key: key)) { _, new in new }
        if let type = plexMusicType(raw) { return plexMusicMetadata(raw, type: type, base: out) }
        if let type = plexPhotoType(raw) { return plexPhotoMetadata(raw, type: type, base: out) }
        switch raw["Type"] as? String {
        case "Movie", "Video": out["type"] = "movie"  // a home video is a movie of its section (4)
        case "Series": out["type"] = "show"
        case "Season": out["type"] = "season"
        case "Episode": out["type"] = "episode"
        default: break
        }
        if let year = raw["ProductionYear"] as? Int { out["year"] = year }
        if let index = raw["IndexNumber"] as? Int { out["index"] = index }
        if let season = raw["ParentIndexNumber"] as? Int { out["parentIndex"] = season }
        out.merge(plexDetails(raw, guids: guids, chapters: chapters)) { _, new in new }
        if let parent = raw["ParentId"] as? String, raw["Type"] as? String != "Movie", raw["Type"] as? String != "Series" {
            out["parentRatingKey"] = plexNumber(parent)
        }
        if let series = raw["SeriesId"] as? String, raw["Type"] as? String == "Episode" {
            out["grandparentRatingKey"] = plexNumber(series)
            out["grandparentTitle"] = raw["SeriesName"] as? String ?? ""
            out["parentTitle"] = "Season \(raw["ParentIndexNumber"] as? Int ?? 0)"
        }
        if let versions = raw["_versions"] as? [[String: Any]] {
            out["Media"] = versions.enumerated().map { index, v -> [String: Any] in
                let vid = v["Id"] as! String
                let container = v["Container"] as? String ?? "mkv"
                // Versions differ by resolution in a real library; the fixture labels them so.
                let resolution = versions.count > 1 ? (index == 0 ? "1080" : "720") : "1080"
                return [
                    "id": Int(plexNumber(vid + ":media"))!, "container": container, "videoResolution": resolution,
                    "Part": [plexPart(v, container: container, streams: streams)]
                ]
            }
        }
        return out
    }

    /// Media.Part of one file (a `_versions` entry): Part.id (integer, int64); Part.key (string) the
    /// part route with the file's changestamp, as the spec's example `/library/parts/1/1531779263/file.mov`,
    /// its last segment `keyName` (the file's name unless given); Part.file ("the local file path at
    /// which the part is stored on the server": the entry's `Path`, else below /media); Part.size
    /// (integer, int64: bytes); Part.container. With `streams`, Part.Stream ("array of Stream"): the
    /// file's catalog subtitles (`plexSubtitleStreams`), when it has any; the fixture lists no video
    /// or audio streams.
    func plexPart(_ v: [String: Any], container: String, keyName: String? = nil, streams: Bool = false) -> [String: Any] {
        let vid = v["Id"] as! String
        let file = v["File"] as! String
        let name = (file as NSString).lastPathComponent
        var part: [String: Any] = [
            "id": Int(plexNumber(vid))!, "key": "/library/parts/\(plexNumber(vid))/\(changestamp(vid))/\(keyName ?? name)",
            "file": v["Path"] as? String ?? "/media/" + name, "size": fileSize(file), "container": container
        ]
        if streams {
            let subtitles = plexSubtitleStreams(ofFile: file)
            if !subtitles.isEmpty { part["Stream"] = subtitles }
        }
        return part
    }

    /// The descriptive Metadata members of a movie, episode or show with catalog details
    /// (`_details`), by the names and types of plex-api-spec.yaml components.schemas.Metadata; all
    /// are optional ("When present"), so unset ones are not sent and an item without details
    /// answers as before. Metadata.Guid only with `guids` (see `plexPage`), Chapter only with `chapters`.
    func plexDetails(_ raw: [String: Any], guids: Bool, chapters: Bool = false) -> [String: Any] {
        guard let d = raw["_details"] as? FixtureCatalog.Details else { return [:] }
        var out: [String: Any] = [:]
        if let plot = d.plot { out["summary"] = plot }  // string: "e.g. movie plot"
        if let original = d.originalTitle { out["originalTitle"] = original }  // string: "a movie's foreign title"
        if !d.genres.isEmpty { out["Genre"] = d.genres.map { ["tag": $0] } }  // array of Tag (`tag` required)
        // studio: one string ("the studio or label which produced an item"); the schema has no
        // Studio array, so only the first studio.
        if let studio = d.studios.first { out["studio"] = studio }
        // rating and audienceRating: numbers (float, 0–10); "some rating systems separate reviewer
        // ratings from audience ratings". The catalog has one (community) rating: both carry it.
        if let rating = d.rating {
            out["rating"] = rating
            out["audienceRating"] = rating
        }
        if let content = d.contentRating { out["contentRating"] = content }  // string, "e.g. MPAA"
        if let day = d.premiered { out["originallyAvailableAt"] = day }  // string (date), "YYYY-MM-DD"
        if let seconds = d.runtimeSeconds { out["duration"] = seconds * 1000 }  // integer (int32): milliseconds
        if guids {
            // Guid: array of objects with `id` (required) matching ^(imdb|tmdb|tvdb)://.+$.
            let ids = [("imdb", d.imdb), ("tmdb", d.tmdb), ("tvdb", d.tvdb)].compactMap { scheme, value in
                value.map { ["id": "\(scheme)://\($0)"] }
            }
            if !ids.isEmpty { out["Guid"] = ids }
        }
        if chapters, !d.chapters.isEmpty, ["Movie", "Episode"].contains(raw["Type"] as? String ?? "") {
            out["Chapter"] = plexChapters(d, itemId: raw["Id"] as! String)
        }
        return out
    }

    /// Metadata.Chapter (v0.0.3 spec, GET /library/metadata/{ratingKey} 200): `id` (integer),
    /// `filter` ("thumb=<id>", as its example `id` 4 / `thumb=4`), `index` (integer, from 1, as its
    /// example and `/library/media/{mediaId}/chapterImages/{chapter}` "The index of the chapter"),
    /// `startTimeOffset` and `endTimeOffset` (integers, milliseconds: the example's 100100 for a
    /// chapter at 0), in start order. A chapter ends where the next starts, the last at the item's
    /// duration; without one (no `runtimeSeconds`) the last has no `endTimeOffset`. The name is
    /// `tag`, which the spec's Chapter does not list (a real server's chapters carry it, as its
    /// other tag lists do). `thumb` is not sent: the fixture has no chapter images.
    func plexChapters(_ d: FixtureCatalog.Details, itemId: String) -> [[String: Any]] {
        let ordered = d.orderedChapters
        func ms(_ seconds: Double) -> Int { Int((seconds * 1000).rounded()) }
        return ordered.enumerated().map { i, chapter -> [String: Any] in
            let id = Int(plexNumber(fixtureId("chapter:\(itemId):\(i)")))!
            var out: [String: Any] = [
                "id": id, "filter": "thumb=\(id)", "index": i + 1,
                "startTimeOffset": ms(chapter.start), "tag": chapter.name
            ]
            if i + 1 < ordered.count {
                out["endTimeOffset"] = ms(ordered[i + 1].start)
            } else if let seconds = d.runtimeSeconds, seconds * 1000 >= ms(chapter.start) {
                out["endTimeOffset"] = seconds * 1000
            }
            return out
        }
    }

    func plexJSON(_ object: Any) -> HTTPServer.Response { json(object) }

    // MARK: - Music

    /// Metadata.type (MediaTypeString "artist", "album", "track") of a music item, nil for others.
    func plexMusicType(_ raw: [String: Any]) -> String? {
        switch raw["Type"] as? String {
        case "MusicArtist"?: return "artist"
        case "MusicAlbum"?: return "album"
        case "Audio"?: return "track"
        default: return nil
        }
    }

    /// An artist's children are its albums, an album's its tracks (by disc and number). The spec's
    /// Metadata description: "A similar hierarchy exists with track, album, and artist".
    func plexMusicChildren(of parent: String, _ node: [String: Any], removed: Set<String>) -> [[String: Any]]? {
        let kept = { (item: [String: Any]) -> Bool in !removed.contains(item["Id"] as! String) }
        switch node["Type"] as? String {
        case "MusicArtist"?:
            return itemsById.values.filter { item -> Bool in
                guard item["Type"] as? String == "MusicAlbum", kept(item), let artist = item["_artistName"] as? String else { return false }
                return fixtureId("artist:" + artist) == parent
            }.sorted { Self.sortKey($0) < Self.sortKey($1) }
        case "MusicAlbum"?:
            func order(_ item: [String: Any]) -> (Int, Int, String) {
                ((item["ParentIndexNumber"] as? Int) ?? 0, (item["IndexNumber"] as? Int) ?? 0, Self.sortKey(item))
            }
            return itemsById.values.filter { $0["Type"] as? String == "Audio" && $0["AlbumId"] as? String == parent && kept($0) }
                .sorted { order($0) < order($1) }
        default:
            return nil
        }
    }

    /// The artist (name and item) an album, or a track through its album (its own when it has none), is filed under.
    func plexArtist(of raw: [String: Any]) -> (name: String, id: String)? {
        let album = (raw["AlbumId"] as? String).flatMap { itemsById[$0] }
        guard let name = (album?["_artistName"] as? String) ?? (raw["_artistName"] as? String) else { return nil }
        return (name, fixtureId("artist:" + name))
    }

    func plexMusicMetadata(_ raw: [String: Any], type: String, base: [String: Any]) -> [String: Any] {
        let id = raw["Id"] as! String
        var out = base
        out["type"] = type  // Metadata.type: MediaTypeString artist/album/track
        out["guid"] = "plex://\(type)/\(id)"  // Metadata.guid, e.g. plex://track/…, plex://album/…
        if let year = raw["ProductionYear"] as? Int { out["year"] = year }  // Metadata.year (integer)
        switch type {
        case "album":
            if let artist = plexArtist(of: raw) {
                let key = plexNumber(artist.id)
                out["parentRatingKey"] = key  // Metadata.parentRatingKey (string): the artist
                out["parentKey"] = "/library/metadata/\(key)"  // Metadata.parentKey
                out["parentTitle"] = artist.name  // Metadata.parentTitle: the artist's title
                out["parentGuid"] = "plex://artist/\(artist.id)"  // Metadata.parentGuid
            }
        case "track":
            if let index = raw["IndexNumber"] as? Int { out["index"] = index }  // Metadata.index: the track number
            if let disc = raw["ParentIndexNumber"] as? Int {
                out["parentIndex"] = disc  // Metadata.parentIndex: the parent's (album's) index, the disc on a real server
                out["absoluteIndex"] = disc  // Metadata.absoluteIndex: "the disc number for a track on multi-disc albums"
            }
            if let albumId = raw["AlbumId"] as? String, let album = itemsById[albumId] {
                let key = plexNumber(albumId)
                out["parentRatingKey"] = key  // Metadata.parentRatingKey (string): the album
                out["parentKey"] = "/library/metadata/\(key)"  // Metadata.parentKey
                out["parentTitle"] = album["Name"] as? String ?? ""  // Metadata.parentTitle: the album's title
                out["parentGuid"] = "plex://album/\(albumId)"  // Metadata.parentGuid
                // parentYear (integer): v0.0.3 spec, `/status/sessions` track Metadata; not in the 1.1.1 schema
                // (Metadata.additionalProperties: true).
                if let year = album["ProductionYear"] as? Int { out["parentYear"] = year }
                // Metadata.parentThumb: the album's thumb, as the spec's track example
                // (`parentThumb: /library/metadata/251/thumb/1716801576`).
                if let thumb = plexImageMembers(album, key: key)["thumb"] { out["parentThumb"] = thumb }
            }
            // An album-less track has no parent: parentTitle, parentRatingKey, parentKey absent (all optional).
            let artist = plexArtist(of: raw)
            if let artist {
                let key = plexNumber(artist.id)
                out["grandparentRatingKey"] = key  // Metadata.grandparentRatingKey (string)
                out["grandparentKey"] = "/library/metadata/\(key)"  // Metadata.grandparentKey
                out["grandparentTitle"] = artist.name  // Metadata.grandparentTitle: the (album) artist
                out["grandparentGuid"] = "plex://artist/\(artist.id)"  // Metadata.grandparentGuid
            }
            // Metadata.originalTitle: v0.0.3 says "the track artist if an audio Item has an album artist";
            // sent when the track's own artists differ from the grandparent's title.
            let own = ((raw["Artists"] as? [String]) ?? []).joined(separator: "; ")
            if !own.isEmpty && own != artist?.name { out["originalTitle"] = own }
            if let versions = raw["_versions"] as? [[String: Any]] {
                out["Media"] = versions.map { v -> [String: Any] in  // Metadata.Media: array of Media
                    let vid = v["Id"] as! String
                    let file = v["File"] as! String
                    let container = v["Container"] as? String ?? ""
                    let ext = (file as NSString).pathExtension.isEmpty ? container : (file as NSString).pathExtension
                    // Part.key's last segment is not the file's name here (as the spec's example `file.mov`).
                    return [
                        "id": Int(plexNumber(vid + ":media"))!,  // Media.id (integer, int64, required)
                        "container": container,  // Media.container
                        "Part": [plexPart(v, container: container, keyName: "file.\(ext)")]
                    ]  // Media.Part: array of Part
                }
            }
        default:
            break
        }
        return out
    }
}

// MARK: - Photos

extension ServerFixture {
    /// Metadata.type (MediaTypeString "photoalbum", "photo") of a photo-section item, nil for others.
    func plexPhotoType(_ raw: [String: Any]) -> String? {
        switch raw["Type"] as? String {
        case "PhotoAlbum"?: return "photoalbum"
        case "Photo"?: return "photo"
        default: return nil
        }
    }

    /// The photo section's items directly below `parent` (an album; nil: the section's top level):
    /// its albums, then its photos, each by title. The spec's Metadata description: "A similar
    /// hierarchy exists with ... photos and photo album".
    func plexPhotoChildren(of parent: String?, removed: Set<String>) -> [[String: Any]] {
        let below = itemsById.values.filter { item in
            plexPhotoType(item) != nil && item["ParentId"] as? String == parent && !removed.contains(item["Id"] as! String)
        }
        func order(_ item: [String: Any]) -> (Int, String) { (item["Type"] as? String == "PhotoAlbum" ? 0 : 1, Self.sortKey(item)) }
        return below.sorted { order($0) < order($1) }
    }

    func plexPhotoMetadata(_ raw: [String: Any], type: String, base: [String: Any]) -> [String: Any] {
        let id = raw["Id"] as! String
        var out = base
        out["type"] = type  // Metadata.type: MediaTypeString photoalbum/photo
        out["guid"] = "plex://\(type)/\(id)"  // Metadata.guid
        // A photo's (or album's) album: the innermost directory it lies in; none at the section's top.
        if let parent = raw["ParentId"] as? String, let album = itemsById[parent] {
            let key = plexNumber(parent)
            out["parentRatingKey"] = key  // Metadata.parentRatingKey (string): the album
            out["parentKey"] = "/library/metadata/\(key)"  // Metadata.parentKey
            out["parentTitle"] = album["Name"] as? String ?? ""  // Metadata.parentTitle: the album's title (its folder's name)
            out["parentGuid"] = "plex://photoalbum/\(parent)"  // Metadata.parentGuid
        }
        if let versions = raw["_versions"] as? [[String: Any]] {
            out["Media"] = versions.map { v -> [String: Any] in  // Metadata.Media: array of Media
                let container = v["Container"] as? String ?? ""
                return clean([
                    "id": Int(plexNumber((v["Id"] as! String) + ":media"))!,  // Media.id (integer, int64, required)
                    "width": raw["Width"] as? Int,  // Media.width (integer, int32): pixels
                    "height": raw["Height"] as? Int,  // Media.height (integer, int32): pixels
                    "container": container,  // Media.container
                    "Part": [plexPart(v, container: container)]
                ])  // Media.Part: array of Part
            }
        }
        return out
    }
}

// MARK: - Artwork and subtitles

extension ServerFixture {
    /// Plex images of an item by Metadata element (the `{element}` of GET
    /// /library/metadata/{ids}/{element}/{timestamp}, whose enum has thumb, art and clearLogo):
    /// "thumb" (a poster, a season's poster, an episode's thumbnail), "art" (fanart), "clearLogo"
    /// (logo), the first of each kind, each with its stamp: the route's `timestamp` (an integer,
    /// "used for cache management in the client"; epoch seconds in the spec's examples), made
    /// from the image's tag so that it changes when the bytes do.
    func plexImages(_ raw: [String: Any]) -> [String: (bytes: Data, stamp: Int)] {
        var out: [String: (bytes: Data, stamp: Int)] = [:]
        for image in artwork(raw) {
            let element: String
            switch image.kind {
            case .poster: element = "thumb"
            case .fanart: element = "art"
            case .logo: element = "clearLogo"
            }
            if out[element] == nil { out[element] = (image.bytes, 1_700_000_000 + Int(image.tag.prefix(7), radix: 16)!) }
        }
        return out
    }

    /// Metadata.thumb ("the URL for the poster or thumbnail for the item"), Metadata.art ("the URL
    /// for the background artwork") and Metadata.Image (array of Image: `type` coverPoster for the
    /// thumb, background for the art, clearLogo for the logo (the Image type enum's names), `url`
    /// "the relative path", `alt` "title to use for accessibility": the item's title), each URL
    /// "/library/metadata/<ratingKey>/<element>/<stamp>" as the spec's examples. Listings and the
    /// item's own metadata alike; only for an item with images (one without answers as before).
    func plexImageMembers(_ raw: [String: Any], key: String) -> [String: Any] {
        guard raw["_artwork"] != nil else { return [:] }
        let images = plexImages(raw)
        var out: [String: Any] = [:]
        var list: [[String: Any]] = []
        for (element, type) in [("thumb", "coverPoster"), ("art", "background"), ("clearLogo", "clearLogo")] {
            guard let image = images[element] else { continue }
            let url = "/library/metadata/\(key)/\(element)/\(image.stamp)"
            if element != "clearLogo" { out[element] = url }  // Metadata has no clearLogo member: Image only
            list.append(["type": type, "url": url, "alt": raw["Name"] as? String ?? ""])
        }
        if !list.isEmpty { out["Image"] = list }
        return out
    }

    /// GET /library/metadata/{ids}/{element}/{timestamp}: the image's bytes (`imageAnswer`), whatever
    /// the timestamp (an integer; the client's cache key, so an old one still gets the current
    /// image, as the spec gives the server no use for it). 404 for an item that is not there, an
    /// element it has no image for, or a timestamp that is no integer.
    func plexImageAnswer(key: String, element: String, timestamp: String) -> HTTPServer.Response {
        guard Int(timestamp) != nil, let id = idsByPlexNumber[key], let item = presentItem(id), let image = plexImages(item)[element] else {
            return .json("{\"errors\":[{\"code\":1002,\"message\":\"Not Found\"}]}", status: 404)
        }
        return imageAnswer(image.bytes)
    }

    /// Stream.codec of a catalog subtitle: srt, ass, vtt (webvtt), pgs (pgssub); any other as given.
    static func plexSubtitleCodec(_ codec: String) -> String {
        subtitleFormat(codec) ?? (codec.lowercased() == "pgssub" ? "pgs" : codec.lowercased())
    }

    /// Stream.id (integer, int32, "unique stream identifier") of the `offset`-th catalog subtitle of
    /// `file`: 28 bits of a hash of both, never 0.
    func plexStreamId(file: String, offset: Int) -> Int { Int(fixtureId("stream:\(file)\u{0}\(offset)").prefix(7), radix: 16)! + 1 }

    /// Part.Stream entries of a part's file's catalog subtitles, only on the item's own
    /// `/library/metadata/{id}` (`plexPage` `streams`). Section listings and `/children` do not
    /// carry them: Part.Stream is optional in every schema (1.1.1 Part; v0.0.3 shows it on the
    /// section listing's and the item's answers alike), a real server sends it on the item's own
    /// metadata, and a client that needs streams must ask there; a fixture sending more would hide
    /// that. Each: `id`, `streamType` 3 (SUBTITLE), `codec` (`plexSubtitleCodec`), `forced`,
    /// `hearingImpaired`, `displayTitle` and `extendedDisplayTitle` (`subtitleTitle`; v0.0.3 requires
    /// both), `languageCode` (the ISO 639-2 code) and `language` (its English name) when there is
    /// one. A sidecar (external) also `key` "/library/streams/<id>" ("key to access this stream
    /// part", served by `plexStreamAnswer`) and `format` (its codec); an embedded one instead its
    /// `index` in the file and no `key`: a real server serves those through its transcoder, out of
    /// this fixture's scope (the 1.1.1 schema lists `key` as required; v0.0.3's does not).
    func plexSubtitleStreams(ofFile file: String) -> [[String: Any]] {
        numberedSubtitles(ofFile: file).enumerated().map { offset, entry in
            let sub = entry.subtitle
            let id = plexStreamId(file: file, offset: offset)
            var stream: [String: Any] = [
                "id": id, "streamType": 3, "codec": Self.plexSubtitleCodec(sub.codec), "forced": sub.forced,
                "hearingImpaired": sub.hearingImpaired, "displayTitle": Self.subtitleTitle(sub, extended: false),
                "extendedDisplayTitle": Self.subtitleTitle(sub, extended: true)
            ]
            if let code = sub.language {
                stream["languageCode"] = code
                stream["language"] = Self.languageName(code)
            }
            if sub.external {
                stream["key"] = "/library/streams/\(id)"
                stream["format"] = Self.plexSubtitleCodec(sub.codec)
            } else {
                stream["index"] = entry.index
            }
            return stream
        }
    }

    /// GET /library/streams/{streamId} and /library/streams/{streamId}.{ext} ("get a stream (such as
    /// a sidecar subtitle stream)"): a sidecar subtitle's bytes (`subtitleFileAnswer`). `ext` must be
    /// its codec's (srt, ass, vtt, pgs) or its file's extension: the file is served as it is, never
    /// converted. 404 for an embedded stream, an unknown id or another extension, and while the
    /// file's item is removed or held back.
    func plexStreamAnswer(_ name: String) -> HTTPServer.Response {
        let notFound = HTTPServer.Response.json("{\"errors\":[{\"code\":1002,\"message\":\"Not Found\"}]}", status: 404)
        let pieces = name.split(separator: ".", maxSplits: 1).map(String.init)
        guard let id = Int(pieces.first ?? "") else { return notFound }
        let removed = state.withLock { $0.removed }
        for (file, subtitles) in catalog.subtitles {
            for (offset, sub) in subtitles.enumerated() where sub.external && plexStreamId(file: file, offset: offset) == id {
                guard let owner = itemId(forFile: file), !removed.contains(owner), !isHeldBack(file: owner) else { return notFound }
                if pieces.count == 2 {
                    let ext = pieces[1].lowercased()
                    guard ext == Self.plexSubtitleCodec(sub.codec) || ext == (sub.file as NSString).pathExtension.lowercased() else { return notFound }
                }
                return subtitleFileAnswer(sub)
            }
        }
        return notFound
    }
}

/// plex.tv's `/api/v2` for tests (from the v0.0.3 spec): PINs the test approves or lets
/// expire, and `/resources` listing the fixture server with a dead relay and remote address
/// ahead of the working local one.
public final class PlexTVFixture: Sendable {
    public let userToken: String
    let server: ServerFixture
    let state = Mutex<State>(State())
    private let http = Mutex<HTTPServer?>(nil)

    struct State {
        var pins: [Int: (code: String, approved: Bool, expired: Bool, client: String)] = [:]
        var approveOnPoll: Int? = nil
        var polls = 0
        var log: [String] = []
    }

    public init(server: ServerFixture, userToken: String = "plex-user-" + String(UInt64.random(in: 0...UInt64.max), radix: 36)) {
        self.server = server
        self.userToken = userToken
    }

    @discardableResult
    public func start() throws -> String {
        let s = try HTTPServer { [self] request in handle(request) }
        http.withLock { $0 = s }
        return s.baseURL
    }

    public func stop() {
        http.withLock {
            $0?.stop(); $0 = nil
        }
    }

    public var baseURL: String { http.withLock { $0?.baseURL ?? "" } }

    /// Approve every PIN when it is polled for the `n`-th time (nil: never).
    public func approve(onPoll n: Int?) { state.withLock { $0.approveOnPoll = n } }
    /// Every PIN expires: polls answer 404, as plex.tv does for a stale PIN.
    public func expireAll() { state.withLock { s in for k in s.pins.keys { s.pins[k]?.expired = true } } }
    public var requestLog: [String] { state.withLock { $0.log } }

    func handle(_ request: HTTPServer.Request) -> HTTPServer.Response {
        state.withLock { $0.log.append("\(request.method) \(request.path)") }
        let parts = request.path.split(separator: "/").map(String.init)
        guard let client = request.headers["x-plex-client-identifier"], !client.isEmpty else {
            return .json("{\"errors\":[{\"code\":1000,\"message\":\"X-Plex-Client-Identifier is missing\",\"status\":400}]}", status: 400)
        }
        if request.method == "POST" && parts == ["api", "v2", "pins"] {
            let (id, code) = state.withLock { s -> (Int, String) in
                let id = 1000 + s.pins.count
                let code = String("ABCDEFGHJKLMNPQRSTUVWXYZ".shuffled().prefix(4))
                s.pins[id] = (code, false, false, client)
                return (id, code)
            }
            return pinAnswer(id, code: code, token: nil, status: 201)
        }
        if request.method == "GET" && parts.count == 4 && parts[0] == "api" && parts[2] == "pins", let id = Int(parts[3]) {
            let answer = state.withLock { s -> (code: String, token: String?)? in
                guard var pin = s.pins[id], !pin.expired, pin.client == client else { return nil }
                s.polls += 1
                if let n = s.approveOnPoll, s.polls >= n { pin.approved = true }
                s.pins[id] = pin
                return (pin.code, pin.approved ? userToken : nil)
            }
            guard let answer else { return .json("{\"errors\":[{\"code\":1020,\"message\":\"Code not found or expired\"}]}", status: 404) }
            return pinAnswer(id, code: answer.code, token: answer.token, status: 200)
        }
        if request.method == "GET" && parts == ["api", "v2", "resources"] {
            guard request.headers["x-plex-token"] == userToken else {
                return .json("{\"errors\":[{\"code\":1001,\"message\":\"User could not be authenticated\",\"status\":401}]}", status: 401)
            }
            let local = server.baseURL
            let port = Int(local.split(separator: ":").last ?? "0") ?? 0
            func connection(_ uri: String, local: Bool, relay: Bool) -> [String: Any] {
                [
                    "protocol": uri.hasPrefix("https") ? "https" : "http", "address": "127.0.0.1", "port": port, "uri": uri,
                    "local": local, "relay": relay, "IPv6": false
                ]
            }
            let resource: [String: Any] = [
                "name": "Fixture PMS", "product": "Plex Media Server", "productVersion": "1.41.3.9314", "platform": "Linux",
                "platformVersion": "6.1", "device": "PC", "clientIdentifier": server.serverId, "createdAt": "2024-01-01T00:00:00Z",
                "lastSeenAt": "2026-11-30T00:00:00Z", "provides": "server", "ownerId": NSNull(), "sourceTitle": NSNull(),
                "publicAddress": "203.0.113.7", "accessToken": server.accessToken, "owned": true, "home": false, "synced": false,
                "relay": true, "presence": true, "httpsRequired": false, "publicAddressMatches": true,
                "dnsRebindingProtection": false, "natLoopbackSupported": false,
                "connections": [
                    connection("http://127.0.0.1:9/relay", local: false, relay: true),
                    connection("http://127.0.0.1:1", local: false, relay: false),
                    connection(local, local: true, relay: false)
                ]
            ]
            let player: [String: Any] = [
                "name": "Phone", "product": "Plex for iOS", "provides": "player,pubsub-player",
                "clientIdentifier": "phone-1", "connections": []
            ]
            return server.json([player, resource])
        }
        return .json("{\"errors\":[{\"code\":1002,\"message\":\"Not Found\"}]}", status: 404)
    }

    func pinAnswer(_ id: Int, code: String, token: String?, status: Int) -> HTTPServer.Response {
        let expires = ISO8601DateFormatter().string(from: Date().addingTimeInterval(900))
        let body: [String: Any] = [
            "id": id, "code": code, "product": "Labstream", "trusted": false, "qr": "https://plex.tv/api/v2/pins/qr/\(code)",
            "clientIdentifier": "", "expiresIn": 900, "createdAt": ISO8601DateFormatter().string(from: Date()),
            "expiresAt": expires, "authToken": token ?? NSNull(), "newRegistration": NSNull()
        ]
        var r = server.json(body)
        r.status = status
        return r
    }
}
