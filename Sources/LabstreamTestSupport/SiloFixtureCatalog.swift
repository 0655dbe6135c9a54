import Foundation
import LabstreamCore
import LabstreamDemo
import LabstreamFixture
import Synchronization

/// Libraries and the catalog: items, versions, series, seasons and episodes, and what is held back.
extension SiloFixture {
    // MARK: Controls: files

    /// Changes a catalog file's `Last-Modified` (at least one second later than before), and its
    /// bytes when `contents` is given (written to disk). `If-Range` with the old date then gets
    /// the whole file (200), and download manifests report the new size and hash.
    public func changeFile(forFile path: String, contents: [UInt8]? = nil) {
        if let contents { _ = FileManager.default.createFile(atPath: path, contents: Data(contents)) }
        let disk = diskInfo(path)?.modified ?? Date()
        let now = Date()
        state.withLock { s in
            let previous = s.modifiedOverride[path] ?? disk
            let later = max(previous, now)
            s.modifiedOverride[path] = Date(timeIntervalSince1970: floor(later.timeIntervalSince1970) + 1)
            s.hashCache[path] = nil
        }
    }

    /// The libraries removed and added again (a rescan that rebuilt the catalog): every film,
    /// series, season and episode gets a new `content_id` and every media file a new `file_id`
    /// ("deterministic catalog identifier"s of a new catalog; downloads-api.md § 6 names this case:
    /// "`stable_identity` is for rescan recovery when a server-side `content_id` changes"). The
    /// files, their names, sizes and containers stay, and so do an episode's provider ids; the
    /// cards are added (`added_at`) now. Download entries and series monitors made before stay as
    /// the registry has them, naming the old ids. A held episode or film stays held.
    public func readdLibraries() {
        let before = catalog
        let rebuilt = SiloCatalog(source, generation: 2)
        // An episode or film the server did not have yet is still not there after the rescan,
        // under its new id (both catalogs come from one source, in one order).
        var renamed: [String: String] = [:]
        for (old, new) in zip(before.movies, rebuilt.movies) { renamed[old.contentId] = new.contentId }
        for (old, new) in zip(before.series, rebuilt.series) {
            for (a, b) in zip(old.episodes, new.episodes) { renamed[a.contentId] = b.contentId }
        }
        catalogNow.withLock { $0 = rebuilt }
        state.withLock { s in
            s.heldEpisodes = Set(s.heldEpisodes.compactMap { renamed[$0] })
            s.heldMovies = Set(s.heldMovies.compactMap { renamed[$0] })
        }
        browseOrders.withLock { $0 = [:] }
    }

    /// The file ids (canonical decimal strings) the catalog gave a file on disk.
    public func fileIds(forPath path: String) -> [String] {
        catalog.files.values.filter { $0.path == path }.map(\.id).sorted { (Int($0) ?? 0) < (Int($1) ?? 0) }
    }

    /// The content id of a movie, series or episode, for building requests in tests.
    public func movieContentId(title: String) -> String? {
        catalog.movies.first { $0.title == title }?.contentId
    }

    public func seriesContentId(name: String) -> String? {
        catalog.series.first { $0.title == name }?.contentId
    }

    public func episodeContentId(series name: String, season: Int, episode: Int) -> String? {
        catalog.series.first { $0.title == name }?.episodes.first { $0.season == season && $0.number == episode }?.contentId
    }

    // MARK: Controls: catalog arrivals

    /// The server does not have this episode yet: catalog listings, item, season and episode
    /// routes, version lists, direct download, download creation and monitor syncs do not show
    /// it, nor a season or series it leaves without an episode. Download entries made before stay.
    /// `release(episodeContentId:)` undoes it. false when the id names no episode.
    @discardableResult
    public func hold(episodeContentId: String) -> Bool {
        guard case .episode? = catalog.node(episodeContentId) else { return false }
        state.withLock { _ = $0.heldEpisodes.insert(episodeContentId) }
        return true
    }

    /// The server gains a held episode, added now: its card's `added_at` is now, and a `future`
    /// monitor created before now counts it as new (downloads-api.md § 8.1; Go:
    /// downloads/subscription.go — `future` keeps only episodes that become available after the
    /// monitor's `created_at`). Episodes never held were there before every monitor. false when
    /// the episode was not held.
    @discardableResult
    public func release(episodeContentId: String) -> Bool {
        let now = Date()
        return state.withLock { s in
            guard s.heldEpisodes.remove(episodeContentId) != nil else { return false }
            s.episodeAddedAt[episodeContentId] = now
            return true
        }
    }

    /// The server does not have this film yet: catalog listings, its item and version routes
    /// and direct download of its files do not show it. `release(movieContentId:)` undoes it.
    /// false when the id names no film.
    @discardableResult
    public func hold(movieContentId: String) -> Bool {
        guard case .movie? = catalog.node(movieContentId) else { return false }
        state.withLock { _ = $0.heldMovies.insert(movieContentId) }
        return true
    }

