import Foundation
import LabstreamCore
import LabstreamDemo
import Synchronization

// Why this file is long: the three MediaBrowser/Plex emulators share one catalog, one request
// log and one set of fault hooks, so a test can break any of them the same way.

/// The library a fixture serves. Files are real files on disk.
public struct FixtureCatalog: Sendable {
    public struct Movie: Sendable {
        public var title: String
        public var year: Int?
        public var file: String
        public var container: String
        /// Extra versions (Jellyfin alternate versions): label and file.
        public var versions: [(label: String, file: String)] = []
        /// `MediaSourceInfo.Bitrate` (bits per second), when the server is to report one.
        public var bitrate: Int?
        /// What a Kodi-style .nfo is made from; none by default (the item is listed as before).
        public var details: Details

        public init(title: String, year: Int?, file: String, container: String, details: Details = Details()) {
            self.title = title
            self.year = year
            self.file = file
            self.container = container
            self.details = details
        }
    }

    public struct Episode: Sendable {
        public var season: Int
        public var number: Int
        public var title: String
        public var file: String
        public var container: String
        /// The episode's own descriptive metadata (plot, air date, ids…); none by default.
        public var details: Details

        public init(season: Int, number: Int, title: String, file: String, container: String, details: Details = Details()) {
            self.season = season
            self.number = number
            self.title = title
            self.file = file
            self.container = container
            self.details = details
        }
    }

    public struct Series: Sendable {
        public var name: String
        public var year: Int?
        public var episodes: [Episode]
        /// The show's own descriptive metadata (a tvshow.nfo's); none by default.
        public var details: Details

        public init(name: String, year: Int?, episodes: [Episode], details: Details = Details()) {
            self.name = name
            self.year = year
            self.episodes = episodes
            self.details = details
        }
    }

    /// Descriptive metadata of a movie, episode or series: what a Kodi-style .nfo is made from.
    /// Each server serves it under its spec's names (Jellyfin/Emby `BaseItemDto`, Plex `Metadata`;
    /// see `ServerFixture.detailMembers` and `plexDetails`). Nil or empty members are not sent.
    public struct Details: Sendable, Hashable {
        /// BaseItemDto.Overview; Plex Metadata.summary.
        public var plot: String?
        /// BaseItemDto.OriginalTitle; Plex Metadata.originalTitle.
        public var originalTitle: String?
        /// BaseItemDto.Genres (strings); Plex Metadata.Genre (Tag `tag`s).
        public var genres: [String]
        /// BaseItemDto.Studios (Jellyfin NameGuidPair, Emby NameLongIdPair); Plex Metadata.studio
        /// (one string: the first).
        public var studios: [String]
        /// BaseItemDto.CommunityRating; Plex Metadata.rating and audienceRating (0–10).
        public var rating: Double?
        /// BaseItemDto.OfficialRating; Plex Metadata.contentRating (e.g. "PG-13", "TV-MA").
        public var contentRating: String?
        /// "YYYY-MM-DD": BaseItemDto.PremiereDate (that day, 00:00 UTC); Plex Metadata.originallyAvailableAt.
        public var premiered: String?
        /// BaseItemDto.RunTimeTicks (×10 000 000); Plex Metadata.duration (×1000, milliseconds).
        public var runtimeSeconds: Int?
        /// BaseItemDto.ProviderIds "Imdb"/"Tmdb"/"Tvdb"; Plex Metadata.Guid `imdb://…`, `tmdb://…`, `tvdb://…`.
        public var imdb: String?
        public var tmdb: String?
        public var tvdb: String?
        /// The file's chapters (movies and episodes): BaseItemDto.Chapters (ChapterInfo), only when
        /// the request's fields/Fields names `Chapters`; Plex Metadata.Chapter, only on
        /// `/library/metadata/{id}` with `includeChapters`. Served in start order. Empty: none sent.
        public var chapters: [Chapter]

        public init(
            plot: String? = nil, originalTitle: String? = nil, genres: [String] = [], studios: [String] = [],
            rating: Double? = nil, contentRating: String? = nil, premiered: String? = nil, runtimeSeconds: Int? = nil,
            imdb: String? = nil, tmdb: String? = nil, tvdb: String? = nil, chapters: [Chapter] = []
        ) {
            self.plot = plot
            self.originalTitle = originalTitle
            self.genres = genres
            self.studios = studios
            self.rating = rating
            self.contentRating = contentRating
            self.premiered = premiered
            self.runtimeSeconds = runtimeSeconds
            self.imdb = imdb
            self.tmdb = tmdb
            self.tvdb = tvdb
            self.chapters = chapters
        }

        /// No member set: the item carries no `_details` and is answered exactly as before.
        public var isEmpty: Bool { self == Details() }

        /// `chapters` by start (those starting together in the order given), as each server lists them.
        var orderedChapters: [Chapter] {
            chapters.enumerated().sorted { ($0.element.start, $0.offset) < ($1.element.start, $1.offset) }.map(\.element)
        }
    }

    /// A chapter of a movie or episode file: where it starts (seconds from the file's start) and its name.
    public struct Chapter: Sendable, Hashable {
        public var start: Double
        public var name: String

        public init(start: Double, name: String) {
            self.start = start
            self.name = name
        }
    }

    /// A music file (Jellyfin/Emby `BaseItemDto` of `Type` "Audio"; Plex `Metadata` of `type` "track"
    /// in the music section, below its album and artist).
    public struct Track: Sendable {
        public var title: String
        public var album: String?
        public var albumArtist: String?
        public var artists: [String]
        /// Disc number (`ParentIndexNumber`).
        public var disc: Int?
        /// Track number (`IndexNumber`).
        public var number: Int?
        public var year: Int?
        public var file: String
        public var container: String

        public init(
            title: String, album: String? = nil, albumArtist: String? = nil, artists: [String] = [],
            disc: Int? = nil, number: Int? = nil, year: Int? = nil, file: String, container: String
        ) {
            self.title = title
            self.album = album
            self.albumArtist = albumArtist
            self.artists = artists
            self.disc = disc
            self.number = number
            self.year = year
            self.file = file
            self.container = container
        }
    }

    /// A file of a home-video library (Jellyfin/Emby `BaseItemDto` of `Type` "Video" in the view of
    /// `CollectionType` "homevideos", below one `Folder` item per directory in `folders`).
    public struct HomeVideo: Sendable {
        public var title: String
        /// The directories it lies in below the library root, outermost first (e.g. ["2019", "Trip"]);
        /// empty: directly in the library.
        public var folders: [String]
        public var file: String
        public var container: String

        public init(title: String, folders: [String] = [], file: String, container: String) {
            self.title = title
            self.folders = folders
            self.file = file
            self.container = container
        }
    }

    /// A picture file. Jellyfin/Emby: a `BaseItemDto` of `Type` "Photo" (BaseItemKind), `MediaType`
    /// "Photo", in the home-video view (CollectionType "homevideos", which Jellyfin names "Home
    /// Videos and Photos") below the same `Folder` items the home videos of the same directories
    /// use. Plex: a `Metadata` of `type` "photo" in the photo section (key 5), below one
    /// "photoalbum" per directory.
    public struct Photo: Sendable {
        public var title: String
        /// The directories it lies in below the library root, outermost first (as `HomeVideo.folders`);
        /// empty: directly in the library.
        public var folders: [String]
        public var file: String
        /// "jpg", "png" (BaseItemDto.Container; Plex Media.container and Part.container).
        public var container: String
        /// Pixels (BaseItemDto.Width and Height; Plex Media.width and height).
        public var width: Int
        public var height: Int

        public init(title: String, folders: [String] = [], file: String, container: String, width: Int, height: Int) {
            self.title = title
            self.folders = folders
            self.file = file
            self.container = container
            self.width = width
            self.height = height
        }
    }

    /// A file of a music-video library (Jellyfin/Emby `BaseItemDto` of `Type` "MusicVideo", directly
    /// below the view of `CollectionType` "musicvideos"), with its performers (`Artists`, `ArtistItems`).
    public struct MusicVideo: Sendable {
        public var title: String
        public var artists: [String]
        public var year: Int?
        public var file: String
        public var container: String

        public init(title: String, artists: [String], year: Int?, file: String, container: String) {
            self.title = title
            self.artists = artists
            self.year = year
            self.file = file
            self.container = container
        }
    }

    /// An image of a movie or series (a file whose bytes are served). Jellyfin/Emby: `poster` is
    /// BaseItemDto.ImageTags "Primary", `logo` ImageTags "Logo", `fanart` BackdropImageTags (in the
    /// order given: image index 0, 1, …), each tag a hash of the file's bytes. Plex: `poster` is
    /// Metadata.thumb, `fanart` Metadata.art, `logo` a Metadata.Image of `type` "clearLogo" (the
    /// first of each kind), each URL ending in a stamp made from the bytes. An image file that
    /// is missing is not listed (and answers 404).
    public struct Artwork: Sendable {
        public enum Kind: String, Sendable { case poster, fanart, logo }
        public var kind: Kind
        /// Local path of the image's bytes (JPEG or PNG).
        public var file: String

        public init(_ kind: Kind, file: String) {
            self.kind = kind
            self.file = file
        }
    }

    /// A subtitle of a movie's or episode's file. Jellyfin/Emby: a MediaStream of `Type`
    /// "Subtitle" in that file's media source (see `ServerFixture.subtitleStreams`); Plex: a Stream
    /// of `streamType` 3 in its Part (see `plexSubtitleStreams`).
    public struct Subtitle: Sendable {
        /// ISO 639-2 code ("eng", "fre"): MediaStream.Language, Plex Stream.languageCode; nil: none.
        public var language: String?
        public var forced: Bool
        public var hearingImpaired: Bool
        /// "srt", "ass", "webvtt" (text) or "pgssub" (bitmap).
        public var codec: String
        /// A sidecar file next to the media (true) or a stream inside it (false).
        public var external: Bool
        /// Local path of its bytes (for an embedded one: what the server would extract).
        public var file: String

        public init(language: String?, forced: Bool = false, hearingImpaired: Bool = false, codec: String, external: Bool, file: String) {
            self.language = language
            self.forced = forced
            self.hearingImpaired = hearingImpaired
            self.codec = codec
            self.external = external
            self.file = file
        }
    }

    public var movieLibrary = "Movies"
    public var showLibrary = "Shows"
    public var musicLibraryName = "Music"
    public var homeVideoLibraryName = "Home Videos"
    public var musicVideoLibraryName = "Music Videos"
    public var mixedLibraryName = "Mixed"
    /// Plex's photo section's LibrarySection.title (Jellyfin/Emby list photos in the home-video view).
    public var photoLibraryName = "Photos"
    public var movies: [Movie] = []
    public var series: [Series] = []
    public var tracks: [Track] = []
    /// Jellyfin and Emby: the home-video view; Plex: section 4 (a "movie" section of the Plex Video
    /// Files Scanner). None: no Plex section 4, and without photos no view either (everything
    /// answers as before).
    public var homeVideos: [HomeVideo] = []
    /// Jellyfin and Emby: in the home-video view (listed for these alone too); Plex: section 5 (a
    /// "photo" section). None: no photos, no photo section (everything answers as before).
    public var photos: [Photo] = []
    /// Served by Jellyfin and Emby only; none: no music-video view (everything answers as before).
    public var musicVideos: [MusicVideo] = []
    /// A mixed-content library (a view with no content type of its own), laid out as the home
    /// videos are: `Folder` items per directory, `Video` items per file. Served by Jellyfin and
    /// Emby only; none: no mixed view (everything answers as before).
    public var mixedVideos: [HomeVideo] = []
    /// A movie's images, by its `Movie.file`. None: the movie answers as before.
    public var movieArtwork: [String: [Artwork]] = [:]
    /// A series' images, by its `Series.name`.
    public var seriesArtwork: [String: [Artwork]] = [:]
    /// A season's poster (image file), by "<series name>/<season number>" (e.g. "Signal/1", "Signal/0"
    /// for the specials): the Season item's ImageTags "Primary", Plex the season's thumb.
    public var seasonPosters: [String: String] = [:]
    /// An episode's thumbnail (image file), by its `Episode.file`: the episode's ImageTags "Primary",
    /// Plex the episode's thumb.
    public var episodeThumbs: [String: String] = [:]
    /// An album's cover (image file), by its `Track.album`: the MusicAlbum item's ImageTags
    /// "Primary", sent on each of its tracks as BaseItemDto.AlbumPrimaryImageTag; Plex the album's
    /// thumb, sent on each track as Metadata.parentThumb.
    public var albumCovers: [String: String] = [:]
    /// The subtitles of a media file (a movie's, a movie version's or an episode's `file`), in the
    /// order its media source lists them. None: the file answers as before.
    public var subtitles: [String: [Subtitle]] = [:]

    public init(
        movies: [Movie], series: [Series], tracks: [Track] = [], homeVideos: [HomeVideo] = [],
        musicVideos: [MusicVideo] = [], mixedVideos: [HomeVideo] = [], photos: [Photo] = []
    ) {
        self.movies = movies
        self.series = series
        self.tracks = tracks
        self.homeVideos = homeVideos
        self.musicVideos = musicVideos
        self.mixedVideos = mixedVideos
        self.photos = photos
    }
}

/// A fault the fixture injects into the next matching requests.
public enum FixtureFault: Sendable, Hashable {
    case status(Int)
    /// A status with a `Retry-After` header (seconds or an HTTP date).
    case statusRetryAfter(Int, String)
    case ignoreRange
    case wrongContentRange
    case dropAfter(Int64)
    case stall(Double)
    /// The body stalls for the seconds after its first bytes went out.
    case stallAfter(Int64, Double)
    case malformedJSON
    case truncatedJSON
}

public struct LoggedRequest: Sendable, Hashable {
    public var method: String
    public var path: String
    public var query: [String: String]
    public var range: String?
    public var ifRange: String?
    /// The `Authorization` header's scheme and keys, never its token value.
    public var authorized: Bool
    /// Body bytes actually sent (so far) in answer.
    public var bytesSent: Int64 = 0
    /// Unique per request, so a slow answer cannot update a newer log entry.
    public var id: Int = 0

