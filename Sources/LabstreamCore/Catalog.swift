/// Backend-neutral catalog values. Backends decode into these; the store persists them; the
/// tree builder names them.
/// Where an item belongs in the tree, and what its bytes are.
public enum ItemKind: String, Sendable, Hashable, Codable, CaseIterable {
    /// `LIBRARY/Title (Year)/Title (Year).ext`.
    case movie
    /// `LIBRARY/Series (Year)/Season NN/Series (Year) - SxxEyy - Title.ext`.
    case episode
    /// A music track: `LIBRARY/Album Artist/Album (Year)/NN - Title.ext`.
    case track
    /// Anything else (home videos, a mixed library): the server's own folders, then `Title.ext`.
    case other
    /// A still image: placed as `other` is; its check decodes it instead of playing it.
    case photo

    /// What the playback check expects to find in a file of this kind.
    public var media: MediaKind {
        switch self {
        case .track: .audio
        case .photo: .image
        case .movie, .episode, .other: .video
        }
    }
}

/// What a file holds.
public enum MediaKind: String, Sendable, Hashable {
    case video, audio, image
}

public struct MediaSource: Sendable, Hashable, Codable {
    public var id: String
    /// Human label for a version ("1080p", "Director's Cut"), when there are several.
    public var name: String?
    public var container: String?
    public var path: String?
    public var size: Int64?
    public var etag: String?
    /// Bits per second, when the server reports it (route choice under a quality cap).
    public var bitrate: Int?
    /// The item the server's download route takes for this source, when it says so (Emby's
    /// `MediaSourceInfo.ItemId`: a version of a multi-version item is an item of its own, and a
    /// media source id is not an item id).
    public var itemId: String?

    public init(
        id: String, name: String? = nil, container: String? = nil, path: String? = nil, size: Int64? = nil, etag: String? = nil,
        bitrate: Int? = nil, itemId: String? = nil
    ) {
        self.bitrate = bitrate
        self.itemId = itemId
        self.id = id
        self.name = name
        self.container = container
        self.path = path
        self.size = size
        self.etag = etag
    }
}

public struct CatalogItem: Sendable, Hashable, Codable {
    public var id: String
    public var kind: ItemKind
    public var title: String
    public var year: Int?
    public var seriesId: String?
    public var seriesName: String?
    public var seriesYear: Int?
    public var seasonNumber: Int?
    public var episodeNumber: Int?
    /// A track's album and its artist (nil: none, e.g. a single; the artist of a compilation).
    public var album: String?
    public var albumArtist: String?
    /// A track's disc and position on it.
    public var discNumber: Int?
    public var trackNumber: Int?
    /// The server's folders (below the library) an `other` item sits in.
    public var folders: [String] = []
    /// Seconds since the epoch; the file mtime shown by `stat`.
    public var modified: Int64
    public var sources: [MediaSource]
    /// The signed-in user has watched it (the server's watched state; monitors with
    /// delete-watched let go of it).
    public var played: Bool = false
    /// What an `.nfo` beside its file says (plot, genres, ids…), when the server told. Boxed: a
    /// catalog held whole (a sync's, the side files') mostly carries none (they are staged in
    /// the index), and an absent one inline was 120 bytes of every item, 12 MB of each copy of
    /// 100 000 items.
    public var details: ItemDetails? {
        get { boxedDetails?.value }
        set { boxedDetails = newValue.map(DetailsBox.init) }
    }
    private var boxedDetails: DetailsBox?

    final class DetailsBox: Sendable, Hashable, Codable {
        let value: ItemDetails
        init(_ value: ItemDetails) { self.value = value }
        static func == (a: DetailsBox, b: DetailsBox) -> Bool { a.value == b.value }
        func hash(into hasher: inout Hasher) { value.hash(into: &hasher) }
        init(from decoder: any Decoder) throws { value = try decoder.singleValueContainer().decode(ItemDetails.self) }
        func encode(to encoder: any Encoder) throws {
            var c = encoder.singleValueContainer()
            try c.encode(value)
        }
    }

