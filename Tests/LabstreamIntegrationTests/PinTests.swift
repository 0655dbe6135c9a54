import Foundation
import LabstreamCore
import LabstreamEngine
import LabstreamFixture
import LabstreamStore
import Testing

/// Pinned downloads in the background, under every fault the fixture can inject.
@Suite struct PinTests {
    let alpha = "test/Movies/Alpha (2001)/Alpha (2001).mkv"
    let show = "test/Shows/Show (2020)"

    @Test func pinningASeriesFillsEveryEpisodeWithCorrectHashes() throws {
        let rig = try EngineRig("pin-series")
        try rig.pin(show)
        let episodes = expectedTree(rig.media).keys.filter { $0.hasPrefix(show) }
        #expect(episodes.count == 4)
        for rel in episodes {
            let row = try #require(try rig.settled(rel))
            #expect(row.pinned && row.status == .unverified && row.awaitingValidation, "\(rel): \(row.status) \(row.reason?.sentence ?? "")")
            #expect(try sha256(rig.partialPath(rel)) == sha256(expectedTree(rig.media)[rel]!))
        }
        #expect(try rig.fs.getxattr(try #require(rig.fs.resolve(show.split(separator: "/").map(String.init))), name: "user.labstream.pinned") == "1")
        // Nothing outside the series was fetched.
        let alphaId = try rig.file(alpha).tree.key.sourceId
        #expect(!rig.fixture.downloadRequests.contains { $0.path.contains(alphaId) })
        // Segment-sized closed ranges, never more than the train allows at once is the planner's job;
        // here: every request was a closed range.
        #expect(rig.fixture.downloadRequests.allSatisfy { $0.requestedRange != nil && $0.range?.hasSuffix("-") == false })
    }

    @Test(arguments: [
        FixtureFault.dropAfter(300_000), .status(503), .status(500), .statusRetryAfter(429, "2"), .stall(4), .ignoreRange
    ])
    func aTransientFaultIsRetriedAndTheFileEndsCorrect(fault: FixtureFault) throws {
        let rig = try EngineRig("pin-fault")
        rig.fixture.inject(fault, pathPrefix: "/Items/", times: 2)
        try rig.pin(alpha)
        let row = try #require(try rig.settled(alpha))
        #expect(row.status == .unverified, "\(fault): \(row.status) \(row.reason?.sentence ?? "")")
        #expect(try sha256(rig.partialPath(alpha)) == sha256(expectedTree(rig.media)[alpha]!))
    }

    /// A server that ignores Range answers the first segment with the whole file: its beginning
    /// is that segment (same validator), so nothing restarts; later segments are asked again.
    @Test func aWholeFileAnswerFromByteZeroIsUsedNotRestarted() throws {
        let rig = try EngineRig("pin-200") { $0.maxQueuedSegments = 1 }  // the first request is the one from byte 0
        rig.fixture.inject(.ignoreRange, pathPrefix: "/Items/", times: 1)
        try rig.pin(alpha)
        let row = try #require(try rig.settled(alpha))
        #expect(row.status == .unverified && row.attempt == AttemptID(1), "\(row.status) attempt \(row.attempt)")
        #expect(try sha256(rig.partialPath(alpha)) == sha256(expectedTree(rig.media)[alpha]!))
        let fromZero = rig.fixture.downloadRequests.filter { $0.requestedRange?.lower == 0 }
        #expect(fromZero.count == 1)  // the 200 was used, not asked for again
    }

    /// A server that never honours `Range`: the pinned file still fills, from one whole-file answer.
    @Test func aPinFromAServerThatIgnoresRangeFillsFromOneWholeFileAnswer() throws {
        let rig = try EngineRig("pin-no-range")
        rig.fixture.inject(.ignoreRange, pathPrefix: "/Items/", times: nil)
        try rig.pin(alpha)
        let row = try #require(try rig.settled(alpha))
        #expect(row.status == .unverified, "\(row.status) \(row.reason?.sentence ?? "")")
        #expect(try sha256(rig.partialPath(alpha)) == sha256(expectedTree(rig.media)[alpha]!))
        let size = try rig.file(alpha).tree.size
        #expect(rig.fixture.downloadRequests.filter { $0.requestedRange == ByteRange(0, size) }.count == 1)
    }

    /// The segment train holds at most a head and a look-ahead on the wire per file, even when
    /// the two are adjacent (they must not count as one) and other files' segments keep waking
    /// the fill.
    @Test func aPinnedFileNeverHasMoreThanTwoSegmentsOnTheWire() throws {
        let rig = try EngineRig("pin-train") { $0.sizes.segmentSize = 1 << 20 }
        try rig.pin(alpha)
        try rig.pin(show)
        for rel in [alpha] + expectedTree(rig.media).keys.filter({ $0.hasPrefix(show) }) {
            #expect(try rig.settled(rel)?.status == .unverified, "\(rel)")
        }
        #expect(rig.fixture.downloadRequests.count >= 12)
        #expect(rig.fixture.peakConcurrentBodiesOfOneFile <= 2, "\(rig.fixture.peakConcurrentBodiesOfOneFile) bodies of one file at once")
    }

    /// A 401 for bytes: the stored sign-in is checked once; it holds, so the fetch goes on.
    @Test func aSingle401IsRetriedOnceTheSignInIsChecked() throws {
        let rig = try EngineRig("pin-401")
        rig.fixture.inject(.status(401), pathPrefix: "/Items/", times: 1)
        try rig.pin(alpha)
        #expect(try rig.settled(alpha)?.status == .unverified)
        #expect(try sha256(rig.partialPath(alpha)) == sha256(expectedTree(rig.media)[alpha]!))
        #expect(rig.fixture.requestLog.contains { $0.path == "/Users/Me" })  // the check
    }

    /// A home server restarting answers 503 for a while: a pinned file waits (`queued`, the
    /// reason saying why and when the next try is) and resumes by itself; it never ends `failed`.
    @Test func aPinnedFileWaitsOutAServerThatAnswers503AndResumesByItself() throws {
        let rig = try EngineRig("pin-503")
        rig.fixture.inject(.status(503), pathPrefix: "/Items/", times: nil)
        try rig.pin(alpha)
        let key = try rig.file(alpha).tree.key
        #expect(eventually { rig.fixture.downloadRequests.count >= 6 })  // more tries than the policy's attempts
        // The fixture logs a request before the engine has taken its 503: the row says so a moment later.
        let tree = try rig.file(alpha).tree
        #expect(eventually { rig.transfers.row(for: tree)?.status == .queued })
        let waiting = try #require(rig.transfers.row(for: tree))
        #expect(waiting.status == .queued, "\(waiting.status) \(waiting.reason?.sentence ?? "")")
        #expect(waiting.reason?.sentence.hasPrefix("server unavailable: HTTP 503, next try in ") == true, "\(waiting.reason?.sentence ?? "")")
        #expect(try rig.index.download(key)?.status != .failed)
        rig.fixture.clearFaults()  // the server is back: no retry command needed
        let row = try #require(try rig.settled(alpha))
        #expect(row.status == .unverified, "\(row.status) \(row.reason?.sentence ?? "")")
        #expect(try sha256(rig.partialPath(alpha)) == sha256(expectedTree(rig.media)[alpha]!))
    }

