import LabstreamBackends
import LabstreamCore
import Testing

@Suite struct PlexDecodeTests {
    func bytes(_ s: String) -> [UInt8] { Array(s.utf8) }

    @Test func versionsAndStackedPartsBecomeLabelledSources() throws {
        let page = try PlexDecode.page(
            bytes(
                """
                {"MediaContainer":{"size":1,"totalSize":7,"offset":0,"Metadata":[{"ratingKey":"42","type":"movie","title":"Heat","year":1995,"updatedAt":1700000000,
                  "Media":[{"id":1,"videoResolution":"1080","container":"mkv","Part":[{"id":101,"key":"/library/parts/101/1699/heat.mkv","size":1000,"file":"/m/heat.mkv"}]},
                           {"id":2,"videoResolution":"4k","container":"mp4","Part":[{"id":102,"key":"/library/parts/102/1699/a.mp4","size":10},{"id":103,"key":"/library/parts/103/1699/b.mp4","size":20}]}]}]}}
                """), "/library/sections/1/all")
        #expect(page.total == 7)
        let item = try #require(PlexDecode.item(page.metadata[0]))
        #expect(item.kind == .movie && item.title == "Heat" && item.year == 1995 && item.modified == 1_700_000_000)
        #expect(item.sources.map(\.id) == ["101", "102", "103"])
        #expect(item.sources.map(\.name) == ["1080p", "4K - Part 1", "4K - Part 2"])
        #expect(item.sources.map(\.etag) == ["/library/parts/101/1699/heat.mkv", "/library/parts/102/1699/a.mp4", "/library/parts/103/1699/b.mp4"])
        #expect(item.sources[1].container == "mp4" && item.sources[0].size == 1000)
    }

    /// An item's own route adds its parts' sidecar subtitles (streamType 3 with a `key`; an
    /// embedded one has none) and its chapters in start order (ms; `tag`, else "Chapter N").
    @Test func anItemsOwnRouteAddsSubtitlesAndChapters() throws {
        let page = try PlexDecode.page(
            bytes(
                """
                {"MediaContainer":{"size":1,"Metadata":[{"ratingKey":"42","type":"movie","title":"Heat","thumb":"/library/metadata/42/thumb/1",
                  "Media":[{"id":1,"Part":[{"id":101,"key":"/library/parts/101/1/heat.mkv","Stream":[
                    {"id":5,"streamType":3,"codec":"srt","languageCode":"eng","key":"/library/streams/5"},
                    {"id":6,"streamType":3,"codec":"srt","languageCode":"ger"},
                    {"id":7,"streamType":3,"codec":"ass","languageCode":"fre","forced":true,"key":"/library/streams/7"},
                    {"id":8,"streamType":2,"codec":"aac"}]}]}],
                  "Chapter":[{"id":2,"filter":"thumb=2","index":2,"startTimeOffset":61500,"endTimeOffset":90000},
                             {"id":1,"filter":"thumb=1","index":1,"startTimeOffset":0,"endTimeOffset":61500,"tag":"Opening"}]}]}}
                """), "/library/metadata/{id}")
        let extras = try #require(PlexDecode.extras(page.metadata[0]))
        #expect(extras.chapters == [.init(start: 0, name: "Opening"), .init(start: 61.5, name: "Chapter 2")])
        #expect(extras.assets.map(\.ref) == ["/library/streams/5", "/library/streams/7"])
        #expect(extras.assets.allSatisfy { $0.kind == .subtitle && $0.sourceId == "101" })
        #expect(extras.assets[1].forced && extras.assets[1].language == "fre" && extras.assets[1].codec == "ass")
        // Nothing more to say: nil, so nothing is kept.
        #expect(PlexDecode.extras(JSONValue(raw: ["ratingKey": "1", "type": "movie", "thumb": "/t"])) == nil)
        // Added to what the listing said, an asset known already is not doubled, and listed chapters win.
        let listed = ItemDetails(plot: "p", chapters: [.init(start: 5, name: "Listed")], assets: [extras.assets[0]])
        let merged = listed.adding(extras: extras)
        #expect(merged.assets == extras.assets && merged.chapters == [.init(start: 5, name: "Listed")] && merged.plot == "p")
    }