    /// The server gains a held film, added now: its card's `added_at` is now. false when the
    /// film was not held.
    @discardableResult
    public func release(movieContentId: String) -> Bool {
        let now = Date()
        return state.withLock { s in
            guard s.heldMovies.remove(movieContentId) != nil else { return false }
            s.movieAddedAt[movieContentId] = now
            return true
        }
    }

    // MARK: - Libraries

    // GET /user/libraries — libraries-api.md § Scoped library discovery (library IDs, names,
    // types, sort order, optional poster URLs); Go: user_libraries.go UserLibrary
    // {id, name, type, sort_order, poster_url}; profile header optional.
    func listUserLibraries(_ c: SiloCtx) throws -> HTTPServer.Response {
        let who = try authenticate(c)
        try rejectUnknownQuery(c, [])
        _ = try resolveProfile(c, who, required: false)
        return json(
            SiloJ.obj([
                (
                    "items",
                    SiloJ.array([
                        SiloJ.obj([
                            ("id", SiloJ.string("1")), ("name", SiloJ.string(catalog.movieLibraryName)),
                            ("type", SiloJ.string("movies")), ("sort_order", SiloJ.num(0))
                        ]),
                        SiloJ.obj([
                            ("id", SiloJ.string("2")), ("name", SiloJ.string(catalog.showLibraryName)),
                            ("type", SiloJ.string("series")), ("sort_order", SiloJ.num(1))
                        ]),
                        // An audiobook library (catalog-api.md § Search media scopes names `audiobook`): its
                        // catalog holds no films or episodes, and downloads-api.md serves nothing else.
                        SiloJ.obj([
                            ("id", SiloJ.string("3")), ("name", SiloJ.string("Audiobooks")),
                            ("type", SiloJ.string("audiobook")), ("sort_order", SiloJ.num(2))
                        ])
                    ])
                )
            ]))
    }

    // MARK: - Catalog

    private static let catalogBrowseParameters: Set<String> = [
        "source", "scope", "section_id", "library_id", "collection_id", "person_id", "q", "name_prefix",
        "match", "type", "genre", "status", "year_min", "year_max", "content_rating", "sort", "group",
        "skip_total", "image_size", "limit", "cursor", "groups", "query_limit", "seek"
    ]

    // GET /catalog — catalog-api.md § Catalog query windows (cards, `page.next_cursor`,
    // `page.has_more`, `total`, `total_exact`, `window_cursor`; send `next_cursor` unchanged as
    // `cursor`; cursors bound to viewer, filters, page size and sort; 400 invalid_cursor) and
    // api-contract.md § Query and pagination conventions (limit default 50, maximum 200); Go:
    // catalog_items.go CatalogBrowseInput, CatalogBrowseCollection, CatalogItem (catalog_types.go).
    func listCatalogItems(_ c: SiloCtx) throws -> HTTPServer.Response {
        let who = try authenticate(c)
        try rejectUnknownQuery(c, Self.catalogBrowseParameters)
        let profile = try resolveProfile(c, who, required: true) ?? ""
        let q = c.query
        if let library = q["library_id"] { try requirePositiveID(c, library, location: "query.library_id") }
        if let size = q["image_size"] { try requireOneOf(c, size, ["small", "medium", "large", "original"], "query.image_size") }
        if let source = q["source"] {
            try requireOneOf(
                c, source,
                [
                    "query", "section", "library_collection", "user_collection", "favorites",
                    "watchlist", "history", "person"
                ], "query.source")
        }
        if let skip = q["skip_total"] { try requireBool(c, skip, "query.skip_total") }
        let limit = try parseLimit(c, defaultValue: 50, maximum: 200)
        let sort = q["sort"] ?? ""
        var field = "title"
        var descending = false
        if !sort.isEmpty {
            let term = sort.hasPrefix("-") ? String(sort.dropFirst()) : sort
            guard ["title", "year", "added_at"].contains(term) else {
                throw validation(c, [("query.sort", "invalid_sort_field", "The fixture sorts by title, year or added_at.")])
            }
            field = term
            descending = sort.hasPrefix("-")
        }
        let rules = try q["groups"].map { try catalogRules(c, $0, match: q["match"]) }
        // The listing's order is kept between pages (a 100 000-film browse sorted at every page
        // was most of a sync's time); what is held back and the rules are applied to it.
        let orderKey = [q["library_id"] ?? "", q["type"] ?? "", q["q"] ?? "", q["source"] ?? "", sort].joined(separator: "\u{0}")
        let sorted =
            browseOrders.withLock { $0[orderKey] }
            ?? {
                let keyed = catalog.browse(libraryId: q["library_id"], type: q["type"], query: q["q"], source: q["source"])
                    .map { (node: $0, key: catalog.sortKey($0, field), id: catalog.contentId($0)) }
                let order = keyed.sorted { l, r in l.key != r.key ? (descending ? l.key > r.key : l.key < r.key) : l.id < r.id }.map(\.node)
                browseOrders.withLock { $0[orderKey] = order }
                return order
            }()
        var ordered = visibleNodes(sorted)
        if let rules { ordered = ordered.filter { rules($0) } }
        let scope = [
            "listCatalogItems", userId, profile, q["library_id"] ?? "", q["type"] ?? "", q["q"] ?? "",
            q["source"] ?? "", sort, String(limit), q["groups"] ?? "", q["match"] ?? ""
        ].joined(separator: "\u{0}")
        let offset = try decodeCursor(c, scope: scope)
        let pageSize = min(limit, max(1, configuration.catalogPageSize))
        let end = min(ordered.count, offset + pageSize)
        let slice = offset < ordered.count ? Array(ordered[offset..<end]) : []
        let next: String? = end < ordered.count ? encodeCursor(scope: scope, offset: end) : nil
        return json(
            SiloJ.obj([
                ("window_cursor", SiloJ.string(encodeCursor(scope: scope, offset: 0))),
                ("items", SiloJ.array(slice.map { SiloJ.obj(cardMembers($0)) })),
                ("page", pageJSON(next)),
                ("total", SiloJ.num(ordered.count)),
                ("total_exact", SiloJ.bool(true))
            ]))
    }