    @Test(arguments: [FixtureFault.wrongContentRange, .status(404), .status(401)])
    func aPersistentFaultEndsFailedWithAReasonAndKeepsGoodBytes(fault: FixtureFault) throws {
        let rig = try EngineRig("pin-fail")
        _ = try rig.readAndSettle(alpha, offset: 0, length: 4096)  // 1 MiB good bytes first
        rig.fixture.inject(fault, pathPrefix: "/Items/", times: nil)
        try rig.pin(alpha)
        let row = try #require(try rig.settled(alpha))
        #expect(row.status == .failed && !(row.reason?.sentence ?? "").isEmpty, "\(row.status) \(row.reason?.sentence ?? "")")
        // A server that accepts the sign-in yet keeps refusing the bytes: the file's failure, not a sign-in to redo.
        if fault == .status(401) {
            #expect(row.reason?.sentence.contains("accepts the stored sign-in but refuses this file's bytes") == true, "\(row.reason?.sentence ?? "")")
        }
        #expect(row.present.contains(ByteRange(0, Int64(MiB))))
        // Whatever is recorded as present matches the source byte for byte.
        for r in row.present.ranges {
            #expect(
                try pread(path: rig.partialPath(alpha), offset: Int(r.lower), length: Int(r.count))
                    == pread(path: expectedTree(rig.media)[alpha]!, offset: Int(r.lower), length: Int(r.count)))
        }
        // Fixed server, retried: it completes.
        rig.fixture.clearFaults()
        let ino = try rig.file(alpha).ino
        try rig.fs.setxattr(ino, name: "user.labstream.action", value: Array("retry".utf8))
        #expect(try rig.settled(alpha)?.status == .unverified)
        #expect(try sha256(rig.partialPath(alpha)) == sha256(expectedTree(rig.media)[alpha]!))
    }

    @Test func pauseStopsNewSegmentsResumeFinishesCancelForgets() throws {
        let rig = try EngineRig("pin-pause")
        let f = try rig.file(alpha)
        let fs = rig.fs
        let fixture = rig.fixture
        let requestsAtPause = LockedBox(-1)
        rig.fixture.onDownloadRequest { n in
            if n == 1 {
                try? fs.setxattr(f.ino, name: "user.labstream.action", value: Array("pause".utf8))
                requestsAtPause.set(fixture.downloadRequests.count)
            }
        }
        try rig.pin(alpha)
        #expect(try rig.waitUntil { try rig.index.download(f.tree.key)?.status == .paused && rig.transfers.inFlight(f.tree).isEmpty })
        let paused = try #require(try rig.index.download(f.tree.key))
        #expect(paused.reason == .pausedByUser && !paused.present.contains(ByteRange(0, paused.total)))
        // Only what was on the wire, or already planned, when the pause landed (at most the two
        // segments of the train) could still arrive.
        #expect(requestsAtPause.get() > 0 && rig.fixture.downloadRequests.count <= requestsAtPause.get() + 2)
        #expect(try rig.fs.getxattr(f.ino, name: "user.labstream.state") == "paused")
        rig.fixture.onDownloadRequest(nil)
        try rig.fs.setxattr(f.ino, name: "user.labstream.action", value: Array("resume".utf8))
        #expect(try rig.settled(alpha)?.status == .unverified)
        #expect(try sha256(rig.partialPath(alpha)) == sha256(expectedTree(rig.media)[alpha]!))
        try rig.fs.setxattr(f.ino, name: "user.labstream.action", value: Array("cancel".utf8))
        let cancelled = try #require(try rig.index.download(f.tree.key))
        #expect(cancelled.present.isEmpty && !cancelled.pinned && cancelled.attempt.rawValue == paused.attempt.rawValue + 1)
        #expect(try rig.fs.getxattr(f.ino, name: "user.labstream.state") == "not-local")
        #expect(try pread(path: rig.partialPath(alpha), offset: 0, length: MiB).allSatisfy { $0 == 0 })
        #expect(throws: LabstreamError.self) { try rig.fs.setxattr(f.ino, name: "user.labstream.action", value: Array("explode".utf8)) }
    }

    /// A request on the wire when the pause landed fails: the pause holds (before, the failure
    /// scheduled a retry, `paused` became `queued`, and the fill went on).
    @Test func aPauseHoldsWhenTheRequestOnTheWireFails() throws {
        let rig = try EngineRig("pin-pause-fail")
        let f = try rig.file(alpha)
        let fs = rig.fs
        let fixture = rig.fixture
        rig.fixture.onDownloadRequest { n in
            guard n == 1 else { return }
            try? fs.setxattr(f.ino, name: "user.labstream.action", value: Array("pause".utf8))
            fixture.inject(.status(503), pathPrefix: "/Items/", times: 1)  // this very request
        }
        try rig.pin(alpha)
        // Nothing on the wire and still paused: every answer was taken in, and none moved it.
        #expect(try rig.waitUntil { try rig.index.download(f.tree.key)?.status == .paused && rig.transfers.inFlight(f.tree).isEmpty })
        let paused = try #require(try rig.index.download(f.tree.key))
        #expect(paused.reason == .pausedByUser && !paused.present.contains(ByteRange(0, paused.total)), "\(paused)")
        #expect(rig.fixture.downloadRequests.count <= 2)
        rig.fixture.onDownloadRequest(nil)
        try rig.fs.setxattr(f.ino, name: "user.labstream.action", value: Array("resume".utf8))
        #expect(try rig.settled(alpha)?.status == .unverified)
        #expect(try sha256(rig.partialPath(alpha)) == sha256(expectedTree(rig.media)[alpha]!))
    }

    @Test func theRateLimitSlowsPinnedDownloads() throws {
        // A lower bound only: a limit must make a download take at least bytes / rate.
        let rig = try EngineRig("rate") { $0.rateLimit = Int64(MiB) }
        let beta = "test/Movies/Beta (2002)/Beta (2002).mp4"  // 3 MiB at 1 MiB/s
        let started = Date()
        try rig.pin(beta)
        #expect(try rig.settled(beta)?.status == .unverified)
        #expect(Date().timeIntervalSince(started) >= 2.0)
        #expect(try sha256(rig.partialPath(beta)) == sha256(expectedTree(rig.media)[beta]!))
    }

    @Test func aValidatorChangeBetweenSegmentsStartsOverAndEndsCorrect() throws {
        let rig = try EngineRig("pin-validator")
        let id = try rig.file(alpha).tree.key.sourceId
        let fixture = rig.fixture
        fixture.onDownloadRequest { n in if n == 3 { fixture.touch(itemId: id) } }
        try rig.pin(alpha)
        let row = try #require(try rig.settled(alpha))
        #expect(row.status == .unverified && row.attempt.rawValue >= 2, "\(row.status) \(row.attempt)")
        #expect(try sha256(rig.partialPath(alpha)) == sha256(expectedTree(rig.media)[alpha]!))
        // Only the new validator is pinned and it is what the last requests sent.
        #expect(rig.fixture.downloadRequests.last?.ifRange == row.validator?.headerValue)
    }

    /// A pinned file's new version that the probe rejected (status: "new version: failed … mpv:
    /// unrecognized file format") has no path of its own: `retry` on the file keeps the rejected
    /// bytes in DATA_DIR/inspect and downloads the new version again, as labstream(1) says.
    @Test func retryingAFileRetriesItsRejectedNewVersion() throws {
        let probe = LockedBox(false)
        let rig = try EngineRig("retry-next") { $0.playbackProbe = probe.get() }
        let gamma = "test/Movies/Gamma/Gamma.mkv"
        let tree = try rig.file(gamma).tree, source = try rig.file(gamma).source
        try rig.pin(gamma)
        #expect(try rig.settled(gamma)?.status == .unverified)
        // The server's file changes; the probe, on from now, rejects the new random bytes (the
        // old copy counts as checked: the probe would reject its random bytes too).
        writeRandomFile(source, size: 700 * 1024, seed: 77)
        rig.fixture.touch(itemId: try #require(rig.fixture.itemId(forFile: source)))
        rig.transfers.stop()
        try rig.index.db.run("UPDATE downloads SET awaiting_validation = 0 WHERE item_id = ?", [.text(tree.key.itemId)])
        probe.set(true)
        try rig.restart()
        try rig.sync()
        let nextKey = NextVersion.key(of: tree.key)
        #expect(try rig.waitUntil { try rig.index.download(nextKey)?.status == .failed })
        let first = try #require(try rig.index.download(nextKey))
        #expect(first.reason?.sentence.hasPrefix("mpv: ") == true, "\(first.reason?.sentence ?? "")")
        #expect(rig.transfers.related(to: tree.key).map(\.status) == [.failed])

        rig.fixture.clearLog()
        try rig.fs.setxattr(try rig.file(gamma).ino, name: "user.labstream.action", value: Array("retry".utf8))
        let inspect = try FileManager.default.contentsOfDirectory(atPath: rig.layout.root + "/inspect")
        #expect(inspect.count == 1, "\(inspect)")
        #expect(try sha256(rig.layout.root + "/inspect/" + inspect[0]) == sha256(source))
        // Fetched again as a new attempt (and rejected again: the bytes are the same).
        #expect(try rig.waitUntil { (try rig.index.download(nextKey)).map { $0.attempt.rawValue > first.attempt.rawValue && $0.status == .failed } ?? false })
        #expect(rig.fixture.downloadRequests.count >= 1)
        // The shown copy is still the old, complete one.
        #expect(rig.transfers.row(for: tree)?.status == .unverified)
    }

    /// A pin that meets a newer row than the index's (a commit landed between the pin's index
    /// write and the transfer taking it): the transfer keeps its state, the index gets the pin
    /// and the state; neither change is lost. (Before, the live row took the index's older
    /// status, and `pin --wait` could wait forever on a file that was complete.)
    @Test func aPinMeetingANewerLiveRowLosesNeitherChange() throws {
        let rig = try EngineRig("pin-race")
        let beta = "test/Movies/Beta (2002)/Beta (2002).mp4"
        let tree = try rig.file(beta).tree
        _ = try rig.readAndSettle(beta, offset: 0, length: Int(tree.size))
        let whole = ByteRange(0, tree.size)
        let live = try #require(rig.transfers.row(for: tree))
        try #require(live.status == .unverified && !live.pinned && live.present.contains(whole))
        try rig.index.db.run("UPDATE downloads SET status='partial', ranges='' WHERE item_id=?", [.text(tree.key.itemId)])
        try rig.pin(beta)
        let after = try #require(rig.transfers.row(for: tree))
        #expect(after.status == .unverified && after.pinned && after.present.contains(whole), "\(after)")
        let stored = try #require(try rig.index.download(tree.key))
        #expect(stored.status == .unverified && stored.pinned && stored.present.contains(whole), "\(stored)")
    }

    @Test func damagedBytesOnDiskAreDroppedAfterARestartAndFetchedAgain() throws {
        let rig = try EngineRig("pin-digest")
        try rig.pin(alpha)
        #expect(try rig.settled(alpha)?.status == .unverified)
        // Flip bytes inside the second segment behind the daemon's back.
        let fd = open(try rig.partialPath(alpha), O_WRONLY)
        var junk = [UInt8](repeating: 0xAA, count: 64)
        _ = junk.withUnsafeMutableBytes { pwrite(fd, $0.baseAddress, 64, off_t(5 * MiB + 17)) }
        close(fd)
        rig.transfers.stop()
        try rig.restart()
        rig.fixture.clearLog()
        #expect(try rig.read(alpha, offset: 5 * MiB, length: 4096) == rig.source(alpha, offset: 5 * MiB, length: 4096))
        #expect(!rig.fixture.downloadRequests.isEmpty)  // the damaged segment was fetched again
        #expect(try rig.read(alpha, offset: 0, length: 4096) == rig.source(alpha, offset: 0, length: 4096))
        // Only the damaged checkpoint piece (about a megabyte around the bad bytes) came again.
        let requested = RangeSet(rig.fixture.downloadRequests.compactMap(\.requestedRange))
        #expect(requested.contains(ByteRange(Int64(5 * MiB + 17), Int64(5 * MiB + 81))), "requested \(requested)")
        #expect(requested.byteCount <= Int64(2 * MiB) && requested.ranges.count == 1, "requested \(requested)")
    }

    @Test func newSegmentsAreStoredWithXXH3AndSchema4SHA256DigestsStillCheckBytes() throws {
        let rig = try EngineRig("pin-legacy-digest")
        try rig.pin(alpha)
        #expect(try rig.settled(alpha)?.status == .unverified)
        let key = try rig.file(alpha).tree.key
        let attempt = try #require(try rig.index.download(key)).attempt
        let segments = try rig.index.segments(key, attempt: attempt)
        #expect(!segments.isEmpty && segments.allSatisfy { $0.digest.hasPrefix("xxh3-128:") && $0.digest.count == 9 + 32 }, "\(segments)")
        // Turn the index back into schema 4, whose digests were SHA-256 of each segment's bytes.
        rig.transfers.stop()
        let partial = try rig.partialPath(alpha)
        try undoSchema18(rig.index.db)
        try rig.index.db.exec(
            undoSchema11
                + "DROP TABLE managed_entries; ALTER TABLE libraries DROP COLUMN left_out; ALTER TABLE items DROP COLUMN album; ALTER TABLE items DROP COLUMN album_artist; ALTER TABLE items DROP COLUMN disc; ALTER TABLE items DROP COLUMN track; ALTER TABLE items DROP COLUMN folders; ALTER TABLE media_sources DROP COLUMN remote_item; ALTER TABLE downloads DROP COLUMN checked; ALTER TABLE segments RENAME COLUMN digest TO sha256; UPDATE meta SET value='4' WHERE key='schema_version'"
        )
        for segment in segments {
            let sha = SHA256Hasher()
            try pread(path: partial, offset: Int(segment.range.lower), length: Int(segment.range.count)).withUnsafeBytes { sha.update($0) }
            try rig.index.db.run("UPDATE segments SET sha256=? WHERE lower=?", [.text(sha.finish()), .int(segment.range.lower)])
        }
        // Damage the second segment: its SHA-256 no longer matches; the first one's still does.
        let fd = open(partial, O_WRONLY)
        var junk = [UInt8](repeating: 0x55, count: 16)
        _ = junk.withUnsafeMutableBytes { pwrite(fd, $0.baseAddress, 16, off_t(segments[1].range.lower + 3)) }
        close(fd)
        try rig.restart()
        #expect(try rig.index.db.query("SELECT value FROM meta WHERE key='schema_version'").first?[0].text == "\(OfflineIndex.schemaVersion)")
        rig.fixture.clearLog()
        let first = segments[0].range, second = segments[1].range
        #expect(try rig.read(alpha, offset: Int(first.lower), length: 4096) == rig.source(alpha, offset: Int(first.lower), length: 4096))
        #expect(rig.fixture.downloadRequests.isEmpty, "a segment whose SHA-256 matches was fetched again")
        #expect(try rig.read(alpha, offset: Int(second.lower), length: 4096) == rig.source(alpha, offset: Int(second.lower), length: 4096))
        let requested = RangeSet(rig.fixture.downloadRequests.compactMap(\.requestedRange))
        #expect(requested.contains(ByteRange(second.lower + 3, second.lower + 19)), "requested \(requested)")
    }

    @Test(.enabled(if: geteuid() == 0, "a tmpfs needs root; CI runs as root"))
    func aFullDiskParksDownloadsAndKeepsEveryCommittedByte() throws {
        let scratch = Scratch("pin-enospc")
        let small = scratch.sub("small")
        let mount = try runProcess("/bin/mount", ["-t", "tmpfs", "-o", "size=14m", "tmpfs", small])
        try #require(mount.code == 0, "\(mount.stderr)")
        defer { _ = try? runProcess("/bin/umount", ["-l", small]) }
        try FileManager.default.createDirectory(atPath: small + "/data", withIntermediateDirectories: true)
        let rig = try EngineRig("pin-enospc", dataDir: small + "/data")
        // Each file fits on its own when it starts; together (about 21 MiB) they cannot.
        try rig.pin("test/Movies")
        try rig.pin(show)
        var outcomes: [String: DownloadRow] = [:]
        for rel in expectedTree(rig.media).keys { outcomes[rel] = try #require(try rig.settled(rel)) }
        let parked = outcomes.values.filter { $0.status == .paused && $0.reason == .storageFull }
        #expect(!parked.isEmpty, "\(outcomes.values.map { "\($0.status) \($0.reason?.sentence ?? "")" })")
        for (rel, row) in outcomes {
            #expect(row.status == .unverified || (row.status == .paused && row.reason == .storageFull), "\(rel): \(row.status) \(row.reason?.sentence ?? "")")
            for r in row.present.ranges {  // every committed byte is the source's byte
                #expect(
                    try pread(path: rig.partialPath(rel), offset: Int(r.lower), length: Int(r.count))
                        == pread(path: expectedTree(rig.media)[rel]!, offset: Int(r.lower), length: Int(r.count)), "\(rel) \(r)")
            }
        }
        // A person's retry is tried once even on a full disk (not refused); here it parks again.
        let parkedFile = try #require(outcomes.first { $0.value.status == .paused }?.key)
        try rig.fs.setxattr(try rig.file(parkedFile).ino, name: "user.labstream.action", value: Array("retry".utf8))
        let retried = try #require(try rig.settled(parkedFile))
        #expect(retried.status == .paused && retried.reason == .storageFull, "\(retried.status) \(retried.reason?.sentence ?? "")")
        // The disk filled to the last byte by something else: cancel still frees space.
        let filler = small + "/filler"
        let fd = open(filler, O_WRONLY | O_CREAT, 0o600)
        let block = [UInt8](repeating: 1, count: 1 << 16)
        while block.withUnsafeBytes({ write(fd, $0.baseAddress, $0.count) }) > 0 {}
        close(fd)
        // The hardest case: the file with the fewest stored bytes frees almost nothing; the
        // index still records the cancel (its reserve).
        let stored = try #require(outcomes.filter { !$0.value.present.isEmpty }.min { $0.value.present.byteCount < $1.value.present.byteCount }?.key)
        let storedPartial = try rig.partialPath(stored)
        try rig.fs.setxattr(try rig.file(stored).ino, name: "user.labstream.action", value: Array("cancel".utf8))
        #expect(try rig.index.download(try rig.file(stored).tree.key)?.present.isEmpty == true)
        // Its bytes are freed: the partial holds no block. (Not "the disk has room afterwards":
        // the free-space watch looks at once after a cancel and may resume a parked pin into it.)
        var st = stat()
        #expect(stat(storedPartial, &st) != 0 || st.st_blocks == 0, "\(storedPartial) keeps \(st.st_blocks) blocks")
        unlink(filler)
    }
}

