import Foundation
import LabstreamBackends
import LabstreamCore
import Testing

/// The managed-entry policy (what to do next with a Silo download entry), the reconciliation
/// of stored entries with the server's listing, the integrity check, and the decoding of the
/// entry, page and manifest shapes from downloads-api.md § 4.1, § 4.2, § 5 and § 6.
@Suite struct ManagedEntryTests {
    func entry(_ id: String? = "dl_1", status: String = "ready", delivery: String = "original", reported: ManagedEntry.Report? = nil) -> ManagedEntry {
        ManagedEntry(itemId: "mv_1", sourceId: "7", id: id, revision: 1, status: status, deliveryFormat: delivery, reported: reported)
    }

    @Test func eachPinnedFileIsRegisteredReportedAndRemovedInTurn() {
        typealias P = ManagedEntryPolicy
        #expect(P.step(pinned: true, local: .fetching, entry: nil) == .register)
        #expect(P.step(pinned: true, local: .finished, entry: nil) == .register)  // finished before it was registered
        #expect(P.step(pinned: false, local: nil, entry: nil) == .none)
        // An intent whose answer never came is looked up, pinned or not.
        #expect(P.step(pinned: true, local: .fetching, entry: entry(nil)) == .lookUp)
        #expect(P.step(pinned: false, local: nil, entry: entry(nil)) == .lookUp)
        #expect(P.step(pinned: true, local: .fetching, entry: entry()) == .report(.downloading))
        #expect(P.step(pinned: true, local: .fetching, entry: entry(reported: .downloading)) == .none)
        #expect(P.step(pinned: true, local: .awaitingCheck, entry: entry(reported: .downloading)) == .none)
        #expect(P.step(pinned: true, local: .finished, entry: entry(reported: .downloading)) == .report(.completed))
        // Completed only once what goes beside it (the manifest's artwork, subtitles) is stored or tried.
        #expect(P.step(pinned: true, local: .finished, entry: entry(reported: .downloading), besideStored: false) == .none)
        #expect(P.step(pinned: true, local: .finished, entry: entry(status: "completed")) == .none)
        #expect(P.step(pinned: true, local: .failed, entry: entry(reported: .downloading)) == .none)  // a failed check is never reported complete
        #expect(P.step(pinned: false, local: .finished, entry: entry(reported: .completed)) == .remove)
        // The server ended the entry: fetching stops (a finished copy stays as it is).
        #expect(P.step(pinned: true, local: .fetching, entry: entry(status: "revoked")) == .stop(P.whyEnded("revoked")))
        #expect(P.step(pinned: true, local: .failed, entry: entry(status: "revoked")) == .stop(P.whyEnded("revoked")))
        #expect(P.step(pinned: true, local: .finished, entry: entry(status: "revoked")) == .none)
        #expect(P.whyEnded("revoked").sentence.contains("revoked") && P.whyEnded("failed").sentence.contains("could not prepare"))
    }

    /// An entry at a preset keys its copy's row; at a preset Labstream cannot name (a server
    /// with its own ladder) it keys no row, and never the original's.
    @Test func anEntrysPresetDecidesWhichRowItHolds() {
        #expect(ManagedEntry.kind(preset: "original") == .original)
        #expect(ManagedEntry.kind(preset: "10mbps") == .copy(.capped(megabitsPerSecond: 10)))
        let odd = ManagedEntry(
            itemId: "mv_1", sourceId: "7", kind: ManagedEntry.kind(preset: "15mbps"), id: "dl_1", revision: 1, status: "ready",
            deliveryFormat: "transcode")
        let original = FileKey(server: "s", itemId: "mv_1", sourceId: "7")
        #expect(odd.kind == nil && odd.key(server: "s") == nil && !odd.routesBytes && !odd.holds(original) && !odd.checks(original))
        let copy = ManagedEntry(itemId: "mv_1", sourceId: "7", kind: ManagedEntry.kind(preset: "10mbps"), id: "dl_2")
        #expect(copy.holds(DerivedCopy.key(of: original, quality: .capped(megabitsPerSecond: 10))) && !copy.holds(original))
    }

