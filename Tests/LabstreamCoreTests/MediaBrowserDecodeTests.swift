import LabstreamBackends
import LabstreamCore
import Testing

@Suite struct MediaBrowserDecodeTests {
    func bytes(_ s: String) -> [UInt8] { Array(s.utf8) }

    @Test func authorizationHeaderHasEveryField() {
        let id = ClientIdentity(device: "nas", deviceId: "d-1", version: "0.1.0")
        #expect(id.authorization(token: nil) == "MediaBrowser Client=\"Labstream\", Device=\"nas\", DeviceId=\"d-1\", Version=\"0.1.0\"")
        #expect(id.authorization(token: "t0k").hasSuffix(", Token=\"t0k\""))
        let hostile = ClientIdentity(device: "a\", Token=\"x", deviceId: "d", version: "1")
        #expect(!hostile.authorization(token: nil).contains(", Token="))  // no injected field
    }

    @Test func requestsFollowTheSpec() {
        let r = MediaBrowserRequests(flavor: .jellyfin, baseURL: "http://h:8096/", identity: ClientIdentity(device: "d", deviceId: "i"))
        let items = r.items(userId: "u", parentId: "p", types: "Movie", startIndex: 200, limit: 100, token: "t")
        #expect(items.url.hasPrefix("http://h:8096/Items?"))
        for part in ["userId=u", "parentId=p", "recursive=true", "includeItemTypes=Movie", "startIndex=200", "limit=100", "fields=MediaSources%2CPath"] {
            #expect(items.url.contains(part), "missing \(part) in \(items.url)")
        }
        #expect(!items.url.contains("api_key") && !items.url.contains("t" + "oken"))
        let dl = r.download(itemId: "abc", range: ByteRange(0, 1024), validator: .etag("\"e\""), token: "t")
        #expect(dl.url == "http://h:8096/Items/abc/Download")
        #expect(dl.headers.contains(.init("Range", "bytes=0-1023")))
        #expect(dl.headers.contains(.init("If-Range", "\"e\"")))
        let login = r.authenticate(user: "al\"ice", password: "p\\w")
        #expect(String(decoding: login.body!, as: UTF8.self) == "{\"Username\":\"al\\\"ice\",\"Pw\":\"p\\\\w\"}")
    }

