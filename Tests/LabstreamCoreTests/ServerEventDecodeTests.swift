import LabstreamBackends
import LabstreamCore
import Testing

/// Each server's event messages as its own code or spec writes them.
@Suite struct ServerEventDecodeTests {
    func bytes(_ s: String) -> [UInt8] { Array(s.utf8) }

    /// Jellyfin's `OutboundWebSocketMessage<LibraryUpdateInfo>` and `ForceKeepAlive(60)`.
    @Test func jellyfinsLibraryChangedAndKeepAlive() {
        let changed = bytes(
            #"{"MessageType":"LibraryChanged","MessageId":"0f5c","Data":{"FoldersAddedTo":["f1"],"FoldersRemovedFrom":[],"#
                + #""ItemsAdded":["a1","a2"],"ItemsRemoved":["r1"],"ItemsUpdated":["u1"],"CollectionFolders":["c1"]}}"#)
        #expect(MediaBrowserEvents.event(from: changed) == .itemsChanged(added: ["a1", "a2"], updated: ["u1", "f1"], removed: ["r1"]))
        #expect(MediaBrowserEvents.event(from: bytes(#"{"MessageType":"ForceKeepAlive","Data":60}"#)) == .keepAliveWithin(seconds: 60))
        #expect(MediaBrowserEvents.event(from: bytes(#"{"MessageType":"KeepAlive"}"#)) == .other)
        #expect(MediaBrowserEvents.event(from: bytes(#"{"MessageType":"UserDataChanged","Data":{}}"#)) == .other)
        #expect(MediaBrowserEvents.event(from: bytes("not json")) == .other)
    }

    @Test func plexTimelineEntriesOnceProcessedOrDeleted() {
        let message = bytes(
            #"{"NotificationContainer":{"type":"timeline","size":3,"TimelineEntry":["#
                + #"{"identifier":"com.plexapp.plugins.library","itemID":101,"state":5,"sectionID":1,"type":1},"#
                + #"{"identifier":"com.plexapp.plugins.library","itemID":102,"state":9,"sectionID":1,"type":1},"#
                + #"{"identifier":"com.plexapp.plugins.library","itemID":103,"state":3,"sectionID":1,"type":1},"#
                + #"{"identifier":"tv.plex.providers.epg","itemID":104,"state":5}]}}"#)
        #expect(PlexEvents.event(from: message) == .itemsChanged(added: [], updated: ["101"], removed: ["102"]))
        // The same members without the container.
        let bare = bytes(#"{"TimelineEntry":[{"identifier":"com.plexapp.plugins.library","itemID":"7","state":5}]}"#)
        #expect(PlexEvents.event(from: bare) == .itemsChanged(added: [], updated: ["7"], removed: []))
        #expect(PlexEvents.event(from: bytes("{}")) == .other)
    }

    @Test func serverSentEventsAreCutAtBlankLinesWhateverTheLineEnds() {
        var parser = ServerSentEvents()
        #expect(parser.feed(bytes(": ping\n\nevent: timeline\ndata: {\"a\":")) == [])
        #expect(parser.feed(bytes("1}\n\n")) == [bytes("{\"a\":1}")])
        #expect(parser.feed(bytes("data:x\r\ndata: y\r\n\r\nid: 3\r")) == [bytes("x\ny")])
        #expect(parser.feed(bytes("\ndata\n\n")) == [[]])  // an empty data line is an empty event
        #expect(parser.feed(bytes("event: ping\n\n")) == [])  // no data: no event
    }

    /// The WebSocket's token: Jellyfin's in the header only; Emby's documented query form keeps
    /// it out of what is logged.
    @Test func theChannelsAddressesKeepTheTokenOutOfWhatIsLogged() {
        let identity = ClientIdentity(device: "d", deviceId: "dev1")
        let jellyfin = MediaBrowserRequests(flavor: .jellyfin, baseURL: "https://jf.example:8920/", identity: identity).eventSocket(token: "SECRET")
        #expect(jellyfin.request.url == "wss://jf.example:8920/socket")
        #expect(jellyfin.request.headers.contains { $0.value.contains("SECRET") })
        let emby = MediaBrowserRequests(flavor: .emby, baseURL: "http://emby.local:8096/emby", identity: identity).eventSocket(token: "SECRET")
        #expect(emby.request.url == "ws://emby.local:8096/emby/embywebsocket?api_key=SECRET&deviceId=dev1")
        #expect(!emby.request.redactedDescription.contains("SECRET"))
        let plex = PlexRequests(baseURL: "http://plex.local:32400", identity: identity).eventSource(token: "SECRET")
        #expect(plex.kind == .serverSentEvents && !plex.request.url.contains("SECRET"))
    }
}