    /// The bytes this request was actually served, from its range start.
    public var servedRange: ByteRange? {
        guard let r = requestedRange, bytesSent > 0 else { return nil }
        return ByteRange(r.lower, r.lower + bytesSent)
    }

    /// The `[first, last+1)` bytes a `Range: bytes=a-b` asked for.
    public var requestedRange: ByteRange? {
        guard let r = range, r.hasPrefix("bytes=") else { return nil }
        let parts = r.dropFirst(6).split(separator: "-", omittingEmptySubsequences: false)
        guard parts.count == 2, let a = Int64(parts[0]) else { return nil }
        guard let b = Int64(parts[1]) else { return ByteRange(a, Int64.max) }
        return ByteRange(a, b + 1)
    }
}

/// A media server fixture built from the published OpenAPI documents: Jellyfin 10.11, Emby 4.8
/// (below its `/emby` base path, PascalCase query names) or Plex Media Server (JSON
/// MediaContainers, part keys with changestamps). The endpoints Labstream uses, paging, and
/// file downloads with `Range`, `If-Range`, `ETag` and `Last-Modified`. Faults can be
/// injected per path prefix.
public final class ServerFixture: Sendable {
    public enum Kind: String, Sendable { case jellyfin, emby, plex }
    public let kind: Kind
    public let serverId: String
    public let userId: String
    public let userName: String
    let password: String
    let token: String
    let catalog: FixtureCatalog
    let state = Mutex<State>(State())
    private let server = Mutex<HTTPServer?>(nil)
    /// Called for every download request with its 1-based number, before it is answered.
    let downloadHook = Hook<@Sendable (Int) -> Void>()
    /// Open event sockets (EventSocketFixture.swift).
    let eventSockets = EventSockets()
    let downloadCount = Mutex(0)

    public func onDownloadRequest(_ hook: (@Sendable (Int) -> Void)?) { downloadHook.set(hook) }

    /// While closed, image and subtitle requests wait (each on its own connection's thread)
    /// until it opens: a test sees what the daemon says while its side assets are on the way.
    let assetGate = NSCondition()
    nonisolated(unsafe) var assetGateClosed = false  // guarded by assetGate

    public func holdSideAssets(_ held: Bool) {
        assetGate.lock()
        assetGateClosed = held
        assetGate.broadcast()
        assetGate.unlock()
    }

    /// Requests held before they are answered (each on its own connection's thread) until the
    /// hold is cleared: a test sees what the daemon does while a fetch of that file (a download
    /// whose path contains `downloadPath`) or a listing (any request whose query names
    /// `queryKey`, e.g. an incremental sync's `minDateLastSaved`) is on the wire.
    struct RequestHold { var downloadPath: String?; var queryKey: String? }
    let requestGate = NSCondition()
    nonisolated(unsafe) var held = RequestHold()  // guarded by requestGate

    private func setHold(_ change: (inout RequestHold) -> Void) {
        requestGate.lock()
        change(&held)
        requestGate.broadcast()
        requestGate.unlock()
    }

    public func holdDownloads(matching part: String?) { setHold { $0.downloadPath = part } }
    public func holdRequests(withQueryKey key: String?) { setHold { $0.queryKey = key } }

    func passRequestGate(path: String, query: [String: String], download: Bool) {
        func isHeld() -> Bool {
            if download, let part = held.downloadPath, path.contains(part) { return true }
            guard let key = held.queryKey else { return false }
            return query.keys.contains { $0.caseInsensitiveCompare(key) == .orderedSame }
        }
        requestGate.lock()
        while isHeld() { requestGate.wait() }
        requestGate.unlock()
    }

    func passAssetGate() {
        assetGate.lock()
        while assetGateClosed { assetGate.wait() }
        assetGate.unlock()
    }

    struct State {
        var log: [LoggedRequest] = []
        var faults: [(prefix: String, fault: FixtureFault, remaining: Int?)] = []
        /// Bumped to simulate a file that changed on the server.
        var validatorGeneration: [String: Int] = [:]
        /// When an item was last saved, for those touched since the fixture started.
        var lastSaved: [String: String] = [:]
        /// Sources listed without a Size (as a server that has not probed them yet does).
        var sizeless: Set<String> = []
        /// Sources whose ranged answers say no total either (`Content-Range: bytes a-b/*`).
        var totalless: Set<String> = []
        /// Plex: show sections list their episodes, as a server that ignores `type` would.
        var flatShowSections = false
        var musicBySpecEnum = false
        /// Jellyfin/Emby: `/Items` ignores includeItemTypes (everything below the parent).
        var ignoreItemTypes = false
        /// Other users of the server (`addUser`), by token.
        var otherUsers: [String: OtherUser] = [:]
        /// Every page starts at the first item, whatever offset was asked.
        var ignorePaging = false
        /// Jellyfin/Emby: `/Items` does not apply `isPlayed` (every item, each with its own `UserData`).
        var ignorePlayedFilter = false
        var removed: Set<String> = []
        /// Set by `readdLibraries`.
        var readded: IdMap?
        /// Items the server does not have yet (`hold`), and when each released one arrived.
        var held: Set<String> = []
        /// Set by `removeMovieLibrary`, cleared by `readdLibraries`.
        var movieLibraryRemoved = false
        var added: [String: Int64] = [:]
        /// The signed-in user's watched state by item id: plays, the last one (epoch seconds),
        /// and when the user's data for the item was last saved (`markPlayed`).
        var playCounts: [String: Int] = [:]
        var lastPlayed: [String: Int64] = [:]
        var userDataSaved: [String: String] = [:]
        var nextRequestId = 0
        /// Emby Sync (Convert) jobs by id.
        var syncJobs: [Int: ServerJob] = [:]
        /// Plex download-queue items by id (all in queue 1).
        var queueItems: [Int: ServerJob] = [:]
        /// Every server-side job (Emby Convert, Plex download queue) fails.
        var failSyncJobs = false
        /// Every server-side job expires before it is ready (Emby forgets it, Plex says `expired`).
        var expireSyncJobs = false
        /// Server-side jobs keep running and are never ready.
        var holdSyncJobs = false
        /// Job creations whose answer is lost: the job is made, the client gets a 504.
        var lostCreateAnswers = 0
        /// The next job creation's answer waits on this gate (`holdNextJobCreateAnswer`), and
        /// whether one waits on it now.
        var jobCreateGate: (armed: Bool, gate: DispatchSemaphore)?
        var holdingJobCreate = false
        /// Play sessions whose encoding a client stopped (`DELETE /Videos/ActiveEncodings`).
        var stoppedSessions: [String] = []
        /// File bodies being sent now, and the most at once, per file.
        var bodiesSending: [String: Int] = [:]
        var peakBodiesSending: [String: Int] = [:]
        var transcodes = 0
    }

    struct Node {
        var json: [String: Any]
        var file: String?
    }
    let movieLibraryId: String
    let showLibraryId: String
    /// The music library view (`BaseItemDto.CollectionType` "music"); `catalog.tracks` live below it.
    public let musicLibraryId: String
    /// The home-video library view (`BaseItemDto.CollectionType` "homevideos"), listed when
    /// `catalog.homeVideos` or `catalog.photos` has any; their folders, videos and photos live below
    /// it (Jellyfin/Emby).
    public let homeVideoLibraryId: String
    /// The music-video library view (`BaseItemDto.CollectionType` "musicvideos"), listed when
    /// `catalog.musicVideos` has any; their items live directly below it (Jellyfin/Emby).
    public let musicVideoLibraryId: String
    /// The mixed-content library view (Jellyfin `CollectionType` "folders", Emby none), listed when
    /// `catalog.mixedVideos` has any; their folders and videos live below it as home videos do.
    public let mixedLibraryId: String
    /// `Content-Type` of a download that is not video (tracks), by item id.
    let contentTypes: [String: String]
    /// Immutable after init.
    nonisolated(unsafe) let itemsById: [String: [String: Any]]
    /// Every item in `/Items`' order (`SortName`, then id), sorted once: a listing filters it.
    nonisolated(unsafe) let itemsInOrder: [[String: Any]]
    /// Each series' seasons and episodes (by `SeriesId`): a series' listing filters these, not
    /// the whole library (200 series each scanning 100 000 items took a quarter of B10's sync).
    nonisolated(unsafe) let seriesChildren: [String: [[String: Any]]]
    /// `/Items` selections by their query without paging (only those that no save date or
    /// watched state narrows), with the removed and held items they were made under: a client
    /// paging through 90 000 films makes its selection once, not once per page.
    nonisolated(unsafe) var selections: [String: [[String: Any]]] = [:]
    let selectionsLock = NSLock()
    let filesById: [String: String]
    /// Plex rating keys and part ids are numbers: each fixture id has one.
    let idsByPlexNumber: [String: String]