    /// The rule groups of a browse (`groups`, a JSON array of `{match, rules: [{field, op,
    /// value}]}`; the browse's `match` combines the groups, default all) as a test of a card:
    /// catalog-api.md § Rule fields and operators. The fixture knows `added_at` (a movie's or
    /// series' arrival) and `latest_episode_added` (a series' newest episode's arrival; movies
    /// never match) with `gt`, `lt` and `between` on an ISO date or instant; any other field or
    /// operator is 422 at `query.groups`, as the spec answers an operator a field does not list.
    func catalogRules(_ c: SiloCtx, _ text: String, match: String?) throws -> (SiloCatalog.Node) -> Bool {
        func refuse(_ detail: String) -> SiloRefusal { validation(c, [("query.groups", "invalid", detail)]) }
        guard let groups = (try? JSONSerialization.jsonObject(with: Data(text.utf8))) as? [[String: Any]] else {
            throw refuse("expected a JSON array of rule groups")
        }
        func date(_ value: Any?) -> Date? {
            guard let text = value as? String else { return nil }
            if let epoch = ISODate.epochSeconds(text) { return Date(timeIntervalSince1970: TimeInterval(epoch)) }
            let day = DateFormatter()
            day.locale = Locale(identifier: "en_US_POSIX")
            day.timeZone = TimeZone(identifier: "UTC")
            day.dateFormat = "yyyy-MM-dd"
            return day.date(from: text)
        }
        let (episodeAdded, movieAdded) = state.withLock { ($0.episodeAddedAt, $0.movieAddedAt) }
        let base = catalog.addedAt
        func value(_ field: String, _ node: SiloCatalog.Node) -> Date? {
            switch (field, node) {
            case ("added_at", .movie(let movie)): return movieAdded[movie.contentId] ?? base
            case ("added_at", .series): return base
            case ("latest_episode_added", .series(let show)): return show.episodes.map { episodeAdded[$0.contentId] ?? base }.max()
            default: return nil
            }
        }
        var tests: [(all: Bool, rules: [(SiloCatalog.Node) -> Bool])] = []
        for group in groups {
            var rules: [(SiloCatalog.Node) -> Bool] = []
            for rule in group["rules"] as? [[String: Any]] ?? [] {
                let field = (rule["field"] as? String ?? "").lowercased(), op = (rule["op"] as? String ?? "").lowercased()
                guard ["added_at", "latest_episode_added"].contains(field) else { throw refuse("field \"\(field)\" is not supported") }
                switch op {
                case "gt", "lt":
                    guard let bound = date(rule["value"]) else { throw refuse("\(field) \(op) takes an ISO date") }
                    rules.append { node in value(field, node).map { op == "gt" ? $0 > bound : $0 < bound } ?? false }
                case "between":
                    guard let pair = rule["value"] as? [Any], pair.count == 2, let from = date(pair[0]), let to = date(pair[1]) else {
                        throw refuse("\(field) between takes [from, to]")
                    }
                    rules.append { node in value(field, node).map { $0 >= from && $0 <= to } ?? false }
                default: throw refuse("op \"\(op)\" is not supported for field \"\(field)\"")
                }
            }
            tests.append(((group["match"] as? String ?? "all") != "any", rules))
        }
        let all = (match ?? "all") != "any"
        return { node in
            let results = tests.map { t in t.rules.isEmpty || (t.all ? t.rules.allSatisfy { $0(node) } : t.rules.contains { $0(node) }) }
            return all ? !results.contains(false) : results.contains(true)
        }
    }

