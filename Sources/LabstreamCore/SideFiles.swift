/// What a server says about a film, an episode or a series beyond its name: what a Kodi-style
/// `.nfo` beside its file is made of.
public struct ItemDetails: Sendable, Hashable, Codable {
    public var originalTitle: String?
    public var plot: String?
    public var runtimeSeconds: Double?
    public var genres: [String]
    public var studios: [String]
    /// The community rating, out of 10.
    public var rating: Double?
    /// `YYYY-MM-DD`.
    public var premiered: String?
    /// Provider ids by provider: `tmdb`, `imdb`, `tvdb`.
    public var ids: [String: String]
    /// The chapters the server knows, in order.
    public var chapters: [Chapter]
    /// The artwork and subtitles the server has for it (a series' also its seasons' posters).
    public var assets: [RemoteAsset]

    public struct Chapter: Sendable, Hashable, Codable {
        /// Seconds from the start.
        public var start: Double
        public var name: String
        public init(start: Double, name: String) {
            self.start = start
            self.name = name
        }
    }

    public init(
        originalTitle: String? = nil, plot: String? = nil, runtimeSeconds: Double? = nil, genres: [String] = [], studios: [String] = [],
        rating: Double? = nil, premiered: String? = nil, ids: [String: String] = [:], chapters: [Chapter] = [], assets: [RemoteAsset] = []
    ) {
        self.chapters = chapters
        self.assets = assets
        self.originalTitle = originalTitle
        self.plot = plot
        self.runtimeSeconds = runtimeSeconds
        self.genres = genres
        self.studios = studios
        self.rating = rating
        self.premiered = premiered
        self.ids = ids
    }

    /// Members a later release adds read back as absent from what an earlier one stored.
    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        self.init(
            originalTitle: try c.decodeIfPresent(String.self, forKey: .originalTitle), plot: try c.decodeIfPresent(String.self, forKey: .plot),
            runtimeSeconds: try c.decodeIfPresent(Double.self, forKey: .runtimeSeconds), genres: try c.decodeIfPresent([String].self, forKey: .genres) ?? [],
            studios: try c.decodeIfPresent([String].self, forKey: .studios) ?? [], rating: try c.decodeIfPresent(Double.self, forKey: .rating),
            premiered: try c.decodeIfPresent(String.self, forKey: .premiered), ids: try c.decodeIfPresent([String: String].self, forKey: .ids) ?? [:],
            chapters: try c.decodeIfPresent([Chapter].self, forKey: .chapters) ?? [],
            assets: (try? c.decodeIfPresent([RemoteAsset].self, forKey: .assets)) ?? [])
    }

    public var isEmpty: Bool { self == ItemDetails() }

    /// nil when there is nothing to keep.
    public var orNil: ItemDetails? { isEmpty ? nil : self }
}

/// A file of the tree that Labstream makes itself rather than fetches (an `.nfo`): it is made
/// from the index, so its size is exact before any read, and it reads the same offline.
/// A fetched side asset (artwork, a subtitle) is one too: its bytes are stored whole at
/// `storedAt` before it appears, and are read from there when it is opened.
public struct GeneratedFile: Sendable, Hashable {
    public var path: [String]
    public var modified: Int64
    public var content: Content

    public enum Content: Sendable, Hashable {
        /// A fetched side asset, stored whole at `at` (absolute).
        case stored(at: String, size: Int64)
        /// A document made again from the index each time it is opened: only its size and a
        /// digest of its bytes are kept, so a library's 100 000 `.nfo` cost no more than their
        /// names in memory, and a changed document is told from an unchanged one.
        case document(NFODocument, size: Int64, digest: UInt64)
    }

    /// `bytes`: the document as made now (its size and digest are kept, not the bytes).
    public init(path: [String], document: NFODocument, bytes: [UInt8], modified: Int64) {
        self.path = path
        self.modified = modified
        self.content = .document(document, size: Int64(bytes.count), digest: FNV1a.hash(bytes))
    }