    enum CodingKeys: String, CodingKey {
        case id, kind, title, year, seriesId, seriesName, seriesYear, seasonNumber, episodeNumber, album, albumArtist, discNumber, trackNumber
        case folders, modified, sources, played
        case boxedDetails = "details"
    }

    public init(
        id: String, kind: ItemKind, title: String, year: Int? = nil, seriesId: String? = nil,
        seriesName: String? = nil, seriesYear: Int? = nil, seasonNumber: Int? = nil,
        episodeNumber: Int? = nil, album: String? = nil, albumArtist: String? = nil, discNumber: Int? = nil,
        trackNumber: Int? = nil, folders: [String] = [], modified: Int64 = 0, sources: [MediaSource], played: Bool = false,
        details: ItemDetails? = nil
    ) {
        self.played = played
        self.boxedDetails = details.map(DetailsBox.init)
        self.album = album
        self.albumArtist = albumArtist
        self.discNumber = discNumber
        self.trackNumber = trackNumber
        self.folders = folders
        self.id = id
        self.kind = kind
        self.title = title
        self.year = year
        self.seriesId = seriesId
        self.seriesName = seriesName
        self.seriesYear = seriesYear
        self.seasonNumber = seasonNumber
        self.episodeNumber = episodeNumber
        self.modified = modified
        self.sources = sources
    }
}

public struct LibraryCatalog: Sendable, Hashable {
    public var id: String
    public var name: String
    public var items: [CatalogItem]
    /// Why this library is not in the tree (a kind Labstream cannot place); nil when it is.
    public var leftOut: String?
    /// The series' own details (their `tvshow.nfo`), by series id.
    public var seriesDetails: [String: ItemDetails]

    public init(id: String, name: String, items: [CatalogItem], leftOut: String? = nil, seriesDetails: [String: ItemDetails] = [:]) {
        self.id = id
        self.name = name
        self.items = items
        self.leftOut = leftOut
        self.seriesDetails = seriesDetails
    }

    /// Why a library of `kind` (as the server names kinds) is left out of the tree.
    public static func whyLeftOut(kind: String?) -> String {
        switch kind?.lowercased() {
        case "livetv": "live TV channels are streams, not files"
        case "playlists", "playlist": "a playlist lists files that belong to other libraries"
        case "boxsets", "collection", "collections": "a collection lists films that belong to other libraries"
        case let k?: "Labstream cannot place \(k) libraries yet"
        case nil: "the server does not say what kind of library it is"
        }
    }
}

extension DownloadRow {
    /// Whether these bytes belong to another version than the catalog's `file`: a different
    /// size, or a different source tag when both are known.
    public func isStale(for file: TreeFile) -> Bool {
        if total != file.size { return true }
        guard let mine = sourceTag, let theirs = file.etag else { return false }
        return mine != theirs
    }
}

/// Identifies one downloadable file: a media source of an item on a server.
public struct FileKey: Sendable, Hashable, Codable, CustomStringConvertible {
    public var server: String
    public var itemId: String
    /// The server's id of the source these bytes come from (the same for its copies and its
    /// next version: `kind` tells them apart).
    public private(set) var sourceId: String
    /// What the row holds of its source.
    public private(set) var kind: FileKind

    /// The key of the `kind` row of `sourceId` (the server's own id; an original by default).
    public init(server: String, itemId: String, sourceId: String, kind: FileKind = .original) {
        self.server = server
        self.itemId = itemId
        self.sourceId = sourceId
        self.kind = kind
    }

    /// The original's key: the file a copy or a next version belongs to (itself for an original).
    public var base: FileKey { FileKey(server: server, itemId: itemId, sourceId: sourceId) }

    public var description: String {
        switch kind {
        case .original: return "\(server)/\(itemId)/\(sourceId)"
        case .copy(let quality): return "\(server)/\(itemId)/\(sourceId) (copy at \(quality))"
        case .nextVersion: return "\(server)/\(itemId)/\(sourceId) (next version)"
        }
    }

