import LabstreamBackends
import LabstreamCore
import Testing

@Suite struct IdentityMatchTests {
    func film(_ item: String, tmdb: String? = "12345", imdb: String? = "tt1234567", size: Int64? = 8_000, container: String? = "mkv", path: String? = nil)
        -> FileIdentity
    {
        var ids: [String: String] = [:]
        if let tmdb { ids["tmdb"] = tmdb }
        if let imdb { ids["imdb"] = imdb }
        return FileIdentity(
            key: FileKey(server: "jf", itemId: item, sourceId: item), kind: .movie, providerIds: ids, size: size, container: container, path: path)
    }

    func pairs(_ vanished: [FileIdentity], _ appeared: [FileIdentity]) -> [String: String] {
        Dictionary(uniqueKeysWithValues: IdentityMatch.pairs(vanished: vanished, appeared: appeared).map { ($0.from.itemId, $0.to.itemId) })
    }

    @Test func theSameFileUnderANewIdIsPaired() {
        #expect(pairs([film("old")], [film("new")]) == ["old": "new"])
        // One provider id in common is enough; a container's case is not a difference.
        #expect(pairs([film("old", imdb: nil)], [film("new", container: "MKV")]) == ["old": "new"])
        #expect(pairs([film("old", path: "/media/a.mkv")], [film("new", path: "/media/a.mkv")]) == ["old": "new"])
    }