    public init(kind: Kind = .jellyfin, catalog: FixtureCatalog, userName: String = "demo", password: String = "demo", token: String? = nil) throws {
        self.kind = kind
        self.catalog = catalog
        self.userName = userName
        self.password = password
        self.serverId = fixtureId("server")
        self.userId = fixtureId("user:" + userName)
        self.token = token ?? fixtureId("token:" + userName + ":" + String(UInt64.random(in: 0...UInt64.max)))
        self.movieLibraryId = fixtureId("library:movies")
        self.showLibraryId = fixtureId("library:shows")
        let musicId = fixtureId("library:music")
        self.musicLibraryId = musicId
        var items: [String: [String: Any]] = [:]
        var files: [String: String] = [:]
        for movie in catalog.movies {
            let id = fixtureId("movie:\(movie.title):\(movie.year ?? 0):\(movie.file)")
            files[id] = movie.file
            var versions: [(String, String, String)] = [(id, movie.title, movie.file)]
            for v in movie.versions {
                let vid = fixtureId("version:\(id):\(v.label)")
                files[vid] = v.file
                versions.append((vid, v.label, v.file))
            }
            items[id] = clean([
                "Name": movie.title, "ServerId": serverId, "Id": id, "Type": "Movie", "IsFolder": false,
                "MediaType": "Video", "LocationType": "FileSystem", "ParentId": movieLibraryId,
                "ProductionYear": movie.year, "Container": movie.container,
                "DateCreated": "2024-03-01T12:00:00.0000000Z",
                "_versions": versions.map { clean(["Id": $0.0, "Name": $0.1, "File": $0.2, "Container": movie.container, "Bitrate": movie.bitrate]) }
            ])
            // `_details`: the catalog's descriptive metadata, turned into each server's members when
            // answered (`detailMembers`, `plexDetails`); an item without any has none.
            if !movie.details.isEmpty { items[id]?["_details"] = movie.details }
            // `_artwork`: the catalog's images, answered by each server (`mediaBrowserImages`,
            // `plexImages`) with tags made from their bytes when asked; an item without any has none.
            if let art = catalog.movieArtwork[movie.file], !art.isEmpty { items[id]?["_artwork"] = art }
        }
        for series in catalog.series {
            let sid = fixtureId("series:\(series.name):\(series.year ?? 0)")
            items[sid] = clean([
                "Name": series.name, "ServerId": serverId, "Id": sid, "Type": "Series", "IsFolder": true,
                "ProductionYear": series.year, "ParentId": showLibraryId, "LocationType": "FileSystem",
                "DateCreated": "2023-05-01T08:00:00.0000000Z"
            ])
            if !series.details.isEmpty { items[sid]?["_details"] = series.details }
            if let art = catalog.seriesArtwork[series.name], !art.isEmpty { items[sid]?["_artwork"] = art }
            for ep in series.episodes {
                let seasonId = fixtureId("season:\(sid):\(ep.season)")
                if items[seasonId] == nil {
                    items[seasonId] = [
                        "Name": ep.season == 0 ? "Specials" : "Season \(ep.season)", "Id": seasonId,
                        "ServerId": serverId, "Type": "Season", "IsFolder": true, "IndexNumber": ep.season,
                        "SeriesId": sid, "SeriesName": series.name, "ParentId": sid
                    ]
                    // A season's poster is its primary image (Plex: its thumb).
                    if let poster = catalog.seasonPosters["\(series.name)/\(ep.season)"] {
                        items[seasonId]?["_artwork"] = [FixtureCatalog.Artwork(.poster, file: poster)]
                    }
                }
                let eid = fixtureId("episode:\(sid):\(ep.season):\(ep.number):\(ep.file)")
                files[eid] = ep.file
                items[eid] = [
                    "Name": ep.title, "ServerId": serverId, "Id": eid, "Type": "Episode", "IsFolder": false,
                    "MediaType": "Video", "LocationType": "FileSystem", "IndexNumber": ep.number,
                    "ParentIndexNumber": ep.season, "SeasonId": seasonId, "SeriesId": sid,
                    "SeriesName": series.name, "ParentId": seasonId, "Container": ep.container,
                    "DateCreated": "2024-04-02T09:30:00.0000000Z",
                    "_versions": [["Id": eid, "Name": ep.title, "File": ep.file, "Container": ep.container]]
                ]
                if !ep.details.isEmpty { items[eid]?["_details"] = ep.details }
                // An episode's thumbnail is its primary image (Plex: its thumb), as a poster is a movie's.
                if let thumb = catalog.episodeThumbs[ep.file] { items[eid]?["_artwork"] = [FixtureCatalog.Artwork(.poster, file: thumb)] }
            }
        }
        // Music: each track is an `Audio` item below its `MusicAlbum`, each album below the music view.
        // Plex lists the same items in its music section (see PlexFixture.swift), with the artist
        // each album is filed under (`_artistName`) and one `MusicArtist` item per such artist.
        var mimeTypes: [String: String] = [:]
        for track in catalog.tracks {
            let albumId = ServerFixture.albumId(of: track)
            // BaseItemDto.AlbumArtists: NameGuidPair (Jellyfin) / NameIdPair (Emby) items, `Name` and `Id`.
            let albumArtists: [[String: String]]? = track.albumArtist.map { [["Name": $0, "Id": fixtureId("artist:" + $0)]] }
            if let albumId, let album = track.album {
                // BaseItemDto.Type "MusicAlbum" (BaseItemKind), a folder: what IncludeItemTypes=MusicAlbum lists.
                var node =
                    items[albumId]
                    ?? clean([
                        "Name": album, "ServerId": serverId, "Id": albumId, "Type": "MusicAlbum", "IsFolder": true,
                        "ParentId": musicId, "LocationType": "FileSystem", "AlbumArtist": track.albumArtist,
                        "AlbumArtists": albumArtists, "DateCreated": "2024-06-01T12:00:00.0000000Z"
                    ])
                if node["ProductionYear"] == nil, let year = track.year { node["ProductionYear"] = year }
                // Plex: the album's parent artist is its album artist, else its first track's artist.
                if kind == .plex, node["_artistName"] == nil, let artist = track.albumArtist ?? track.artists.first {
                    node["_artistName"] = artist
                }
                if let cover = catalog.albumCovers[album] { node["_artwork"] = [FixtureCatalog.Artwork(.poster, file: cover)] }
                items[albumId] = node
            }
            let id = fixtureId("track:\(track.album ?? ""):\(track.disc ?? 0):\(track.number ?? 0):\(track.title):\(track.file)")
            files[id] = track.file
            mimeTypes[id] = ServerFixture.audioContentType(track.container)
            // MediaSourceInfo.Path: a server-side path as a music library lays it out (artist/album/file),
            // so tracks with the same file name on different albums do not share one.
            let folders = [track.albumArtist ?? track.artists.first, track.album].compactMap { $0?.replacingOccurrences(of: "/", with: "_") }
            let path = (["/media/music"] + folders + [(track.file as NSString).lastPathComponent]).joined(separator: "/")
            // BaseItemDto.Type "Audio" (BaseItemKind), BaseItemDto.MediaType "Audio"; BaseItemDto.ParentId its album.
            var node: [String: Any] = [
                "Name": track.title, "ServerId": serverId, "Id": id, "Type": "Audio", "IsFolder": false,
                "MediaType": "Audio", "LocationType": "FileSystem", "ParentId": albumId ?? musicId, "Container": track.container,
                "DateCreated": "2024-06-01T12:00:00.0000000Z",
                "_versions": [["Id": id, "Name": track.title, "File": track.file, "Container": track.container, "Path": path]]
            ]
            // BaseItemDto.Artists: array of strings (always sent, empty when the tag has none).
            node["Artists"] = track.artists
            // BaseItemDto.ArtistItems: NameGuidPair (Jellyfin) / NameIdPair (Emby) per artist.
            node["ArtistItems"] = track.artists.map { ["Name": $0, "Id": fixtureId("artist:" + $0)] }
            node.merge(
                clean([
                    "Album": track.album,  // BaseItemDto.Album
                    "AlbumId": albumId,  // BaseItemDto.AlbumId (the MusicAlbum item's Id)
                    "AlbumArtist": track.albumArtist,  // BaseItemDto.AlbumArtist
                    "AlbumArtists": albumArtists,  // BaseItemDto.AlbumArtists
                    "IndexNumber": track.number,  // BaseItemDto.IndexNumber: the track number
                    "ParentIndexNumber": track.disc,  // BaseItemDto.ParentIndexNumber: the disc number
                    "ProductionYear": track.year  // BaseItemDto.ProductionYear
                ])
            ) { _, new in new }
            // Plex: the artist an album-less track is filed under (a track on an album uses the album's).
            if kind == .plex, let artist = track.albumArtist ?? track.artists.first { node["_artistName"] = artist }
            items[id] = node
        }
        // Home videos: the library's directory tree as `Folder` items (BaseItemKind "Folder", IsFolder
        // true), one per distinct directory path, each below its parent directory's folder or, at the
        // top, the view; each file a `Video` item (BaseItemKind "Video", MediaType "Video") below its
        // innermost folder or the view. Ids follow the path, so one directory named in many videos
        // (or photos, below) is one folder.
        // The mixed library (`catalog.mixedVideos`) is laid out the same way below its own view,
        // with its own folder and video ids (distinct from the home videos' even for equal names).
        // Plex serves the home videos alone (section 4, see PlexFixture.swift), flat: the same
        // `Video` items with no folders and no parent, their directories only in their path.
        let homeId = fixtureId("library:homevideos")
        self.homeVideoLibraryId = homeId
        let mixedId = fixtureId("library:mixed")
        self.mixedLibraryId = mixedId
        let folderLibraries:
            [(
                videos: [FixtureCatalog.HomeVideo], viewId: String, root: String, idPrefix: String,
                folderId: ([String]) -> String
            )] = [
                (catalog.homeVideos, homeId, "/media/homevideos", "homevideo:", ServerFixture.homeVideoFolderId),
                (catalog.mixedVideos, mixedId, "/media/mixed", "mixedvideo:", ServerFixture.mixedFolderId)
            ]
        for library in folderLibraries where kind != .plex || library.viewId == homeId {
            for video in library.videos {
                let folders = video.folders.filter { !$0.isEmpty }
                let parent =
                    kind == .plex
                    ? nil
                    : ServerFixture.fileFolders(
                        folders, below: library.viewId, root: library.root, type: "Folder",
                        serverId: serverId, id: library.folderId, into: &items)
                let id = fixtureId(library.idPrefix + "\(folders.joined(separator: "\u{0}")):\(video.title):\(video.file)")
                files[id] = video.file
                // BaseItemDto.Path / MediaSourceInfo.Path (Plex Part.file): a server-side path below the library's root.
                let filePath = ServerFixture.serverPath(library.root, folders + [(video.file as NSString).lastPathComponent])
                items[id] = clean([
                    "Name": video.title, "ServerId": serverId, "Id": id, "Type": "Video", "IsFolder": false,
                    "MediaType": "Video", "LocationType": "FileSystem", "ParentId": parent, "Container": video.container,
                    "DateCreated": "2024-07-01T12:00:00.0000000Z",
                    "_versions": [["Id": id, "Name": video.title, "File": video.file, "Container": video.container, "Path": filePath]]
                ])
            }
        }
        // Photos. Jellyfin/Emby: each a `Photo` item (BaseItemKind "Photo", MediaType "Photo", IsFolder
        // false) in the home-video view, below the home videos' `Folder` item for its directory (one
        // folder per path, whichever of videos and photos names it). Neither server attaches media
        // sources to a photo, so it has no `_versions`: its file is its own (`_path`, BaseItemDto.Path;
        // Emby's BaseItemDto.Size, see `dto`). Plex: each in the photo section (5) below one
        // `PhotoAlbum` item per directory path (an album at the top has no parent), with one Media
        // of one Part (`_versions`, answered by `plexPhotoMetadata`).
        for photo in catalog.photos {
            let folders = photo.folders.filter { !$0.isEmpty }
            let root = kind == .plex ? "/media/photos" : "/media/homevideos"
            let parent =
                kind == .plex
                ? ServerFixture.fileFolders(
                    folders, below: nil, root: root, type: "PhotoAlbum", serverId: serverId,
                    id: ServerFixture.photoAlbumId, into: &items)
                : ServerFixture.fileFolders(
                    folders, below: homeId, root: root, type: "Folder", serverId: serverId,
                    id: ServerFixture.homeVideoFolderId, into: &items)
            let id = fixtureId("photo:\(folders.joined(separator: "\u{0}")):\(photo.title):\(photo.file)")
            files[id] = photo.file
            mimeTypes[id] = ServerFixture.imageContentType(photo.container)
            // BaseItemDto.Path (Plex Part.file): a server-side path below the library's root.
            let path = ServerFixture.serverPath(root, folders + [(photo.file as NSString).lastPathComponent])
            var node = clean([
                "Name": photo.title, "ServerId": serverId, "Id": id, "Type": "Photo", "IsFolder": false,
                "MediaType": "Photo", "LocationType": "FileSystem", "ParentId": parent,
                "Container": photo.container,  // BaseItemDto.Container (string)
                "Width": photo.width, "Height": photo.height,  // BaseItemDto.Width, Height (int32, nullable)
                "DateCreated": "2024-07-01T12:00:00.0000000Z", "_path": path
            ])
            if kind == .plex {
                node["_versions"] = [["Id": id, "Name": photo.title, "File": photo.file, "Container": photo.container, "Path": path]]
            }
            items[id] = node
        }
        // Music videos (Jellyfin/Emby; Plex serves no such section): each file a `MusicVideo` item
        // (BaseItemKind "MusicVideo", MediaType "Video", IsFolder false) directly below the view,
        // with one media source as a movie has (`_versions`, answered by `dto`).
        let musicVideoId = fixtureId("library:musicvideos")
        self.musicVideoLibraryId = musicVideoId
        if kind != .plex {
            for video in catalog.musicVideos {
                let id = fixtureId("musicvideo:\(video.title):\(video.year ?? 0):\(video.file)")
                files[id] = video.file
                // MediaSourceInfo.Path (and BaseItemDto.Path): a server-side path below the library's root.
                let path = "/media/musicvideos/" + (video.file as NSString).lastPathComponent
                var node = clean([
                    "Name": video.title, "ServerId": serverId, "Id": id, "Type": "MusicVideo", "IsFolder": false,
                    "MediaType": "Video", "LocationType": "FileSystem", "ParentId": musicVideoId,
                    "ProductionYear": video.year,  // BaseItemDto.ProductionYear (int32, nullable)
                    "Container": video.container, "DateCreated": "2024-08-01T12:00:00.0000000Z",
                    "_versions": [["Id": id, "Name": video.title, "File": video.file, "Container": video.container, "Path": path]]
                ])
                // BaseItemDto.Artists: array of strings (always sent, empty when there are none), as for tracks.
                node["Artists"] = video.artists
                // BaseItemDto.ArtistItems: Jellyfin NameGuidPair, Emby NameIdPair (`Name`, `Id` a string
                // in both), the same artist ids as tracks' so one performer is one artist.
                node["ArtistItems"] = video.artists.map { ["Name": $0, "Id": fixtureId("artist:" + $0)] }
                items[id] = node
            }
        }
        if kind == .plex {
            // Plex's music section is artist > album > track (spec `/library/sections/all` description):
            // one artist item for each artist an album or album-less track is filed under.
            let artists = Set(
                items.values.compactMap { node -> String? in
                    switch node["Type"] as? String {
                    case "MusicAlbum"?: return node["_artistName"] as? String
                    case "Audio"? where node["AlbumId"] == nil: return node["_artistName"] as? String
                    default: return nil
                    }
                })
            for name in artists {
                let artistId = fixtureId("artist:" + name)
                items[artistId] = [
                    "Name": name, "ServerId": serverId, "Id": artistId, "Type": "MusicArtist", "IsFolder": true,
                    "ParentId": musicId, "_artistName": name
                ]
            }
        }
        contentTypes = mimeTypes
        itemsById = items
        itemsInOrder = items.values.map { (Self.sortKey($0), $0) }.sorted { $0.0 < $1.0 }.map(\.1)
        seriesChildren = Dictionary(grouping: items.values.filter { $0["SeriesId"] is String }) { $0["SeriesId"] as! String }
        filesById = files
        var numbers: [String: String] = [:]
        for id in Set(items.keys).union(files.keys) { numbers[plexNumber(id)] = id }
        idsByPlexNumber = numbers
    }

    /// Starts listening on 127.0.0.1 (a random free port).
    /// Starts listening on 127.0.0.1: `port` 0 picks a free port; a stopped fixture restarts on
    /// its old port (`restart`) so clients configured with its URL find it again.
    @discardableResult
    public func start(port: UInt16 = 0) throws -> String {
        let s = try HTTPServer(port: port) { [self] request in handle(request) }
        lastPort.withLock { $0 = s.port }
        server.withLock { $0 = s }
        return s.baseURL
    }

    public var baseURL: String { server.withLock { $0?.baseURL ?? "" } }
    let lastPort = Mutex<UInt16>(0)

    @discardableResult
    public func restart() throws -> String { try start(port: lastPort.withLock { $0 }) }

    /// Stops the server: connections drop, new ones are refused.
    public func stop() {
        server.withLock {
            $0?.stop(); $0 = nil
        }
    }

    public var accessToken: String { token }

    /// Another user of a Jellyfin server: signs in with its own name and password, and may see
    /// only the movie library (Jellyfin's `UserPolicy.EnableAllFolders` false and
    /// `EnabledFolders` naming it): `/UserViews` lists only that library, and every item outside
    /// it answers 404 to this user, as Jellyfin answers an item a user cannot access.
    struct OtherUser: Sendable {
        var name: String
        var password: String
        var id: String
    }

    /// Adds such a user; returns its id.
    @discardableResult
    public func addUser(_ name: String, password: String) -> String {
        let id = fixtureId("user:" + name)
        let token = fixtureId("token:" + name + ":" + String(UInt64.random(in: 0...UInt64.max)))
        state.withLock { $0.otherUsers[token] = OtherUser(name: name, password: password, id: id) }
        return id
    }

    /// Whether `id` lies below the movie library (what another user may see).
    func inMovieLibrary(_ id: String) -> Bool {
        var p: String? = id
        while let cur = p {
            if cur == movieLibraryId { return true }
            p = itemsById[cur]?["ParentId"] as? String
        }
        return false
    }

    /// A request of another user (`addUser`): its own identity, and only the movie library.
    func otherUserRoute(_ request: HTTPServer.Request, parts: [String], user: OtherUser, fault: FixtureFault?, logIndex: Int) -> HTTPServer.Response {
        let dto: [String: Any] = ["Name": user.name, "ServerId": serverId, "Id": user.id, "HasPassword": true, "HasConfiguredPassword": true]
        let m = request.method
        let notFound = HTTPServer.Response.json("{\"title\":\"Not Found\",\"status\":404}", status: 404)
        if m == "GET" && parts == ["Users", "Me"] { return json(dto) }
        if m == "GET" && parts == ["UserViews"] && request.query["userId"] == user.id {
            guard case .bytes(let body) = userViews(request).body,
                let answer = try? JSONSerialization.jsonObject(with: Data(body)) as? [String: Any],
                let views = answer["Items"] as? [[String: Any]]
            else { return notFound }
            let mine = views.filter { $0["Id"] as? String == movieLibraryId }
            return json(["Items": mine, "TotalRecordCount": mine.count, "StartIndex": 0])
        }
        if m == "GET" && parts == ["Items"] && request.query["userId"] == user.id {
            guard let parent = query(request, "parentId"), inMovieLibrary(parent) else {
                return json(["Items": [] as [Any], "TotalRecordCount": 0, "StartIndex": 0])
            }
            return items(request)
        }
        if (m == "GET" || m == "HEAD") && parts.count == 3 && parts[0] == "Items" && parts[2] == "Download" {
            return inMovieLibrary(parts[1]) ? download(parts[1], request, fault, logIndex: logIndex) : notFound
        }
        if let answer = mediaBrowserAssetRoute(request, parts: parts) { return answer }
        return notFound
    }