    // GET /catalog/items/{id} — catalog-api.md § Library-scoped version lists and § Device-scoped
    // playback answers (getCatalogItem takes library_id and X-Silo-Device-Id); Go:
    // catalog_items.go CatalogItemInput {image_size, library_id, file_id}, CatalogItemDetail
    // (card + cast, crew, versions [FileVersion: file_id, file_name, container, file_size, …],
    // ratings, subtitles; every array present, never null).
    func getCatalogItem(_ c: SiloCtx, _ id: String) throws -> HTTPServer.Response {
        let who = try authenticate(c)
        try rejectUnknownQuery(c, ["image_size", "library_id", "file_id"])
        _ = try resolveProfile(c, who, required: true)
        try validateItemQuery(c)
        guard let node = visibleNode(id) else { throw problem(c, .notFound, "The item does not exist.") }
        var members = cardMembers(node)
        members.append(("cast", SiloJ.array([])))
        members.append(("crew", SiloJ.array([])))
        switch node {
        case .series(let series):
            members.append(("season_count", SiloJ.num(series.seasons.count)))
            members.append(("episode_count", SiloJ.num(series.episodes.count)))
        case .season(let series, let number):
            members.append(("episode_count", SiloJ.num(series.episodes(inSeason: number).count)))
        default:
            break
        }
        members.append(("versions", SiloJ.array(catalog.files(of: node).map(fileVersionJSON))))
        members.append(("ratings", SiloJ.array([])))
        members.append(("subtitles", SiloJ.array([])))
        return json(SiloJ.obj(members))
    }

    // GET /catalog/items/{id}/versions — catalog-api.md § Library-scoped version lists
    // (listCatalogItemVersions); Go: catalog_items.go FileVersionCollection {items}.
    func listCatalogItemVersions(_ c: SiloCtx, _ id: String) throws -> HTTPServer.Response {
        let who = try authenticate(c)
        try rejectUnknownQuery(c, ["image_size", "library_id", "file_id"])
        _ = try resolveProfile(c, who, required: true)
        try validateItemQuery(c)
        guard let node = visibleNode(id) else { throw problem(c, .notFound, "The item does not exist.") }
        return json(SiloJ.obj([("items", SiloJ.array(catalog.files(of: node).map(fileVersionJSON)))]))
    }

    // GET /catalog/items/{id}/episodes — catalog-api.md § Episode files (each episode lists its
    // accessible files); Go: catalog_items.go listCatalogItemEpisodes ("The episodes of a season
    // item"), EpisodeCollection {items: [Episode {…, files: [EpisodeFile]}]}.
    func listCatalogItemEpisodes(_ c: SiloCtx, _ id: String) throws -> HTTPServer.Response {
        let who = try authenticate(c)
        try rejectUnknownQuery(c, ["image_size", "library_id"])
        _ = try resolveProfile(c, who, required: true)
        try validateItemQuery(c)
        guard case .season(let series, let number)? = visibleNode(id) else {
            throw problem(c, .notFound, "The season does not exist.")
        }
        return json(SiloJ.obj([("items", SiloJ.array(series.episodes(inSeason: number).map(episodeJSON)))]))
    }

    // GET /catalog/series/{id}/seasons — catalog-api.md § Season-list artwork (include_artwork,
    // strict booleans, the `items` envelope); Go: catalog_items.go CatalogSeasonsInput,
    // SeasonCollection {items: [Season]}.
    func listSeriesSeasons(_ c: SiloCtx, _ id: String) throws -> HTTPServer.Response {
        let who = try authenticate(c)
        try rejectUnknownQuery(c, ["image_size", "library_id", "include_artwork"])
        _ = try resolveProfile(c, who, required: true)
        try validateItemQuery(c)
        if let artwork = c.query["include_artwork"] { try requireBool(c, artwork, "query.include_artwork") }
        guard case .series(let series)? = visibleNode(id) else { throw problem(c, .notFound, "The series does not exist.") }
        return json(SiloJ.obj([("items", SiloJ.array(series.seasons.map { seasonJSON(series, $0) }))]))
    }

    // GET /catalog/series/{id}/seasons/{num} — catalog-api.md § Library-scoped version lists
    // (getSeriesSeason); Go: catalog_items.go CatalogSeasonInput (num ≥ 0, 0 is specials), Season.
    func getSeriesSeason(_ c: SiloCtx, _ id: String, _ num: String) throws -> HTTPServer.Response {
        let who = try authenticate(c)
        try rejectUnknownQuery(c, ["image_size", "library_id"])
        _ = try resolveProfile(c, who, required: true)
        try validateItemQuery(c)
        let number = try seasonNumber(c, num)
        guard case .series(let series)? = visibleNode(id), series.seasons.contains(number) else {
            throw problem(c, .notFound, "The season does not exist.")
        }
        return json(seasonJSON(series, number))
    }

