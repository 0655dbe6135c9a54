import CLinux
import Foundation
import LabstreamCore
import LabstreamDemo
import LabstreamFixture
import LabstreamStore
import Testing

/// Copies at a capped quality come from the server's live transcode: forward-only, restarted
/// from byte 0 after an interruption, the server's encoding always stopped, the intent to stop
/// it journaled beside the index so a crash cannot lose it.
@Suite(.serialized) struct LiveForwardTests {
    static func clipCatalog(_ dir: String) -> FixtureCatalog {
        let clip = dir + "/clip.mkv"
        try? DemoMedia.generate(path: clip, seconds: 6, size: "640x360")
        return FixtureCatalog(movies: [.init(title: "Clip", year: 2020, file: clip, container: "mkv")], series: [])
    }

    static let original = "test/Movies/Clip (2020)/Clip (2020).mkv"
    static let copy = "test/Movies/Clip (2020)/Clip (2020) - 2mbps.mkv"
    /// Plex's download queue makes MP4 whatever was asked: the copy is named by its bytes.
    static func copy(_ kind: ServerFixture.Kind) -> String { kind == .plex ? "test/Movies/Clip (2020)/Clip (2020) - 2mbps.mp4" : copy }

    func journal(_ m: MountedLabstream) throws -> [CleanupJournal.Intent] {
        try CleanupJournal(path: m.dataDir + "/cleanup-journal.json").pending
    }

    /// The index row of the clip's copy at another quality.
    func copyRow(_ m: MountedLabstream) throws -> DownloadRow {
        let index = try OfflineIndex(path: m.dataDir + "/index.sqlite")
        let key = try #require(try index.treeFiles().first { $0.path.last == "Clip (2020).mkv" }?.key)
        return try #require(try index.derivedCopies(of: key).first)
    }

    /// The first server job (Emby Convert job 100, Plex queue item 500) was cancelled on the
    /// server and nothing is left in the cleanup journal.
    func firstJobCleanedUp(_ m: MountedLabstream, _ kind: ServerFixture.Kind) -> Bool {
        eventually { kind == .emby ? m.fixture.cancelledSyncJobs == [100] : m.fixture.removedQueueItems == [500] }
            && eventually { (try? journal(m).isEmpty) ?? false }
    }

    @Test(arguments: [ServerFixture.Kind.jellyfin])
    func aLiveCopyCutMidwayRestartsFromZeroAndStopsEveryEncoding(kind: ServerFixture.Kind) throws {
        let m = try MountedLabstream("live-\(kind)", kind: kind, catalog: Self.clipCatalog, probe: true)
        // Each spec's own query names: camelCase for Jellyfin, PascalCase for Emby.
        func name(_ camel: String) -> String { kind == .jellyfin ? camel : camel.prefix(1).uppercased() + camel.dropFirst() }
        try m.mount()
        #expect(!FileManager.default.fileExists(atPath: m.path(Self.copy)))
        m.fixture.inject(.dropAfter(40_000), pathPrefix: "/Videos/", times: 1)
        let pin = try m.cli(["pin", "--quality", "2mbps", "--wait", m.path(Self.original)])
        #expect(pin.code == 0, "\(pin.stdout) \(pin.stderr)")

        let streams = m.fixture.streamRequests
        try #require(streams.count == 2, "\(streams.map(\.path))")
        // Forward-only: no Range, a new play session each time, the first cut short.
        #expect(streams.allSatisfy { $0.range == nil && $0.authorized && $0.query[name("videoBitRate")] != nil })
        let sessions = streams.compactMap { $0.query[name("playSessionId")] }
        #expect(Set(sessions).count == 2)
        #expect(streams[0].bytesSent < streams[1].bytesSent)
        // Both encodings were stopped, and nothing is left to clean up.
        #expect(Set(m.fixture.stoppedSessions) == Set(sessions))
        #expect(try journal(m).isEmpty)

        // The finished copy sits beside the original, whole, proven playable.
        let size = try #require(try FileManager.default.attributesOfItem(atPath: m.path(Self.copy))[.size] as? Int64)
        #expect(size == streams[1].bytesSent)
        #expect(StatusCommandXattr.get(m.path(Self.copy), "state") == "complete")
        #expect(StatusCommandXattr.get(m.path(Self.original), "copies") == "2mbps=complete")
        #expect(StatusCommandXattr.get(m.path(Self.original), "state") == "not-local")  // the original was not fetched
        let probe = try runProcess("/usr/bin/ffprobe", ["-v", "error", "-show_entries", "format=format_name", "-of", "csv=p=0", m.path(Self.copy)])
        #expect(probe.code == 0 && probe.stdout.contains("matroska"), "\(probe.stderr)")
        #expect(m.fixture.downloadRequests.isEmpty)

        // Unpinning the original unpins its copy; the copy stays readable.
        #expect(try m.cli(["unpin", m.path(Self.original)]).code == 0)
        #expect(StatusCommandXattr.get(m.path(Self.copy), "pinned") == "0")
        try m.unmount()
    }