    /// A document whose size and digest are known already (the index's cache of them).
    public init(path: [String], document: NFODocument, size: Int64, digest: UInt64, modified: Int64) {
        self.path = path
        self.modified = modified
        self.content = .document(document, size: size, digest: digest)
    }

    public init(path: [String], storedAt: String, size: Int64, modified: Int64) {
        self.path = path
        self.modified = modified
        self.content = .stored(at: storedAt, size: size)
    }

    public var size: Int64 {
        switch content {
        case .stored(_, let size), .document(_, let size, _): return size
        }
    }

    public var storedAt: String? { if case .stored(let at, _) = content { return at }; return nil }

}

/// What a generated `.nfo` is made from: an item's (a film's or an episode's), or a series'.
public enum NFODocument: Sendable, Hashable {
    case item(server: String, itemId: String)
    case series(server: String, seriesId: String, title: String, year: Int?)

    /// The document's name in the index's cache of sizes (per server): `item:ID`, or
    /// `series:ID\nYEAR\nTITLE` (the index drops a series' rows by the `series:ID\n` prefix).
    public var cacheKey: String {
        switch self {
        case .item(_, let id): return "item:" + id
        case .series(_, let id, let title, let year): return "series:" + id + "\n" + (year.map(String.init) ?? "") + "\n" + title
        }
    }
}

/// The `.nfo` files of a server's tree (Kodi's schema, which Jellyfin and Plex scanners read
/// too): `<media file>.nfo` beside each film and episode, `tvshow.nfo` in each series folder.
/// Pure.
public enum SideFiles {
    public static func nfos(tree: [TreeFile], libraries: [LibraryCatalog]) -> [GeneratedFile] {
        let itemOf = ItemLookup(libraries)
        var seriesDetails: [String: ItemDetails] = [:]
        for library in libraries { seriesDetails.merge(library.seriesDetails) { a, _ in a } }
        return nfos(tree: tree, libraries: libraries, known: [:]) { doc in
            switch doc {
            case .item(_, let id): return document(doc, item: itemOf[id], series: nil)
            case .series(_, let id, _, _): return document(doc, item: nil, series: seriesDetails[id])
            }
        }.files
    }

    /// The same, taking the size and digest of a document from `known` (by `cacheKey`) instead
    /// of making it with `make`; `made` is what had to be made. `libraries` needs only each
    /// item's kind and series.
    public static func nfos(
        tree: [TreeFile], libraries: [LibraryCatalog], known: [String: (size: Int64, digest: UInt64)],
        make: (NFODocument) -> [UInt8]?
    ) -> (files: [GeneratedFile], made: [(doc: String, size: Int64, digest: UInt64)]) {
        let itemOf = ItemLookup(libraries)
        var out: [GeneratedFile] = []
        var made: [(doc: String, size: Int64, digest: UInt64)] = []
        func generated(_ path: [String], _ doc: NFODocument, modified: Int64, make: () -> [UInt8]?) -> GeneratedFile? {
            let key = doc.cacheKey
            if let k = known[key] { return GeneratedFile(path: path, document: doc, size: k.size, digest: k.digest, modified: modified) }
            guard let bytes = make() else { return nil }
            let file = GeneratedFile(path: path, document: doc, bytes: bytes, modified: modified)
            if case .document(_, let size, let digest) = file.content { made.append((key, size, digest)) }
            return file
        }
        var seriesFolders = Set<[String]>()
        for file in tree where DerivedCopy.parse(file.key) == nil && [.movie, .episode].contains(file.kind) {
            guard let item = itemOf[file.key.itemId], [.movie, .episode].contains(item.kind), let name = file.path.last else { continue }
            let stem = name.utf8.lastIndex(of: UInt8(ascii: ".")).map { String(name[..<$0]) } ?? name
            // The file's own strings: the catalog's are freed after the mount is built.
            let doc = NFODocument.item(server: file.key.server, itemId: file.key.itemId)
            guard let nfo = generated(file.path.dropLast() + [stem + ".nfo"], doc, modified: file.modified, make: { make(doc) }) else { continue }
            out.append(nfo)
            // SERVER/LIBRARY/Series (Year)/Season NN/file: the series folder is two above.
            if item.kind == .episode, file.path.count >= 3, let series = item.seriesId {
                let folder = Array(file.path.dropLast(2))
                if seriesFolders.insert(folder).inserted {
                    let show = NFODocument.series(server: file.key.server, seriesId: series, title: item.seriesName ?? folder.last ?? "", year: item.seriesYear)
                    if let tvshow = generated(folder + ["tvshow.nfo"], show, modified: file.modified, make: { make(show) ?? [] }) {
                        out.append(tvshow)
                    }
                }
            }
        }
        return (out, made)
    }

