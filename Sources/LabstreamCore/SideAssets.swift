/// Artwork and subtitles the server keeps beside an item's media, fetched and stored next to
/// the copy so players and scanners find them where they look (Jellyfin's and Kodi's naming):
/// `poster`/`fanart`/`logo` in a film's or series' folder, a season's poster both as `poster` in
/// its season folder (Jellyfin) and as `seasonNN-poster` in the series folder (Kodi),
/// `<episode>-thumb`, `<media>.<lang>[.forced][.sdh].<ext>`.
public struct RemoteAsset: Sendable, Hashable, Codable {
    public enum Kind: String, Sendable, Hashable, Codable, CaseIterable {
        case poster, fanart, logo, thumb, subtitle
    }

    public var kind: Kind
    /// The server's name for it within its item: an image type (`Primary`, `Backdrop/0`), an
    /// image path (Plex), or a subtitle stream's index or id.
    public var ref: String
    /// Changes when its bytes do (an image tag, a stamp); nil when the server gives none.
    public var tag: String?
    /// A season poster's season (kept in the series' details).
    public var season: Int?
    /// A subtitle's media source, ISO 639-2 language, flags and codec (`srt`, `ass`, `ssa`, `vtt`).
    public var sourceId: String?
    public var language: String?
    public var forced: Bool
    public var hearingImpaired: Bool
    public var codec: String?

    public init(
        kind: Kind, ref: String, tag: String? = nil, season: Int? = nil, sourceId: String? = nil, language: String? = nil,
        forced: Bool = false, hearingImpaired: Bool = false, codec: String? = nil
    ) {
        self.kind = kind
        self.ref = ref
        self.tag = tag
        self.season = season
        self.sourceId = sourceId
        self.language = language
        self.forced = forced
        self.hearingImpaired = hearingImpaired
        self.codec = codec
    }

    /// Unique among one item's assets.
    public var id: String {
        kind.rawValue + (season.map { "/s\($0)" } ?? "") + ":" + ref + (sourceId.map { "@" + $0 } ?? "")
    }
}

/// One asset placed in the tree: which item's it is, where it goes, and which media files it
/// belongs with (fetched with their pin, dropped when they are evicted).
public struct PlannedAsset: Sendable, Hashable {
    public var server: String
    public var itemId: String
    public var asset: RemoteAsset
    public var directory: [String]
    /// The name before its extension (`poster`, `Film (2001).eng.forced`, `… - S01E01 - Pilot-thumb`).
    public var stem: String
    /// Known up front for a subtitle; an image's is named by its bytes once stored.
    public var fileExtension: String?
    public var owners: [FileKey]
    /// Further names of the same stored bytes (folder, then the name before its extension), for
    /// players that look elsewhere: a season poster's `seasonNN-poster` in the series folder.
    public var alsoAt: [[String]]

    public init(
        server: String, itemId: String, asset: RemoteAsset, directory: [String], stem: String, fileExtension: String? = nil, owners: [FileKey],
        alsoAt: [[String]] = []
    ) {
        self.server = server
        self.itemId = itemId
        self.asset = asset
        self.directory = directory
        self.stem = stem
        self.fileExtension = fileExtension
        self.owners = owners
        self.alsoAt = alsoAt
    }

    /// The key it is stored under.
    public var key: SideAssetKey { SideAssetKey(server: server, itemId: itemId, asset: asset.id) }

    /// Every path it shows at once stored with extension `ext`: its own, then `alsoAt`.
    public func paths(extension ext: String) -> [[String]] {
        ([directory + [stem]] + alsoAt).map { Array($0.dropLast()) + [$0.last! + "." + ext] }
    }

    /// The folders it shows in: listing any of them fetches it (with `side_assets = all`).
    public var directories: [[String]] { [directory] + alsoAt.map { Array($0.dropLast()) } }
}

public struct SideAssetKey: Sendable, Hashable, Codable, CustomStringConvertible {
    public var server: String
    public var itemId: String
    public var asset: String

    public init(server: String, itemId: String, asset: String) {
        self.server = server
        self.itemId = itemId
        self.asset = asset
    }

    public var description: String { "\(server)/\(itemId)/\(asset)" }
}