    /// A live copy is written from byte 0 into an empty file: bytes an earlier, longer try left
    /// in the row's partial (here 4 MiB of 0x5A, more than the whole copy) are not part of it,
    /// on disk, in what the probe checked, or in what a reader of the mount gets.
    @Test func aLiveCopyKeepsNothingOfALongerEarlierTry() throws {
        let m = try MountedLabstream("live-tail", kind: .jellyfin, catalog: Self.clipCatalog, probe: true)
        try m.mount()
        let index = try OfflineIndex(path: m.dataDir + "/index.sqlite")
        let original = try #require(try index.treeFiles().first { $0.path.last == "Clip (2020).mkv" }?.key)
        let partial =
            m.dataDir + "/" + DataLayout(root: m.dataDir).partialRelativePath(for: DerivedCopy.key(of: original, quality: .capped(megabitsPerSecond: 2)))
        try FileManager.default.createDirectory(atPath: m.dataDir + "/partials", withIntermediateDirectories: true)
        try Data(repeating: 0x5A, count: 4 << 20).write(to: URL(fileURLWithPath: partial))

        let pin = try m.cli(["pin", "--quality", "2mbps", "--wait", m.path(Self.original)])
        #expect(pin.code == 0, "\(pin.stdout) \(pin.stderr)")
        let sent = try #require(m.fixture.streamRequests.last?.bytesSent)
        #expect(sent > 0 && sent < 4 << 20)
        #expect(try FileManager.default.attributesOfItem(atPath: partial)[.size] as? Int64 == sent)
        let read = try Data(contentsOf: URL(fileURLWithPath: m.path(Self.copy)))
        #expect(Int64(read.count) == sent)
        #expect(!read.suffix(64).allSatisfy { $0 == 0x5A })
        #expect(StatusCommandXattr.get(m.path(Self.copy), "state") == "complete")
        try m.unmount()
    }