    @Test func onlyAnOriginalEntryRoutesBytesAndOnlyAServableOneIsChecked() {
        #expect(entry().routesBytes && entry().servesOriginal)
        #expect(entry(status: "revoked").routesBytes && !entry(status: "revoked").servesOriginal)
        #expect(!entry(delivery: "remux").routesBytes && !entry(nil).routesBytes)
        #expect(!entry(status: "preparing").servesOriginal)
    }

    /// Its manifest is asked for once the entry is ready (§ 4.6), never while the server prepares it.
    @Test func onlyAReadyEntryHasAManifestToAskFor() {
        #expect(["ready", "downloading", "completed"].allSatisfy { entry(status: $0, delivery: "transcode").servable })
        #expect(["preparing", "failed", "revoked"].allSatisfy { !entry(status: $0, delivery: "transcode").servable })
        #expect(!entry(nil).servable)
    }

    @Test func aListingAdoptsLostCreatesDropsWhatIsGoneAndLeavesOthersAlone() {
        let intent = ManagedEntry(itemId: "a", sourceId: "1", id: nil)
        let known = ManagedEntry(
            itemId: "b", sourceId: "2", id: "dl_b", revision: 1, status: "ready", reported: .downloading, reportedAt: 5,
            manifest: [1])
        let gone = ManagedEntry(itemId: "c", sourceId: "3", id: "dl_c", revision: 1, status: "completed", reported: .completed)
        let neverMade = ManagedEntry(itemId: "d", sourceId: "4", id: nil)
        let remote = [
            ManagedEntry(itemId: "a", sourceId: "1", id: "dl_a", revision: 1, status: "ready"),
            ManagedEntry(itemId: "b", sourceId: "2", id: "dl_b", revision: 1, status: "revoked"),
            ManagedEntry(itemId: "e", sourceId: "5", id: "dl_e", revision: 3, status: "ready"),  // pinned, not known here
            ManagedEntry(itemId: "f", sourceId: "6", id: "dl_f", revision: 1, status: "completed")  // not pinned: not ours to touch
        ]
        let now = ManagedEntryPolicy.reconcile(
            stored: ["a": intent, "b": known, "c": gone, "d": neverMade], remote: remote,
            pinned: ["a", "b", "c", "d", "e"])
        #expect(Set(now.keys) == ["a", "b", "e"])
        #expect(now["a"]?.id == "dl_a" && now["a"]?.reported == nil)
        // A known entry takes the server's state and keeps what was reported and the manifest.
        #expect(now["b"]?.status == "revoked" && now["b"]?.reported == .downloading && now["b"]?.reportedAt == 5 && now["b"]?.manifest == [1])
        #expect(now["e"]?.revision == 3)
        // Replaced on the server (a new id): its reports start over.
        let replaced = ManagedEntryPolicy.reconcile(
            stored: ["b": known], remote: [ManagedEntry(itemId: "b", sourceId: "2", id: "dl_b2", revision: 2, status: "ready")],
            pinned: ["b"])
        #expect(replaced["b"]?.id == "dl_b2" && replaced["b"]?.reported == nil && replaced["b"]?.manifest == nil)
    }

    @Test func theIntegrityCheckComparesSizeThenTheServersKindOfHash() {
        let sha = String(repeating: "0f", count: 32)
        var asked: [IntegrityCheck.HashKind] = []
        func local(_ kind: IntegrityCheck.HashKind) -> String? { asked.append(kind); return kind == .sha256 ? sha : "00000000000000ff" }
        #expect(IntegrityCheck.judge(Integrity(expectedBytes: 10, hash: sha), localBytes: 10, localHash: local) == .matches)
        #expect(IntegrityCheck.judge(Integrity(expectedBytes: 10, hash: "SHA256:" + sha.uppercased()), localBytes: 10, localHash: local) == .matches)
        #expect(IntegrityCheck.judge(Integrity(expectedBytes: 10, hash: "00000000000000FF"), localBytes: 10, localHash: local) == .matches)
        #expect(asked == [.sha256, .sha256, .osHash])
        // A size that differs fails without reading the file.
        asked = []
        guard case .mismatch(let why) = IntegrityCheck.judge(Integrity(expectedBytes: 11, hash: sha), localBytes: 10, localHash: local) else {
            Issue.record("a size mismatch passed")
            return
        }
        #expect(why.contains("11") && why.contains("10") && asked.isEmpty)
        let other = String(repeating: "ab", count: 32)
        guard case .mismatch(let both) = IntegrityCheck.judge(Integrity(expectedBytes: 10, hash: other), localBytes: 10, localHash: local) else {
            Issue.record("a hash mismatch passed")
            return
        }
        #expect(both.contains(other) && both.contains(sha) && both.contains("SHA-256"))
        // A hash of an unknown kind, none, or one that cannot be computed: the size alone is checked.
        #expect(IntegrityCheck.judge(Integrity(expectedBytes: 10, hash: "sha256-or-scanner-hash"), localBytes: 10, localHash: local) == .sizeOnly)
        #expect(IntegrityCheck.judge(Integrity(expectedBytes: nil, hash: nil), localBytes: 10, localHash: local) == .sizeOnly)
        #expect(IntegrityCheck.judge(Integrity(expectedBytes: 10, hash: "00000000000000ff"), localBytes: 10, localHash: { _ in nil }) == .sizeOnly)
    }