    // On a wire a key is its three ids and its kind's two fields, as the index keeps them.
    enum CodingKeys: String, CodingKey { case server, itemId, sourceId, kind, quality }

    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        let kind = try c.decodeIfPresent(String.self, forKey: .kind) ?? "original"
        guard let typed = FileKind(persisted: kind, quality: try c.decodeIfPresent(String.self, forKey: .quality)) else {
            throw DecodingError.dataCorruptedError(forKey: .kind, in: c, debugDescription: "unknown file kind \(kind)")
        }
        self.init(
            server: try c.decode(String.self, forKey: .server), itemId: try c.decode(String.self, forKey: .itemId),
            sourceId: try c.decode(String.self, forKey: .sourceId), kind: typed)
    }

    public func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        try c.encode(server, forKey: .server)
        try c.encode(itemId, forKey: .itemId)
        try c.encode(sourceId, forKey: .sourceId)
        try c.encode(kind.persisted.kind, forKey: .kind)
        try c.encodeIfPresent(kind.persisted.quality, forKey: .quality)
    }
}

/// A file in the mounted tree, as the catalog describes it.
public struct TreeFile: Sendable, Hashable {
    /// Components below the mount root: server, library, folders…, file name.
    public var path: [String]
    public var key: FileKey
    public var size: Int64
    public var modified: Int64
    public var etag: String?
    /// Gone from the server; kept because it is stored locally.
    public var orphaned: Bool
    /// Bits per second, when the server reports it.
    public var bitrate: Int?
    /// The source's own item on the server, when the catalog named one (`MediaSource.itemId`).
    public var remoteItemId: String?
    /// The kind of item it is a file of (the playback check judges audio as audio).
    public var kind: ItemKind

    public init(
        path: [String], key: FileKey, size: Int64, modified: Int64, etag: String?, orphaned: Bool = false, bitrate: Int? = nil,
        remoteItemId: String? = nil, kind: ItemKind = .movie
    ) {
        self.kind = kind
        self.remoteItemId = remoteItemId
        self.orphaned = orphaned
        self.bitrate = bitrate
        self.path = path
        self.key = key
        self.size = size
        self.modified = modified
        self.etag = etag
    }

    /// `files` by server, sorted by server's name; a tree of one server (the usual case) is
    /// handed back as it is, not copied (100 000 files are 14 MiB and 600 000 retains).
    public static func byServer(_ files: [TreeFile]) -> [(server: String, files: [TreeFile])] {
        guard let first = files.first?.key.server else { return [] }
        if files.allSatisfy({ $0.key.server == first }) { return [(first, files)] }
        return Dictionary(grouping: files, by: \.key.server).sorted { $0.key < $1.key }.map { ($0.key, $0.value) }
    }

    /// The container, from the file name's extension (names are built from it).
    public var container: String? {
        guard let name = path.last, let dot = name.lastIndex(of: "."), name.index(after: dot) < name.endIndex else { return nil }
        return name[name.index(after: dot)...].lowercased()
    }
}

/// One attempt at downloading a file. Work started under an older attempt may not change the
/// row: every write names the attempt it belongs to, and only the row's current one is taken.
public struct AttemptID: Sendable, Hashable, Codable, CustomStringConvertible {
    public let rawValue: Int64
    public init(_ rawValue: Int64) { self.rawValue = rawValue }
    public var next: AttemptID { AttemptID(rawValue + 1) }
    public var description: String { "attempt-\(rawValue)" }
}