/// Takes a current index back to schema 11 (`undoSchema11` on to 10).
let undoSchema17 = ["held_episodes", "held_bytes", "in_scope", "skipped"].map { "ALTER TABLE monitors DROP COLUMN \($0); " }.joined()
let undoSchema16 = undoSchema17 + "ALTER TABLE servers DROP COLUMN last_full_sync; "
let undoSchema15 = undoSchema16 + "ALTER TABLE downloads DROP COLUMN pause_cause; "
let undoSchema14 =
    undoSchema15 + ["inserted", "updated", "deleted"].map { "DROP TRIGGER documents_item_\($0); DROP TRIGGER documents_series_\($0); " }.joined()
    + "DROP TABLE documents; "
let undoSchema13 = undoSchema14 + "DROP TABLE item_extras; "
let undoSchema12 = undoSchema13 + "DROP TABLE side_assets; "
let undoSchema11 =
    undoSchema12
    + "DROP TABLE monitors; DROP TABLE monitored_episodes; DROP TABLE series_details; ALTER TABLE items DROP COLUMN played; ALTER TABLE items DROP COLUMN details; "

@Suite struct IndexMigrationTests {
    @Test func aVersion1IndexIsUpgradedAndItsUnverifiableRangesDropped() throws {
        let scratch = Scratch("migrate")
        let path = scratch.path + "/index.sqlite"
        let db = try SQLiteDatabase(path: path)
        try db.exec(
            """
            CREATE TABLE meta(key TEXT PRIMARY KEY, value TEXT NOT NULL);
            INSERT INTO meta VALUES('schema_version', '1');
            CREATE TABLE servers(name TEXT PRIMARY KEY, type TEXT NOT NULL, url TEXT NOT NULL, server_id TEXT, last_sync INTEGER);
            CREATE TABLE libraries(server TEXT NOT NULL, id TEXT NOT NULL, name TEXT NOT NULL, PRIMARY KEY(server, id));
            CREATE TABLE items(server TEXT NOT NULL, id TEXT NOT NULL, library TEXT NOT NULL, kind TEXT NOT NULL,
                title TEXT NOT NULL, year INTEGER, series_id TEXT, series_name TEXT, series_year INTEGER,
                season INTEGER, episode INTEGER, modified INTEGER NOT NULL, PRIMARY KEY(server, id));
            CREATE TABLE media_sources(server TEXT NOT NULL, item_id TEXT NOT NULL, id TEXT NOT NULL, name TEXT,
                container TEXT, size INTEGER NOT NULL, etag TEXT, tree_path TEXT NOT NULL, modified INTEGER NOT NULL,
                PRIMARY KEY(server, item_id, id));
            CREATE TABLE downloads(server TEXT NOT NULL, item_id TEXT NOT NULL, source_id TEXT NOT NULL,
                status TEXT NOT NULL, attempt INTEGER NOT NULL, validator TEXT, total INTEGER NOT NULL,
                ranges TEXT NOT NULL, partial TEXT NOT NULL, reason TEXT, awaiting_validation INTEGER NOT NULL DEFAULT 0,
                updated INTEGER NOT NULL, PRIMARY KEY(server, item_id, source_id));
            INSERT INTO media_sources VALUES('s', 'i', 'm', NULL, 'mkv', 100, NULL, 's/Movies/A/A.mkv', 0);
            INSERT INTO downloads VALUES('s', 'i', 'm', 'partial', 1, NULL, 100, '0-50', 'partials/x.part', NULL, 0, 0);
            """)
        let index = try OfflineIndex(path: path)
        #expect(try index.db.query("SELECT value FROM meta WHERE key='schema_version'").first?[0].text == "\(OfflineIndex.schemaVersion)")
        #expect(try index.treeFiles().first?.orphaned == false)
        #expect(try index.treeFiles().count == 1)  // the catalog survives
        let row = try #require(try index.download(FileKey(server: "s", itemId: "i", sourceId: "m")))
        #expect(row.present.isEmpty && !row.pinned && row.reason?.sentence.contains("upgraded") == true)
    }