/// Where each asset of a server's catalog goes in its tree. Pure.
public enum SideAssetPlan {
    public static func plan(tree: [TreeFile], libraries: [LibraryCatalog]) -> [PlannedAsset] {
        let itemOf = ItemLookup(libraries)
        var seriesDetails: [String: ItemDetails] = [:]
        for library in libraries { seriesDetails.merge(library.seriesDetails) { a, _ in a } }
        // The names in each folder, for a subtitle's name not to take one: made when the first
        // subtitle is planned, since most catalogs' subtitles stay inside the media.
        var taken: [[String]: Set<String>]?
        var planned: [SideAssetKey: PlannedAsset] = [:]
        var order: [SideAssetKey] = []
        func add(_ p: PlannedAsset) {
            if planned[p.key] == nil {
                planned[p.key] = p
                order.append(p.key)
            } else if let owner = p.owners.first, planned[p.key]?.owners.contains(owner) == false {
                planned[p.key]?.owners.append(owner)
            }
        }
        /// The album cover a folder already has (the first track's album wins a folder of several).
        var coverOf: [[String]: String] = [:]
        // Only files with artwork or subtitles of their own or their series' are placed (sorted,
        // so the first track of an album folder is the same on every mount).
        let withAssets = tree.filter { file in
            guard let item = itemOf[file.key.itemId] else { return false }
            if item.details?.assets.isEmpty == false { return true }
            return item.kind == .episode && item.seriesId.flatMap { seriesDetails[$0]?.assets.isEmpty == false } == true
        }
        for file in withAssets.sorted(by: { $0.path.lexicographicallyPrecedes($1.path) }) {
            guard let item = itemOf[file.key.itemId], file.path.count >= 3, [.movie, .episode, .track].contains(item.kind) else { continue }
            let dir = Array(file.path.dropLast())
            let stem = Naming.stem(of: file.path.last!)
            if item.kind == .track {
                // A track's poster is its album's cover: `cover.<ext>` in the album's folder, one
                // asset for all its tracks (keyed by the image, not the track).
                guard let cover = item.details?.assets.first(where: { $0.kind == .poster }), coverOf[dir, default: cover.ref] == cover.ref else { continue }
                coverOf[dir] = cover.ref
                add(PlannedAsset(server: file.key.server, itemId: "album:" + cover.ref, asset: cover, directory: dir, stem: "cover", owners: [file.key]))
                continue
            }
            for asset in item.details?.assets ?? [] {
                switch asset.kind {
                case .poster, .fanart, .logo:
                    guard item.kind == .movie else { continue }
                    add(
                        PlannedAsset(
                            server: file.key.server, itemId: item.id, asset: asset, directory: dir, stem: asset.kind.rawValue,
                            owners: [file.key]))
                case .thumb:
                    guard item.kind == .episode else { continue }
                    add(PlannedAsset(server: file.key.server, itemId: item.id, asset: asset, directory: dir, stem: stem + "-thumb", owners: [file.key]))
                case .subtitle:
                    guard asset.sourceId == nil || asset.sourceId == Self.assetSource(of: file.key),
                        let ext = subtitleExtension(asset.codec)
                    else { continue }
                    var name = stem + "." + language(asset.language)
                    if asset.forced { name += ".forced" }
                    if asset.hearingImpaired { name += ".sdh" }
                    var unique = name
                    var n = 2
                    if taken == nil {
                        taken = [:]
                        for file in tree { taken![Array(file.path.dropLast()), default: []].insert(file.path.last ?? "") }
                    }
                    while taken![dir, default: []].contains(unique + "." + ext) {
                        unique = name + ".\(n)"
                        n += 1
                    }
                    taken![dir, default: []].insert(unique + "." + ext)
                    var key = asset
                    key.sourceId = Self.assetSource(of: file.key)
                    add(
                        PlannedAsset(
                            server: file.key.server, itemId: item.id, asset: key, directory: dir, stem: unique, fileExtension: ext,
                            owners: [file.key]))
                }
            }
            // The series' artwork in its folder, a season's poster in the season's.
            if item.kind == .episode, let series = item.seriesId, file.path.count >= 5 {
                let seriesDir = Array(file.path.dropLast(2))
                for asset in seriesDetails[series]?.assets ?? [] where [.poster, .fanart, .logo].contains(asset.kind) {
                    if let season = asset.season {
                        guard asset.kind == .poster, season == item.seasonNumber else { continue }
                        add(
                            PlannedAsset(
                                server: file.key.server, itemId: series, asset: asset, directory: dir, stem: "poster", owners: [file.key],
                                alsoAt: [seriesDir + [kodiSeasonPoster(season)]]))
                    } else {
                        add(
                            PlannedAsset(
                                server: file.key.server, itemId: series, asset: asset, directory: seriesDir, stem: asset.kind.rawValue,
                                owners: [file.key]))
                    }
                }
            }
        }
        return order.compactMap { planned[$0] }
    }

    /// The source a subtitle planned beside `key`'s file is of, in its asset id (kept in
    /// `side_assets`): a copy's own subtitles are its own assets, apart from the original's
    /// (the id spells the copy's quality, as it did when row ids did).
    static func assetSource(of key: FileKey) -> String {
        guard case .copy(let quality) = key.kind else { return key.sourceId }
        return key.sourceId + "@" + quality.description
    }

    /// Kodi's name for a season's poster in the series folder: `season01-poster`, and
    /// `season-specials-poster` for season 0.
    public static func kodiSeasonPoster(_ season: Int) -> String {
        season == 0 ? "season-specials-poster" : "season" + (season < 10 ? "0" : "") + String(season) + "-poster"
    }

