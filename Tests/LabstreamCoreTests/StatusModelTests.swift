import LabstreamCore
import Testing

/// One status model: the same file reads the same whichever way it is asked.
@Suite struct StatusModelTests {
    let film = FileKey(server: "home", itemId: "i1", sourceId: "s1")

    func row(_ key: FileKey, _ status: DownloadStatus, present: Int64, total: Int64 = 100, reason: StatusReason? = nil) -> DownloadRow {
        DownloadRow(
            key: key, status: status, attempt: AttemptID(1), validator: nil, total: total,
            present: present > 0 ? RangeSet([ByteRange(0, present)]) : RangeSet(), partialPath: "p", reason: reason)
    }

    @Test func copiesAndNewVersionsAreFieldsOfTheirFile() {
        let copy = DerivedCopy.key(of: film, quality: Quality("2mbps")!)
        let next = NextVersion.key(of: film)
        let rows = [
            row(copy, .preparing, present: 0, total: 0, reason: StatusReason.preparing(job: "7")),
            row(film, .complete, present: 100), row(next, .downloading, present: 40, total: 120)
        ]
        let all = FileStatus.gather(rows, path: { $0 == self.film ? "home/Movies/Film.mkv" : nil }, size: { $0 == self.film ? 100 : nil })
        #expect(all.count == 1)
        let f = all[0]
        #expect(f.path == "home/Movies/Film.mkv" && f.state == .complete && f.present == 100)
        #expect(f.copies == [FileStatus.Part(quality: "2mbps", state: .preparing, present: 0, total: 0, reason: StatusReason.preparing(job: "7"))])
        #expect(f.newVersion?.state == .downloading && f.newVersion?.present == 40 && f.newVersion?.total == 120 && f.newVersion?.label == "new version")
        // The same file asked for by itself: the same answer.
        #expect(FileStatus(path: f.path, size: 100, row: rows[1], related: [rows[2], rows[0]]) == f)
    }