    @Test func aVersion2IndexIsUpgradedKeepingItsVerifiedRanges() throws {
        let scratch = Scratch("migrate2")
        let path = scratch.path + "/index.sqlite"
        do {
            let v3 = try OfflineIndex(path: path)
            let file = TreeFile(path: ["s", "M", "A", "A.mkv"], key: FileKey(server: "s", itemId: "i", sourceId: "m"), size: 100, modified: 0, etag: nil)
            try v3.replaceCatalog(
                server: .init(name: "s", type: "jellyfin", url: "u", serverId: nil, lastSync: nil),
                libraries: [
                    LibraryCatalog(id: "L", name: "M", items: [CatalogItem(id: "i", kind: .movie, title: "A", sources: [MediaSource(id: "m", size: 100)])])
                ],
                tree: [file], now: 1)
            var row = DownloadRow(
                key: file.key, status: .partial, attempt: AttemptID(1), validator: nil, total: 100,
                present: RangeSet([ByteRange(0, 50)]), partialPath: "partials/a.part")
            row.pinned = true
            try v3.saveDownload(row, committing: .init(range: ByteRange(0, 50), digest: "ab"), now: 1)
            // Turn it back into a version 2 index.
            try undoSchema18(v3.db)
            try v3.db.exec(
                undoSchema11 + """
                    DROP TABLE managed_entries; ALTER TABLE libraries DROP COLUMN left_out; ALTER TABLE items DROP COLUMN album; ALTER TABLE items DROP COLUMN album_artist; ALTER TABLE items DROP COLUMN disc; ALTER TABLE items DROP COLUMN track; ALTER TABLE items DROP COLUMN folders; ALTER TABLE media_sources DROP COLUMN remote_item; ALTER TABLE downloads DROP COLUMN checked;
                    ALTER TABLE downloads DROP COLUMN source_tag; ALTER TABLE downloads DROP COLUMN job; ALTER TABLE media_sources DROP COLUMN bitrate; DROP TABLE quarantine;
                    ALTER TABLE media_sources DROP COLUMN orphaned; ALTER TABLE segments RENAME COLUMN digest TO sha256;
                    UPDATE meta SET value='2' WHERE key='schema_version';
                    """)
        }
        let index = try OfflineIndex(path: path)
        let row = try #require(try index.download(FileKey(server: "s", itemId: "i", sourceId: "m")))
        #expect(row.present == RangeSet([ByteRange(0, 50)]) && row.pinned)  // v2 ranges have digests: kept
        #expect(try index.segments(row.key, attempt: row.attempt).count == 1)
        #expect(try index.treeFiles().count == 1)
    }