/// The persisted state of one file's local copy.
public struct DownloadRow: Sendable, Hashable {
    public var key: FileKey
    public var status: DownloadStatus
    public var attempt: AttemptID
    public var validator: Validator?
    public var total: Int64
    public var present: RangeSet
    /// The partial file, relative to the data directory.
    public var partialPath: String
    public var reason: StatusReason?
    /// All bytes are present and the completion check (size, hash, playback probe) has not run.
    public var awaitingValidation: Bool
    /// Pinned files are downloaded completely in the background and never evicted.
    public var pinned: Bool
    /// The catalog's tag for the version these bytes belong to (media source ETag, Plex part key).
    public var sourceTag: String?
    /// The server-side job preparing this copy (Emby Convert, Plex's download queue), while it matters.
    public var job: ServerJob?
    /// The local copy's identity (`PartialFile.identity`) when this daemon last found every
    /// byte present and matching its digest. A copy with the same identity after a restart was
    /// not written since, and is trusted without reading it again.
    public var checked: String?
    /// Why a `paused` row is paused (nil on every other status, and on a pause recorded
    /// before causes were, which waits for the user). Set by `apply`.
    public var pauseCause: PauseCause?

    public init(
        key: FileKey, status: DownloadStatus, attempt: AttemptID, validator: Validator?, total: Int64,
        present: RangeSet, partialPath: String, reason: StatusReason? = nil, awaitingValidation: Bool = false,
        pinned: Bool = false, sourceTag: String? = nil, job: ServerJob? = nil, checked: String? = nil,
        pauseCause: PauseCause? = nil
    ) {
        self.pauseCause = status == .paused ? pauseCause : nil
        self.job = job
        self.checked = checked
        self.pinned = pinned
        self.sourceTag = sourceTag
        self.key = key
        self.status = status
        self.attempt = attempt
        self.validator = validator
        self.total = total
        self.present = present
        self.partialPath = partialPath
        self.reason = reason
        self.awaitingValidation = awaitingValidation
    }
}

extension DownloadRow {
    /// The row of this file's next attempt: no bytes, no validator, nothing checked, `queued`
    /// when pinned else `partial` (`.restarted`); the file, its pin, its partial, its tag and
    /// its job carry over. Bytes of the old attempt can no longer be committed under it.
    public func nextAttempt(reason: StatusReason?) -> DownloadRow {
        var next = self
        next.attempt = attempt.next
        next.apply(.restarted(pinned: pinned))
        next.validator = nil
        next.present = RangeSet()
        next.reason = reason
        next.awaitingValidation = false
        next.checked = nil
        return next
    }

    /// Pins or unpins the row: a pinned file still missing bytes is queued for the background
    /// fill; an unpinned one that was waiting for it goes back to `partial`. Files with every
    /// byte (copies at another quality: once complete) keep their status.
    public mutating func setPinned(_ pinned: Bool) {
        self.pinned = pinned
        let whole = DerivedCopy.parse(key) == nil ? present.contains(ByteRange(0, total)) : [.complete, .unverified].contains(status)
        guard !whole else { return }
        if pinned && apply(.enqueued) {
            reason = nil
        } else if !pinned && apply(.unpinned) {
            reason = nil
            // A server job for a copy no longer wanted: the cleanup journal cancels it.
            if DerivedCopy.parse(key) != nil { job = nil }
        }
    }
}

/// What an incremental refresh needs of the stored catalog: each library's name, item ids and
/// series ids, and each series' year (a changed episode does not carry it). Sets and a dictionary: at
/// 100 000 items a few megabytes, where whole items were tens of an unchanged sync's peak.
public struct CatalogOutline: Sendable {
    public struct Library: Sendable {
        public var id: String
        public var name: String
        public var itemIds: Set<String>
        /// The series its episodes belong to.
        public var seriesIds: Set<String>

        public init(id: String, name: String, itemIds: Set<String>, seriesIds: Set<String> = []) {
            self.id = id
            self.name = name
            self.itemIds = itemIds
            self.seriesIds = seriesIds
        }
    }

    public var libraries: [Library]
    /// Series id → its year (nil when the server gave none).
    public var seriesYears: [String: Int?]

    public init(libraries: [Library], seriesYears: [String: Int?]) {
        self.libraries = libraries
        self.seriesYears = seriesYears
    }
}