    /// A remux keeps the original's streams in Matroska: for an MPEG-TS recording, Jellyfin and
    /// Emby both stream it live with the codecs copied (the seed's "compatible remux").
    @Test(arguments: [ServerFixture.Kind.jellyfin, .emby])
    func aRemuxComesLiveWithItsStreamsCopied(kind: ServerFixture.Kind) throws {
        let m = try MountedLabstream(
            "remux-\(kind)", kind: kind,
            catalog: { dir in
                let recording = dir + "/recording.ts"
                try? DemoMedia.generate(path: recording, seconds: 4, size: "320x240")
                return FixtureCatalog(movies: [.init(title: "Recording", year: 2021, file: recording, container: "ts")], series: [])
            }, probe: true)
        func name(_ camel: String) -> String { kind == .jellyfin ? camel : camel.prefix(1).uppercased() + camel.dropFirst() }
        try m.mount()
        let original = "test/Movies/Recording (2021)/Recording (2021).ts"
        let copy = "test/Movies/Recording (2021)/Recording (2021) - remux.mkv"
        let pin = try m.cli(["pin", "--quality", "remux", "--wait", m.path(original)])
        #expect(pin.code == 0, "\(pin.stdout) \(pin.stderr)")
        let streams = m.fixture.streamRequests
        try #require(streams.count == 1, "\(streams.map(\.path))")
        #expect(streams[0].path.hasSuffix("/stream.mkv") && streams[0].range == nil)
        #expect(streams[0].query[name("videoCodec")] == "copy" && streams[0].query[name("audioCodec")] == "copy")
        #expect(streams[0].query[name("videoBitRate")] == nil)
        #expect(m.fixture.stoppedSessions == [streams[0].query[name("playSessionId")] ?? "?"])
        #expect(StatusCommandXattr.get(m.path(copy), "state") == "complete")
        #expect(StatusCommandXattr.get(m.path(original), "copies") == "remux=complete")
        let probe = try runProcess("/usr/bin/ffprobe", ["-v", "error", "-show_entries", "stream=codec_name", "-of", "csv=p=0", m.path(copy)])
        #expect(probe.stdout.split(separator: "\n").sorted() == ["aac", "h264"], "\(probe.stdout) \(probe.stderr)")
        #expect(m.fixture.downloadRequests.isEmpty && m.fixture.syncJobCount == 0)
        try m.unmount()
    }

    /// Emby transcodes go through Convert (Sync) jobs: the row waits `preparing` with the job
    /// id in the index, polling resumes after a restart (no second job), and the converted file
    /// is then fetched like an original, in ranges, and the job closed.
    @Test func anEmbyConvertJobSurvivesARestart() throws {
        let m = try MountedLabstream("convert", kind: .emby, catalog: Self.clipCatalog)
        try m.mount()
        #expect(try m.cli(["pin", "--quality", "2mbps", m.path(Self.original)]).code == 0)
        #expect(eventually { StatusCommandXattr.get(m.path(Self.original), "copies") == "2mbps=preparing" })
        #expect(m.fixture.syncJobCount == 1)
        let status = try m.cli(["status"])
        #expect(status.stdout.contains("Clip (2020).mkv") && status.stdout.contains("2mbps copy: preparing"), "\(status.stdout)")
        // The copy is a field of its original, the same in bare status and in status PATH.
        func copies(_ args: [String]) throws -> [[String: Any]]? {
            let rows = try JSONSerialization.jsonObject(with: Data(try m.cli(args).stdout.utf8)) as? [[String: Any]]
            return rows?.first { $0["path"] as? String == m.path(Self.original) }?["copies"] as? [[String: Any]]
        }
        for asked in [["status", "--json"], ["status", "--json", m.path(Self.original)]] {
            let copy = try copies(asked)?.first
            #expect(
                copy?["quality"] as? String == "2mbps" && copy?["state"] as? String == "preparing" && copy?["reason"] as? String == "preparing_copy",
                "\(asked): \(String(describing: copy))")
        }
        try m.unmount()