    // GET /catalog/series/{id}/seasons/{num}/episodes — catalog-api.md § Episode files
    // (listSeasonEpisodes); Go: catalog_items.go EpisodeCollection.
    func listSeasonEpisodes(_ c: SiloCtx, _ id: String, _ num: String) throws -> HTTPServer.Response {
        let who = try authenticate(c)
        try rejectUnknownQuery(c, ["image_size", "library_id"])
        _ = try resolveProfile(c, who, required: true)
        try validateItemQuery(c)
        let number = try seasonNumber(c, num)
        guard case .series(let series)? = visibleNode(id), series.seasons.contains(number) else {
            throw problem(c, .notFound, "The season does not exist.")
        }
        return json(SiloJ.obj([("items", SiloJ.array(series.episodes(inSeason: number).map(episodeJSON)))]))
    }

    /// The catalog node as the server shows it now (`hold(episodeContentId:)`).
    func visibleNode(_ id: String) -> SiloCatalog.Node? {
        guard let node = catalog.node(id) else { return nil }
        let held: Set<String> = state.withLock { $0.heldEpisodes.union($0.heldMovies) }
        return siloVisible(node, held: held)
    }

    private func visibleNodes(_ nodes: [SiloCatalog.Node]) -> [SiloCatalog.Node] {
        let held: Set<String> = state.withLock { $0.heldEpisodes.union($0.heldMovies) }
        return held.isEmpty ? nodes : nodes.compactMap { siloVisible($0, held: held) }
    }

    /// Whether `fileId` is the file of an episode or film the server does not have yet.
    func isHeldFile(_ fileId: String) -> Bool {
        let (held, movies) = state.withLock { ($0.heldEpisodes, $0.heldMovies) }
        guard !held.isEmpty || !movies.isEmpty else { return false }
        return catalog.series.contains { show in show.episodes.contains { $0.fileId == fileId && held.contains($0.contentId) } }
            || catalog.movies.contains { movies.contains($0.contentId) && $0.fileIds.contains(fileId) }
    }

    /// A catalog card (Go: catalog_types.go CatalogItem; genres and keywords never null).
    private func cardMembers(_ node: SiloCatalog.Node) -> [(String, SiloJ?)] {
        let added = SiloJ.string(siloInstant(catalog.addedAt))
        switch node {
        case .movie(let movie):
            let added = state.withLock { $0.movieAddedAt[movie.contentId] }.map { SiloJ.string(siloInstant($0)) } ?? added
            return [
                ("content_id", SiloJ.string(movie.contentId)), ("type", SiloJ.string("movie")), ("title", SiloJ.string(movie.title)),
                ("year", SiloJ.optNum(movie.year)), ("genres", SiloJ.array([])), ("keywords", SiloJ.array([])),
                ("status", SiloJ.string("matched")), ("added_at", added)
            ]
        case .series(let series):
            return [
                ("content_id", SiloJ.string(series.contentId)), ("play_content_id", SiloJ.optStr(series.episodes.first?.contentId)),
                ("type", SiloJ.string("series")), ("title", SiloJ.string(series.title)), ("year", SiloJ.optNum(series.year)),
                ("genres", SiloJ.array([])), ("keywords", SiloJ.array([])), ("status", SiloJ.string("matched")), ("added_at", added)
            ]
        case .season(let series, let number):
            return [
                ("content_id", SiloJ.string(series.seasonId(number))),
                ("play_content_id", SiloJ.optStr(series.episodes(inSeason: number).first?.contentId)),
                ("type", SiloJ.string("season")), ("title", SiloJ.string(siloSeasonTitle(number))),
                ("series_id", SiloJ.string(series.contentId)), ("series_title", SiloJ.string(series.title)),
                ("season_number", SiloJ.num(number)), ("genres", SiloJ.array([])), ("keywords", SiloJ.array([])),
                ("status", SiloJ.string("matched")), ("added_at", added)
            ]
        case .episode(let series, let episode):
            // An episode released by `release(episodeContentId:)` was added then.
            let arrived: Date? = state.withLock { $0.episodeAddedAt[episode.contentId] }
            return [
                ("content_id", SiloJ.string(episode.contentId)), ("type", SiloJ.string("episode")), ("title", SiloJ.string(episode.title)),
                ("series_id", SiloJ.string(series.contentId)), ("series_title", SiloJ.string(series.title)),
                ("season_number", SiloJ.num(episode.season)), ("episode_number", SiloJ.num(episode.number)),
                ("genres", SiloJ.array([])), ("keywords", SiloJ.array([])), ("status", SiloJ.string("matched")),
                ("added_at", arrived.map { SiloJ.string(siloInstant($0)) } ?? added)
            ]
        }
    }

    /// Go: catalog_items.go FileVersion. Probe facts the fixture does not know are empty/zero.
    private func fileVersionJSON(_ file: SiloCatalog.File) -> SiloJ {
        SiloJ.obj([
            ("file_id", SiloJ.string(file.id)),
            ("file_name", SiloJ.string(siloFileName(file.path))),
            ("resolution", SiloJ.string(configuration.resolutions[siloFileName(file.path)] ?? "")),
            ("codec_video", SiloJ.string("")),
            ("codec_audio", SiloJ.string("")),
            ("hdr", SiloJ.bool(false)),
            ("container", SiloJ.string(file.container)),
            ("file_size", SiloJ.int(fileInfo(file.path)?.size ?? 0)),
            ("duration", SiloJ.num(0)),
            ("bitrate", SiloJ.num((file.bitrate ?? 0) / 1000)),
            ("added_at", SiloJ.string(siloInstant(catalog.addedAt))),
            ("edition_raw", SiloJ.optStr(file.label))
        ])
    }