    /// A Silo season listing (catalog_items.go Episode: `imdb_id`, `tmdb_id`, `tvdb_id` omitted
    /// when empty; EpisodeFile: no name) as the identities a rebuilt library is matched by.
    func siloSeason(_ series: String, _ episode: String, file: String, tvdb: String?) throws -> [FileIdentity] {
        let ids = tvdb.map { #","tvdb_id":"\#($0)""# } ?? ""
        let body =
            #"{"items":[{"content_id":"\#(episode)","season_number":1,"episode_number":2,"title":"Two","runtime":0\#(ids),"#
            + #""files":[{"file_id":"\#(file)","hdr":false,"container":"MKV","file_size":300000}]}]}"#
        return try SiloDecode.episodes(Array(body.utf8), "episodes", series: (series, "Keep", 2021)).flatMap { item in
            item.sources.map { s in
                FileIdentity(
                    key: FileKey(server: "silo", itemId: item.id, sourceId: s.id), kind: item.kind, providerIds: item.details?.ids ?? [:],
                    size: s.size, container: s.container, path: s.path, season: item.seasonNumber, episode: item.episodeNumber)
            }
        }
    }

    @Test func aSiloEpisodeIsKnownAgainByTheProviderIdsItsSeasonListingNames() throws {
        let old = try siloSeason("series:keep", "episode:keep-s01e02", file: "7", tvdb: "90102")
        #expect(old.first?.providerIds == ["tvdb": "90102"] && old.first?.path == nil, "\(old)")
        let new = try siloSeason("series:keep-g2", "episode:keep-g2-s01e02", file: "100007", tvdb: "90102")
        #expect(pairs(old, new) == ["episode:keep-s01e02": "episode:keep-g2-s01e02"])
        // Without the ids (a server that knows none) nothing says it is the same episode.
        let bare = try siloSeason("series:keep-g2", "episode:keep-g2-s01e02", file: "100007", tvdb: nil)
        #expect(bare.first?.providerIds.isEmpty == true)
        #expect(pairs(try siloSeason("series:keep", "episode:keep-s01e02", file: "7", tvdb: nil), bare).isEmpty)
        #expect(pairs(old, bare).isEmpty)
    }

    @Test func withoutProviderIdsTheSameServerPathStandsInForOne() {
        // Silo's catalog names no provider ids: its file name, with size, container and kind.
        let bare = { (item: String, path: String?) in self.film(item, tmdb: nil, imdb: nil, path: path) }
        #expect(pairs([bare("old", "alpha.mkv")], [bare("new", "alpha.mkv")]) == ["old": "new"])
        #expect(pairs([bare("old", "alpha.mkv")], [bare("new", "beta.mkv")]).isEmpty)
        #expect(pairs([bare("old", nil)], [bare("new", nil)]).isEmpty)
        #expect(pairs([bare("old", "alpha.mkv")], [bare("new", nil)]).isEmpty)
        // Ids on one side only: no id in common, the path does not stand in.
        #expect(pairs([film("old", path: "alpha.mkv")], [bare("new", "alpha.mkv")]).isEmpty)
        // Two files of one name and size are still doubtful.
        #expect(pairs([bare("old", "alpha.mkv")], [bare("a", "alpha.mkv"), bare("b", "alpha.mkv")]).isEmpty)
    }

    @Test func anythingTheServerSaysDifferentlyPairsNothing() {
        let old = film("old")
        #expect(pairs([old], [film("new", size: 8_001)]).isEmpty)
        #expect(pairs([old], [film("new", container: "mp4")]).isEmpty)
        #expect(pairs([old], [film("new", tmdb: "999")]).isEmpty)  // a differing id, even with imdb shared
        #expect(pairs([old], [film("new", tmdb: nil, imdb: nil)]).isEmpty)  // no provider id in common
        #expect(pairs([old], [film("new", size: nil)]).isEmpty)
        #expect(pairs([film("old", path: "/media/a.mkv")], [film("new", path: "/media/b.mkv")]).isEmpty)
        var episode = film("new")
        episode.kind = .episode
        #expect(pairs([old], [episode]).isEmpty)
        var elsewhere = film("new")
        elsewhere.key = FileKey(server: "other", itemId: "new", sourceId: "new")
        #expect(pairs([old], [elsewhere]).isEmpty)
    }

    @Test func aDoubtfulMatchPairsNothing() {
        // Two candidates for one stored file, or two stored files for one candidate.
        #expect(pairs([film("old")], [film("a"), film("b")]).isEmpty)
        #expect(pairs([film("x"), film("y")], [film("new")]).isEmpty)
        // The unambiguous one next to them still pairs.
        #expect(pairs([film("x"), film("y"), film("z", tmdb: "7", imdb: nil)], [film("new"), film("n7", tmdb: "7", imdb: nil)]) == ["z": "n7"])
    }

    @Test func theProbeReadsAFewSmallRangesAtSegmentStarts() {
        let mib: Int64 = 1 << 20
        let segments = [(ByteRange(0, 16 * mib), "a"), (ByteRange(16 * mib, 32 * mib), "b"), (ByteRange(32 * mib, 32 * mib + 5000), "c")]
        let checks = AdoptionProbe.plan(size: 32 * mib + 5000, segments: segments)!
        #expect(checks.reduce(0) { $0 + $1.range.count } <= AdoptionProbe.budget)
        #expect(checks.map(\.range.lower) == [0, 16 * mib, 32 * mib])
        // The small last segment is read whole and checked against its stored digest.
        #expect(checks.last == AdoptionProbe.Check(range: ByteRange(32 * mib, 32 * mib + 5000), digest: "c"))
        #expect(checks[0].digest == nil && checks[1].digest == nil)
        // A copy not wholly stored is not probed at all.
        #expect(AdoptionProbe.plan(size: 32 * mib + 5000, segments: Array(segments.dropLast())) == nil)
        #expect(AdoptionProbe.plan(size: 32 * mib + 5000, segments: [segments[0], segments[2]]) == nil)
        // A small file is one whole segment: one range, its digest.
        #expect(AdoptionProbe.plan(size: 5000, segments: [(ByteRange(0, 5000), "d")]) == [AdoptionProbe.Check(range: ByteRange(0, 5000), digest: "d")])
    }

    @Test func onlyEveryRangeReadAlikeConfirms() {
        let checks = [AdoptionProbe.Check(range: ByteRange(0, 10), digest: nil), AdoptionProbe.Check(range: ByteRange(90, 100), digest: "s")]
        let stored = [ByteRange(0, 10): "h"]
        #expect(AdoptionProbe.confirms(checks, read: [ByteRange(0, 10): (10, "h"), ByteRange(90, 100): (10, "s")], stored: stored, validators: ["v"]))
        #expect(!AdoptionProbe.confirms(checks, read: [ByteRange(0, 10): (10, "x"), ByteRange(90, 100): (10, "s")], stored: stored, validators: ["v"]))
        #expect(!AdoptionProbe.confirms(checks, read: [ByteRange(0, 10): (10, "h"), ByteRange(90, 100): (10, "x")], stored: stored, validators: ["v"]))
        #expect(!AdoptionProbe.confirms(checks, read: [ByteRange(0, 10): (9, "h"), ByteRange(90, 100): (10, "s")], stored: stored, validators: ["v"]))
        #expect(!AdoptionProbe.confirms(checks, read: [ByteRange(90, 100): (10, "s")], stored: stored, validators: ["v"]))
        #expect(!AdoptionProbe.confirms(checks, read: [ByteRange(0, 10): (10, "h"), ByteRange(90, 100): (10, "s")], stored: [:], validators: ["v"]))
        #expect(!AdoptionProbe.confirms([], read: [:], stored: [:], validators: ["v"]))
        // The file changed between two reads (two validators), or nothing answered at all.
        let alike = [ByteRange(0, 10): (count: Int64(10), digest: "h"), ByteRange(90, 100): (count: Int64(10), digest: "s")]
        #expect(!AdoptionProbe.confirms(checks, read: alike, stored: stored, validators: ["\"1\"", "\"2\""]))
        #expect(!AdoptionProbe.confirms(checks, read: alike, stored: stored, validators: []))
        // A range read inside a larger segment is hashed like that segment's digest.
        let segments = [(range: ByteRange(0, 50), digest: "xxh:a"), (range: ByteRange(50, 100), digest: "sha")]
        #expect(AdoptionProbe.digestLike(checks[0], segments: segments) == "xxh:a")
        #expect(AdoptionProbe.digestLike(checks[1], segments: segments) == "s")
        #expect(AdoptionProbe.digestLike(AdoptionProbe.Check(range: ByteRange(40, 60), digest: nil), segments: segments) == nil)
    }
}