    public var requestLog: [LoggedRequest] { state.withLock { $0.log } }
    public func clearLog() { state.withLock { $0.log.removeAll() } }
    public var downloadRequests: [LoggedRequest] { requestLog.filter { isDownload($0.path) } }

    func isDownload(_ path: String) -> Bool {
        kind == .plex ? path.hasPrefix("/library/parts/") : path.hasSuffix("/Download")
    }

    public func inject(_ fault: FixtureFault, pathPrefix: String, times: Int? = 1) {
        state.withLock { $0.faults.append((pathPrefix, fault, times)) }
    }

    public func clearFaults() { state.withLock { $0.faults.removeAll() } }

    /// Makes the file behind `itemId` look changed (new ETag and Last-Modified).
    /// Removes an item from the server's listings (its download answers 404).
    public func remove(itemId: String) {
        state.withLock { _ = $0.removed.insert(itemId) }
        tellingChanges(removed: [itemId])
    }

    /// Makes the file behind `itemId` look changed (new ETag, Last-Modified, part key) and its
    /// item saved now (`DateLastSaved`).
    /// From now on `/Items` answers every item below the parent, whatever includeItemTypes asks.
    public func ignoreIncludeItemTypes() { state.withLock { $0.ignoreItemTypes = true } }

    /// From now on every page is the first one (a server that ignores the offset).
    public func ignorePageOffsets() { state.withLock { $0.ignorePaging = true } }

    /// From now on `/Items` lists watched and unwatched items alike whatever `isPlayed` asks, each
    /// with its own `UserData.Played`, as a Jellyfin-compatible server that leaves a filter
    /// unapplied does (Silo's jellycompat-api.md: "including filters Silo does not apply").
    public func ignoreIsPlayedFilter() { state.withLock { $0.ignorePlayedFilter = true } }

    /// Lists `sourceId` without its Size from now on.
    public func hideSize(of sourceId: String) { state.withLock { _ = $0.sizeless.insert(sourceId) } }
    /// Not listed with a size, and ranged answers do not say the total.
    public func hideSizeAndTotal(of sourceId: String) {
        state.withLock {
            $0.sizeless.insert(sourceId)
            $0.totalless.insert(sourceId)
        }
    }

    public func touch(itemId: String) {
        let now = ISODate.string(epochSeconds: Int64(Date().timeIntervalSince1970))
        state.withLock {
            $0.validatorGeneration[itemId, default: 0] += 1
            $0.lastSaved[itemId] = now
        }
        tellingChanges(updated: [itemId])
    }

    /// A server-wide metadata refresh (Jellyfin's "refresh all metadata"): every item, and every
    /// file, saved anew now, with new validators. Returns how many items were saved.
    @discardableResult
    public func touchAll() -> Int {
        let now = ISODate.string(epochSeconds: Int64(Date().timeIntervalSince1970))
        let ids = Set(itemsById.keys).union(filesById.keys)
        state.withLock { s in
            for id in ids {
                s.validatorGeneration[id, default: 0] += 1
                s.lastSaved[id] = now
            }
        }
        return itemsById.count
    }

    static let defaultLastSaved = "2024-05-01T10:00:00.0000000Z"

    func lastSaved(_ id: String) -> String { state.withLock { $0.lastSaved[id] } ?? Self.defaultLastSaved }

    /// The signed-in user watched `itemId` once more (PlayCount, Plex's viewCount, go up; the last
    /// play is now) or, with `false`, has not (no plays, no date), as the servers' mark
    /// played/unplayed do. Either saves the user's data for the item, not the item: a listing
    /// with `minDateLastSavedForUser` includes it, one with `minDateLastSaved` does not.
    /// Plex takes the item's ratingKey (`ratingKey(forFile:)`) as well as its fixture id.
    public func markPlayed(itemId: String, _ played: Bool = true) {
        let id = fixtureItem(itemId)
        let now = Int64(Date().timeIntervalSince1970)
        state.withLock { s in
            if played {
                s.playCounts[id, default: 0] += 1
                s.lastPlayed[id] = now
            } else {
                s.playCounts[id] = nil
                s.lastPlayed[id] = nil
            }
            s.userDataSaved[id] = ISODate.string(epochSeconds: now)
        }
    }

    /// The server does not have `itemId` yet: no listing, count or lookup shows it or anything
    /// below it, nor a season, series or album (Plex: artist) it leaves without one episode or
    /// track, and its files answer 404. Unlike `remove`, `release` undoes it. Plex takes a
    /// ratingKey as well.
    public func hold(itemId: String) {
        let id = fixtureItem(itemId)
        state.withLock { _ = $0.held.insert(id) }
    }

    /// The server gains a held item and what is below it: added (`DateCreated`, Plex `addedAt`)
    /// and saved (`DateLastSaved`) now, so a listing of what changed since before shows it as new.
    /// An item that was not held is already on the server: nothing changes.
    public func release(itemId: String) {
        let id = fixtureItem(itemId)
        let arriving = [id] + itemsById.filter { ancestors(of: $0.value).contains(id) }.map(\.key)
        let now = Int64(Date().timeIntervalSince1970)
        let released = state.withLock { s -> Bool in
            guard s.held.remove(id) != nil else { return false }
            for a in arriving where !s.held.contains(a) {
                s.added[a] = now
                s.lastSaved[a] = ISODate.string(epochSeconds: now)
            }
            return true
        }
        if released { tellingChanges(added: [id]) }
    }

    /// The fixture item a test names: its id, or on Plex its ratingKey (numbers are never ids).
    func fixtureItem(_ given: String) -> String { kind == .plex ? idsByPlexNumber[given] ?? given : given }

    /// The items `item` lives below (season and series of an episode, album of a track; on Plex
    /// also the artist an album or album-less track is filed under), nearest first.
    func ancestors(of item: [String: Any]) -> [String] {
        var out: [String] = []
        var p = item["ParentId"] as? String
        while let cur = p, let node = itemsById[cur], !out.contains(cur) {
            out.append(cur)
            p = node["ParentId"] as? String
        }
        if kind == .plex, let artist = plexArtist(of: item)?.id, artist != item["Id"] as? String,
            itemsById[artist] != nil, !out.contains(artist)
        {
            out.append(artist)
        }
        return out
    }

    /// What holds keep off the server: held items, everything below them, and each season, series,
    /// album, home-video folder or photo album whose episodes, tracks, videos or photos are all gone
    /// (held, or removed) with at least one held.
    /// A container emptied by `remove` alone stays listed, as it always was.
    func heldBack() -> Set<String> {
        let (removed, heldItems, libraryRemoved) = state.withLock { ($0.removed, $0.held, $0.movieLibraryRemoved) }
        // A removed library's films are not on the server at all (as held ones are not yet).
        let held = libraryRemoved ? heldItems.union(itemsById.filter { $0.value["ParentId"] as? String == movieLibraryId }.map(\.key)) : heldItems
        guard !held.isEmpty else { return [] }
        struct Tally { var total = 0, gone = 0, held = 0 }
        var back = held
        var tallies: [String: Tally] = [:]
        for (id, item) in itemsById {
            let above = ancestors(of: item)
            if above.contains(where: { held.contains($0) }) { back.insert(id) }
            guard ["Episode", "Audio", "Video", "Photo"].contains(item["Type"] as? String ?? "") else { continue }
            let isHeld = back.contains(id)
            let gone = isHeld || removed.contains(id)
            for container in above {
                tallies[container, default: Tally()].total += 1
                if gone { tallies[container, default: Tally()].gone += 1 }
                if isHeld { tallies[container, default: Tally()].held += 1 }
            }
        }
        for (container, t) in tallies where t.gone == t.total && t.held > 0 { back.insert(container) }
        return back
    }

    /// A file (item or version id) a hold keeps back: its own item, or the item it is a version of.
    func isHeldBack(file id: String) -> Bool {
        let back = heldBack()
        guard !back.isEmpty else { return false }
        if back.contains(id) { return true }
        return itemsById.contains { entry in
            back.contains(entry.key) && ((entry.value["_versions"] as? [[String: Any]]) ?? []).contains { $0["Id"] as? String == id }
        }
    }

    /// `minDateLastSaved` (the item's own saves: `touch`, `release`) and `minDateLastSavedForUser`,
    /// as the request asks. Jellyfin 10.11 compares the latter with the item's own last save too
    /// (its spec only says "for the current user"), so a watched change does not show there;
    /// Emby's is taken as the user's data save (`markPlayed`) or the item's.
    func savedSinceFilter(_ request: HTTPServer.Request) -> (String) -> Bool {
        let since = query(request, "minDateLastSaved").flatMap(ISODate.epochSeconds)
        let userSince = query(request, "minDateLastSavedForUser").flatMap(ISODate.epochSeconds)
        guard since != nil || userSince != nil else { return { _ in true } }
        let (saved, userSaved) = state.withLock { ($0.lastSaved, $0.userDataSaved) }
        let fallback = Self.defaultLastSaved
        let userDataCounts = kind == .emby
        return { id in
            let item = ISODate.epochSeconds(saved[id] ?? fallback) ?? 0
            if let since, item < since { return false }
            let user = userDataCounts ? max(item, userSaved[id].flatMap(ISODate.epochSeconds) ?? 0) : item
            if let userSince, user < userSince { return false }
            return true
        }
    }

    /// `isPlayed` (Jellyfin `/Items`, Emby `IsPlayed`): only items the user has (true) or has not
    /// (false) watched.
    func playedFilter(_ request: HTTPServer.Request) -> (String) -> Bool {
        guard let wanted = query(request, "isPlayed").map({ $0.lowercased() == "true" }), !state.withLock({ $0.ignorePlayedFilter }) else {
            return { _ in true }
        }
        let counts = state.withLock { $0.playCounts }
        return { id in ((counts[id] ?? 0) > 0) == wanted }
    }

    public func itemId(forFile file: String) -> String? { filesById.first { $0.value == file }?.key }

    /// Every item's id by its file, at once (`itemId(forFile:)` looks through them all each time).
    public var itemIdsByFile: [String: String] { Dictionary(filesById.map { ($0.value, $0.key) }, uniquingKeysWith: { a, _ in a }) }

    /// The `AlbumId` (`BaseItemDto.AlbumId`) a track is listed with: one per album title and album
    /// artist, nil for a track without an album.
    public static func albumId(of track: FixtureCatalog.Track) -> String? {
        track.album.map { fixtureId("album:\(track.albumArtist ?? ""):\($0)") }
    }

    /// The id of the home-video `Folder` item for a directory path below the library root
    /// (`HomeVideo.folders` or a leading part of it, outermost first; empty names are skipped).
    public static func homeVideoFolderId(_ folders: [String]) -> String {
        fixtureId("homefolder:" + folders.filter { !$0.isEmpty }.joined(separator: "\u{0}"))
    }

    /// The id of the mixed library's `Folder` item for a directory path below its root
    /// (`FixtureCatalog.mixedVideos[i].folders` or a leading part of it, as `homeVideoFolderId`).
    public static func mixedFolderId(_ folders: [String]) -> String {
        fixtureId("mixedfolder:" + folders.filter { !$0.isEmpty }.joined(separator: "\u{0}"))
    }

    /// The id of the Plex photo section's `PhotoAlbum` item (Metadata type "photoalbum", its
    /// ratingKey `plexNumber` of it) for a directory path below the section's root
    /// (`Photo.folders` or a leading part of it, outermost first; empty names are skipped).
    public static func photoAlbumId(_ folders: [String]) -> String {
        fixtureId("photoalbum:" + folders.filter { !$0.isEmpty }.joined(separator: "\u{0}"))
    }

    /// A server-side path (BaseItemDto.Path, MediaSourceInfo.Path, Plex Part.file): `root`, then each
    /// of `names` (directories, then the file's name), a "/" inside a name made "_".
    static func serverPath(_ root: String, _ names: [String]) -> String {
        ([root] + names.map { $0.replacingOccurrences(of: "/", with: "_") }).joined(separator: "/")
    }

    /// Files `folders` (outermost first, no empty names) into `items`: one item of `type` (Jellyfin/Emby
    /// "Folder", Plex "PhotoAlbum"; BaseItemKind, IsFolder true) per directory path not there yet, with
    /// its name, its own directory (`_path`, BaseItemDto.Path) and below its parent directory's item or,
    /// at the top, `top` (none: no parent). Answers the innermost one's id, `top` without folders.
    static func fileFolders(
        _ folders: [String], below top: String?, root: String, type: String, serverId: String,
        id folderId: ([String]) -> String, into items: inout [String: [String: Any]]
    ) -> String? {
        var parent = top
        for depth in folders.indices {
            let id = folderId(Array(folders[...depth]))
            if items[id] == nil {
                items[id] = clean([
                    "Name": folders[depth], "ServerId": serverId, "Id": id, "Type": type,
                    "IsFolder": true, "ParentId": parent, "LocationType": "FileSystem",
                    "DateCreated": "2024-07-01T12:00:00.0000000Z", "_path": serverPath(root, Array(folders[...depth]))
                ])
            }
            parent = id
        }
        return parent
    }

    /// A photo download's `Content-Type` (the spec's `/Items/{itemId}/Download` lists only `video/*`
    /// and `audio/*`; a picture is answered as what it is).
    static func imageContentType(_ container: String) -> String {
        switch container.lowercased() {
        case "jpg", "jpeg": return "image/jpeg"
        case "tif", "tiff": return "image/tiff"
        default: return "image/" + container.lowercased()
        }
    }