    /// The bytes of `doc`: `item` for a film's or an episode's (nil when it is neither), the
    /// series' details for a series'. The same catalog makes the same bytes.
    public static func document(_ doc: NFODocument, item: CatalogItem?, series: ItemDetails?) -> [UInt8]? {
        switch doc {
        case .item:
            guard let item else { return nil }
            switch item.kind {
            case .movie: return NFO.movie(item)
            case .episode: return NFO.episode(item)
            default: return nil
            }
        case .series(_, _, let title, let year):
            return NFO.tvshow(title: title, year: year, series)
        }
    }
}

extension SideFiles {
    /// `user.labstream.chapters` of each file whose item has chapters: one line per chapter,
    /// `HH:MM:SS.mmm NAME` (the start, then the name with line breaks made spaces).
    public static func chapters(tree: [TreeFile], libraries: [LibraryCatalog]) -> [FileKey: String] {
        var chaptersOf: [String: [ItemDetails.Chapter]] = [:]
        for library in libraries {
            for item in library.items { if let c = item.details?.chapters, !c.isEmpty { chaptersOf[item.id] = c } }
        }
        guard !chaptersOf.isEmpty else { return [:] }
        var out: [FileKey: String] = [:]
        for file in tree where DerivedCopy.parse(file.key) == nil {
            guard let chapters = chaptersOf[file.key.itemId] else { continue }
            out[file.key] = chapters.map { timestamp($0.start) + " " + $0.name.split(whereSeparator: \.isNewline).joined(separator: " ") }.joined(
                separator: "\n")
        }
        return out
    }

    /// `01:02:03.450`.
    public static func timestamp(_ seconds: Double) -> String {
        let millis = Int((max(seconds, 0) * 1000).rounded())
        let h = millis / 3_600_000, m = millis / 60_000 % 60, s = millis / 1000 % 60, ms = millis % 1000
        func two(_ n: Int) -> String { n < 10 ? "0\(n)" : "\(n)" }
        return "\(two(h)):\(two(m)):\(two(s))." + String(String(ms + 1000).dropFirst())
    }
}

/// Kodi `.nfo` documents (movie, episodedetails, tvshow), XML-escaped; characters XML 1.0
/// cannot hold (NUL and other controls) are left out, so any plot makes a valid document.
public enum NFO {
    /// The documents' format: raised whenever what they hold or how it is written changes, so
    /// sizes the index kept for the old format are not taken for the new one (2: a runtime
    /// under half a minute is left out).
    public static let format = 2

    public static func movie(_ item: CatalogItem) -> [UInt8] {
        document("movie", [element("title", item.title)] + common(item.details, year: item.year))
    }

    public static func episode(_ item: CatalogItem) -> [UInt8] {
        var lines = [element("title", item.title), element("showtitle", item.seriesName ?? "")]
        if let s = item.seasonNumber { lines.append(element("season", String(s))) }
        if let e = item.episodeNumber { lines.append(element("episode", String(e))) }
        if let aired = item.details?.premiered { lines.append(element("aired", aired)) }
        return document("episodedetails", lines + common(item.details, year: nil))
    }

    public static func tvshow(title: String, year: Int?, _ details: ItemDetails?) -> [UInt8] {
        document("tvshow", [element("title", title)] + common(details, year: year))
    }