    @Test func embyRequestsUseEmbysPathsNamesAndHeaders() {
        let r = MediaBrowserRequests(flavor: .emby, baseURL: "http://h:8096/emby", identity: ClientIdentity(device: "d", deviceId: "i"), userId: "u1")
        let items = r.items(userId: "u1", parentId: "p", types: "Movie", startIndex: 200, limit: 100, token: "t")
        #expect(items.url.hasPrefix("http://h:8096/emby/Users/u1/Items?"))
        for part in ["ParentId=p", "Recursive=true", "IncludeItemTypes=Movie", "StartIndex=200", "Limit=100", "Fields=MediaSources%2CPath%2CEtag%2CChapters"] {
            #expect(items.url.contains(part), "missing \(part) in \(items.url)")
        }
        #expect(items.headers.contains(.init("X-Emby-Token", "t")))
        let auth = items.headers.first { $0.name == "Authorization" }?.value ?? ""
        #expect(auth.hasPrefix("Emby UserId=\"u1\", Client=\"Labstream\"") && auth.hasSuffix("Token=\"t\""))
        #expect(items.headers.contains(.init("X-Emby-Authorization", auth)))
        #expect(r.userViews(userId: "u1", token: "t").url == "http://h:8096/emby/Users/u1/Views?IncludeExternalContent=false")
        #expect(r.episodes(seriesId: "s", userId: "u1", startIndex: 0, limit: 5, token: "t").url.contains("UserId=u1"))
        #expect(r.me(token: "t").url == "http://h:8096/emby/Users/u1")
        #expect(r.download(itemId: "x", range: ByteRange(0, 1), validator: nil, token: "t").url == "http://h:8096/emby/Items/x/Download")
        // Emby's PublicSystemInfo has no ProductName; Jellyfin's names it.
        #expect(throws: LabstreamError.self) {
            try MediaBrowserDecode.publicInfo(Array("{\"Id\":\"a\",\"Version\":\"10.11\",\"ProductName\":\"Jellyfin Server\"}".utf8), flavor: .emby)
        }
        #expect((try? MediaBrowserDecode.publicInfo(Array("{\"Id\":\"a\",\"Version\":\"4.8.11.0\"}".utf8), flavor: .emby))?.version == "4.8.11.0")
    }

    @Test func publicInfoRejectsOtherServers() throws {
        let info = try MediaBrowserDecode.publicInfo(
            bytes("{\"Id\":\"abc\",\"Version\":\"10.11.11\",\"ServerName\":\"x\",\"ProductName\":\"Jellyfin Server\"}"))
        #expect(info.serverId == "abc")
        #expect(throws: LabstreamError.self) { try MediaBrowserDecode.publicInfo(self.bytes("<html>nginx</html>")) }
        #expect(throws: LabstreamError.self) { try MediaBrowserDecode.publicInfo(self.bytes("{\"status\":\"ok\"}")) }
        #expect(throws: LabstreamError.self) {
            try MediaBrowserDecode.publicInfo(self.bytes("{\"Id\":\"a\",\"Version\":\"4.8\",\"ProductName\":\"Emby Server\"}"))
        }
        // Emby 4.8's own answer (emby-openapi.json PublicSystemInfo: no ProductName, its address
        // lists) is refused as Jellyfin, naming Emby; it was taken for Jellyfin before.
        let emby = "{\"LocalAddress\":\"http://h\",\"LocalAddresses\":[],\"RemoteAddresses\":[],\"ServerName\":\"den\",\"Version\":\"4.8.11.0\",\"Id\":\"e\"}"
        let refusal = #expect(throws: LabstreamError.self) { try MediaBrowserDecode.publicInfo(self.bytes(emby), flavor: .jellyfin, url: "http://h") }
        #expect(refusal?.userMessage.contains("http://h answers as an Emby server, not Jellyfin") == true, "\(String(describing: refusal))")
        #expect(try MediaBrowserDecode.publicInfo(bytes(emby), flavor: .emby).serverId == "e")
    }

    @Test func malformedAndTruncatedJSONAreClearErrors() {
        for body in ["{\"Items\": [", "{\"Items\": 5}", "", "null"] {
            #expect(throws: LabstreamError.self) { try MediaBrowserDecode.page(self.bytes(body), "/Items") }
        }
    }

    @Test func camelCaseResponsesDecodeToo() throws {
        let page = try MediaBrowserDecode.page(
            bytes(
                "{\"items\":[{\"id\":\"m1\",\"type\":\"Movie\",\"name\":\"Heat\",\"productionYear\":1995,\"mediaSources\":[{\"id\":\"m1\",\"container\":\"mkv\",\"size\":123,\"protocol\":\"File\"}]}],\"totalRecordCount\":1}"
            ), "/Items")
        let item = try #require(MediaBrowserDecode.item(page.items[0]))
        #expect(item.title == "Heat" && item.year == 1995 && item.sources.first?.size == 123)
    }

    @Test func itemsWithoutSourcesOrOfOtherTypes() {
        let noSource = MediaBrowserDecode.item(JSONValue(raw: ["Id": "x", "Type": "Movie", "Name": "Empty"]))
        #expect(noSource?.sources.isEmpty == true)
        #expect(MediaBrowserDecode.item(JSONValue(raw: ["Id": "x", "Type": "MusicAlbum"])) == nil)
        #expect(MediaBrowserDecode.item(JSONValue(raw: ["Type": "Movie"])) == nil)
        let remote = MediaBrowserDecode.item(JSONValue(raw: ["Id": "x", "Type": "Movie", "MediaSources": [["Id": "s", "Protocol": "Http"]]]))
        #expect(remote?.sources.isEmpty == true)
    }

    /// A track's album cover is its album's Primary image (BaseItemDto `AlbumId`,
    /// `AlbumPrimaryImageTag`, in both specs); a track without one has none.
    @Test func aTracksCoverIsItsAlbumsPrimaryImage() {
        let track = MediaBrowserDecode.details(
            JSONValue(raw: [
                "Id": "t", "Type": "Audio", "Name": "Song", "AlbumId": "al", "AlbumPrimaryImageTag": "tag1",
                "ImageTags": ["Primary": "own"]
            ]))
        #expect(track?.assets == [RemoteAsset(kind: .poster, ref: "al/Primary", tag: "tag1")])
        #expect(MediaBrowserDecode.details(JSONValue(raw: ["Id": "t", "Type": "Audio", "AlbumId": "al"]))?.assets ?? [] == [])
        let plex = PlexDecode.details(
            JSONValue(raw: ["ratingKey": "7", "type": "track", "thumb": "/library/metadata/7/thumb/1", "parentThumb": "/library/metadata/6/thumb/2"]))
        #expect(plex?.assets == [RemoteAsset(kind: .poster, ref: "/library/metadata/6/thumb/2", tag: "/library/metadata/6/thumb/2")])
    }

    /// Emby (spec: `getItemsByIdDownload` takes an item id; `MediaSourceInfo` names it as `ItemId`
    /// and has no ETag) against Jellyfin (a source id is its version's item id; sources carry ETag).
    @Test func theDownloadRouteTakesTheSourcesItemAndEmbyChangesShowInTheItemsEtag() throws {
        let emby = try #require(
            MediaBrowserDecode.item(
                JSONValue(raw: [
                    "Id": "101", "Type": "Movie", "Name": "Cut", "Etag": "e7",
                    "MediaSources": [
                        ["Id": "mediasource_101", "ItemId": "101", "Protocol": "File", "Size": 5],
                        ["Id": "mediasource_102", "ItemId": "102", "Protocol": "File", "Size": 6]
                    ]
                ])))
        #expect(emby.sources.map(\.itemId) == ["101", "102"] && emby.sources.allSatisfy { $0.etag == "e7" })
        let embyRequests = MediaBrowserRequests(flavor: .emby, baseURL: "http://h/emby", identity: ClientIdentity(device: "d", deviceId: "i"))
        let jellyfinRequests = MediaBrowserRequests(flavor: .jellyfin, baseURL: "http://h", identity: ClientIdentity(device: "d", deviceId: "i"))
        func file(_ item: String, _ source: String, remote: String?) -> TreeFile {
            TreeFile(path: ["x"], key: FileKey(server: "s", itemId: item, sourceId: source), size: 1, modified: 0, etag: nil, remoteItemId: remote)
        }
        #expect(embyRequests.downloadItemId(of: file("101", "mediasource_102", remote: "102")) == "102")
        #expect(embyRequests.downloadItemId(of: file("101", "mediasource_102", remote: nil)) == "101")  // an index from before
        #expect(jellyfinRequests.downloadItemId(of: file("a", "b", remote: nil)) == "b")
        let jellyfin = try #require(
            MediaBrowserDecode.item(
                JSONValue(raw: [
                    "Id": "a", "Type": "Movie", "Etag": "item", "MediaSources": [["Id": "a", "ETag": "source", "Protocol": "File", "Size": 5]]
                ])))
        #expect(jellyfin.sources.first?.etag == "source" && jellyfin.sources.first?.itemId == nil)
    }

    @Test func episodeSeasonComesFromSeasonsWhenMissing() {
        let j = JSONValue(raw: [
            "Id": "e", "Type": "Episode", "Name": "Pilot", "IndexNumber": 1, "SeasonId": "S2",
            "MediaSources": [["Id": "e", "Container": "mkv", "Size": 5]]
        ])
        let item = MediaBrowserDecode.item(j, series: ("s", "Show", 2020), seasons: ["S2": 2])
        #expect(item?.seasonNumber == 2 && item?.seriesName == "Show" && item?.episodeNumber == 1)
    }

    /// A home-video library: each `Video` sits in the `Folder` items between it and the
    /// library, outermost first; a video in a movie listing is not taken for a film.
    @Test func homeVideosArePlacedByTheirFolders() throws {
        let raw =
            try JSONValue.parse(
                Array(
                    """
                    [{"Id": "f1", "Type": "Folder", "IsFolder": true, "Name": "2019", "ParentId": "lib"},
                     {"Id": "f2", "Type": "Folder", "IsFolder": true, "Name": "Trip", "ParentId": "f1"},
                     {"Id": "v1", "Type": "Video", "Name": "Beach", "ParentId": "f2",
                      "MediaSources": [{"Id": "v1", "Protocol": "File", "Container": "mp4", "Size": 10, "Path": "/home/2019/Trip/beach.mp4"}]},
                     {"Id": "v2", "Type": "Video", "Name": "Top", "ParentId": "lib", "MediaSources": [{"Id": "v2", "Protocol": "File", "Container": "mkv", "Size": 5}]}]
                    """.utf8)
            ).array ?? []
        let items = MediaBrowserDecode.folderItems(raw, root: "lib")
        #expect(items.map(\.id) == ["v1", "v2"] && items.allSatisfy { $0.kind == .other })
        #expect(items[0].folders == ["2019", "Trip"] && items[1].folders == [] && items[0].sources.first?.size == 10)
        #expect(MediaBrowserDecode.item(raw[2]) == nil)  // outside a home-video library
    }

    /// A photo has no media sources: the item is its file (Emby's `Size`; Jellyfin's DTO has
    /// none, so the size is left for the client to ask), in its `PhotoAlbum` or `Folder`.
    @Test func photosAreTheirOwnFileInTheirAlbums() throws {
        let raw =
            try JSONValue.parse(
                Array(
                    """
                    [{"Id": "a1", "Type": "PhotoAlbum", "IsFolder": true, "Name": "Trip", "ParentId": "lib"},
                     {"Id": "p1", "Type": "Photo", "Name": "IMG_1", "ParentId": "a1", "Path": "/photos/Trip/IMG_1.jpg", "Size": 2000, "Etag": "t1"},
                     {"Id": "p2", "Type": "Photo", "Name": "IMG_2", "ParentId": "lib", "Container": "png"},
                     {"Id": "p3", "Type": "Photo", "Name": "Gone", "ParentId": "lib", "LocationType": "Virtual"}]
                    """.utf8)
            ).array ?? []
        let items = MediaBrowserDecode.folderItems(raw, root: "lib")
        #expect(items.map(\.id) == ["p1", "p2", "p3"] && items.allSatisfy { $0.kind == .photo })
        #expect(items[0].folders == ["Trip"] && items[0].sources == [MediaSource(id: "p1", path: "/photos/Trip/IMG_1.jpg", size: 2000, etag: "t1")])
        #expect(items[1].sources.first?.size == nil && items[1].sources.first?.container == "png")
        #expect(items[2].sources.isEmpty)  // nothing on disk: not a file
        #expect(MediaBrowserDecode.item(raw[1]) == nil)  // outside a home-video or photo library
    }

    /// A music video sits in its (first) artist's folder, in a music-video library only.
    @Test func aMusicVideoIsPlacedByItsArtist() throws {
        let j = try JSONValue.parse(
            Array(
                #"{"Id": "mv", "Type": "MusicVideo", "Name": "Song", "ProductionYear": 1999, "Artists": ["Band", "Guest"], "MediaSources": [{"Id": "mv", "Protocol": "File", "Container": "mp4", "Size": 7}]}"#
                    .utf8))
        let item = try #require(MediaBrowserDecode.item(j, otherVideos: true))
        #expect(item.kind == .other && item.folders == ["Band"] && item.year == 1999)
        #expect(MediaBrowserDecode.item(j) == nil)  // not in a film or music listing
    }
}