    /// A track download's `Content-Type` (Jellyfin's `/Items/{itemId}/Download` answers `audio/*` for audio).
    static func audioContentType(_ container: String) -> String {
        switch container.lowercased() {
        case "mp3": return "audio/mpeg"
        case "flac": return "audio/flac"
        case "m4a", "m4b", "mp4", "alac": return "audio/mp4"
        case "aac": return "audio/aac"
        case "ogg", "oga", "opus": return "audio/ogg"
        case "wav": return "audio/wav"
        case "wma", "asf": return "audio/x-ms-wma"
        default: return "audio/" + container.lowercased()
        }
    }

    func takeFault(for path: String) -> FixtureFault? {
        state.withLock { s in
            guard let i = s.faults.firstIndex(where: { path.hasPrefix($0.prefix) }) else { return nil }
            let f = s.faults[i].fault
            if let r = s.faults[i].remaining {
                if r <= 1 { s.faults.remove(at: i) } else { s.faults[i].remaining = r - 1 }
            }
            return f
        }
    }

    // MARK: - Routing

    /// Answers one request as the server would (the loopback listener's handler; in-memory
    /// transports call it directly).
    public func handle(_ original: HTTPServer.Request) -> HTTPServer.Response {
        guard let readded = state.withLock({ $0.readded }) else { return handleAsListed(original) }
        // A library re-added: every item, and every media source, is the same file under an id
        // the server gave it anew. Requests name the new ids; answers (JSON) say them.
        var request = original
        request.path = readded.back(request.path)
        request.query = request.query.mapValues(readded.back)
        var response = handleAsListed(request)
        if response.headers.contains(where: { $0.0.lowercased() == "content-type" && $0.1.contains("json") }), case .bytes(let body) = response.body {
            response.body = .bytes(Array(readded.forth(String(decoding: body, as: UTF8.self)).utf8))
        }
        return response
    }

    /// The movie library is removed from the server, as its administrator does (Jellyfin and Emby:
    /// `DELETE /Library/VirtualFolders`; Plex: `DELETE /library/sections/{sectionId}`): the user's views (Plex: `/library/sections`) no longer
    /// list it, and its films are not on the server (no listing, count or lookup shows them, their
    /// files answer 404; Plex's section answers 404). `readdLibraries` adds it back.
    public func removeMovieLibrary() {
        state.withLock { $0.movieLibraryRemoved = true }
        tellingChanges(removed: itemsById.filter { $0.value["ParentId"] as? String == movieLibraryId }.map(\.key).sorted())
    }

    /// Gives every item and media source a new id from now on, as each server does when a library
    /// is removed and added again; the files, their bytes, their metadata and the libraries stay.
    /// Jellyfin: BaseItemDto.Id and MediaSourceInfo.Id (the item's). Emby: BaseItemDto.Id,
    /// MediaSourceInfo.ItemId and MediaSourceInfo.Id (`mediasource_…`), while ProviderIds, Path,
    /// Size and Container stay (emby-openapi.json BaseItemDto, MediaSourceInfo). Plex: a section
    /// added again gives its items new rows, so Metadata.ratingKey (and every `key` naming it),
    /// Media.id, Part.id and Part.key change, while Metadata.Guid (imdb://, tmdb://, tvdb://),
    /// Metadata.guid, Part.file, Part.size and Part.container stay (plex-api-spec.yaml
    /// components.schemas.Metadata, Media, Part). The new items are new to the server: added
    /// (`DateCreated`, Plex `addedAt`) and saved (`DateLastSaved`) now, so a listing of what
    /// changed since before lists every one of them, and the event channel (once `tellChanges`)
    /// tells of the old items removed and the new ones added.
    public func readdLibraries() {
        var forth: [String: String] = [:]
        for id in Set(itemsById.keys).union(filesById.keys) {
            let new = fixtureId("readded:" + id)
            forth[id] = new
            switch kind {
            case .jellyfin: break
            case .emby: forth[String(mediaSourceId(ofItem: id).suffix(12))] = String(mediaSourceId(ofItem: new).suffix(12))
            case .plex: forth[plexNumber(id)] = plexNumber(new)
            }
        }
        for library in [movieLibraryId, showLibraryId, musicLibraryId] {
            forth[library] = nil
            forth[plexNumber(library)] = nil
        }
        let map = IdMap(forth: forth)
        let now = Int64(Date().timeIntervalSince1970)
        let ids = Set(itemsById.keys).union(filesById.keys)
        state.withLock { s in
            s.readded = map
            s.movieLibraryRemoved = false
            for id in ids {
                s.added[id] = now
                s.lastSaved[id] = ISODate.string(epochSeconds: now)
            }
        }
        let renamed = itemsById.keys.filter { forth[$0] != nil }.sorted()
        tellingChanges(added: renamed.compactMap { forth[$0] }, removed: renamed)
    }

    /// The new id of `itemId` after `readdLibraries` (itself before).
    public func currentId(of itemId: String) -> String { state.withLock { $0.readded?.forthIds[itemId] } ?? itemId }

    func handleAsListed(_ original: HTTPServer.Request) -> HTTPServer.Response {
        var request = original
        if kind == .emby {
            // Emby serves its API below /emby (its spec's base path).
            guard request.path.lowercased().hasPrefix("/emby/") else { return .json("{\"title\":\"Not Found\"}", status: 404) }
            request.path = String(request.path.dropFirst(5))
        }
        let auth = parseAuthorization(request.headers["authorization"] ?? request.headers["x-emby-authorization"])
        let authorized: Bool
        let other = kind == .jellyfin ? state.withLock { s in auth["Token"].flatMap { s.otherUsers[$0] } } : nil
        switch kind {
        case .jellyfin: authorized = auth["Token"] == token || other != nil
        case .emby: authorized = (request.headers["x-emby-token"] ?? auth["Token"] ?? request.query["api_key"]) == token
        case .plex: authorized = (request.headers["x-plex-token"] ?? request.query["X-Plex-Token"]) == token
        }
        let logIndex = state.withLock { s -> Int in
            s.nextRequestId += 1
            s.log.append(
                LoggedRequest(
                    method: request.method, path: request.path, query: request.query,
                    range: request.headers["range"], ifRange: request.headers["if-range"],
                    authorized: authorized, id: s.nextRequestId))
            return s.nextRequestId
        }
        if isDownload(request.path) {
            let n = downloadCount.withLock {
                $0 += 1; return $0
            }
            if let hook = downloadHook.function { hook(n) }
        }
        passRequestGate(path: request.path, query: request.query, download: isDownload(request.path))
        let fault = takeFault(for: request.path)
        if case .status(let code)? = fault {
            return .json("{\"title\":\"injected\",\"status\":\(code)}", status: code)
        }
        if case .statusRetryAfter(let code, let after)? = fault {
            var r = HTTPServer.Response.json("{\"title\":\"injected\",\"status\":\(code)}", status: code)
            r.headers.append(("Retry-After", after))
            return r
        }
        let parts = request.path.split(separator: "/").map(String.init)
        let m = request.method
        let response: HTTPServer.Response
        if kind == .plex {
            if authorized, let answer = downloadQueueRoute(request, parts: parts, fault: fault, logIndex: logIndex) { return answer }
            if let answer = plexRoute(request, parts: parts, authorized: authorized, fault: fault, logIndex: logIndex) { return answer }
            response = .json("{\"errors\":[{\"code\":1001,\"message\":\"Not Found\"}]}", status: 404)
        } else if m == "GET" && parts == ["System", "Info", "Public"] {
            response = json(
                kind == .jellyfin
                    ? [
                        "LocalAddress": baseURL, "ServerName": "Labstream Fixture", "Version": "10.11.11",
                        "ProductName": "Jellyfin Server", "OperatingSystem": "", "Id": serverId, "StartupWizardCompleted": true
                    ]
                    : [
                        "LocalAddress": baseURL, "LocalAddresses": [baseURL], "RemoteAddresses": [], "ServerName": "Labstream Emby Fixture",
                        "Version": "4.8.11.0", "Id": serverId
                    ])
        } else if m == "POST" && parts == ["Users", "AuthenticateByName"] {
            response = authenticate(request, auth)
        } else if let other {
            response = otherUserRoute(request, parts: parts, user: other, fault: fault, logIndex: logIndex)
        } else if authorized || kind == .jellyfin, let answer = mediaBrowserAssetRoute(request, parts: parts) {
            // Images and subtitle files. Jellyfin's spec gives their GET and HEAD no `security`
            // (anonymous); Emby's requires a user's (apikeyauth or embyauth), as every other route.
            return answer
        } else if !authorized {
            response = .json("", status: 401)
        } else if m == "GET" && parts == [kind == .jellyfin ? "socket" : "embywebsocket"] {
            return eventSocket(request)
        } else if kind == .jellyfin && m == "GET" && parts == ["Users", "Me"] {
            response = json(userDto())
        } else if kind == .emby && m == "GET" && parts == ["Users", userId] {
            response = json(userDto())
        } else if kind == .jellyfin && m == "GET" && parts == ["Users"] {
            response = json([userDto()])
        } else if kind == .emby && m == "GET" && parts == ["Users", "Query"] {
            response = json(["Items": [userDto()], "TotalRecordCount": 1])
        } else if kind == .jellyfin && m == "GET" && parts == ["UserViews"] && request.query["userId"] == userId {
            response = userViews(request)
        } else if kind == .emby && m == "GET" && parts == ["Users", userId, "Views"] {
            response = userViews(request)
        } else if kind == .jellyfin && m == "GET" && parts == ["Items"] && request.query["userId"] == userId {
            response = items(request)
        } else if kind == .emby && m == "GET" && parts == ["Users", userId, "Items"] {
            response = items(request)
        } else if m == "GET" && parts.count == 3 && parts[0] == "Shows" && parts[2] == "Seasons" {
            response = seasons(parts[1], request)
        } else if m == "GET" && parts.count == 3 && parts[0] == "Shows" && parts[2] == "Episodes" {
            response = episodes(parts[1], request)
        } else if m == "GET" && parts.count == 3 && parts[0] == "Videos" && parts[2].hasPrefix("stream.") {
            return stream(parts[1], container: String(parts[2].dropFirst("stream.".count)), request, fault, logIndex: logIndex)
        } else if kind == .emby, let answer = syncRoute(request, parts: parts, fault: fault, logIndex: logIndex) {
            return answer
        } else if m == "DELETE" && parts == ["Videos", "ActiveEncodings"] {
            guard let session = query(request, "playSessionId"), query(request, "deviceId") != nil else {
                return .json("{\"title\":\"Bad Request\",\"detail\":\"deviceId and playSessionId are required\"}", status: 400)
            }
            state.withLock { $0.stoppedSessions.append(session) }
            return HTTPServer.Response(status: 204)
        } else if (m == "GET" || m == "HEAD") && parts.count == 3 && parts[0] == "Items" && parts[2] == "Download" {
            return download(parts[1], request, fault, logIndex: logIndex)
        } else {
            response = .json("{\"title\":\"Not Found\",\"status\":404}", status: 404)
        }
        switch fault {
        case .malformedJSON?:
            return HTTPServer.Response(status: 200, headers: [("Content-Type", "application/json")], body: .bytes(Array("{\"Items\": [oops".utf8)))
        case .truncatedJSON?:
            if case .bytes(let b) = response.body {
                return HTTPServer.Response(status: response.status, headers: response.headers, body: .bytes(Array(b.prefix(b.count / 2))))
            }
            return response
        default:
            return response
        }
    }

    func parseAuthorization(_ header: String?) -> [String: String] {
        let scheme = kind == .emby ? "Emby " : "MediaBrowser "
        guard let header, header.hasPrefix(scheme) else { return [:] }
        var out: [String: String] = [:]
        for part in header.dropFirst(scheme.count).split(separator: ",") {
            let kv = part.split(separator: "=", maxSplits: 1)
            guard kv.count == 2 else { continue }
            var v = kv[1].trimmingCharacters(in: .whitespaces)
            if v.hasPrefix("\"") && v.hasSuffix("\"") && v.count >= 2 { v = String(v.dropFirst().dropLast()) }
            out[kv[0].trimmingCharacters(in: .whitespaces)] = v.removingPercentEncoding ?? v
        }
        return out
    }

    func authenticate(_ request: HTTPServer.Request, _ auth: [String: String]) -> HTTPServer.Response {
        // Jellyfin 10.11 requires the client identity fields on an unauthenticated login.
        guard ["Client", "Device", "DeviceId", "Version"].allSatisfy({ auth[$0]?.isEmpty == false }) else {
            return .json("{\"title\":\"Bad Request\",\"detail\":\"Authorization header missing fields\"}", status: 400)
        }
        guard let body = try? JSONSerialization.jsonObject(with: Data(request.body)) as? [String: Any],
            let user = body["Username"] as? String
        else {
            return .json("{\"title\":\"Bad Request\"}", status: 400)
        }
        let others = state.withLock { $0.otherUsers }
        if let (token, other) = others.first(where: { $0.value.name.lowercased() == user.lowercased() }), (body["Pw"] as? String) == other.password {
            let dto: [String: Any] = ["Name": other.name, "ServerId": serverId, "Id": other.id, "HasPassword": true, "HasConfiguredPassword": true]
            return json([
                "User": dto, "SessionInfo": ["UserId": other.id, "DeviceId": auth["DeviceId"]!, "Client": auth["Client"]!],
                "AccessToken": token, "ServerId": serverId
            ])
        }
        guard user.lowercased() == userName.lowercased(), (body["Pw"] as? String) == password else {
            return .json("Error processing request.", status: 401)
        }
        return json([
            "User": userDto(), "SessionInfo": ["UserId": userId, "DeviceId": auth["DeviceId"]!, "Client": auth["Client"]!],
            "AccessToken": token, "ServerId": serverId
        ])
    }

    func userDto() -> [String: Any] {
        ["Name": userName, "ServerId": serverId, "Id": userId, "HasPassword": true, "HasConfiguredPassword": true]
    }