    /// v7 → v8: the catalog keeps its movies and episodes, and a track's placement is stored
    /// and read back once the index is upgraded.
    @Test func aVersion7IndexIsUpgradedAndKeepsTrackPlacement() throws {
        let scratch = Scratch("migrate7")
        let path = scratch.path + "/index.sqlite"
        let server = OfflineIndex.ServerRow(name: "s", type: "jellyfin", url: "u", serverId: nil, lastSync: nil)
        let movie = CatalogItem(id: "m", kind: .movie, title: "A", year: 2000, sources: [MediaSource(id: "ms", size: 10)])
        do {
            let v8 = try OfflineIndex(path: path)
            let libraries = [LibraryCatalog(id: "L", name: "Movies", items: [movie])]
            try v8.replaceCatalog(server: server, libraries: libraries, tree: TreeBuilder.build(server: "s", libraries: libraries), now: 1)
            try undoSchema18(v8.db)
            try v8.db.exec(
                undoSchema11 + """
                    DROP TABLE managed_entries; ALTER TABLE libraries DROP COLUMN left_out; ALTER TABLE items DROP COLUMN album; ALTER TABLE items DROP COLUMN album_artist; ALTER TABLE items DROP COLUMN disc;
                    ALTER TABLE items DROP COLUMN track; ALTER TABLE items DROP COLUMN folders; UPDATE meta SET value='7' WHERE key='schema_version';
                    """)
        }
        let index = try OfflineIndex(path: path)
        #expect(try index.db.query("SELECT value FROM meta WHERE key='schema_version'").first?[0].text == "\(OfflineIndex.schemaVersion)")
        #expect(try index.catalog(server: "s").first?.items == [movie])
        let song = CatalogItem(
            id: "t", kind: .track, title: "Song", year: 2001, album: "Album", albumArtist: "Band", discNumber: 2, trackNumber: 3,
            sources: [MediaSource(id: "ts", container: "flac", size: 20)])
        let home = CatalogItem(id: "o", kind: .other, title: "Clip", folders: ["2019", "Trip"], sources: [MediaSource(id: "os", container: "mp4", size: 30)])
        let libraries = [LibraryCatalog(id: "L", name: "Mixed", items: [movie, song, home])]
        try index.replaceCatalog(server: server, libraries: libraries, tree: TreeBuilder.build(server: "s", libraries: libraries), now: 2)
        let stored = try #require(try index.catalog(server: "s").first)
        #expect(Set(stored.items.map(\.id)) == ["m", "t", "o"])
        #expect(stored.items.first { $0.id == "t" } == song && stored.items.first { $0.id == "o" } == home)
        #expect(try index.treeFiles().first { $0.key.itemId == "t" }?.kind == .track)
    }

    /// v10 → v11: the catalog and pins are kept; items read back unwatched until a refresh says
    /// otherwise; monitors and what they did are stored and read back.
    /// A v11 index (before side assets) opens, keeps its rows, and stores side assets after.
    @Test func aVersion11IndexIsUpgradedAndStoresSideAssets() throws {
        let scratch = Scratch("migrate11")
        let path = scratch.path + "/index.sqlite"
        let server = OfflineIndex.ServerRow(name: "s", type: "jellyfin", url: "u", serverId: nil, lastSync: nil)
        let film = CatalogItem(
            id: "m", kind: .movie, title: "Film", sources: [MediaSource(id: "ms", container: "mkv", size: 10)],
            details: ItemDetails(plot: "p", assets: [RemoteAsset(kind: .poster, ref: "Primary", tag: "t1")]))
        let libraries = [LibraryCatalog(id: "L", name: "Movies", items: [film])]
        do {
            let v12 = try OfflineIndex(path: path)
            try v12.replaceCatalog(server: server, libraries: libraries, tree: TreeBuilder.build(server: "s", libraries: libraries), now: 1)
            try undoSchema18(v12.db)
            try v12.db.exec(undoSchema12 + "UPDATE meta SET value='11' WHERE key='schema_version';")
        }
        let index = try OfflineIndex(path: path)
        #expect(try index.db.query("SELECT value FROM meta WHERE key='schema_version'").first?[0].text == "\(OfflineIndex.schemaVersion)")
        #expect(try index.catalog(server: "s").first?.items == [film])
        #expect(try index.sideAssets().isEmpty)
        let key = SideAssetKey(server: "s", itemId: "m", asset: "poster:Primary")
        let row = OfflineIndex.SideAssetRow(
            key: key, state: .stored, tag: "t1", file: "side/x.jpg", fileExtension: "jpg", size: 5, reason: nil,
            attempts: 1, retryAt: 0)
        try index.saveSideAsset(row)
        #expect(try index.sideAssets(server: "s") == [row])
        // A row pointing outside `side/` is not believed.
        var hostile = row
        hostile.file = "../../etc/passwd"
        try index.saveSideAsset(hostile)
        let read = try #require(try index.sideAssets().first)
        #expect(read.state == .failed && read.file == nil)
    }