    @Test func episodesTakeTheirShowAndNumericIdsDecodeToo() throws {
        let e = JSONValue(raw: [
            "ratingKey": 77, "type": "episode", "title": "Pilot", "index": 1, "parentIndex": 2, "grandparentTitle": "Show",
            "grandparentRatingKey": "9", "Media": [["Part": [["id": 5, "key": "/library/parts/5/1/p.mkv", "size": 3]]]]
        ])
        let item = try #require(PlexDecode.item(e, show: ("9", "Show", 2020)))
        #expect(item.id == "77" && item.kind == .episode && item.seriesName == "Show" && item.seriesYear == 2020)
        #expect(item.seasonNumber == 2 && item.episodeNumber == 1 && item.sources.map(\.name) == [nil])
        #expect(PlexDecode.item(JSONValue(raw: ["ratingKey": "1", "type": "photoalbum"])) == nil)
        // A track: album, album artist, disc (absoluteIndex, only on multi-disc albums) and number.
        let track = PlexDecode.item(
            JSONValue(raw: [
                "ratingKey": "7", "type": "track", "title": "Song", "parentTitle": "Album",
                "grandparentTitle": "Band", "index": 3, "parentIndex": 1, "absoluteIndex": 2, "year": 2004
            ]))
        #expect(
            track?.kind == .track && track?.album == "Album" && track?.albumArtist == "Band" && track?.discNumber == 2 && track?.trackNumber == 3
                && track?.year == 2004)
        let single = PlexDecode.item(
            JSONValue(raw: ["ratingKey": "8", "type": "track", "title": "Lone", "grandparentTitle": "Band", "index": 1, "parentIndex": 1]))
        #expect(single?.album == nil && single?.discNumber == nil)
    }

    /// Home videos (a movie section without a metadata agent) are placed by where their file lies
    /// below the section's locations; photos and a photo section's clips decode as such.
    @Test func homeVideosAndPhotosArePlacedByTheirFiles() throws {
        let sections = try PlexDecode.sections(
            bytes(
                """
                {"MediaContainer":{"size":2,"Directory":[
                  {"key":"4","title":"Home","type":"movie","agent":"tv.plex.agents.none","Location":[{"id":1,"path":"/srv/home"},{"id":2,"path":"/srv/home/old"}]},
                  {"key":"1","title":"Films","type":"movie","agent":"tv.plex.agents.movie","Location":[{"id":3,"path":"/srv/films"}]}]}}
                """))
        #expect(sections.map(\.holdsHomeVideos) == [true, false])
        #expect(sections[0].locations == ["/srv/home", "/srv/home/old"])
        func video(_ file: String) -> JSONValue {
            JSONValue(raw: [
                "ratingKey": "5", "type": "movie", "title": "Cake", "year": 2019,
                "Media": [["Part": [["id": 9, "key": "/library/parts/9/1/cake.mkv", "size": 3, "file": file]]]]
            ])
        }
        let home = try #require(PlexDecode.item(video("/srv/home/old/2019/Party/cake.mkv"), placedBelow: sections[0].locations))
        // The deepest location holding the file is its root.
        #expect(home.kind == .other && home.folders == ["2019", "Party"])
        #expect(PlexDecode.item(video("/elsewhere/cake.mkv"), placedBelow: sections[0].locations)?.folders == [])
        #expect(PlexDecode.item(video("/srv/homework/cake.mkv"), placedBelow: ["/srv/home"])?.folders == [])
        #expect(PlexDecode.item(video("/srv/films/cake.mkv"))?.kind == .movie)
        let photo = try #require(
            PlexDecode.item(
                JSONValue(raw: [
                    "ratingKey": "6", "type": "photo", "title": "Beach",
                    "Media": [["width": 64, "height": 48, "container": "jpeg", "Part": [["id": 10, "key": "/library/parts/10/1/beach.jpg", "size": 2000]]]]
                ])))
        #expect(photo.kind == .photo && photo.kind.media == .image && photo.sources.first?.size == 2000)
        #expect(PlexDecode.item(JSONValue(raw: ["ratingKey": "7", "type": "clip", "title": "Waves"]))?.kind == .other)
    }

    /// The download queue: which part to add, what the server says of the item, and the
    /// request the copy sends (kbit/s, the token only in its header).
    @Test func downloadQueueAnswersAndRequests() throws {
        let metadata = bytes(
            """
            {"MediaContainer":{"Metadata":[{"ratingKey":"42","type":"movie","Media":[{"Part":[{"id":101}]},{"Part":[{"id":102},{"id":103}]}]}]}}
            """)
        #expect(try PlexDecode.partPosition(metadata, partId: "103") == (media: 1, part: 1))
        #expect(throws: LabstreamError.self) { try PlexDecode.partPosition(metadata, partId: "999") }
        // Where a part is now: its key, with the file's changestamp (GET /library/metadata/{id}).
        let moved = bytes(
            #"{"MediaContainer":{"Metadata":[{"ratingKey":"42","type":"movie","Media":[{"Part":[{"id":101,"key":"/library/parts/101/1531779264/file.mkv"}]}]}]}}"#
        )
        #expect(try PlexDecode.partKey(moved, partId: "101") == "/library/parts/101/1531779264/file.mkv")
        #expect(throws: LabstreamError.self) { try PlexDecode.partKey(moved, partId: "102") }
        #expect(try PlexDecode.downloadQueueId(bytes(#"{"MediaContainer":{"DownloadQueue":[{"id":7,"status":"done"}]}}"#)) == 7)
        #expect(try PlexDecode.addedQueueItemId(bytes(#"{"MediaContainer":{"AddedQueueItems":[{"id":31,"key":"/library/metadata/42"}]}}"#)) == 31)
        #expect(throws: LabstreamError.self) { try PlexDecode.addedQueueItemId(bytes(#"{"MediaContainer":{}}"#)) }
        let failed = try PlexDecode.downloadQueueItem(bytes(#"{"MediaContainer":{"DownloadQueueItem":[{"id":31,"status":"error","error":"no space"}]}}"#))
        #expect(failed.status == "error" && failed.error == "no space")
        let running = try PlexDecode.downloadQueueItem(
            bytes(#"{"MediaContainer":{"DownloadQueueItem":[{"status":"processing","TranscodeSession":{"progress":41.5}}]}}"#))
        #expect(running.progress == 41.5)
        #expect(throws: LabstreamError.self) { try PlexDecode.downloadQueueItem(bytes(#"{"MediaContainer":{"DownloadQueueItem":[]}}"#)) }

        let requests = PlexRequests(baseURL: "http://pms:32400/", identity: ClientIdentity(device: "d", deviceId: "id-1"))
        let add = requests.addToDownloadQueue(7, key: "/library/metadata/42", mediaIndex: 1, partIndex: 0, kilobitsPerSecond: 2000, token: "secret")
        #expect(add.method == "POST" && add.url.hasPrefix("http://pms:32400/downloadQueue/7/add?keys=%2Flibrary%2Fmetadata%2F42&mediaIndex=1&partIndex=0"))
        #expect(add.url.contains("videoBitrate=2000") && !add.url.contains("secret"))
        #expect(add.headers.contains(HTTPRequest.Header("X-Plex-Token", "secret")))
        let media = requests.downloadQueueMedia(7, item: 31, range: ByteRange(0, 10), validator: nil, token: "secret")
        #expect(media.url == "http://pms:32400/downloadQueue/7/item/31/media" && media.headers.contains(HTTPRequest.Header("Range", "bytes=0-9")))
        #expect(requests.removeDownloadQueueItem(7, item: 31, token: "secret").method == "DELETE")
    }

    @Test func malformedContainersAreClearErrors() {
        for body in ["{\"MediaContainer\":{\"Metadata\":5}}", "{\"errors\":[]}", "<MediaContainer/>", ""] {
            #expect(throws: LabstreamError.self) { try PlexDecode.page(self.bytes(body), "/library/sections/1/all") }
        }
        #expect(throws: LabstreamError.self) { try PlexDecode.machineIdentifier(self.bytes("{\"MediaContainer\":{}}")) }
    }

    @Test func pinsAndServersFromPlexTV() throws {
        let pin = try PlexDecode.pin(bytes("{\"id\":1001,\"code\":\"WXYZ\",\"authToken\":null,\"expiresAt\":\"2026-12-01T10:00:00Z\"}"))
        #expect(pin.id == 1001 && pin.code == "WXYZ" && pin.authToken == nil && pin.expiresAt != nil)
        let servers = try PlexDecode.servers(
            bytes(
                """
                [{"name":"Phone","provides":"player","clientIdentifier":"p","connections":[]},
                 {"name":"NAS","provides":"server,player","clientIdentifier":"m1","accessToken":"srv","httpsRequired":true,"owned":true,
                  "connections":[{"protocol":"http","uri":"http://10.0.0.2:32400","local":true,"relay":false},
                                 {"protocol":"https","uri":"https://relay.plex.direct:8443","local":false,"relay":true},
                                 {"protocol":"https","uri":"https://1-2-3-4.x.plex.direct:32400","local":false,"relay":false},
                                 {"protocol":"https","uri":"https://10-0-0-2.x.plex.direct:32400","local":true,"relay":false}]}]
                """))
        #expect(servers.map(\.name) == ["NAS"] && servers[0].accessToken == "srv")
        // https required: the plain local address is dropped; local, then remote, relay last.
        #expect(
            PlexConnectionPolicy.order(servers[0]).map(\.uri) == [
                "https://10-0-0-2.x.plex.direct:32400", "https://1-2-3-4.x.plex.direct:32400", "https://relay.plex.direct:8443"
            ])
        var relaxed = servers[0]
        relaxed.httpsRequired = false
        #expect(PlexConnectionPolicy.order(relaxed).map(\.uri).first == "https://10-0-0-2.x.plex.direct:32400")
        #expect(PlexConnectionPolicy.order(relaxed).count == 4 && PlexConnectionPolicy.order(relaxed).last?.isRelay == true)
    }

    @Test func requestsCarryIdentityAndTheTokenOnlyInAHeader() {
        let r = PlexRequests(baseURL: "http://pms:32400/", identity: ClientIdentity(device: "nas", deviceId: "cid-1"))
        let page = r.sectionItems(section: "3", type: 1, start: 100, size: 50, token: "sekret")
        #expect(page.url == "http://pms:32400/library/sections/3/all?type=1&includeGuids=1&X-Plex-Container-Start=100&X-Plex-Container-Size=50")
        #expect(page.headers.contains(.init("X-Plex-Token", "sekret")) && page.headers.contains(.init("X-Plex-Client-Identifier", "cid-1")))
        #expect(page.headers.contains(.init("Accept", "application/json")))
        let part = r.part(key: "/library/parts/5/1699/f.mkv", range: ByteRange(10, 20), validator: nil, token: "sekret")
        #expect(part.url == "http://pms:32400/library/parts/5/1699/f.mkv" && !part.url.contains("sekret"))
        #expect(part.headers.contains(.init("Range", "bytes=10-19")))
        #expect(r.createPin().method == "POST" && r.createPin().url.hasSuffix("/api/v2/pins?strong=false"))
    }
}
