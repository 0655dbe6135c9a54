/// Turns catalog titles into safe, unique path components (Jellyfin's own naming scheme).
public enum Naming {
    public static let maxComponentBytes = 255

    /// A single path component that is safe on Linux and portable to Windows shares:
    /// no `/`, NUL or control characters, Windows-reserved characters replaced, never `.`/`..`,
    /// at most 255 UTF-8 bytes cut on a character boundary with the extension kept.
    public static func sanitize(_ raw: String, extension ext: String? = nil) -> String {
        var out = ""
        // A control character parted words (`Tab\tand\nnewline`): it becomes one space, with
        // the spaces beside it, so the words stay apart without a run of blanks.
        var parted = false
        for scalar in raw.unicodeScalars {
            switch scalar.value {
            case 0..<0x20, 0x7F, 0x80..<0xA0:
                if !out.hasSuffix(" ") { out.unicodeScalars.append(" ") }
                parted = true
                continue
            case 0x20 where parted: continue
            default: parted = false
            }
            switch scalar {
            case "/", "\\", ":", "*", "?", "\"", "<", ">", "|": out.unicodeScalars.append("_")
            default: out.unicodeScalars.append(scalar)
            }
        }
        // Trailing dots and spaces are invalid on Windows and confusing everywhere; a leading
        // dot hides the entry from `ls` and from Jellyfin, Plex and Kodi scanners.
        while let last = out.last, last == " " || last == "." { out.removeLast() }
        while let first = out.first, first == " " || first == "." { out.removeFirst() }
        if out.isEmpty || out == "." || out == ".." { out = "_" }
        let suffix = ext.map { "." + sanitizeExtension($0) } ?? ""
        return truncate(out, reserving: suffix.utf8.count) + suffix
    }

    /// A file name without its extension (`Film (2001).mkv` → `Film (2001)`).
    public static func stem(of name: String) -> String {
        guard let dot = name.lastIndex(of: "."), dot != name.startIndex else { return name }
        return String(name[..<dot])
    }

    public static func sanitizeExtension(_ raw: String) -> String {
        let cleaned = raw.lowercased().unicodeScalars.filter { ($0.properties.isAlphabetic && $0.isASCII) || ("0"..."9").contains($0) }
        let s = String(String.UnicodeScalarView(cleaned))
        return s.isEmpty ? "bin" : String(s.prefix(10))
    }

    /// Cuts `s` so it plus `reserving` bytes fits 255 bytes, never splitting a character. A
    /// closing ` (Year)` or ` (N)` stays: the title before it is what gets shorter.
    static func truncate(_ s: String, reserving: Int) -> String {
        let budget = maxComponentBytes - reserving
        if s.utf8.count <= budget { return s }
        var kept = ""
        if s.hasSuffix(")"), let open = s.lastIndex(of: "("), open > s.startIndex, s[s.index(before: open)] == " " {
            let digits = s[s.index(after: open)..<s.index(before: s.endIndex)]
            if !digits.isEmpty && digits.count <= 4 && digits.allSatisfy(\.isNumber) { kept = String(s[s.index(before: open)...]) }
        }
        var out = ""
        var used = kept.utf8.count
        for ch in s.dropLast(kept.count) {
            let n = ch.utf8.count
            if used + n > budget { break }
            out.append(ch)
            used += n
        }
        while out.last == " " { out.removeLast() }
        return (out.isEmpty ? "_" : out) + kept
    }

    /// `Title (Year)`, or `Title` when the year is unknown.
    public static func titled(_ title: String, year: Int?) -> String {
        let t = title.isEmpty ? "Untitled" : title
        guard let year, year > 0 else { return t }
        return "\(t) (\(year))"
    }

    public static func seasonFolder(_ season: Int?) -> String {
        let n = max(season ?? 0, 0)
        return n < 10 ? "Season 0\(n)" : "Season \(n)"
    }

    static func twoDigits(_ n: Int) -> String { n < 10 && n >= 0 ? "0\(n)" : "\(n)" }

    /// The extension for a media source: its container, else its path's extension.
    public static func fileExtension(for source: MediaSource) -> String {
        if let c = source.container?.split(separator: ",").first, !c.isEmpty {
            return sanitizeExtension(String(c))
        }
        if let p = source.path, let dot = p.lastIndex(of: "."), !p[dot...].contains("/") {
            return sanitizeExtension(String(p[p.index(after: dot)...]))
        }
        return "bin"
    }

    /// Makes `name` unique among `taken`: `name (2).ext`, `name (3).ext`, … deterministically.
    public static func unique(_ stem: String, extension ext: String?, taken: inout Set<String>) -> String {
        var candidate = sanitize(stem, extension: ext)
        var n = 2
        while taken.contains(candidate) {
            candidate = sanitize(stem, extension: nil)
            let marker = " (\(n))"
            let suffix = marker + (ext.map { "." + sanitizeExtension($0) } ?? "")
            candidate = truncate(candidate, reserving: suffix.utf8.count) + suffix
            n += 1
        }
        taken.insert(candidate)
        return candidate
    }
}

/// Builds the mounted tree for one server from its catalog. Deterministic: the same catalog in
/// any order gives the same paths (collisions are resolved in item-id order).
public enum TreeBuilder {
    /// The folder of a track's album artist: the album's artist, else the track's artist as the
    /// server names it (`seriesName` is not used for music), else "Various Artists".
    static func artistFolderName(_ item: CatalogItem) -> String {
        guard let artist = item.albumArtist, !artist.isEmpty else { return "Various Artists" }
        return artist
    }