    /// A v12 index opens with its side assets and catalog, and keeps what a server told item by
    /// item (a Plex film's subtitles and chapters) across a catalog rewrite; stored side assets
    /// count in the cache size.
    /// v16 → v17: a monitor keeps its settings and has no outcome until its next evaluation,
    /// whose counts and skipped codes are then read back.
    @Test func aVersion16IndexIsUpgradedAndKeepsWhatItsMonitorsSkipped() throws {
        let scratch = Scratch("migrate16")
        let path = scratch.path + "/index.sqlite"
        let monitor = SeriesMonitor(server: "s", seriesId: "show", mode: .latestSeason, deleteWatched: true, maxStorage: 500, created: 7)
        do {
            let v17 = try OfflineIndex(path: path)
            try v17.saveMonitor(monitor)
            try undoSchema18(v17.db)
            try v17.db.exec(undoSchema17 + "UPDATE meta SET value='16' WHERE key='schema_version';")
        }
        let index = try OfflineIndex(path: path)
        #expect(try index.db.query("SELECT value FROM meta WHERE key='schema_version'").first?[0].text == "\(OfflineIndex.schemaVersion)")
        #expect(try index.monitors() == [monitor])
        #expect(try index.monitorOutcome(server: "s", series: "show") == nil)
        let outcome = MonitorOutcome(episodes: 0, bytes: 0, inScope: 3, skipped: [.watched: 2, .declined: 1])
        try index.saveMonitorOutcome(server: "s", series: "show", outcome)
        #expect(try index.monitorOutcome(server: "s", series: "show") == outcome)
        #expect(try index.db.query("SELECT skipped FROM monitors").first?[0].text == "watched=2 declined=1")
    }

    /// v15 → v16: a server's last whole read is unknown, so its next scheduled sync reads
    /// everything; what the row held stays.
    @Test func aVersion15IndexIsUpgradedAndItsNextScheduledSyncReadsEverything() throws {
        let scratch = Scratch("migrate15")
        let path = scratch.path + "/index.sqlite"
        do {
            let v16 = try OfflineIndex(path: path)
            let movie = CatalogItem(id: "a", kind: .movie, title: "A", sources: [MediaSource(id: "a", size: 1)])
            let libraries = [LibraryCatalog(id: "L", name: "Movies", items: [movie])]
            try v16.replaceCatalog(
                server: .init(name: "home", type: "jellyfin", url: "http://h", serverId: nil, lastSync: nil), libraries: libraries,
                tree: TreeBuilder.build(server: "home", libraries: libraries), now: 1000, full: true)
            try undoSchema18(v16.db)
            try v16.db.exec(undoSchema16 + "UPDATE meta SET value='15' WHERE key='schema_version';")
        }
        let index = try OfflineIndex(path: path)
        #expect(try index.db.query("SELECT value FROM meta WHERE key='schema_version'").first?[0].text == "\(OfflineIndex.schemaVersion)")
        let row = try #require(try index.servers().first)
        #expect(row.name == "home" && row.lastSync == 1000 && row.lastFullSync == nil)
        #expect(FullRefreshPolicy.due(lastFull: row.lastFullSync, now: 1001))
        #expect(try index.treeFiles().count == 1)
    }