    /// The OpenSubtitles hash: size plus every little-endian 64-bit word of the first and last 64 KiB, modulo 2^64.
    @Test func theOpenSubtitlesHashSumsTheEndsWithTheSize() {
        let size: Int64 = 200_000
        let ones = [UInt8](repeating: 1, count: 64 * 1024)
        // 8192 words of 0x0101010101010101 at each end.
        let expected = (UInt64(size) &+ 16_384 &* 0x0101_0101_0101_0101)
        #expect(IntegrityCheck.osHash(size: size, head: ones, tail: ones) == String(format: "%016llx", expected))
        var head = [UInt8](repeating: 0, count: 64 * 1024)
        head[0] = 0x02  // the first word's low byte
        head[15] = 0x01  // the second word's high byte
        #expect(
            IntegrityCheck.osHash(size: size, head: head, tail: [UInt8](repeating: 0, count: 64 * 1024))
                == String(format: "%016llx", UInt64(size) + 2 + (1 << 56)))
        #expect(IntegrityCheck.osHash(size: 100_000, head: ones, tail: ones) == nil)  // under 128 KiB
    }

    @Test func statusEventsCarryMillisecondInstants() {
        #expect(ISODate.string(epochMilliseconds: 1_767_323_045_007) == "2026-01-02T03:04:05.007Z")
        #expect(ISODate.string(epochSeconds: 1_767_323_045) == "2026-01-02T03:04:05.000Z")
        #expect(ISODate.epochSeconds(ISODate.string(epochMilliseconds: 1_767_323_045_999)) == 1_767_323_045)
    }

    /// A version whose bitrate Silo does not know says 0: unknown, not a bitrate every cap fits.
    @Test func anUnknownBitrateIsNotZero() {
        let known = SiloDecode.source(JSONValue(raw: ["file_id": "7", "file_size": 10, "bitrate": 8000]), labelled: false)
        let unknown = SiloDecode.source(JSONValue(raw: ["file_id": "8", "file_size": 10, "bitrate": 0]), labelled: false)
        #expect(known?.bitrate == 8_000_000 && unknown?.bitrate == nil && unknown?.id == "8")
    }

    /// A version's label says its resolution and edition once each: an edition that names the
    /// resolution already is the label alone (it was `360p 360p`).
    @Test func aVersionLabelNamesItsResolutionOnce() {
        func label(_ resolution: String, _ edition: String?) -> String? {
            var raw: [String: Any] = ["file_id": "7", "file_size": 10, "resolution": resolution]
            if let edition { raw["edition_raw"] = edition }
            return SiloDecode.source(JSONValue(raw: raw), labelled: true)?.name
        }
        #expect(label("360p", "360p") == "360p")
        #expect(label("1080p", "1080P Extended") == "1080P Extended")
        #expect(label("1080p", "Director's Cut") == "1080p Director's Cut")
        #expect(label("720p", nil) == "720p" && label("", "Theatrical") == "Theatrical" && label("", nil) == nil)
    }

    /// The shapes as downloads-api.md shows them (§ 4.1 create answer, § 4.2 page, § 6 manifest).
    @Test func entriesPagesAndManifestsDecodeFromTheDocumentsShapes() throws {
        let created = try SiloDecode.created(
            Array(
                """
                {"items":[{"id":"dl_01H","content_id":"mv_123","media_file_id":"4567","device_id":"device-uuid","file_size":8589934592,"bytes_sent":0,
                  "kind":"queued","status":"ready","quality":"original","effective_quality":"original","delivery_format":"original","target_bitrate_kbps":0,
                  "revision":1,"created_at":"2026-06-19T16:04:05Z"}],"skipped":[],"page":{"has_more":false}}
                """.utf8))
        #expect(created == ManagedEntry(itemId: "mv_123", sourceId: "4567", id: "dl_01H", revision: 1, status: "ready"))
        // An episode's entry is the episode's.
        let page = try SiloDecode.entriesPage(
            Array(
                """
                {"items":[{"id":"dl_2","batch_id":"b_1","content_id":"sr_123","episode_id":"ep_1","media_file_id":"4568","status":"preparing",
                  "quality":"10mbps","effective_quality":"10mbps","delivery_format":"transcode","revision":2}],
                 "page":{"has_more":true,"next_cursor":"opaque"}}
                """.utf8))
        // A copy at a preset is the row of the version's copy at that quality.
        #expect(
            page.next == "opaque"
                && page.entries == [
                    ManagedEntry(
                        itemId: "ep_1", sourceId: "4568", kind: .copy(.capped(megabitsPerSecond: 10)), id: "dl_2", revision: 2, status: "preparing",
                        deliveryFormat: "transcode")
                ])
        #expect(page.entries.first?.quality == Quality("10mbps"))
        #expect(try SiloDecode.entriesPage(Array(#"{"items":[],"page":{"has_more":false}}"#.utf8)).next == nil)
        #expect(throws: LabstreamError.self) { try SiloDecode.entriesPage(Array(#"{"page":{}}"#.utf8)) }
        // More to come with no way to ask for it: an error, not a listing taken as complete.
        #expect(throws: LabstreamError.self) { try SiloDecode.entriesPage(Array(#"{"items":[],"page":{"has_more":true}}"#.utf8)) }
        // A create that made nothing says why, from its `skipped`.
        #expect { try SiloDecode.created(Array(#"{"items":[],"skipped":[{"episode_id":"e","reason":"no_file"}],"page":{"has_more":false}}"#.utf8)) } throws: {
            ($0 as? LabstreamError)?.userMessage.contains("no_file") == true
        }
        // A season page (§ 4.1's example): its entries, what it skipped and why, the next page.
        let season = try SiloDecode.seasonPage(
            Array(
                """
                {"batch_id":"b_1","items":[{"id":"dl_3","batch_id":"b_1","content_id":"sr_123","episode_id":"ep_1","media_file_id":"4567","status":"ready",
                  "quality":"original","effective_quality":"original","delivery_format":"original","revision":1}],
                 "skipped":[{"episode_id":"ep_missing","reason":"no_file"}],"page":{"has_more":true,"next_cursor":"opaque"}}
                """.utf8))
        #expect(season.made.map(\.itemId) == ["ep_1"] && season.made.first?.sourceId == "4567" && season.next == "opaque")
        #expect(season.skipped.map(\.episode) == ["ep_missing"] && season.skipped.map(\.reason) == ["no_file"])
        #expect(throws: LabstreamError.self) { try SiloDecode.seasonPage(Array(#"{"items":[],"page":{"has_more":true}}"#.utf8)) }
        let integrity = try SiloDecode.integrity(
            Array(
                """
                {"download_id":"dl_1","content_id":"mv_123","type":"movie","revision":1,"media_file_id":"4567","file_size":8589934592,
                 "integrity":{"expected_bytes":8589934592,"media_file_hash":"sha256-or-scanner-hash","metadata_etag":"opaque-server-value"},
                 "manifest_version":3,"generated_at":"2026-06-19T16:05:00.000Z"}
                """.utf8))
        #expect(integrity.integrity == Integrity(expectedBytes: 8_589_934_592, hash: "sha256-or-scanner-hash") && integrity.revision == 1)
        #expect(throws: LabstreamError.self) { try SiloDecode.integrity(Array(#"{"type":"problem"}"#.utf8)) }
    }

    /// § 6's manifest names what goes beside the media: a film's artwork, every entry's
    /// subtitles (ISO 639-1 languages, a downloaded one's `revision`) and its chapters.
    @Test func aManifestNamesArtworkSubtitlesAndChapters() throws {
        let film = try #require(
            try SiloDecode.extras(
                Array(
                    """
                    {"download_id":"dl_1","content_id":"mv_123","type":"movie","revision":1,"media_file_id":"4567",
                     "artwork_urls":{"poster":"/api/v2/downloads/dl_1/artwork/poster","backdrop":"/api/v2/downloads/dl_1/artwork/backdrop"},
                     "chapters":[{"index":1,"title":"Heist","start_seconds":142.5,"end_seconds":900},{"index":0,"title":"Cold Open","start_seconds":0,"end_seconds":142.5}],
                     "subtitles":[{"language":"en","format":"srt","forced":false,"hearing_impaired":true,"external":true,"fetch_url":"/api/v2/downloads/dl_1/subtitles/external:0","file_size":41234},
                                  {"language":"fr","format":"ass","forced":true,"external":false,"fetch_url":"/api/v2/downloads/dl_1/subtitles/embedded:1","revision":"r7"}],
                     "integrity":{"expected_bytes":10,"media_file_hash":"h","metadata_etag":"e1"},"manifest_version":3}
                    """.utf8)))
        #expect(film.chapters == [.init(start: 0, name: "Cold Open"), .init(start: 142.5, name: "Heist")])
        #expect(film.assets.map(\.kind) == [.poster, .fanart, .subtitle, .subtitle])
        #expect(film.assets[0].ref == "/api/v2/downloads/dl_1/artwork/poster" && film.assets[0].tag == "/api/v2/downloads/dl_1/artwork/poster#e1")
        let (en, fr) = (film.assets[2], film.assets[3])
        #expect(en.hearingImpaired && !en.forced && en.codec == "srt" && en.sourceId == "4567" && SideAssetPlan.language(en.language) == "eng")
        #expect(fr.forced && fr.tag == "/api/v2/downloads/dl_1/subtitles/embedded:1#r7")
        // An episode's poster is its still: its thumbnail.
        let episode = try #require(
            try SiloDecode.extras(
                Array(
                    """
                    {"download_id":"dl_2","type":"episode","artwork_urls":{"poster":"/api/v2/downloads/dl_2/artwork/poster"},
                     "subtitles":[{"language":"de","format":"srt","fetch_url":"/api/v2/downloads/dl_2/subtitles/external:0"}]}
                    """.utf8)))
        #expect(episode.assets.map(\.kind) == [.thumb, .subtitle])
        #expect(try SiloDecode.extras(Array(#"{"download_id":"dl_3","type":"movie","artwork_urls":{}}"#.utf8)) == nil)
        #expect(throws: LabstreamError.self) { try SiloDecode.extras(Array(#"{"code":"not_found"}"#.utf8)) }
    }

    /// Only the proxy paths of § 4.8–4.9 are asked, with the device's headers: a hostile
    /// manifest cannot send the bearer elsewhere.
    @Test func onlyTheDocumentsProxyPathsAreAsked() throws {
        let requests = SiloRequests(serverBase: "http://silo.lan:8080", identity: ClientIdentity(device: "d", deviceId: "dev-1"))
        let poster = try #require(requests.downloadAsset(path: "/api/v2/downloads/dl_1/artwork/poster", bearer: "b", profile: "p"))
        #expect(poster.url == "http://silo.lan:8080/api/v2/downloads/dl_1/artwork/poster")
        #expect(poster.headers.contains { $0.name == "X-Silo-Device-Id" && $0.value == "dev-1" })
        #expect(requests.downloadAsset(path: "/api/v2/downloads/dl_1/subtitles/external:0", bearer: "b", profile: "p") != nil)
        for hostile in [
            "//evil.example/api/v2/downloads/x/artwork/poster", "/api/v2/downloads/../auth/artwork/poster", "/api/v2/user/libraries",
            "/api/v2/downloads/dl_1/file", "/api/v2/downloads/dl_1/artwork/poster?x=1", "http://evil/api/v2/downloads/a/artwork/poster",
            "/api/v2/downloads/dl_1/artwork/"
        ] {
            #expect(requests.downloadAsset(path: hostile, bearer: "b", profile: "p") == nil, "\(hostile)")
        }
    }
}