    func userViews(_ request: HTTPServer.Request) -> HTTPServer.Response {
        var views: [[String: Any]] = []
        if !catalog.movies.isEmpty && !state.withLock({ $0.movieLibraryRemoved }) {
            views.append([
                "Name": catalog.movieLibrary, "ServerId": serverId, "Id": movieLibraryId, "Type": "CollectionFolder",
                "CollectionType": "movies", "IsFolder": true
            ])
        }
        if !catalog.series.isEmpty {
            views.append([
                "Name": catalog.showLibrary, "ServerId": serverId, "Id": showLibraryId, "Type": "CollectionFolder",
                "CollectionType": "tvshows", "IsFolder": true
            ])
        }
        // BaseItemDto.CollectionType "music" (listed even when empty, as before tracks existed).
        views.append([
            "Name": catalog.musicLibraryName, "ServerId": serverId, "Id": musicLibraryId, "Type": "CollectionFolder",
            "CollectionType": "music", "IsFolder": true
        ])
        // BaseItemDto.CollectionType "homevideos" (Jellyfin's CollectionType enum; Emby's spec types
        // it as a plain string, its servers send the same value), only when there are home videos or
        // photos (both live in it: Jellyfin's "Home Videos and Photos").
        if !catalog.homeVideos.isEmpty || !catalog.photos.isEmpty {
            views.append([
                "Name": catalog.homeVideoLibraryName, "ServerId": serverId, "Id": homeVideoLibraryId,
                "Type": "CollectionFolder", "CollectionType": "homevideos", "IsFolder": true
            ])
        }
        // BaseItemDto.CollectionType "musicvideos" (Jellyfin's CollectionType enum; Emby's spec types
        // it as a plain string), only when there are music videos.
        if !catalog.musicVideos.isEmpty {
            views.append([
                "Name": catalog.musicVideoLibraryName, "ServerId": serverId, "Id": musicVideoLibraryId,
                "Type": "CollectionFolder", "CollectionType": "musicvideos", "IsFolder": true
            ])
        }
        // A mixed-content library, only when there are mixed videos. Jellyfin: BaseItemDto.CollectionType
        // is the CollectionType enum, which has "folders" (jellyfin-openapi.json line 56185, in the
        // schema at line 56171; there is no "mixed" there, that is only CollectionTypeOptions (line 56199)
        // for creating a library), and the property is `"nullable": true` (line 54849),
        // so absent would be allowed too; "folders" is sent. Emby: BaseItemDto.CollectionType is a
        // plain string (emby-openapi.json line 80185) with no value for mixed content, so it is left out.
        if !catalog.mixedVideos.isEmpty {
            var view: [String: Any] = [
                "Name": catalog.mixedLibraryName, "ServerId": serverId, "Id": mixedLibraryId,
                "Type": "CollectionFolder", "IsFolder": true
            ]
            if kind == .jellyfin { view["CollectionType"] = "folders" }
            views.append(view)
        }
        // BaseItemDto.CollectionType "livetv" (the spec's CollectionType enum): a view that holds
        // channels, not files; a client must leave it out.
        views.append([
            "Name": "Live TV", "ServerId": serverId, "Id": fixtureId("view:livetv"), "Type": "UserView",
            "CollectionType": "livetv", "IsFolder": true
        ])
        return json(kind == .jellyfin ? ["Items": views, "TotalRecordCount": views.count, "StartIndex": 0] : ["Items": views, "TotalRecordCount": views.count])
    }

    /// A query parameter by the name this server's spec gives it: camelCase for Jellyfin,
    /// PascalCase for Emby. Drift in either direction goes unanswered, as on a strict server.
    func query(_ request: HTTPServer.Request, _ camel: String) -> String? {
        request.query[kind == .jellyfin ? camel : camel.prefix(1).uppercased() + camel.dropFirst()]
    }

    func fields(_ request: HTTPServer.Request) -> Set<String> {
        Set((query(request, "fields") ?? "").split(separator: ",").map(String.init))
    }

    /// `userData`: whether the answer carries `BaseItemDto.UserData` (`enableUserData` is not false);
    /// `images`: which of its ImageTags and BackdropImageTags (see `imageMembers`).
    func dto(_ raw: [String: Any], fields: Set<String>, userData: Bool = true, images: ImageOptions = ImageOptions()) -> [String: Any] {
        var out = raw.filter { !$0.key.hasPrefix("_") }
        out.merge(detailMembers(raw, fields: fields)) { _, new in new }
        out.merge(imageMembers(raw, images)) { _, new in new }
        out.merge(albumImageMember(raw, images)) { _, new in new }
        if userData, let data = userItemData(raw) { out["UserData"] = data }
        // BaseItemDto.DateCreated: a released item was added when it arrived.
        if out["DateCreated"] != nil, let id = raw["Id"] as? String, let added = state.withLock({ $0.added[id] }) {
            out["DateCreated"] = ISODate.string(epochSeconds: added)
        }
        if let versions = raw["_versions"] as? [[String: Any]] {
            let sources: [[String: Any]] = versions.map { v in
                let file = v["File"] as! String
                let size = fileSize(file)
                let itemId = v["Id"] as! String
                let path = v["Path"] as? String ?? "/media/" + (file as NSString).lastPathComponent
                var source: [String: Any] = [
                    "Protocol": "File", "Id": mediaSourceId(ofItem: itemId), "Path": path,
                    "Type": "Default", "Container": v["Container"]!, "Size": size, "Name": v["Name"]!,
                    "IsRemote": false, "SupportsDirectStream": true, "SupportsDirectPlay": true, "SupportsTranscoding": true
                ]
                switch kind {
                case .jellyfin: source["ETag"] = etag(for: itemId, file: file)
                // Emby 4.8's MediaSourceInfo has no ETag; it names the item (each version is one).
                case .emby: source["ItemId"] = itemId
                case .plex: break
                }
                if state.withLock({ $0.sizeless.contains(itemId) }) { source.removeValue(forKey: "Size") }
                if let bitrate = v["Bitrate"] { source["Bitrate"] = bitrate }
                // MediaSourceInfo.MediaStreams (array of MediaStream; a source's own member, not a
                // `fields` one, so every listed source carries it): the file's catalog subtitles.
                // None: not sent, as before.
                let subtitles = subtitleStreams(ofFile: file, path: path)
                if !subtitles.isEmpty { source["MediaStreams"] = subtitles }
                return source
            }
            if fields.contains("MediaSources") { out["MediaSources"] = sources }
            // BaseItemDto.MediaStreams: the default (first) source's streams, only when asked (an
            // ItemFields member, and in Emby's Fields options).
            if fields.contains("MediaStreams"), let streams = sources.first?["MediaStreams"] { out["MediaStreams"] = streams }
            if fields.contains("Path") { out["Path"] = sources.first?["Path"] }
            if versions.count > 1 && kind == .jellyfin { out["MediaSourceCount"] = versions.count }  // not in Emby's BaseItemDto
        }
        // A home-video folder's own directory, or a photo's file (BaseItemDto.Path), asked for as a
        // file's is (`Path`: an ItemFields member, and in Emby's Fields options).
        if fields.contains("Path"), out["Path"] == nil, let path = raw["_path"] as? String { out["Path"] = path }
        // BaseItemDto.Width and Height (a photo's): Jellyfin ItemFields members, so only when asked;
        // Emby's Fields options name neither, so Emby always sends them.
        if kind == .jellyfin { for member in ["Width", "Height"] where !fields.contains(member) { out[member] = nil } }
        // BaseItemDto.Size (Emby only: integer, int64, nullable; Jellyfin's BaseItemDto has none): a
        // photo has no media source to carry its file's bytes, its item does. Not in Emby's Fields
        // options: always sent (but for a file `hideSize` names, as its sources would lose theirs).
        if kind == .emby, raw["Type"] as? String == "Photo", let id = raw["Id"] as? String, let file = filesById[id],
            !state.withLock({ $0.sizeless.contains(id) })
        {
            out["Size"] = fileSize(file)
        }
        if fields.contains("Etag") {
            // The item's tag changes when any of its files does (Emby's only change signal).
            let ids = (raw["_versions"] as? [[String: Any]])?.compactMap { $0["Id"] as? String } ?? [raw["Id"] as! String]
            let generations = state.withLock { s in ids.map { String(s.validatorGeneration[$0] ?? 0) } }
            out["Etag"] = String(fixtureId("etag:\(raw["Id"]!):" + generations.joined(separator: ",")).prefix(16))
        }
        return out
    }

    /// The descriptive `BaseItemDto` members of a movie, episode or series with catalog details
    /// (`_details`), each by its spec's name and type (jellyfin-openapi.json and emby-openapi.json,
    /// components.schemas.BaseItemDto). A member the spec lets a client ask for through `fields`
    /// (Jellyfin: the `ItemFields` enum of `/Items`' `fields`; Emby: the "Options:" list of `Fields`
    /// on `/Users/{UserId}/Items` and `/Shows/{Id}/Episodes`) is sent only when the request names
    /// it, as a real server leaves it out otherwise; the others are always sent. Unset members
    /// (nil, or an empty list) are not sent at all, so an item without details answers as before.
    func detailMembers(_ raw: [String: Any], fields: Set<String>) -> [String: Any] {
        guard let d = raw["_details"] as? FixtureCatalog.Details else { return [:] }
        var out: [String: Any] = [:]
        // Not ItemFields members (nor in Emby's Fields options): always sent.
        if let rating = d.rating { out["CommunityRating"] = rating }  // number (float)
        if let official = d.contentRating { out["OfficialRating"] = official }  // string
        // PremiereDate (string, date-time): the day at midnight UTC, as the servers write DateTimes.
        if let day = d.premiered { out["PremiereDate"] = day + "T00:00:00.0000000Z" }
        // RunTimeTicks (integer, int64): 10 000 000 ticks a second (.NET TimeSpan ticks).
        if let seconds = d.runtimeSeconds { out["RunTimeTicks"] = Int64(seconds) * 10_000_000 }
        // OriginalTitle: a Jellyfin ItemFields member; Emby's Fields options do not name it, so Emby
        // always sends it.
        if let original = d.originalTitle, kind == .emby || fields.contains("OriginalTitle") { out["OriginalTitle"] = original }
        // ItemFields members in both specs (and in Emby's Fields options): only when asked.
        if let plot = d.plot, fields.contains("Overview") { out["Overview"] = plot }  // string
        if !d.genres.isEmpty, fields.contains("Genres") { out["Genres"] = d.genres }  // array of strings
        if !d.studios.isEmpty, fields.contains("Studios") {
            out["Studios"] = d.studios.map { name -> [String: Any] in
                let id = fixtureId("studio:" + name)
                // Jellyfin: NameGuidPair (`Name`, `Id` a uuid, written as item ids are here). Emby:
                // NameLongIdPair (`Name`, `Id` an integer, int64).
                var pair: [String: Any] = ["Name": name, "Id": id]
                if kind == .emby { pair["Id"] = Int(id.prefix(12), radix: 16)! }
                return pair
            }
        }
        // ProviderIds: Jellyfin an object of strings, Emby ProviderIdDictionary (the same). The keys
        // are the servers' MetadataProvider names (MediaBrowser.Model.Entities.MetadataProvider:
        // Imdb, Tmdb, Tvdb); neither spec lists them.
        let providerIds = clean(["Imdb": d.imdb, "Tmdb": d.tmdb, "Tvdb": d.tvdb])
        if !providerIds.isEmpty, fields.contains("ProviderIds") { out["ProviderIds"] = providerIds }
        // Chapters (array of ChapterInfo) of a movie or episode: a Jellyfin ItemFields member and in
        // Emby's Fields options, so only when asked. ChapterInfo.StartPositionTicks (integer, int64):
        // seconds × 10 000 000; Name (string). Emby's also ChapterIndex (integer, int32): the
        // chapter's place in the list, from 0. The image members (Jellyfin ImagePath,
        // ImageDateModified, ImageTag; Emby ImageTag) and Emby's MarkerType are not sent: the
        // fixture has no chapter images and the catalog says nothing of markers.
        if !d.chapters.isEmpty, fields.contains("Chapters"), ["Movie", "Episode"].contains(raw["Type"] as? String ?? "") {
            out["Chapters"] = d.orderedChapters.enumerated().map { index, chapter -> [String: Any] in
                var info: [String: Any] = ["StartPositionTicks": Int64((chapter.start * 10_000_000).rounded()), "Name": chapter.name]
                if kind == .emby { info["ChapterIndex"] = index }
                return info
            }
        }
        return out
    }

    /// `BaseItemDto.UserData` (UserItemDataDto) of a movie, episode, track, home or music video or
    /// photo: the signed-in user's watched state. The members neither spec marks nullable are always sent; `LastPlayedDate`
    /// (nullable) only once played, as a server that omits nulls does. Folders get none here (a
    /// real server derives theirs from their children).
    func userItemData(_ raw: [String: Any]) -> [String: Any]? {
        guard let id = raw["Id"] as? String, ["Movie", "Episode", "Audio", "Video", "MusicVideo", "Photo"].contains(raw["Type"] as? String ?? "") else {
            return nil
        }
        let (count, last) = state.withLock { ($0.playCounts[id] ?? 0, $0.lastPlayed[id]) }
        var data: [String: Any] = [
            "Played": count > 0, "PlayCount": count, "PlaybackPositionTicks": 0, "IsFavorite": false,
            "Key": id, "ItemId": id
        ]
        if count > 0, let last { data["LastPlayedDate"] = ISODate.string(epochSeconds: last) }
        return data
    }

    func page(_ all: [[String: Any]], _ request: HTTPServer.Request) -> HTTPServer.Response {
        let start = state.withLock { $0.ignorePaging } ? 0 : max(Int(query(request, "startIndex") ?? "0") ?? 0, 0)
        let limit = Int(query(request, "limit") ?? "") ?? Int.max
        let f = fields(request)
        // `enableUserData` ("Optional, include user data"): user data unless it is false.
        let userData = query(request, "enableUserData")?.lowercased() != "false"
        let slice = start < all.count ? Array(all[start..<min(all.count, start + min(limit, all.count))]) : []
        let images = imageOptions(request)
        var result: [String: Any] = ["Items": slice.map { dto($0, fields: f, userData: userData, images: images) }, "TotalRecordCount": all.count]
        if kind == .jellyfin { result["StartIndex"] = start }  // Emby's QueryResult has no StartIndex
        return json(result)
    }