    /// v14 → v15: a paused row gets the cause its sentence names; the fill's decisions use it.
    @Test func aVersion14IndexIsUpgradedAndItsPausesGetTheirCauses() throws {
        let scratch = Scratch("migrate14")
        let path = scratch.path + "/index.sqlite"
        func row(_ id: String, _ status: DownloadStatus, _ reason: StatusReason?) -> DownloadRow {
            DownloadRow(
                key: FileKey(server: "home", itemId: id, sourceId: "m"), status: status, attempt: AttemptID(1), validator: nil, total: 10,
                present: RangeSet(), partialPath: "partials/\(id).part", reason: reason, pinned: true)
        }
        let rows = [
            row("full", .paused, StatusReason.storageFull), row("user", .paused, StatusReason.pausedByUser),
            row("away", .paused, StatusReason.serverUnavailable), row("refused", .paused, StatusReason.signInRefused(server: "home")),
            row("odd", .paused, .said("paused by a build long gone")), row("failed", .failed, StatusReason.storageFull)
        ]
        do {
            let v15 = try OfflineIndex(path: path)
            for r in rows { try v15.saveDownload(r, now: 1) }
            try undoSchema18(v15.db)
            try v15.db.exec(undoSchema15 + "UPDATE meta SET value='14' WHERE key='schema_version';")
        }
        let index = try OfflineIndex(path: path)
        #expect(try index.db.query("SELECT value FROM meta WHERE key='schema_version'").first?[0].text == "\(OfflineIndex.schemaVersion)")
        let causes = Dictionary(try index.downloads().map { ($0.key.itemId, $0.pauseCause?.rawValue ?? "none") }, uniquingKeysWith: { a, _ in a })
        #expect(
            causes == [
                "full": "storage_full", "user": "paused_by_user", "away": "server_unavailable", "refused": "sign_in_refused", "odd": "none", "failed": "none"
            ])
        // Saved and read back as it is; a removed server's waiting files are paused for that.
        var queued = row("queued", .queued, nil)
        try index.saveDownload(queued, now: 2)
        #expect(try index.download(queued.key)?.pauseCause == nil)
        queued.park(.serverUnavailable)
        try index.saveDownload(queued, now: 3)
        #expect(try index.download(queued.key)?.pauseCause == .serverUnavailable)
        var waiting = row("waiting", .queued, nil)
        try index.saveDownload(waiting, now: 4)
        try index.removeServer("home")
        waiting = try #require(try index.download(waiting.key))
        #expect(waiting.status == .paused && waiting.pauseCause == .serverRemoved && waiting.reason == StatusReason.serverRemoved)
    }

    @Test func aVersion12IndexIsUpgradedAndKeepsItemExtras() throws {
        let scratch = Scratch("migrate12")
        let path = scratch.path + "/index.sqlite"
        let server = OfflineIndex.ServerRow(name: "s", type: "plex", url: "u", serverId: nil, lastSync: nil)
        let film = CatalogItem(id: "m", kind: .movie, title: "Film", modified: 7, sources: [MediaSource(id: "ms", container: "mkv", size: 10)])
        let libraries = [LibraryCatalog(id: "L", name: "Movies", items: [film])]
        let stored = OfflineIndex.SideAssetRow(
            key: SideAssetKey(server: "s", itemId: "m", asset: "poster:/t"), state: .stored, tag: "t", file: "side/p.jpg",
            fileExtension: "jpg", size: 500, reason: nil, attempts: 0, retryAt: 0)
        do {
            let v13 = try OfflineIndex(path: path)
            try v13.replaceCatalog(server: server, libraries: libraries, tree: TreeBuilder.build(server: "s", libraries: libraries), now: 1)
            try v13.saveSideAsset(stored)
            try undoSchema18(v13.db)
            try v13.db.exec(undoSchema13 + "UPDATE meta SET value='12' WHERE key='schema_version';")
        }
        let index = try OfflineIndex(path: path)
        #expect(try index.db.query("SELECT value FROM meta WHERE key='schema_version'").first?[0].text == "\(OfflineIndex.schemaVersion)")
        #expect(try index.sideAssets() == [stored])
        #expect(try index.itemExtras(server: "s").isEmpty)
        let extras = ItemDetails(
            chapters: [.init(start: 0, name: "Opening")],
            assets: [RemoteAsset(kind: .subtitle, ref: "/library/streams/9", tag: "/library/streams/9", sourceId: "1", language: "eng", codec: "srt")])
        try index.saveItemExtras(server: "s", itemId: "m", tag: "7", details: extras)
        try index.saveItemExtras(server: "s", itemId: "n", tag: "3", details: nil)
        // A sync rewrites the catalog; what was told item by item stays.
        try index.replaceCatalog(server: server, libraries: libraries, tree: TreeBuilder.build(server: "s", libraries: libraries), now: 2)
        let read = try index.itemExtras(server: "s")
        #expect(read["m"]?.tag == "7" && read["m"]?.details == extras)
        #expect(read["n"]?.tag == "3" && read["n"]?.details == nil)
        var failed = stored
        failed.key.asset = "fanart:/a"
        failed.state = .failed
        try index.saveSideAsset(failed)
        #expect(try index.storedSideAssetBytes() == 500)
        try index.removeServer("s")
        #expect(try index.itemExtras(server: "s").isEmpty)
    }

    @Test func aVersion10IndexIsUpgradedAndKeepsMonitors() throws {
        let scratch = Scratch("migrate10")
        let path = scratch.path + "/index.sqlite"
        let server = OfflineIndex.ServerRow(name: "s", type: "jellyfin", url: "u", serverId: nil, lastSync: nil)
        let episode = CatalogItem(
            id: "e", kind: .episode, title: "Pilot", seriesId: "show", seriesName: "Show", seriesYear: 2020, seasonNumber: 1,
            episodeNumber: 1, sources: [MediaSource(id: "es", container: "mkv", size: 10)], played: true)
        let libraries = [LibraryCatalog(id: "L", name: "Shows", items: [episode])]
        do {
            let v11 = try OfflineIndex(path: path)
            try v11.replaceCatalog(server: server, libraries: libraries, tree: TreeBuilder.build(server: "s", libraries: libraries), now: 1)
            #expect(try v11.catalog(server: "s").first?.items.first?.played == true)
            try undoSchema18(v11.db)
            try v11.db.exec(undoSchema11 + "UPDATE meta SET value='10' WHERE key='schema_version';")
        }
        let index = try OfflineIndex(path: path)
        #expect(try index.db.query("SELECT value FROM meta WHERE key='schema_version'").first?[0].text == "\(OfflineIndex.schemaVersion)")
        var unwatched = episode
        unwatched.played = false
        #expect(try index.catalog(server: "s").first?.items == [unwatched])
        #expect(try index.monitors().isEmpty)
        let monitor = SeriesMonitor(
            server: "s", seriesId: "show", mode: .seasons([1, 2]), deleteWatched: true, maxStorage: 1 << 30,
            baseline: ["e", "x"], created: 5)
        try index.saveMonitor(monitor)
        #expect(try index.monitors(server: "s") == [monitor])
        try index.setMonitoredEpisode(server: "s", item: "e", .init(seriesId: "show", sourceId: "es", state: .declined))
        #expect(try index.monitoredEpisodes(server: "s")["e"]?.state == .declined)
        try index.removeMonitor(server: "s", series: "show")
        #expect(try index.monitors().isEmpty && index.monitoredEpisodes(server: "s").isEmpty)
    }

    /// v9 → v10: download rows are kept; the table of managed entries starts empty and keeps
    /// what it is given (an intent without an id, then the entry with its manifest).
    @Test func aVersion9IndexIsUpgradedAndKeepsManagedEntries() throws {
        let scratch = Scratch("migrate9")
        let path = scratch.path + "/index.sqlite"
        let key = FileKey(server: "s", itemId: "movie:a", sourceId: "7")
        do {
            let v10 = try OfflineIndex(path: path)
            var row = DownloadRow(
                key: key, status: .queued, attempt: AttemptID(1), validator: nil, total: 100, present: RangeSet(), partialPath: "partials/a.part")
            row.pinned = true
            try v10.saveDownload(row, now: 1)
            try undoSchema18(v10.db)
            try v10.db.exec(undoSchema11 + "DROP TABLE managed_entries; UPDATE meta SET value='9' WHERE key='schema_version';")
        }
        let index = try OfflineIndex(path: path)
        #expect(try index.db.query("SELECT value FROM meta WHERE key='schema_version'").first?[0].text == "\(OfflineIndex.schemaVersion)")
        #expect(try index.pinnedManaged(server: "s").map(\.key) == [key])
        #expect(try index.managedEntries(server: "s").isEmpty)
        try index.saveManagedEntry(ManagedEntry(itemId: key.itemId, sourceId: key.sourceId, id: nil), server: "s")
        #expect(try index.managedEntries(server: "s")[key.itemId]?.id == nil)
        let entry = ManagedEntry(
            itemId: key.itemId, sourceId: key.sourceId, id: "dl_1", revision: 2, status: "ready", reported: .downloading,
            reportedAt: 1_700_000_000_123, manifest: Array("{\"download_id\":\"dl_1\"}".utf8))
        try index.saveManagedEntry(entry, server: "s")
        #expect(try index.managedEntries(server: "s") == [key.itemId: entry])
        try index.removeManagedEntry(server: "s", item: key.itemId)
        #expect(try index.managedEntries(server: "s").isEmpty)
    }

    @Test func aVersion3IndexIsUpgradedAndItsRowsAdoptTheCurrentSourceTag() throws {
        let scratch = Scratch("migrate3")
        let layout = DataLayout(root: scratch.path)
        let file = TreeFile(path: ["s", "M", "A", "A.mkv"], key: FileKey(server: "s", itemId: "i", sourceId: "m"), size: 100, modified: 0, etag: "v1")
        do {
            let v4 = try OfflineIndex(path: layout.indexPath)
            let row = DownloadRow(
                key: file.key, status: .partial, attempt: AttemptID(1), validator: nil, total: 100,
                present: RangeSet([ByteRange(0, 50)]), partialPath: "partials/a.part", sourceTag: "v1")
            try v4.saveDownload(row, committing: .init(range: ByteRange(0, 50), digest: "ab"), now: 1)
            try undoSchema18(v4.db)
            try v4.db.exec(
                undoSchema11 + """
                    DROP TABLE managed_entries; ALTER TABLE libraries DROP COLUMN left_out; ALTER TABLE items DROP COLUMN album; ALTER TABLE items DROP COLUMN album_artist; ALTER TABLE items DROP COLUMN disc; ALTER TABLE items DROP COLUMN track; ALTER TABLE items DROP COLUMN folders; ALTER TABLE media_sources DROP COLUMN remote_item; ALTER TABLE downloads DROP COLUMN checked;
                    ALTER TABLE downloads DROP COLUMN source_tag; ALTER TABLE downloads DROP COLUMN job; ALTER TABLE media_sources DROP COLUMN bitrate; DROP TABLE quarantine;
                    ALTER TABLE segments RENAME COLUMN digest TO sha256; UPDATE meta SET value='3' WHERE key='schema_version';
                    """)
        }
        let index = try OfflineIndex(path: layout.indexPath)
        let row = try #require(try index.download(file.key))
        #expect(row.present == RangeSet([ByteRange(0, 50)]) && row.sourceTag == nil)  // kept: nothing says it changed
        #expect(!row.isStale(for: file))
        var tagged = row
        tagged.sourceTag = "v1"
        #expect(!tagged.isStale(for: file))
        var newer = file
        newer.etag = "v2"
        #expect(tagged.isStale(for: newer))
        newer.etag = nil
        newer.size = 101
        #expect(tagged.isStale(for: newer))
    }

    @Test func removingAServerPausesItsDownloadsAndKeepsThem() throws {
        let scratch = Scratch("remove-server")
        let layout = DataLayout(root: scratch.path)
        let index = try OfflineIndex(path: layout.indexPath)
        let file = TreeFile(path: ["s", "Movies", "A", "A.mkv"], key: FileKey(server: "s", itemId: "i", sourceId: "m"), size: 100, modified: 0, etag: nil)
        _ = try index.setPinned(true, files: [file], layout: layout, now: 1)
        #expect(try index.download(file.key)?.status == .queued)
        try index.removeServer("s")
        let row = try #require(try index.download(file.key))
        #expect(row.status == .paused && row.pinned && row.reason?.sentence.contains("server removed") == true)
    }

    @Test func aNewerOrForeignIndexIsRefusedAndLeftAlone() throws {
        let scratch = Scratch("future")
        let path = scratch.path + "/index.sqlite"
        let db = try SQLiteDatabase(path: path)
        try db.exec("CREATE TABLE meta(key TEXT PRIMARY KEY, value TEXT NOT NULL); INSERT INTO meta VALUES('schema_version', '99');")
        #expect { _ = try OfflineIndex(path: path) } throws: { ($0 as? LabstreamError)?.userMessage.contains("schema 99") == true }
        let foreign = scratch.path + "/other.sqlite"
        try SQLiteDatabase(path: foreign).exec("CREATE TABLE photos(id INTEGER)")
        #expect { _ = try OfflineIndex(path: foreign) } throws: { ($0 as? LabstreamError)?.userMessage.contains("not a Labstream index") == true }
        let garbage = scratch.path + "/garbage.sqlite"
        writeRandomFile(garbage, size: 8192, seed: 9)
        #expect(throws: LabstreamError.self) { _ = try OfflineIndex(path: garbage) }
        #expect(FileManager.default.fileExists(atPath: garbage) && FileManager.default.fileExists(atPath: foreign))
    }
}