        try m.mount()  // polling resumes with the persisted job
        let wait = try m.cli(["pin", "--quality", "2mbps", "--wait", m.path(Self.original)])
        #expect(wait.code == 0, "\(wait.stderr)")
        #expect(m.fixture.syncJobCount == 1)
        let files = m.fixture.syncFileRequests
        #expect(!files.isEmpty && files.allSatisfy { $0.range != nil && $0.authorized })
        #expect(eventually { m.fixture.transferredSyncJobs == [100] })
        #expect(eventually { FileManager.default.fileExists(atPath: m.path(Self.copy)) })
        #expect(eventually { ((try? journal(m).count) ?? 1) == 0 })
        let probe = try runProcess("/usr/bin/ffprobe", ["-v", "error", "-show_entries", "format=format_name", "-of", "csv=p=0", m.path(Self.copy)])
        #expect(probe.code == 0 && probe.stdout.contains("matroska"), "\(probe.stderr)")
        #expect(m.fixture.streamRequests.isEmpty && m.fixture.downloadRequests.isEmpty)
        try m.unmount()
    }

    /// A server slow to answer a job's create holds up no file's bytes: the original of the
    /// clip downloads and completes while the Convert job for its copy has no answer yet (the
    /// jobs are made and polled on a thread of their own; the fill only wakes it). The copy
    /// then comes through its job once the answer arrives.
    @Test func aSlowJobCreateHoldsUpNoOtherFile() throws {
        // Patient enough that a fill stuck behind the held create could not give up on it first.
        let m = try MountedLabstream("convert-slow-create", kind: .emby, catalog: Self.clipCatalog, cacheConfig: "fetch_timeout = 120")
        try m.mount()
        m.fixture.holdNextJobCreateAnswer()
        #expect(try m.cli(["pin", "--quality", "2mbps", m.path(Self.original)]).code == 0)
        #expect(eventually { m.fixture.holdsJobCreateAnswer })
        let wait = try m.cli(["pin", "--wait", m.path(Self.original)])
        #expect(wait.code == 0, "\(wait.stdout) \(wait.stderr)")
        #expect(m.fixture.holdsJobCreateAnswer, "the original finished only once Emby answered the job's create")
        #expect(try sha256(m.path(Self.original)) == sha256(m.mediaDir + "/clip.mkv"))
        m.fixture.releaseJobCreateAnswer()
        let copy = try m.cli(["pin", "--quality", "2mbps", "--wait", m.path(Self.original)])
        #expect(copy.code == 0, "\(copy.stderr)")
        #expect(m.fixture.syncJobCount == 1)
        #expect(eventually { m.fixture.transferredSyncJobs == [100] })
        try m.unmount()
    }

    /// Plex transcodes go through its download queue: the row stays `queued` (the server's
    /// state as its reason) with the queue item persisted, polling resumes after a restart (no
    /// second item), the prepared file is fetched in ranges, and the item is then removed.
    @Test func aPlexDownloadQueueItemSurvivesARestart() throws {
        let m = try MountedLabstream("plex-queue", kind: .plex, catalog: Self.clipCatalog, probe: true)
        try m.mount()
        #expect(try m.cli(["pin", "--quality", "2mbps", m.path(Self.original)]).code == 0)
        #expect(eventually { m.fixture.queueItemCount == 1 })
        #expect(StatusCommandXattr.get(m.path(Self.original), "copies") == "2mbps=queued")
        let add = try #require(m.fixture.queueAddRequests.first)
        #expect(add.authorized && add.query["keys"]?.hasPrefix("/library/metadata/") == true)
        #expect(add.query["mediaIndex"] == "0" && add.query["partIndex"] == "0" && add.query["protocol"] == "http")
        #expect(add.query["videoBitrate"] == "2000")  // the spec's kbit/s
        try m.unmount()

        try m.mount()  // polling resumes with the persisted queue item
        let wait = try m.cli(["pin", "--quality", "2mbps", "--wait", m.path(Self.original)])
        #expect(wait.code == 0, "\(wait.stderr)")
        #expect(m.fixture.queueItemCount == 1)
        let files = m.fixture.queueMediaRequests
        #expect(!files.isEmpty && files.allSatisfy { $0.range != nil && $0.authorized })
        #expect(eventually { m.fixture.removedQueueItems == [500] })
        #expect(eventually { ((try? journal(m).count) ?? 1) == 0 })
        #expect(FileManager.default.fileExists(atPath: m.path(Self.copy(.plex))))
        #expect(!FileManager.default.fileExists(atPath: m.path(Self.copy)))
        #expect(
            StatusCommandXattr.get(m.path(Self.original), "copies") == "2mbps=complete", "\(StatusCommandXattr.get(m.path(Self.copy(.plex)), "reason") ?? "")")
        let probe = try runProcess("/usr/bin/ffprobe", ["-v", "error", "-show_entries", "format=format_name", "-of", "csv=p=0", m.path(Self.copy(.plex))])
        #expect(probe.code == 0 && probe.stdout.contains("mp4"), "\(probe.stderr)")
        #expect(m.fixture.downloadRequests.isEmpty)  // the original part was never fetched
        try m.unmount()
    }

    /// A server job that fails, or expires before its file is fetched, fails the copy with the
    /// server's reason, is cleaned up on the server, and a later pin starts a new job.
    @Test(arguments: [(ServerFixture.Kind.emby, false), (.plex, false), (.emby, true), (.plex, true)])
    func aServerJobThatFailsOrExpiresFailsTheCopyAndAPinStartsAnother(kind: ServerFixture.Kind, expires: Bool) throws {
        let m = try MountedLabstream("job-\(expires ? "expired" : "failed")-\(kind)", kind: kind, catalog: Self.clipCatalog)
        try m.mount()
        if expires { m.fixture.expireSyncJobs() } else { m.fixture.failSyncJobs() }
        let pin = try m.cli(["pin", "--quality", "2mbps", "--wait", m.path(Self.original)])
        #expect(pin.code == 74)
        #expect(StatusCommandXattr.get(m.path(Self.original), "copies") == "2mbps=failed")
        let copy = try copyRow(m)
        let expected =
            switch (kind, expires) {
            case (.emby, false): "Convert job 100 ended Failed"
            case (.emby, true): "Emby no longer knows Convert job 100"
            case (_, false): "Plex could not prepare item 1/500: the transcoder exited with an error"
            case (_, true): "Plex's prepared file for item 1/500 expired"
            }
        #expect(copy.status == .failed && (copy.reason?.sentence ?? "").contains(expected), "\(copy.reason?.sentence ?? "")")
        #expect(copy.job == nil && !FileManager.default.fileExists(atPath: m.path(Self.copy(kind))))
        #expect(firstJobCleanedUp(m, kind))

        // Pinning again starts a new job, which this time succeeds.
        m.fixture.failSyncJobs(false)
        m.fixture.expireSyncJobs(false)
        let again = try m.cli(["pin", "--quality", "2mbps", "--wait", m.path(Self.original)])
        #expect(again.code == 0, "\(again.stderr)")
        #expect((kind == .emby ? m.fixture.syncJobCount : m.fixture.queueItemCount) == 2)
        #expect(FileManager.default.fileExists(atPath: m.path(Self.copy(kind))))
        try m.unmount()
    }

    /// A create whose answer is lost (a proxy's 504 after the server made the job, or a stop
    /// before the answer was recorded): the intent was recorded first, so the next try finds
    /// the job on the server and adopts it; one job, never two.
    @Test(arguments: [ServerFixture.Kind.emby, .plex])
    func aJobWhoseCreateAnswerWasLostIsAdoptedNotMadeAgain(kind: ServerFixture.Kind) throws {
        let m = try MountedLabstream("job-lost-\(kind)", kind: kind, catalog: Self.clipCatalog)
        try m.mount()
        m.fixture.loseJobCreateAnswers(1)
        let pin = try m.cli(["pin", "--quality", "2mbps", "--wait", m.path(Self.original)])
        #expect(pin.code == 0, "\(pin.stderr)")
        #expect((kind == .emby ? m.fixture.syncJobCount : m.fixture.queueItemCount) == 1)
        #expect(m.log.contains("adopted server job"), "\(m.log)")
        #expect(FileManager.default.fileExists(atPath: m.path(Self.copy(kind))))
        try m.unmount()
    }

    /// A copy at a cap the original already meets is not made: the original is pinned, and
    /// `pin --quality --wait` says so and ends when it is complete (it waited forever).
    @Test func aPinAtACapTheOriginalMeetsKeepsTheOriginalAndEnds() throws {
        let m = try MountedLabstream("cap-met") { dir in
            writeRandomFile(dir + "/small.mkv", size: 2 * MiB, seed: 31)
            var movie = FixtureCatalog.Movie(title: "Small", year: 2021, file: dir + "/small.mkv", container: "mkv")
            movie.bitrate = 1_000_000
            return FixtureCatalog(movies: [movie], series: [])
        }
        try m.mount()
        let path = m.path("test/Movies/Small (2021)/Small (2021).mkv")
        let pin = try m.cli(["pin", "--quality", "10mbps", "--wait", path])
        #expect(pin.code == 0 && pin.stdout.contains("the original is within 10mbps; keeping it"), "\(pin.stdout)\(pin.stderr)")
        // No copy was made, and none is counted as ready.
        #expect(!pin.stdout.contains("copies ready") && pin.stdout.contains("10mbps: no copy needed"), "\(pin.stdout)")
        #expect(m.fixture.streamRequests.isEmpty && StatusCommandXattr.get(path, "pinned") == "1")
        try m.unmount()
    }

    /// A server that refuses to make the job (a 4xx other than 408/429) ends the copy `failed`
    /// with the server's own message: no re-posting, and `pin --wait` returns.
    @Test(arguments: [ServerFixture.Kind.emby, .plex])
    func aRefusedServerJobFailsTheCopyWithTheServersWords(kind: ServerFixture.Kind) throws {
        let m = try MountedLabstream("job-refused-\(kind)", kind: kind, catalog: Self.clipCatalog)
        try m.mount()
        let route = kind == .emby ? "/Sync/Jobs" : "/downloadQueue"
        m.fixture.inject(.status(400), pathPrefix: route, times: nil)
        let pin = try m.cli(["pin", "--quality", "2mbps", "--wait", m.path(Self.original)])
        #expect(pin.code == 74, "\(pin.stdout)\(pin.stderr)")
        let copy = try copyRow(m)
        #expect(
            copy.status == .failed && (copy.reason?.sentence ?? "").contains("refused the request") && (copy.reason?.sentence ?? "").contains("HTTP 400"),
            "\(copy.reason?.sentence ?? "")")
        let posts = m.fixture.requestLog.filter { $0.method == "POST" && $0.path.hasPrefix(route) }.count
        #expect(posts == 1, "\(posts) posts")
        try m.unmount()
    }

    /// A live stream the server answers 404 to is a file it has no stream for, not a server
    /// that is down: the copy fails at once, saying so, and is not asked for again.
    @Test func aLiveStreamAnswered404FailsSayingWhatWasMissing() throws {
        let m = try MountedLabstream("live-404", catalog: Self.clipCatalog)
        try m.mount()
        m.fixture.inject(.status(404), pathPrefix: "/Videos/", times: nil)
        let pin = try m.cli(["pin", "--quality", "2mbps", "--wait", m.path(Self.original)])
        #expect(pin.code == 74, "\(pin.stdout)\(pin.stderr)")
        #expect(pin.stderr.contains("no live stream for this file (HTTP 404)") && !pin.stderr.contains("Check that it is running"), "\(pin.stderr)")
        #expect(m.fixture.streamRequests.count == 1, "\(m.fixture.streamRequests.count) stream requests")
        m.fixture.clearFaults()
        try m.unmount()
    }

    /// Unpinning a copy whose server job is still running cancels the job (through the cleanup
    /// journal) and keeps no claim on it.
    @Test(arguments: [ServerFixture.Kind.emby, .plex])
    func unpinningACopyWhoseJobRunsCancelsTheJob(kind: ServerFixture.Kind) throws {
        let m = try MountedLabstream("job-unpin-\(kind)", kind: kind, catalog: Self.clipCatalog)
        try m.mount()
        m.fixture.holdSyncJobs()
        #expect(try m.cli(["pin", "--quality", "2mbps", m.path(Self.original)]).code == 0)
        #expect(eventually { (kind == .emby ? m.fixture.syncJobCount : m.fixture.queueItemCount) == 1 })
        #expect(eventually { ((try? journal(m).count) ?? 0) == 1 })
        #expect(try m.cli(["unpin", m.path(Self.original)]).code == 0)
        #expect(firstJobCleanedUp(m, kind))
        #expect(StatusCommandXattr.get(m.path(Self.original), "copies") == "2mbps=partial")
        try m.unmount()
    }

    /// A journal that cannot be read is moved aside with a warning, never trusted or emptied.
    @Test func aDamagedJournalIsMovedAsideAndSaidSo() throws {
        let scratch = Scratch("journal-damaged")
        let path = scratch.path + "/cleanup-journal.json"
        try Data("[{\"kind\": \"stop-enc".utf8).write(to: URL(fileURLWithPath: path))
        let warnings = LockedBox<[String]>([])
        let journal = CleanupJournal.open(path: path) { message in warnings.update { $0.append(message) } }
        #expect(journal.pending.isEmpty)
        #expect(warnings.get().count == 1 && warnings.get()[0].contains("moved to \(path).damaged"), "\(warnings.get())")
        #expect(FileManager.default.contents(atPath: path + ".damaged") == Data("[{\"kind\": \"stop-enc".utf8))
        try journal.add(.init(kind: .stopEncoding, server: "s", session: "x", created: 1))
        #expect(try CleanupJournal(path: path).pending.map(\.session) == ["x"])
    }

    /// A cleanup the server refuses for good (501 Not Implemented) ends its intent, said once,
    /// instead of being asked again at every mount.
    @Test func aCleanupTheServerRefusesForGoodLeavesTheJournal() throws {
        let m = try MountedLabstream("live-refused", catalog: Self.clipCatalog)
        try m.mount()
        m.fixture.inject(.stall(60), pathPrefix: "/Videos/", times: 1)
        #expect(try m.cli(["pin", "--quality", "2mbps", m.path(Self.original)]).code == 0)
        #expect(eventually { !m.fixture.streamRequests.isEmpty && ((try? journal(m).count) ?? 0) == 1 })
        kill(m.daemonPid, SIGKILL)
        #expect(waitForExit(pid: m.daemonPid))
        m.fixture.clearFaults()
        m.fixture.inject(.status(501), pathPrefix: "/Videos/ActiveEncodings", times: nil)
        try m.mount()
        #expect(eventually { m.log.contains("was refused (HTTP 501) and will not be asked again") }, "\(m.log)")
        #expect(eventually { ((try? journal(m).count) ?? 1) == 0 })
        try m.unmount()
    }

    @Test func aJournaledCleanupIsReplayedAfterACrash() throws {
        let m = try MountedLabstream("live-crash", catalog: Self.clipCatalog)
        try m.mount()
        m.fixture.inject(.stall(60), pathPrefix: "/Videos/", times: 1)
        #expect(try m.cli(["pin", "--quality", "2mbps", m.path(Self.original)]).code == 0)
        // The stream is on the wire (stalled) and its cleanup is journaled: crash now.
        #expect(eventually { !m.fixture.streamRequests.isEmpty && ((try? journal(m).count) ?? 0) == 1 })
        let session = try #require(try journal(m).first?.session)
        #expect(m.fixture.streamRequests.first?.query["playSessionId"] == session)
        let text = try String(contentsOfFile: m.dataDir + "/cleanup-journal.json", encoding: .utf8)
        #expect(!text.contains(m.fixture.accessToken) && !text.contains(m.fixture.baseURL))  // credential-free
        kill(m.daemonPid, SIGKILL)
        #expect(waitForExit(pid: m.daemonPid))
        #expect(!m.fixture.stoppedSessions.contains(session))

        m.fixture.clearFaults()
        try m.mount()  // replays the journal, then fetches the copy again from byte 0
        let wait = try m.cli(["pin", "--quality", "2mbps", "--wait", m.path(Self.original)])
        #expect(wait.code == 0, "\(wait.stderr)")
        #expect(m.fixture.stoppedSessions.contains(session))
        #expect(try journal(m).isEmpty)
        #expect(FileManager.default.fileExists(atPath: m.path(Self.copy)))
        try m.unmount()
    }
}

/// Reads a `user.labstream.*` attribute.
enum StatusCommandXattr {
    static func get(_ path: String, _ name: String) -> String? {
        var buffer = [UInt8](repeating: 0, count: 4096)
        let n = getxattr(path, "user.labstream." + name, &buffer, buffer.count)
        return n < 0 ? nil : String(decoding: buffer[0..<n], as: UTF8.self)
    }
}