    func items(_ request: HTTPServer.Request) -> HTTPServer.Response {
        let types = state.withLock { $0.ignoreItemTypes } ? [] : Set((query(request, "includeItemTypes") ?? "").split(separator: ",").map(String.init))
        let parent = query(request, "parentId")
        let recursive = query(request, "recursive") == "true"
        let removed = state.withLock { $0.removed }.union(heldBack())
        let narrowed = ["minDateLastSaved", "minDateLastSavedForUser", "isPlayed"].contains { query(request, $0) != nil }
        let key = [parent ?? "-", recursive ? "r" : "", types.sorted().joined(separator: ","), removed.sorted().joined(separator: ",")].joined(
            separator: "\u{0}")
        if !narrowed, let made = selectionsLock.withLock({ selections[key] }) { return page(made, request) }
        let saved = savedSinceFilter(request)
        let played = playedFilter(request)
        let selected = itemsInOrder.filter { item in
            if removed.contains(item["Id"] as! String) { return false }
            if !saved(item["Id"] as! String) || !played(item["Id"] as! String) { return false }
            if !types.isEmpty && !types.contains(item["Type"] as! String) { return false }
            guard let parent else { return true }
            if item["ParentId"] as? String == parent { return true }
            guard recursive else { return false }
            // Episodes and seasons live below a series below the library.
            var p = item["ParentId"] as? String
            while let cur = p, let node = itemsById[cur] {
                if node["ParentId"] as? String == parent { return true }
                p = node["ParentId"] as? String
            }
            return false
        }
        if !narrowed {
            selectionsLock.withLock {
                if selections.count > 16 { selections.removeAll() }; selections[key] = selected
            }
        }
        return page(selected, request)
    }

    static func sortKey(_ item: [String: Any]) -> String {
        "\((item["Name"] as? String ?? "").lowercased())\u{0}\(item["Id"] as! String)"
    }

    // A removed series or season is still answered here (as before holds); a held-back one is not
    // on the server at all.
    func seasons(_ sid: String, _ request: HTTPServer.Request) -> HTTPServer.Response {
        let back = heldBack()
        guard itemsById[sid]?["Type"] as? String == "Series", !back.contains(sid) else { return .json("{\"title\":\"Not Found\"}", status: 404) }
        let all = (seriesChildren[sid] ?? []).filter { $0["Type"] as? String == "Season" && !back.contains($0["Id"] as! String) }
            .sorted { ($0["IndexNumber"] as! Int) < ($1["IndexNumber"] as! Int) }
        return page(all, request)
    }

    func episodes(_ sid: String, _ request: HTTPServer.Request) -> HTTPServer.Response {
        let back = heldBack()
        guard itemsById[sid]?["Type"] as? String == "Series", !back.contains(sid) else { return .json("{\"title\":\"Not Found\"}", status: 404) }
        let removed = state.withLock { $0.removed }.union(back)
        // Emby's /Shows/{Id}/Episodes takes MinDateLastSaved(ForUser); Jellyfin's has neither.
        let saved: (String) -> Bool = kind == .emby ? savedSinceFilter(request) : { _ in true }
        let all = (seriesChildren[sid] ?? []).filter { item -> Bool in
            let id = item["Id"] as! String
            return item["Type"] as? String == "Episode" && !removed.contains(id) && saved(id)
        }.sorted { (($0["ParentIndexNumber"] as! Int), ($0["IndexNumber"] as! Int)) < (($1["ParentIndexNumber"] as! Int), ($1["IndexNumber"] as! Int)) }
        return page(all, request)
    }

    /// A media source's id. Emby's are not item ids (only Jellyfin's are), so a route given one
    /// where the spec says item id answers 404, as a real Emby server does.
    func mediaSourceId(ofItem id: String) -> String { kind == .emby ? "mediasource_" + String(fixtureId("source:" + id).prefix(12)) : id }

    func itemId(ofMediaSource id: String) -> String? {
        kind == .emby ? filesById.keys.first { mediaSourceId(ofItem: $0) == id } : id
    }

    /// A file's byte count (0 for a file that is missing).
    func fileSize(_ file: String) -> Int64 { (try? FileManager.default.attributesOfItem(atPath: file)[.size] as? Int64) ?? 0 }

    func etag(for id: String, file: String) -> String {
        let gen = state.withLock { $0.validatorGeneration[id] ?? 0 }
        let size = fileSize(file)
        return "\"\(String(size, radix: 16))-\(fixtureId("\(id):\(gen)").prefix(12))\""
    }

    func lastModified(for id: String) -> String {
        let gen = state.withLock { $0.validatorGeneration[id] ?? 0 }
        let date = Date(timeIntervalSince1970: 1_700_000_000 + Double(gen) * 3600)
        let f = DateFormatter()
        f.locale = Locale(identifier: "en_US_POSIX")
        f.timeZone = TimeZone(identifier: "GMT")
        f.dateFormat = "EEE, dd MMM yyyy HH:mm:ss 'GMT'"
        return f.string(from: date)
    }

    func download(_ id: String, _ request: HTTPServer.Request, _ fault: FixtureFault?, logIndex requestId: Int) -> HTTPServer.Response {
        let report: @Sendable (Int64) -> Void = { [self] sent in
            state.withLock { s in
                if let i = s.log.lastIndex(where: { $0.id == requestId }) { s.log[i].bytesSent = sent }
            }
        }
        guard !state.withLock({ $0.removed.contains(id) }), !isHeldBack(file: id), let file = filesById[id] else {
            return .json("{\"title\":\"Not Found\",\"status\":404}", status: 404)
        }
        return serveFile(file, tagId: id, request, fault, report: report)
    }

    /// The most bodies of one file that were being sent at once (a body counts until its last
    /// byte went out; one cut short counts until the fixture stops).
    public var peakConcurrentBodiesOfOneFile: Int { state.withLock { $0.peakBodiesSending.values.max() ?? 0 } }

    /// A file with `Range`, `If-Range`, `ETag` and `Last-Modified` (tagged by `tagId`).
    func serveFile(
        _ file: String, tagId id: String, _ request: HTTPServer.Request, _ fault: FixtureFault?,
        report progress: @escaping @Sendable (Int64) -> Void
    ) -> HTTPServer.Response {
        guard let attrs = try? FileManager.default.attributesOfItem(atPath: file), let size = attrs[.size] as? Int64 else {
            return .json("{\"title\":\"Not Found\",\"status\":404}", status: 404)
        }
        // Set when a body is answered below; its last byte ends it.
        let bodyLength = Mutex<Int64>(-1)
        let report: @Sendable (Int64) -> Void = { [self] sent in
            progress(sent)
            if sent == bodyLength.withLock({ $0 }) { state.withLock { $0.bodiesSending[id, default: 1] -= 1 } }
        }
        func sending(_ length: Int64) {
            bodyLength.withLock { $0 = length }
            state.withLock { s in
                s.bodiesSending[id, default: 0] += 1
                s.peakBodiesSending[id] = max(s.peakBodiesSending[id] ?? 0, s.bodiesSending[id]!)
            }
        }
        let tag = etag(for: id, file: file)
        let modified = lastModified(for: id)
        var headers: [(String, String)] = [
            ("Content-Type", contentTypes[id] ?? "video/x-matroska"), ("Accept-Ranges", "bytes"),
            ("ETag", tag), ("Last-Modified", modified)
        ]
        let dropAfter: Int64? = {
            if case .dropAfter(let n)? = fault { return n }; return nil
        }()
        let stall: (after: Int64, seconds: Double)? = {
            switch fault {
            case .stall(let s)?: return (0, s)
            case .stallAfter(let n, let s)?: return (n, s)
            default: return nil
            }
        }()
        var honourRange = fault != .ignoreRange
        if let ifRange = request.headers["if-range"], ifRange != tag, ifRange != modified { honourRange = false }
        if honourRange, let spec = request.headers["range"], spec.hasPrefix("bytes=") {
            let bounds = spec.dropFirst(6).split(separator: "-", omittingEmptySubsequences: false)
            guard bounds.count == 2, let first = Int64(bounds[0]), first < size else {
                headers.append(("Content-Range", "bytes */\(size)"))
                return HTTPServer.Response(status: 416, headers: headers)
            }
            let last = min(Int64(bounds[1]) ?? (size - 1), size - 1)
            guard last >= first else { return HTTPServer.Response(status: 416, headers: headers + [("Content-Range", "bytes */\(size)")]) }
            let shift: Int64 = fault == .wrongContentRange ? 1 : 0
            let total = state.withLock { $0.totalless.contains(id) } ? "*" : String(size)
            headers.append(("Content-Range", "bytes \(first + shift)-\(last + shift)/\(total)"))
            sending(min(last - first + 1, dropAfter ?? .max))
            return HTTPServer.Response(
                status: 206, headers: headers,
                body: FaultyFile.body(path: file, offset: first, length: last - first + 1, dropAfter: dropAfter, stall: stall, sent: report))
        }
        sending(min(size, dropAfter ?? .max))
        return HTTPServer.Response(
            status: 200, headers: headers,
            body: FaultyFile.body(path: file, offset: 0, length: size, dropAfter: dropAfter, stall: stall, sent: report))
    }

    /// Play sessions whose encodings clients stopped, in order.
    public var stoppedSessions: [String] { state.withLock { $0.stoppedSessions } }
    public var streamRequests: [LoggedRequest] { requestLog.filter { $0.path.contains("/stream.") } }

    /// A live transcode as the server makes it: ffmpeg's real output at the asked bitrate,
    /// forward-only (no `Accept-Ranges`, `Range` ignored). The media must be real.
    func stream(_ id: String, container: String, _ request: HTTPServer.Request, _ fault: FixtureFault?, logIndex: Int) -> HTTPServer.Response {
        let version = query(request, "mediaSourceId").flatMap { itemId(ofMediaSource: $0) } ?? id
        guard itemsById[id] != nil, !heldBack().contains(id), let file = filesById[version], query(request, "playSessionId") != nil else {
            return .json("{\"title\":\"Not Found\"}", status: 404)
        }
        let bitrate = Int(query(request, "videoBitRate") ?? "") ?? 2_000_000
        let copy = query(request, "videoCodec") == "copy"
        let n = state.withLock {
            $0.transcodes += 1; return $0.transcodes
        }
        let out = NSTemporaryDirectory() + "labstream-fixture-\(getpid())-\(n).\(container)"
        let ffmpeg = Process()
        ffmpeg.executableURL = URL(fileURLWithPath: "/usr/bin/ffmpeg")
        ffmpeg.arguments =
            ["-v", "error", "-nostdin", "-y", "-i", file]
            + (copy ? ["-c", "copy"] : ["-c:v", "libx264", "-preset", "ultrafast", "-b:v", String(bitrate), "-c:a", "aac", "-b:a", "128k"])
            + ["-f", container == "mkv" ? "matroska" : container, out]
        ffmpeg.standardInput = FileHandle.nullDevice
        ffmpeg.standardOutput = FileHandle.nullDevice
        ffmpeg.standardError = FileHandle.nullDevice
        guard (try? ffmpeg.run()) != nil else { return .json("{\"title\":\"ffmpeg is missing\"}", status: 500) }
        ffmpeg.waitUntilExit()
        guard ffmpeg.terminationStatus == 0, let size = (try? FileManager.default.attributesOfItem(atPath: out)[.size] as? Int64) else {
            return .json("{\"title\":\"transcode failed\"}", status: 500)
        }
        let report: @Sendable (Int64) -> Void = { [self] sent in
            state.withLock { s in if let i = s.log.lastIndex(where: { $0.id == logIndex }) { s.log[i].bytesSent = sent } }
            if sent >= size { unlink(out) }
        }
        let dropAfter: Int64? = {
            if case .dropAfter(let n)? = fault { return n }; return nil
        }()
        let stall: (after: Int64, seconds: Double)? = {
            switch fault {
            case .stall(let s)?: return (0, s)
            case .stallAfter(let n, let s)?: return (n, s)
            default: return nil
            }
        }()
        return HTTPServer.Response(
            status: 200, headers: [("Content-Type", "video/x-matroska")],
            body: FaultyFile.body(path: out, offset: 0, length: size, dropAfter: dropAfter, stall: stall, sent: report))
    }

    func json(_ object: Any) -> HTTPServer.Response {
        // Keys in the dictionary's order: sorting them (Foundation compares keys by locale) was a third of
        // the fixture's time serving a large library, and JSON objects are unordered.
        let bytes = FixtureJSON.encode(object) ?? Array((try? JSONSerialization.data(withJSONObject: object)) ?? Data("{}".utf8))
        return HTTPServer.Response(status: 200, headers: [("Content-Type", "application/json; charset=utf-8")], body: .bytes(bytes))
    }
}

// MARK: - Artwork and subtitles

extension ServerFixture {
    /// An item's catalog images (`_artwork`) whose files can be read now, in catalog order, each
    /// with its bytes and tag: `fixtureId` of the bytes, so a rewritten image has a new tag at once.
    func artwork(_ raw: [String: Any]) -> [(kind: FixtureCatalog.Artwork.Kind, bytes: Data, tag: String)] {
        ((raw["_artwork"] as? [FixtureCatalog.Artwork]) ?? []).compactMap { art in
            FileManager.default.contents(atPath: art.file).map { (art.kind, $0, fixtureId(bytes: $0)) }
        }
    }

    /// Jellyfin/Emby images of an item by ImageType (both specs' enum): "Primary" (a poster, a
    /// season's poster, an episode's thumbnail) and "Logo", the first of each (ImageTags has one
    /// tag per type); "Backdrop" every fanart, in order: its position is the image routes' index.
    func mediaBrowserImages(_ raw: [String: Any]) -> [String: [(bytes: Data, tag: String)]] {
        var out: [String: [(bytes: Data, tag: String)]] = [:]
        for image in artwork(raw) {
            let type: String
            switch image.kind {
            case .poster: type = "Primary"
            case .logo: type = "Logo"
            case .fanart: type = "Backdrop"
            }
            if type != "Backdrop", out[type] != nil { continue }
            out[type, default: []].append((image.bytes, image.tag))
        }
        return out
    }