    /// Go: catalog_items.go Episode with EpisodeFile rows.
    private func episodeJSON(_ episode: SiloCatalog.Episode) -> SiloJ {
        var files: [SiloJ] = []
        if let file = catalog.files[episode.fileId] {
            files.append(
                SiloJ.obj([
                    ("file_id", SiloJ.string(file.id)),
                    ("hdr", SiloJ.bool(false)),
                    ("container", SiloJ.string(file.container)),
                    ("file_size", SiloJ.int(fileInfo(file.path)?.size ?? 0))
                ]))
        }
        return SiloJ.obj([
            ("content_id", SiloJ.string(episode.contentId)),
            ("season_number", SiloJ.num(episode.season)),
            ("episode_number", SiloJ.num(episode.number)),
            ("title", SiloJ.string(episode.title)),
            ("runtime", SiloJ.num(0)),
            // Go: `omitempty` — present only when the server knows the id.
            ("imdb_id", SiloJ.optStr(episode.imdb.flatMap { $0.isEmpty ? nil : $0 })),
            ("tmdb_id", SiloJ.optStr(episode.tmdb.flatMap { $0.isEmpty ? nil : $0 })),
            ("tvdb_id", SiloJ.optStr(episode.tvdb.flatMap { $0.isEmpty ? nil : $0 })),
            ("files", SiloJ.array(files))
        ])
    }

    /// Go: catalog_items.go Season.
    private func seasonJSON(_ series: SiloCatalog.Series, _ number: Int) -> SiloJ {
        let episodes = series.episodes(inSeason: number)
        return SiloJ.obj([
            ("content_id", SiloJ.string(series.seasonId(number))),
            ("play_content_id", SiloJ.optStr(episodes.first?.contentId)),
            ("season_number", SiloJ.num(number)),
            ("is_specials", number == 0 ? SiloJ.bool(true) : nil),
            ("title", SiloJ.string(siloSeasonTitle(number))),
            ("episode_count", SiloJ.num(episodes.count))
        ])
    }
}

// MARK: - Catalog model

/// The fixture catalog as Silo identities: libraries "1" (movies) and "2" (series), decimal file
/// ids, deterministic content ids.
struct SiloCatalog: Sendable {
    struct File: Sendable {
        let id: String
        let path: String
        let container: String
        let label: String?
        let bitrate: Int?
    }

    struct Movie: Sendable {
        let contentId: String
        let title: String
        let year: Int?
        let fileIds: [String]
    }

    struct Episode: Sendable {
        let contentId: String
        let season: Int
        let number: Int
        let title: String
        let fileId: String
        /// The episode's own provider ids (FixtureCatalog.Details imdb/tmdb/tvdb), which a rescan
        /// finds again: Go catalog_items.go Episode `imdb_id`, `tmdb_id`, `tvdb_id`.
        var imdb: String? = nil
        var tmdb: String? = nil
        var tvdb: String? = nil
    }

    struct Series: Sendable {
        let contentId: String
        let title: String
        let year: Int?
        let episodes: [Episode]

        var seasons: [Int] { Array(Set(episodes.map(\.season))).sorted() }

        func seasonId(_ number: Int) -> String { contentId + "-S" + siloPad2(number) }

        func episodes(inSeason number: Int) -> [Episode] {
            episodes.filter { $0.season == number }.sorted { $0.number < $1.number }
        }
    }

    enum Node: Sendable {
        case movie(Movie)
        case series(Series)
        case season(Series, Int)
        case episode(Series, Episode)
    }

    let movieLibraryName: String
    let showLibraryName: String
    let movies: [Movie]
    let series: [Series]
    let files: [String: File]
    let addedAt: Date
    /// Offline artwork (downloads-api.md § 4.8 kinds `poster`, `backdrop`, `logo`) by a movie's or
    /// an episode's content id: kind → image file. See `init` for where each kind comes from.
    let artwork: [String: [String: String]]
    /// A media file's subtitles (FixtureCatalog.subtitles of its path), by file id, in catalog order.
    let subtitles: [String: [FixtureCatalog.Subtitle]]
    /// A movie's or episode's chapters in start order (those starting together in catalog order),
    /// by content id.
    let chapters: [String: [FixtureCatalog.Chapter]]
    /// Details.runtimeSeconds by movie or episode content id (ends the last chapter).
    let runtimes: [String: Int]
    let nodes: [String: Node]