    @Test func aCancelledOrEvictedFileIsNotLocalEverywhere() {
        let cancelled = row(film, .partial, present: 0, reason: StatusReason.evicted)
        #expect(FileStatus.state(of: cancelled) == .notLocal && FileStatus.state(of: nil) == .notLocal)
        #expect(FileStatus(path: "x", size: 100, row: cancelled).state == .notLocal)
        // Bare status lists only what holds bytes (or copies).
        #expect(FileStatus.gather([cancelled], path: { _ in "x" }, size: { _ in 100 }).isEmpty)
        let withCopy = [cancelled, row(DerivedCopy.key(of: film, quality: Quality("2mbps")!), .downloading, present: 5, total: 50)]
        #expect(FileStatus.gather(withCopy, path: { _ in "x" }, size: { _ in 100 }).map(\.state) == [.notLocal])
        // A row whose file left the catalog is still shown, and says so.
        #expect(
            FileStatus.gather([row(film, .partial, present: 3)], path: { _ in nil }, size: { _ in nil }).first?.path.hasPrefix("(no longer in the catalog)")
                == true)
    }

    @Test func anOrphanedFileSaysSoWhateverItsRowSays() {
        let kept = FileStatus(path: "x", size: 100, row: row(film, .complete, present: 100), orphaned: true).reason
        #expect(kept == StatusReason.orphaned(kept: true) && kept?.sentence.contains("until you remove it with `labstream cancel`") == true)
        // Cancelled: nothing is kept, and it says so (it said "kept until you remove it" of 0 B).
        let gone = FileStatus(path: "x", size: 100, row: row(film, .partial, present: 0), orphaned: true).reason?.sentence ?? ""
        #expect(gone == StatusReason.orphaned(kept: false).sentence && gone.contains("nothing of it is kept") && gone.contains("`labstream sync`"))
    }

    @Test func verifyingACompleteFileShowsItUnverifiedUntilTheVerdict() {
        #expect(DownloadStatus.complete.after(.recheck) == .unverified)
        #expect(DownloadStatus.failed.after(.recheck) == .unverified)
        #expect(DownloadStatus.downloading.after(.recheck) == nil)
        #expect(DownloadStatus.unverified.after(.validated(playable: false)) == .failed)
    }

    /// With no daemon, what the index left under way (a killed daemon's "downloading 32%")
    /// waits for the next mount and says why; what is at rest stays as it is.
    @Test func withoutADaemonNothingIsUnderWay() {
        let copy = FileStatus.Part(quality: "2mbps", state: .preparing, present: 0, total: 0, reason: StatusReason.preparing(job: "7"))
        let busy = FileStatus(
            path: "x", state: .downloading, present: 32, total: 100, reason: .retrying("timed out", fromByte: 32), pinned: true, copies: [copy])
        let still = busy.withoutDaemon()
        #expect(still.state == .queued && still.reason == StatusReason.daemonNotRunning && still.present == 32 && still.pinned)
        #expect(still.copies.first?.state == .queued && still.copies.first?.reason == StatusReason.daemonNotRunning)
        #expect(busy.wasUnderWay && !still.wasUnderWay)
        let waiting = FileStatus(path: "x", size: 100, row: row(film, .queued, present: 0, reason: StatusReason.fileChanged()))
        #expect(waiting.withoutDaemon().reason == StatusReason.daemonNotRunning)
        for state in [DownloadStatus.paused, .failed, .partial, .complete, .unverified] {
            let resting = FileStatus(path: "x", size: 100, row: row(film, state, present: 50, reason: .said("why")))
            #expect(resting.withoutDaemon() == resting && !resting.wasUnderWay, "\(state)")
        }
    }

    @Test func everyReasonTheDaemonWritesHasItsOwnCode() {
        let cases: [(StatusReason, DisplayState, StatusReason.Code)] = [
            (StatusReason.storageFull, .paused, .storageFull),
            (StatusReason.pausedByUser, .paused, .pausedByUser),
            (StatusReason.serverUnavailable, .paused, .serverUnavailable),
            (StatusReason.waitingForServer(.serverUnavailable("HTTP 503"), retryIn: 3.2), .queued, .serverUnavailable),
            (StatusReason.serverAway(.offline), .notLocal, .serverAway),
            (StatusReason.serverAway(.authFailed), .notLocal, .serverAway),
            (StatusReason.signInRefused(server: "home"), .paused, .signInRefused),
            (StatusReason.awaitingValidation, .unverified, .awaitingValidation),
            (StatusReason.probeOff, .unverified, .probeOff),
            (StatusReason.evicted, .notLocal, .evicted),
            (StatusReason.orphaned(kept: true), .complete, .orphaned), (StatusReason.orphaned(kept: false), .notLocal, .orphaned),
            (StatusReason.fileChanged(), .queued, .fileChanged),
            (StatusReason.fileChanged("ETag", refetching: false), .partial, .fileChanged),
            (StatusReason.keepsChanging("ETag"), .failed, .fileChanged),
            (StatusReason.localFileVanished, .queued, .localFileVanished),
            (StatusReason.damagedBytes, .queued, .damagedBytes),
            (StatusReason.preparing(job: "12"), .preparing, .preparingCopy),
            (StatusReason.serverRemoved, .paused, .serverRemoved),
            (StatusReason.indexUpgraded, .partial, .indexUpgraded),
            (StatusReason.retrying("timed out", fromByte: 4096), .downloading, .retrying),
            (StatusReason.sizeUnknown, .downloading, .sizeUnknown),
            (StatusReason.liveStreamStopped("timed out"), .queued, .liveStream),
            (StatusReason.liveStreamFailed("HTTP 500"), .failed, .liveStream),
            (StatusReason.doesNotPlay("mpv: invalid data"), .failed, .failed),
            (StatusReason.preparingEntry(quality: "10mbps", entry: "e1"), .preparing, .other),
            (StatusReason.fetchingSideAssets, .downloading, .fetchingSideAssets),
            (StatusReason.monitorLetGo, .notLocal, .monitorLetGo),
            (StatusReason.heldByCap, .notLocal, .heldByCap),
            (StatusReason.daemonNotRunning, .queued, .daemonNotRunning),
            (.said("mpv: invalid data"), .failed, .failed),
            (.said("probe timed out"), .unverified, .checkInconclusive),
            (.said("Emby is converting (job 4: Transcoding)"), .preparing, .other)
        ]
        for (reason, state, code) in cases { #expect(StatusReason.code(reason, state: state) == code, "\(reason)") }
        #expect(StatusReason.code(nil, state: .failed) == nil)
        // Only a server's absence lifts by itself; signing in again lifts a pause for a refused
        // sign-in (the user does not also resume it).
        #expect(PauseCause.allCases.filter(\.liftsByItself) == [.serverUnavailable, .signInRefused])
        // Each cause says itself in the sentence its code is read back from (how schema 14's
        // pauses get theirs), and its code is the reason code `--json` shows.
        for cause in PauseCause.allCases {
            // (schema 14 kept a full disk as its code, every other cause as today's sentence)
            let older = cause == .storageFull ? "storage_full" : cause.reason(server: "home").sentence
            #expect(PauseCause.recorded(before: older) == cause, "\(cause)")
            #expect(StatusReason.code(cause.reason(server: "home"), state: .paused) == cause.code && cause.code != .other, "\(cause)")
            #expect(StatusReason.code(.said("anything"), state: .paused, cause: cause) == cause.code)
        }
        #expect(PauseCause.recorded(before: "paused for a reason of an older build") == nil && PauseCause.recorded(before: nil) == nil)
        #expect(StatusReason.storageFull.sentence.contains("disk is full"))
        #expect(StatusReason.awaitingValidation.sentence.contains("playback check"))
    }

    @Test func sizesReadAsPeopleReadThem() {
        #expect(ByteCount.text(0) == "0 B")
        #expect(ByteCount.text(1023) == "1023 B")
        #expect(ByteCount.text(1024) == "1.0 KiB")
        #expect(ByteCount.text(1536) == "1.5 KiB")
        #expect(ByteCount.text(51 * 1024 * 1024) == "51 MiB")
        #expect(ByteCount.text(1_288_490_189) == "1.2 GiB")
        #expect(ByteCount.text(1024 * 1024 - 1) == "1.0 MiB")  // not "1024 KiB"
        #expect(ByteCount.text(Int64.max).hasSuffix("PiB"))
    }

    @Test func theRateIsSmoothedOverAWindowNotTakenBetweenTwoSamples() {
        // A 1 MB/s server whose bytes are committed in 2 MB bursts every 2 s, sampled twice a second.
        var meter = RateMeter()
        var rates: [Double] = []
        for tick in 0...40 {
            let t = Double(tick) / 2
            meter.record(Int64(tick / 4) * 2_000_000 + 50_000_000, at: t)  // 50 MB were already here
            if let r = meter.bytesPerSecond { rates.append(r) }
        }
        #expect(!rates.isEmpty)
        let settled = rates.suffix(20)
        #expect(settled.allSatisfy { $0 > 600_000 && $0 < 1_500_000 }, "\(settled)")  // never 0, never 4 MB/s
        #expect(meter.secondsLeft(toReach: 80_000_000).map { $0 > 5 && $0 < 20 } == true)
        // The bytes that were already present are not a rate.
        var first = RateMeter()
        first.record(2_000_000_000, at: 0)
        first.record(2_000_000_000, at: 0.5)
        #expect(first.bytesPerSecond == nil)
        // A file that starts over forgets its history.
        meter.record(10, at: 21)
        #expect(meter.bytesPerSecond == nil && meter.secondsLeft(toReach: 100) == nil)
        #expect(RateText.text(1_000_000) == "1.0 MB/s" && RateText.text(nil) == "-- MB/s" && RateText.eta(90) == "ETA 2 min")
    }
}