    public static func build(server: String, libraries: [LibraryCatalog]) -> [TreeFile] {
        var files: [TreeFile] = []
        // As large as it gets at once: grown by doubling, its last copy held both.
        files.reserveCapacity(libraries.reduce(0) { $0 + $1.items.reduce(0) { $0 + $1.sources.count } })
        let serverDir = Naming.sanitize(server)
        var libraryNames = Set<String>()
        for library in libraries.sorted(by: { ($0.name, $0.id) < ($1.name, $1.id) }) {
            let libDir = Naming.unique(library.name, extension: nil, taken: &libraryNames)
            let root = [serverDir, libDir]
            // Positions, not copies: a sorted copy of 90 000 items (and the filter's growing one
            // before it) was 90 MiB of a full sync's peak.
            let items = library.items
            let playable = items.indices.filter { !items[$0].sources.isEmpty }.sorted { items[$0].id < items[$1].id }

            // Top-level folders: one per movie, one per series, one per album artist. Other
            // items sit in the server's own folders instead.
            var topNames = Set<String>()
            var folderOf: [String: String] = [:]  // movie id, series id or artist key → folder name
            let folderKeys: [(key: String, name: String)?] = playable.map { position in
                let item = items[position]
                switch item.kind {
                case .movie: return (item.id, Naming.titled(item.title, year: item.year))
                case .episode:
                    let sid = item.seriesId ?? "series:" + (item.seriesName ?? "")
                    return (sid, Naming.titled(item.seriesName ?? "Unknown Series", year: item.seriesYear))
                case .track:
                    let artist = artistFolderName(item)
                    return ("artist:" + artist, artist)
                case .other, .photo: return nil
                }
            }
            for (key, name) in folderKeys.compactMap({ $0 }).sorted(by: { $0.key < $1.key }) where folderOf[key] == nil {
                folderOf[key] = Naming.unique(name, extension: nil, taken: &topNames)
            }

            // An album whose tracks span discs numbers them `D-NN`; tracks without an album
            // are the artist's "Singles".
            func albumKey(_ item: CatalogItem) -> String { "artist:" + artistFolderName(item) + "\u{1F}" + (item.album ?? "") }
            let multiDisc = Set(playable.lazy.map { items[$0] }.filter { $0.kind == .track && ($0.discNumber ?? 1) > 1 }.map(albumKey))
            var albumFolder: [String: String] = [:]
            var albumNamesIn: [String: Set<String>] = [:]

            var namesIn: [[String]: Set<String>] = [:]
            for (position, folderKey) in zip(playable, folderKeys) {
                let item = items[position]
                let dir: [String]
                let stem: String
                switch item.kind {
                case .movie:
                    let folder = folderOf[folderKey!.key]!
                    dir = root + [folder]
                    stem = folder  // "Title (Year)/Title (Year).ext", even for a de-duplicated folder
                case .episode:
                    dir = root + [folderOf[folderKey!.key]!, Naming.seasonFolder(item.seasonNumber)]
                    let series = Naming.titled(item.seriesName ?? "Unknown Series", year: item.seriesYear)
                    let s = Naming.twoDigits(max(item.seasonNumber ?? 0, 0))
                    let e = Naming.twoDigits(max(item.episodeNumber ?? 0, 0))
                    stem = "\(series) - S\(s)E\(e) - \(item.title.isEmpty ? "Episode \(e)" : item.title)"
                case .track:
                    let artist = folderOf[folderKey!.key]!
                    let key = albumKey(item)
                    let album: String
                    if let known = albumFolder[key] {
                        album = known
                    } else {
                        var taken = albumNamesIn[artist] ?? []
                        album = Naming.unique(item.album.map { Naming.titled($0, year: item.year) } ?? "Singles", extension: nil, taken: &taken)
                        albumNamesIn[artist] = taken
                        albumFolder[key] = album
                    }
                    dir = root + [artist, album]
                    let number = item.trackNumber.map { Naming.twoDigits(max($0, 0)) }
                    let position = number.map { multiDisc.contains(key) ? "\(max(item.discNumber ?? 1, 1))-\($0) - " : "\($0) - " } ?? ""
                    stem = position + (item.title.isEmpty ? "Track \(number ?? item.id)" : item.title)
                case .other, .photo:
                    dir = root + item.folders.map { Naming.sanitize($0) }.filter { !$0.isEmpty }
                    stem = item.title.isEmpty ? item.id : item.title
                }
                let several = item.sources.count > 1
                for (index, source) in item.sources.enumerated() {
                    let label = several ? " - " + (source.name?.isEmpty == false ? source.name! : "Version \(index + 1)") : ""
                    var taken = namesIn[dir] ?? []
                    let name = Naming.unique(stem + label, extension: Naming.fileExtension(for: source), taken: &taken)
                    namesIn[dir] = taken
                    files.append(
                        TreeFile(
                            path: dir + [name],
                            key: FileKey(server: server, itemId: item.id, sourceId: source.id),
                            size: max(source.size ?? 0, 0), modified: item.modified, etag: source.etag, bitrate: source.bitrate,
                            remoteItemId: source.itemId, kind: item.kind))
                }
            }
        }
        return files
    }
}