    /// `generation` > 1: the catalog as a rescan that rebuilt it lists it (`readdLibraries()`):
    /// other content ids, file ids counted on from where the first catalog's ended, every card
    /// added now.
    init(_ source: FixtureCatalog, generation: Int = 1) {
        var files: [String: File] = [:]
        var nextFileId = 1 + (generation - 1) * 100_000
        let rebuilt = generation > 1 ? "-g\(generation)" : ""
        var usedIds = Set<String>()
        func unique(_ base: String) -> String {
            var id = base
            var n = 2
            while usedIds.contains(id) {
                id = base + "-\(n)"
                n += 1
            }
            usedIds.insert(id)
            return id
        }
        func addFile(_ path: String, _ container: String, _ label: String?, _ bitrate: Int?) -> String {
            let id = String(nextFileId)
            nextFileId += 1
            files[id] = File(id: id, path: path, container: container, label: label, bitrate: bitrate)
            return id
        }
        var artwork: [String: [String: String]] = [:]
        var subtitles: [String: [FixtureCatalog.Subtitle]] = [:]
        var chapters: [String: [FixtureCatalog.Chapter]] = [:]
        var runtimes: [String: Int] = [:]
        func addDetails(_ contentId: String, _ details: FixtureCatalog.Details) {
            if !details.chapters.isEmpty {
                chapters[contentId] = details.chapters.enumerated()
                    .sorted { ($0.element.start, $0.offset) < ($1.element.start, $1.offset) }.map(\.element)
            }
            if let runtime = details.runtimeSeconds { runtimes[contentId] = runtime }
        }
        func addSubtitles(_ fileId: String, _ path: String) {
            if let subs = source.subtitles[path], !subs.isEmpty { subtitles[fileId] = subs }
        }
        var movies: [Movie] = []
        for movie in source.movies {
            let contentId = unique("movie:" + siloSlug(movie.title) + (movie.year.map { "-\($0)" } ?? "") + rebuilt)
            var ids = [addFile(movie.file, movie.container, nil, movie.bitrate)]
            addSubtitles(ids[0], movie.file)
            for version in movie.versions {
                let ext = URL(fileURLWithPath: version.file).pathExtension
                ids.append(addFile(version.file, ext.isEmpty ? movie.container : ext, version.label, nil))
                addSubtitles(ids[ids.count - 1], version.file)
            }
            movies.append(Movie(contentId: contentId, title: movie.title, year: movie.year, fileIds: ids))
            // A movie's own images (the first of each kind, as the other fixtures serve them):
            // poster → `poster`, fanart → `backdrop`, logo → `logo` (downloads-api.md § 4.8).
            var kinds: [String: String] = [:]
            for art in source.movieArtwork[movie.file] ?? [] {
                let kind: String
                switch art.kind {
                case .poster: kind = "poster"
                case .fanart: kind = "backdrop"
                case .logo: kind = "logo"
                }
                if kinds[kind] == nil { kinds[kind] = art.file }
            }
            if !kinds.isEmpty { artwork[contentId] = kinds }
            addDetails(contentId, movie.details)
        }
        var series: [Series] = []
        for show in source.series {
            let contentId = unique("series:" + siloSlug(show.name) + rebuilt)
            let stem = String(contentId.dropFirst("series:".count))
            var episodes: [Episode] = []
            for episode in show.episodes {
                let episodeId = unique("episode:" + stem + "-s" + siloPad2(episode.season) + "e" + siloPad2(episode.number))
                // An episode with no file ("" in the catalog) is listed with no files (catalog-api.md).
                let fileId = episode.file.isEmpty ? "" : addFile(episode.file, episode.container, nil, nil)
                episodes.append(
                    Episode(
                        contentId: episodeId, season: episode.season, number: episode.number, title: episode.title,
                        fileId: fileId, imdb: episode.details.imdb, tmdb: episode.details.tmdb, tvdb: episode.details.tvdb))
                if !fileId.isEmpty { addSubtitles(fileId, episode.file) }
                // An episode's artwork: downloads-api.md says only "poster, backdrop, and logo when
                // available" (§ 1, § 4.8, § 6) and nothing of which image an episode's poster is.
                // Followed Go (internal/apiv2/download_manifests.go DownloadManifest: "poster is the
                // episode still"; internal/downloads/manifest.go uses the episode's own item
                // detail): `poster` is the episode's thumbnail; the catalog has no episode backdrop
                // or logo, so those are absent. Go's extra `series_poster` kind is not in the spec's
                // kinds (§ 4.8), so the fixture has none (the spec wins).
                if !episode.file.isEmpty, let thumb = source.episodeThumbs[episode.file] { artwork[episodeId] = ["poster": thumb] }
                addDetails(episodeId, episode.details)
            }
            episodes.sort { ($0.season, $0.number) < ($1.season, $1.number) }
            series.append(Series(contentId: contentId, title: show.name, year: show.year, episodes: episodes))
        }
        self.movieLibraryName = source.movieLibrary
        self.showLibraryName = source.showLibrary
        self.movies = movies
        self.series = series
        self.files = files
        // A rebuilt catalog's rows are new: added when the rescan made them.
        self.addedAt = generation > 1 ? Date() : Date(timeIntervalSince1970: 1_767_225_600)
        self.artwork = artwork
        self.subtitles = subtitles
        self.chapters = chapters
        self.runtimes = runtimes
        self.nodes = Self.index(movies: movies, series: series)
    }