@Suite struct ReconcileTests {
    @Test func orphansAreSetAsideVanishedFilesResetDamagedRowsAreQuarantined() throws {
        let rig = try EngineRig("reconcile")
        let alpha = "test/Movies/Alpha (2001)/Alpha (2001).mkv", beta = "test/Movies/Beta (2002)/Beta (2002).mp4"
        _ = try rig.readAndSettle(alpha, offset: 0, length: 10)
        _ = try rig.readAndSettle(beta, offset: 0, length: 10)
        rig.transfers.stop()
        let orphan = rig.layout.partialsDir + "/0123456789abcdef0123456789abcdef.part"
        writeRandomFile(orphan, size: 100, seed: 1)
        // A cleared partial a crash caught before it took its name.
        let fresh = try rig.partialPath(alpha) + ".fresh"
        writeRandomFile(fresh, size: 100, seed: 3)
        try FileManager.default.removeItem(atPath: try rig.partialPath(beta))
        // A damaged row (absolute partial path) keeps its file: nothing is guessed.
        let damagedFile = rig.layout.partialsDir + "/damaged.part"
        writeRandomFile(damagedFile, size: 100, seed: 2)
        try rig.index.db.run(
            "INSERT INTO downloads VALUES('test','x','y','partial',1,NULL,100,'0-100','/etc/passwd',NULL,0,0,0,NULL,NULL,NULL,NULL,NULL,'original','')")
        try rig.index.db.run(
            "INSERT INTO downloads VALUES('test','x','z','partial',1,NULL,100,'0-100','partials/damaged.part',NULL,0,0,0,NULL,NULL,NULL,NULL,NULL,'original','')"
        )
        try rig.index.db.run("UPDATE downloads SET ranges='garbage' WHERE item_id='x' AND source_id='z'")

        let report = try Reconcile.run(index: rig.index, layout: rig.layout, now: 1) { _ in }
        // A file no row owns is set aside, never deleted; the empty cleared partial goes.
        #expect(report.setAside == ["0123456789abcdef0123456789abcdef.part"])
        #expect(!FileManager.default.fileExists(atPath: orphan) && !FileManager.default.fileExists(atPath: fresh))
        #expect(FileManager.default.contents(atPath: rig.layout.orphansDir + "/0123456789abcdef0123456789abcdef.part")?.count == 100)
        #expect(FileManager.default.fileExists(atPath: try rig.partialPath(alpha)))
        #expect(FileManager.default.fileExists(atPath: damagedFile) && FileManager.default.fileExists(atPath: "/etc/passwd"))
        #expect(Set(report.malformed) == ["test/x/y", "test/x/z"])
        // Quarantined as they were, with why; gone from the live rows; their files kept.
        let quarantined = try rig.index.quarantined()
        #expect(quarantined.map(\.reason).sorted() == ["partial path outside the data directory", "unreadable range map"])
        #expect(quarantined.contains { $0.row.contains("partial=/etc/passwd") } && quarantined.contains { $0.row.contains("ranges=garbage") })
        #expect(try rig.index.db.query("SELECT count(*) FROM downloads WHERE item_id='x'").first?.first?.int == 0)
        let again = try Reconcile.run(index: rig.index, layout: rig.layout, now: 2) { _ in }
        #expect(again.malformed.isEmpty && again.setAside.isEmpty && FileManager.default.fileExists(atPath: damagedFile))
        let betaKey = try rig.file(beta).tree.key
        #expect(report.vanished == [betaKey])
        let reset = try #require(try rig.index.download(betaKey))
        #expect(reset.present.isEmpty && reset.attempt.rawValue == 2)
        #expect(try rig.index.download(try rig.file(alpha).tree.key)?.present.isEmpty == false)
    }
}

@Suite struct EvictionTests {
    @Test func theCacheStaysUnderItsCapWithoutTouchingPinnedOrOpenFiles() throws {
        // 6 MiB: beta fits beside the pinned and the open file; pilot then needs beta's room.
        let rig = try EngineRig("evict") { $0.budget.maxSize = Int64(6 * MiB) }
        let beta = "test/Movies/Beta (2002)/Beta (2002).mp4"  // 3 MiB
        let gamma = "test/Movies/Gamma/Gamma.mkv"  // 0.7 MiB
        let pilot = "test/Shows/Show (2020)/Season 01/Show (2020) - S01E01 - Pilot.mkv"  // 2 MiB
        let second = "test/Shows/Show (2020)/Season 01/Show (2020) - S01E02 - Second.mp4"  // 2 MiB, pinned
        try rig.pin(second)
        #expect(try rig.settled(second)?.status == .unverified)
        // Read beta while keeping gamma open: the cap forces evictions of closed, unpinned copies only.
        let gammaFile = try rig.file(gamma)
        let held = try rig.fs.open(gammaFile.ino, writeRequested: false)
        _ = try rig.fs.read(handle: held, offset: 0, size: 700 * 1024)
        _ = try rig.readAndSettle(beta, offset: 0, length: 3 * MiB)
        _ = try rig.readAndSettle(pilot, offset: 0, length: 2 * MiB)
        let betaKey = try rig.file(beta).tree.key
        let underCap = try rig.waitUntil {
            let used = try rig.index.downloads().reduce(Int64(0)) { $0 + $1.present.byteCount }
            let betaGone = try rig.index.download(betaKey)?.present.isEmpty ?? false
            return used <= Int64(6 * MiB) || betaGone
        }
        #expect(underCap)
        #expect(try rig.index.download(try rig.file(beta).tree.key)?.present.isEmpty == true)  // least recently used
        #expect(try rig.index.download(try rig.file(second).tree.key)?.present.byteCount == Int64(2 * MiB))  // pinned
        #expect(try rig.index.download(gammaFile.tree.key)?.present.isEmpty == false)  // open
        #expect(try rig.fs.read(handle: held, offset: 0, size: 4096) == rig.source(gamma, offset: 0, length: 4096))
        #expect(try rig.index.download(try rig.file(beta).tree.key)?.reason?.sentence.contains("evicted") == true)
        rig.fs.release(handle: held)
        // An evicted file reads correctly again, from the server.
        #expect(try rig.read(beta, offset: 0, length: 4096) == rig.source(beta, offset: 0, length: 4096))
    }
}
