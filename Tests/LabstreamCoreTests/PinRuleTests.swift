import LabstreamCore
import Testing

/// `DownloadRow.setPinned`: what a pin or an unpin does to a row's status.
@Suite struct PinRuleTests {
    func row(_ status: DownloadStatus, present: RangeSet = RangeSet(), key: FileKey = FileKey(server: "s", itemId: "i", sourceId: "m")) -> DownloadRow {
        DownloadRow(
            key: key, status: status, attempt: AttemptID(1), validator: nil, total: 100, present: present,
            partialPath: "partials/x.part", reason: .said("old reason"), job: .made("job-1"))
    }

    @Test(arguments: [DownloadStatus.partial, .paused, .failed])
    func pinningAFileMissingBytesQueuesIt(status: DownloadStatus) {
        var r = row(status, present: RangeSet([ByteRange(0, 40)]))
        r.setPinned(true)
        #expect(r.pinned && r.status == .queued && r.reason == nil)
    }

    @Test func pinningAFileWithEveryByteKeepsItsStatus() {
        var r = row(.unverified, present: RangeSet([ByteRange(0, 100)]))
        r.setPinned(true)
        #expect(r.pinned && r.status == .unverified && r.reason == .said("old reason"))
        r.setPinned(false)
        #expect(!r.pinned && r.status == .unverified)
    }

    @Test(arguments: [DownloadStatus.queued, .downloading, .paused, .failed, .preparing])
    func unpinningAFileStillWaitingForTheFillMakesItPartial(status: DownloadStatus) {
        var r = row(status)
        r.pinned = true
        r.setPinned(false)
        #expect(!r.pinned && r.status == .partial && r.reason == nil && r.job == .made("job-1"))
    }

    @Test func aCopyAtAnotherQualityIsWholeOnceCompleteAndLosesItsJobWhenUnpinned() {
        let copy = DerivedCopy.key(of: FileKey(server: "s", itemId: "i", sourceId: "m"), quality: .capped(megabitsPerSecond: 2))
        var done = row(.complete, key: copy)  // no size is known before it is complete: `present` says nothing
        done.setPinned(true)
        #expect(done.status == .complete)
        var preparing = row(.preparing, key: copy)
        preparing.pinned = true
        preparing.setPinned(false)
        #expect(preparing.status == .partial && preparing.job == nil)
    }
}