    /// The members every kind shares, in Kodi's order; ids with the first of tmdb, imdb, tvdb
    /// as the default.
    static func common(_ details: ItemDetails?, year: Int?) -> [String] {
        var lines: [String] = []
        if let original = details?.originalTitle { lines.append(element("originaltitle", original)) }
        if let year { lines.append(element("year", String(year))) }
        if let plot = details?.plot { lines.append(element("plot", plot)) }
        // Kodi (and Jellyfin's reader) take `<runtime>` in whole minutes. One that rounds to 0
        // (a clip under half a minute, or a server's 0 for "unknown") is left out rather than
        // written as 0: a scanner then takes the length from the file itself, exactly, where a
        // 0 says it plays for nothing and a 1 would say six times too long of a 10-second clip.
        if let runtime = details?.runtimeSeconds, case let minutes = Int((runtime / 60).rounded()), minutes > 0 {
            lines.append(element("runtime", String(minutes)))
        }
        for genre in details?.genres ?? [] { lines.append(element("genre", genre)) }
        for studio in details?.studios ?? [] { lines.append(element("studio", studio)) }
        if let rating = details?.rating {
            lines.append("<ratings><rating name=\"default\" max=\"10\" default=\"true\"><value>\(rating)</value></rating></ratings>")
        }
        if let premiered = details?.premiered { lines.append(element("premiered", premiered)) }
        let ids = details?.ids ?? [:]
        let order = ["tmdb", "imdb", "tvdb"].filter { ids[$0] != nil } + ids.keys.filter { !["tmdb", "imdb", "tvdb"].contains($0) }.sorted()
        for (i, provider) in order.enumerated() {
            lines.append("<uniqueid type=\"\(escape(provider))\"\(i == 0 ? " default=\"true\"" : "")>\(escape(ids[provider]!))</uniqueid>")
        }
        return lines
    }

    static func element(_ name: String, _ value: String) -> String { "<\(name)>\(escape(value))</\(name)>" }

    static func document(_ root: String, _ lines: [String]) -> [UInt8] {
        var xml = "<?xml version=\"1.0\" encoding=\"UTF-8\" standalone=\"yes\"?>\n<\(root)>\n"
        for line in lines { xml += "  " + line + "\n" }
        xml += "</\(root)>\n"
        return Array(xml.utf8)
    }

    /// Text as XML character data: the five markup characters escaped, characters XML 1.0
    /// does not allow dropped.
    public static func escape(_ text: String) -> String {
        // Most titles and plots need nothing: 100 000 documents are made at a first mount.
        if text.utf8.allSatisfy({ ($0 >= 0x20 && $0 < 0x7F && $0 != 0x26 && $0 != 0x3C && $0 != 0x3E && $0 != 0x22 && $0 != 0x27) || $0 == 0x0A }) {
            return text
        }
        var out = ""
        out.reserveCapacity(text.utf8.count)
        for scalar in text.unicodeScalars {
            switch scalar {
            case "&": out += "&amp;"
            case "<": out += "&lt;"
            case ">": out += "&gt;"
            case "\"": out += "&quot;"
            case "'": out += "&apos;"
            case "\t", "\n", "\r": out.unicodeScalars.append(scalar)
            default:
                let v = scalar.value
                if (0x20...0xD7FF).contains(v) || (0xE000...0xFFFD).contains(v) || v >= 0x10000 { out.unicodeScalars.append(scalar) }
            }
        }
        return out
    }
}

extension ItemDetails {
    /// These details with what the server tells only item by item (Plex: its parts' subtitle
    /// streams, its chapters): assets not already known are added, and chapters fill in where
    /// the listing had none.
    public func adding(extras: ItemDetails) -> ItemDetails {
        var out = self
        let known = Set(assets.map(\.id))
        out.assets += extras.assets.filter { !known.contains($0.id) }
        if out.chapters.isEmpty { out.chapters = extras.chapters }
        return out
    }
}

extension LibraryCatalog {
    /// The catalog with each item's extras (by item id) added to its details.
    public func adding(extras: [String: ItemDetails]) -> LibraryCatalog {
        guard !extras.isEmpty else { return self }
        var out = self
        out.items = items.map { item in
            guard let more = extras[item.id] else { return item }
            var item = item
            item.details = (item.details ?? ItemDetails()).adding(extras: more).orNil
            return item
        }
        return out
    }
}