    /// A text subtitle's file extension; nil for bitmap subtitles (PGS, VobSub, DVB), which stay
    /// inside the media.
    public static func subtitleExtension(_ codec: String?) -> String? {
        switch codec?.lowercased() {
        case "srt", "subrip": "srt"
        case "ass": "ass"
        case "ssa": "ssa"
        case "vtt", "webvtt": "vtt"
        default: nil
        }
    }

    /// ISO 639-2 (three letters) as players read it; `und` when unknown.
    public static func language(_ code: String?) -> String {
        guard let raw = code?.lowercased().split(separator: "-").first.map(String.init), !raw.isEmpty else { return "und" }
        if raw.count == 3, raw.allSatisfy({ $0.isLetter && $0.isASCII }) { return raw }
        let twoLetter = [
            "en": "eng", "fr": "fre", "de": "ger", "es": "spa", "it": "ita", "pt": "por", "nl": "dut", "sv": "swe", "no": "nor",
            "nb": "nob", "da": "dan", "fi": "fin", "pl": "pol", "ru": "rus", "ja": "jpn", "zh": "chi", "ko": "kor", "ar": "ara",
            "he": "heb", "tr": "tur", "el": "gre", "cs": "cze", "hu": "hun", "ro": "rum", "uk": "ukr", "hi": "hin", "th": "tha"
        ]
        return twoLetter[raw] ?? "und"
    }
}

/// Whether fetched bytes are what they claim, before they are stored. Pure.
public enum SideAssetCheck {
    public enum Verdict: Sendable, Hashable {
        /// Keep these bytes under this extension.
        case keep([UInt8], extension: String)
        case reject(SideAssetFailure)
    }

    public static func judge(_ bytes: [UInt8], as planned: PlannedAsset) -> Verdict {
        guard !bytes.isEmpty else { return .reject(.noBytes) }
        if planned.asset.kind == .subtitle {
            guard let ext = planned.fileExtension else { return .reject(.notTextSubtitle) }
            guard let text = utf8(bytes) else { return .reject(.subtitleNotText) }
            guard looksLike(ext, text) else { return .reject(.subtitleUnparsed(format: ext)) }
            return .keep(Array(text.utf8), extension: ext)
        }
        guard let ext = ContainerSniff.imageExtension(ofHeader: Array(bytes.prefix(ContainerSniff.headerLength))),
            ["jpg", "png", "webp", "gif"].contains(ext)
        else {
            return .reject(.notAnImage)
        }
        return .keep(bytes, extension: ext)
    }

    /// The text as UTF-8: UTF-8 (a BOM dropped), UTF-16 with its BOM, else Windows-1252 (what
    /// old SRT files are); nil for bytes with NULs that are none of these.
    public static func utf8(_ bytes: [UInt8]) -> String? {
        if bytes.starts(with: [0xEF, 0xBB, 0xBF]) { return String(validating: bytes.dropFirst(3), as: UTF8.self) }
        if bytes.starts(with: [0xFF, 0xFE]) || bytes.starts(with: [0xFE, 0xFF]) {
            let little = bytes[0] == 0xFF
            let body = Array(bytes.dropFirst(2))
            let units = stride(from: 0, to: body.count - 1, by: 2).map { i in
                little ? UInt16(body[i]) | UInt16(body[i + 1]) << 8 : UInt16(body[i]) << 8 | UInt16(body[i + 1])
            }
            return String(validating: units, as: UTF16.self)
        }
        if let text = String(validating: bytes, as: UTF8.self) { return text.contains("\0") ? nil : text }
        guard !bytes.contains(0) else { return nil }
        return String(bytes.map { windows1252[$0] ?? Character(Unicode.Scalar($0)) })
    }

    static func looksLike(_ ext: String, _ text: String) -> Bool {
        switch ext {
        case "srt": text.split(whereSeparator: \.isNewline).contains { $0.contains("-->") && $0.contains(":") }
        case "vtt": text.trimmingPrefixWhitespace.hasPrefix("WEBVTT")
        case "ass", "ssa": text.contains("[Script Info]") && text.contains("[Events]")
        default: false
        }
    }

    /// The bytes 0x80–0x9F where Windows-1252 differs from Latin-1.
    static let windows1252: [UInt8: Character] = [
        0x80: "€", 0x82: "‚", 0x83: "ƒ", 0x84: "„", 0x85: "…", 0x86: "†", 0x87: "‡", 0x88: "ˆ", 0x89: "‰", 0x8A: "Š", 0x8B: "‹", 0x8C: "Œ",
        0x8E: "Ž", 0x91: "‘", 0x92: "’", 0x93: "“", 0x94: "”", 0x95: "•", 0x96: "–", 0x97: "—", 0x98: "˜", 0x99: "™", 0x9A: "š", 0x9B: "›",
        0x9C: "œ", 0x9E: "ž", 0x9F: "Ÿ"
    ]
}

extension String {
    fileprivate var trimmingPrefixWhitespace: Substring { drop { $0.isWhitespace || $0 == "\u{FEFF}" } }
}