    func node(_ id: String) -> Node? { nodes[id] }

    /// Every node by its content id (a walk of the catalog per lookup made a 100 000-film
    /// library's version reads quadratic).
    static func index(movies: [Movie], series: [Series]) -> [String: Node] {
        var out: [String: Node] = [:]
        for movie in movies where out[movie.contentId] == nil { out[movie.contentId] = .movie(movie) }
        for show in series {
            if out[show.contentId] == nil { out[show.contentId] = .series(show) }
            for episode in show.episodes where out[episode.contentId] == nil { out[episode.contentId] = .episode(show, episode) }
            for number in show.seasons where out[show.seasonId(number)] == nil { out[show.seasonId(number)] = .season(show, number) }
        }
        return out
    }

    func files(of node: Node) -> [File] {
        switch node {
        case .movie(let movie): return movie.fileIds.compactMap { files[$0] }
        case .episode(_, let episode): return files[episode.fileId].map { [$0] } ?? []
        default: return []
        }
    }

    /// The cards a browse lists: movies in library "1", series in library "2" (an unscoped
    /// browse lists no episodes, catalog-api.md § Search media scopes).
    func browse(libraryId: String?, type: String?, query: String?, source: String?) -> [Node] {
        if let source, source != "query" { return [] }
        let wantMovies = libraryId == nil || libraryId == "1"
        let wantSeries = libraryId == nil || libraryId == "2"
        var nodes: [Node] = []
        switch type ?? "" {
        case "", "video", "video_with_episodes":
            if wantMovies { nodes += movies.map { Node.movie($0) } }
            if wantSeries { nodes += series.map { Node.series($0) } }
        case "movie":
            if wantMovies { nodes += movies.map { Node.movie($0) } }
        case "series":
            if wantSeries { nodes += series.map { Node.series($0) } }
        default:
            break
        }
        if let needle = query?.lowercased(), !needle.isEmpty {
            nodes = nodes.filter { title($0).lowercased().contains(needle) }
        }
        return nodes
    }

    func title(_ node: Node) -> String {
        switch node {
        case .movie(let movie): return movie.title
        case .series(let show): return show.title
        case .season(_, let number): return siloSeasonTitle(number)
        case .episode(_, let episode): return episode.title
        }
    }

    func contentId(_ node: Node) -> String {
        switch node {
        case .movie(let movie): return movie.contentId
        case .series(let show): return show.contentId
        case .season(let show, let number): return show.seasonId(number)
        case .episode(_, let episode): return episode.contentId
        }
    }

    func sortKey(_ node: Node, _ field: String) -> String {
        switch field {
        case "year":
            let year: Int
            switch node {
            case .movie(let movie): year = movie.year ?? 0
            case .series(let show): year = show.year ?? 0
            default: year = 0
            }
            let digits = String(year)
            return String(repeating: "0", count: max(0, 6 - digits.count)) + digits + title(node).lowercased()
        case "added_at":
            return ""
        default:
            return title(node).lowercased()
        }
    }
}

fileprivate func siloSeasonTitle(_ number: Int) -> String { number == 0 ? "Specials" : "Season \(number)" }

/// `node` as the server shows it while `held` episodes are not there yet: a season or series they
/// leave without an episode is not there either. Nothing held: unchanged.
func siloVisible(_ node: SiloCatalog.Node, held: Set<String>) -> SiloCatalog.Node? {
    if held.isEmpty { return node }
    switch node {
    case .movie(let movie):
        return held.contains(movie.contentId) ? nil : node
    case .series(let show):
        guard let shown = siloVisibleSeries(show, held) else { return nil }
        return SiloCatalog.Node.series(shown)
    case .season(let show, let number):
        guard let shown = siloVisibleSeries(show, held), shown.seasons.contains(number) else { return nil }
        return SiloCatalog.Node.season(shown, number)
    case .episode(let show, let episode):
        guard !held.contains(episode.contentId), let shown = siloVisibleSeries(show, held) else { return nil }
        return SiloCatalog.Node.episode(shown, episode)
    }
}

fileprivate func siloVisibleSeries(_ show: SiloCatalog.Series, _ held: Set<String>) -> SiloCatalog.Series? {
    guard show.episodes.contains(where: { held.contains($0.contentId) }) else { return show }
    let kept = show.episodes.filter { !held.contains($0.contentId) }
    if kept.isEmpty { return nil }
    return SiloCatalog.Series(contentId: show.contentId, title: show.title, year: show.year, episodes: kept)
}

/// libraries-api.md via the fixture's libraries: "1" holds the movies, "2" the series.
func siloLibraryId(_ node: SiloCatalog.Node) -> String {
    if case .movie = node { return "1" }
    return "2"
}