    /// What a listing asks of the items' images (both specs' `/Items` (Emby `/Users/{UserId}/Items`),
    /// `/Shows/{Id}/Seasons` and `/Shows/{Id}/Episodes`): `enableImages` ("include image information
    /// in output"; only false leaves it out), `enableImageTypes` ("the image types to include in
    /// the output", comma-separated; none: every type), `imageTypeLimit` ("the max number of images
    /// to return, per image type"; none: no limit).
    struct ImageOptions {
        var enabled = true
        var types: Set<String>? = nil
        var limit = Int.max
    }

    func imageOptions(_ request: HTTPServer.Request) -> ImageOptions {
        ImageOptions(
            enabled: query(request, "enableImages")?.lowercased() != "false",
            types: query(request, "enableImageTypes").map { Set($0.split(separator: ",").map(String.init)) },
            limit: Int(query(request, "imageTypeLimit") ?? "") ?? .max)
    }

    /// BaseItemDto.ImageTags (object: ImageType → tag) and BackdropImageTags (array of tags in image
    /// index order): not `fields` members, so sent unasked, but only for an item with images (one
    /// without answers as before), and only what `options` leaves of them.
    func imageMembers(_ raw: [String: Any], _ options: ImageOptions) -> [String: Any] {
        guard options.enabled, raw["_artwork"] != nil else { return [:] }
        var tags: [String: String] = [:]
        var backdrops: [String] = []
        for (type, images) in mediaBrowserImages(raw) where options.types?.contains(type) ?? true {
            let kept = images.prefix(max(options.limit, 0)).map(\.tag)
            if type == "Backdrop" { backdrops = kept } else if let tag = kept.first { tags[type] = tag }
        }
        var out: [String: Any] = [:]
        if !tags.isEmpty { out["ImageTags"] = tags }
        if !backdrops.isEmpty { out["BackdropImageTags"] = backdrops }
        return out
    }

    /// BaseItemDto.AlbumPrimaryImageTag ("the album image tag", both specs) of a track whose album
    /// has a cover: its album's Primary tag, sent as that album's ImageTags would be (the listing's
    /// image options leave Primary in). Nothing for any other item.
    func albumImageMember(_ raw: [String: Any], _ options: ImageOptions) -> [String: Any] {
        guard options.enabled, options.limit > 0, options.types?.contains("Primary") ?? true, raw["Type"] as? String == "Audio",
            let albumId = raw["AlbumId"] as? String, let album = itemsById[albumId],
            let tag = mediaBrowserImages(album)["Primary"]?.first?.tag
        else { return [:] }
        return ["AlbumPrimaryImageTag": tag]
    }

    /// The item `id` names while it is on the server (neither removed nor held back).
    func presentItem(_ id: String) -> [String: Any]? {
        guard let item = itemsById[id], !state.withLock({ $0.removed.contains(id) }), !heldBack().contains(id) else { return nil }
        return item
    }

    /// Jellyfin/Emby images and subtitle files; nil for any other request.
    /// - GET/HEAD /Items/{Id}/Images/{Type} (the index from the query: Jellyfin `imageIndex`, Emby
    ///   `Index`; default 0) and /Items/{Id}/Images/{Type}/{Index}: the image's bytes (see
    ///   `imageAnswer`); 404 for an item that is not there or has no image of that type and index.
    ///   The resizing and format parameters are ignored: the image is answered as it is.
    /// - GET /Videos/{Id}/{MediaSourceId}/Subtitles/{Index}/Stream.{Format}; Emby also HEAD, and the
    ///   same below /Items (see `subtitleAnswer`). The variants with a StartPositionTicks segment
    ///   are not served.
    func mediaBrowserAssetRoute(_ request: HTTPServer.Request, parts: [String]) -> HTTPServer.Response? {
        let m = request.method
        let notFound = HTTPServer.Response.json("{\"title\":\"Not Found\",\"status\":404}", status: 404)
        let image = (m == "GET" || m == "HEAD") && (parts.count == 4 || parts.count == 5) && parts[0] == "Items" && parts[2] == "Images"
        let subtitleRoots = kind == .jellyfin ? ["Videos"] : ["Videos", "Items"]
        let subtitle =
            (m == "GET" || (m == "HEAD" && kind == .emby)) && parts.count == 6 && subtitleRoots.contains(parts[0])
            && parts[3] == "Subtitles" && parts[5].hasPrefix("Stream.")
        if image || subtitle { passAssetGate() }
        if image {
            let index = parts.count == 5 ? Int(parts[4]) : Int(request.query[kind == .jellyfin ? "imageIndex" : "Index"] ?? "0")
            guard let item = presentItem(parts[1]), let index, let images = mediaBrowserImages(item)[parts[3]],
                images.indices.contains(index)
            else { return notFound }
            // `tag` (Emby `Tag`): "supply the cache tag from the item object to receive strong caching headers".
            return imageAnswer(images[index].bytes, cacheable: query(request, "tag") == images[index].tag)
        }
        if subtitle {
            return subtitleAnswer(item: parts[1], mediaSource: parts[2], index: parts[4], format: String(parts[5].dropFirst("Stream.".count)))
        }
        return nil
    }

    /// An image's bytes: 200 with its Content-Type (`imageContentType(sniffing:)`; the HTTP server
    /// adds Content-Length), and, `cacheable`, a long-lived Cache-Control.
    func imageAnswer(_ bytes: Data, cacheable: Bool = false) -> HTTPServer.Response {
        var headers = [("Content-Type", Self.imageContentType(sniffing: bytes))]
        if cacheable { headers.append(("Cache-Control", "public, max-age=31536000")) }
        return HTTPServer.Response(status: 200, headers: headers, body: .bytes(Array(bytes)))
    }

    /// An image's Content-Type from its first bytes: image/jpeg (FF D8 FF), image/png (the PNG
    /// signature), anything else application/octet-stream.
    static func imageContentType(sniffing bytes: Data) -> String {
        if bytes.starts(with: [0xFF, 0xD8, 0xFF]) { return "image/jpeg" }
        if bytes.starts(with: [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A]) { return "image/png" }
        return "application/octet-stream"
    }

    /// The catalog subtitles of a media file with their stream indexes (MediaStream.Index, Plex
    /// Stream.index), in catalog order after the file's other streams. The fixture lists no video
    /// or audio streams (it does not probe files), so the first subtitle is 0.
    func numberedSubtitles(ofFile file: String) -> [(index: Int, subtitle: FixtureCatalog.Subtitle)] {
        let before = 0
        return (catalog.subtitles[file] ?? []).enumerated().map { (before + $0.offset, $0.element) }
    }

    /// A MediaStream (both specs) per catalog subtitle of a media source's file (server-side `path`):
    /// `Type` "Subtitle" (MediaStreamType), `Index`, `Codec` as the catalog names it, `Language` (the
    /// ISO 639-2 code; not sent without one), `IsForced`, `IsHearingImpaired`, `IsExternal`,
    /// `IsTextSubtitleStream` (srt, ass, webvtt; not pgssub) and `SupportsExternalStream` (the same:
    /// a text stream can be fetched on its own), `IsDefault` false (the catalog has no default),
    /// `DisplayTitle` (`subtitleTitle`), and for a sidecar its `Path` ("the filename": server-side,
    /// beside the media file). DeliveryMethod and DeliveryUrl are not sent: SubtitleDeliveryMethod
    /// is the "delivery method to use during playback", a server's playback-info decision for a
    /// device profile, which this fixture does not make; a client fetches the Stream route.
    func subtitleStreams(ofFile file: String, path: String) -> [[String: Any]] {
        numberedSubtitles(ofFile: file).map { index, sub in
            let text = Self.subtitleFormat(sub.codec) != nil
            var stream: [String: Any] = [
                "Type": "Subtitle", "Index": index, "Codec": sub.codec, "IsForced": sub.forced, "IsHearingImpaired": sub.hearingImpaired,
                "IsExternal": sub.external, "IsTextSubtitleStream": text, "SupportsExternalStream": text, "IsDefault": false,
                "DisplayTitle": Self.subtitleTitle(sub, extended: true)
            ]
            if let language = sub.language { stream["Language"] = language }
            if sub.external {
                stream["Path"] = ((path as NSString).deletingLastPathComponent as NSString).appendingPathComponent((sub.file as NSString).lastPathComponent)
            }
            return stream
        }
    }

    /// The subtitle stream `index` of media source `mediaSource` of `item`, in `format`: the file's
    /// bytes for a text stream asked in its own format (srt, ass, vtt for webvtt). Any other format,
    /// or a bitmap stream (pgssub), answers 404: a real server converts text subtitles between
    /// formats (and can extract or render others); this fixture does not. 404 too for an item
    /// that is not there, a source that is not the item's, or an index that is no subtitle.
    func subtitleAnswer(item id: String, mediaSource: String, index: String, format: String) -> HTTPServer.Response {
        let notFound = HTTPServer.Response.json("{\"title\":\"Not Found\",\"status\":404}", status: 404)
        guard let item = presentItem(id), let version = itemId(ofMediaSource: mediaSource), let index = Int(index),
            let file = ((item["_versions"] as? [[String: Any]]) ?? []).first(where: { $0["Id"] as? String == version })?["File"] as? String,
            let sub = numberedSubtitles(ofFile: file).first(where: { $0.index == index })?.subtitle,
            Self.subtitleFormat(sub.codec) == format.lowercased()
        else { return notFound }
        return subtitleFileAnswer(sub)
    }

    /// A subtitle file's bytes, with a `text/*` Content-Type (Jellyfin's spec for its subtitle
    /// stream): text/plain for srt, text/x-ssa for ass, text/vtt for vtt; application/octet-stream
    /// for a bitmap one (Plex serves those as sidecars). 404 when the file cannot be read.
    func subtitleFileAnswer(_ sub: FixtureCatalog.Subtitle) -> HTTPServer.Response {
        guard let bytes = FileManager.default.contents(atPath: sub.file) else {
            return .json("{\"title\":\"Not Found\",\"status\":404}", status: 404)
        }
        let type = ["srt": "text/plain", "ass": "text/x-ssa", "vtt": "text/vtt"][Self.subtitleFormat(sub.codec) ?? ""] ?? "application/octet-stream"
        return HTTPServer.Response(status: 200, headers: [("Content-Type", type)], body: .bytes(Array(bytes)))
    }

    /// The format a text subtitle is served in (Jellyfin/Emby `Stream.{Format}`; Plex's codec name and
    /// file extension): srt, ass, vtt (webvtt); nil for a bitmap one (pgssub) or any other codec.
    static func subtitleFormat(_ codec: String) -> String? { ["srt": "srt", "ass": "ass", "webvtt": "vtt"][codec.lowercased()] }

    /// A subtitle's title (MediaStream.DisplayTitle; Plex Stream.displayTitle and
    /// extendedDisplayTitle; no spec gives a form): its language's English name ("Unknown" without
    /// one), "Forced", "SDH" (hearing impaired), then the codec in capitals (Plex's names: SRT, ASS,
    /// VTT, PGS) in parentheses, `extended` with "External" for a sidecar: "English Forced (SRT External)".
    static func subtitleTitle(_ sub: FixtureCatalog.Subtitle, extended: Bool) -> String {
        let language = sub.language.map(languageName) ?? "Unknown"
        let flags = [sub.forced ? "Forced" : nil, sub.hearingImpaired ? "SDH" : nil].compactMap { $0 }
        let codec = plexSubtitleCodec(sub.codec).uppercased() + (extended && sub.external ? " External" : "")
        return ([language] + flags).joined(separator: " ") + " (\(codec))"
    }

    /// An ISO 639 code's English name ("eng" → "English"; Plex Stream.language's example), the code
    /// itself when Foundation knows none.
    static func languageName(_ code: String) -> String {
        Locale(identifier: "en_US").localizedString(forLanguageCode: code) ?? code
    }
}

/// A Jellyfin-style id: 32 lower-case hex digits, derived deterministically from `seed`.
public func fixtureId(_ seed: String) -> String { fixtureId(bytes: seed.utf8) }

/// The same hash of any bytes (an image file's: its tag changes when its content does).
func fixtureId<Bytes: Sequence>(bytes: Bytes) -> String where Bytes.Element == UInt8 {
    var h1: UInt64 = 0xcbf29ce484222325, h2: UInt64 = 0x84222325cbf29ce4
    for b in bytes {
        h1 = (h1 ^ UInt64(b)) &* 0x100000001b3
        h2 = (h2 ^ UInt64(b)) &* 0x100000001b3 &+ 0x9e3779b97f4a7c15
    }
    func hex(_ v: UInt64) -> String { let s = String(v, radix: 16); return String(repeating: "0", count: 16 - s.count) + s }
    return hex(h1) + hex(h2)
}

/// Drops nil values so JSONSerialization can encode the dictionary.
func clean(_ d: [String: Any?]) -> [String: Any] { d.compactMapValues { $0 } }

/// Ids swapped in text both ways (whole runs of hex digits only: no id is part of another).
struct IdMap: Sendable {
    let forthIds: [String: String]
    let backIds: [String: String]

    init(forth: [String: String]) {
        forthIds = forth
        backIds = Dictionary(forth.map { ($1, $0) }, uniquingKeysWith: { a, _ in a })
    }

    func forth(_ text: String) -> String { swap(text, forthIds) }
    func back(_ text: String) -> String { swap(text, backIds) }

    /// Each whole run of hex digits that is a key of `map` (a 32-digit id, Emby's 12 digits after
    /// `mediasource_`, a Plex decimal key) becomes its value.
    func swap(_ text: String, _ map: [String: String]) -> String {
        guard !map.isEmpty else { return text }
        var out = ""
        var run = ""
        func flush() {
            out += run.count >= 6 ? map[run] ?? run : run
            run = ""
        }
        for ch in text {
            if ch.isHexDigit {
                run.append(ch)
            } else {
                flush()
                out.append(ch)
            }
        }
        flush()
        return out
    }
}
