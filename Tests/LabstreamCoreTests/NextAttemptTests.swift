import LabstreamCore
import Testing

/// Every way a file starts over builds its next row the same way.
@Suite struct NextAttemptTests {
    let row = DownloadRow(
        key: FileKey(server: "s", itemId: "i", sourceId: "m"), status: .downloading, attempt: AttemptID(4),
        validator: .etag("\"v1\""), total: 100, present: RangeSet([ByteRange(0, 60)]), partialPath: "partials/x.part",
        reason: .said("old"), awaitingValidation: true, pinned: true, sourceTag: "tag", job: .made("7"), checked: "id")

    @Test func theNextAttemptHasNothingOfTheOldBytesAndKeepsTheFile() {
        let next = row.nextAttempt(reason: .said("why"))
        #expect(next.attempt == AttemptID(5) && next.present.isEmpty && next.validator == nil && next.checked == nil && !next.awaitingValidation)
        #expect(next.status == .queued && next.reason == .said("why"))  // pinned: the fill takes it up again
        #expect(
            next.key == row.key && next.total == 100 && next.partialPath == row.partialPath && next.pinned && next.sourceTag == "tag" && next.job == .made("7"))
        var unpinned = row
        unpinned.pinned = false
        #expect(unpinned.nextAttempt(reason: nil).status == .partial)
        // From every status, whatever it was: the old bytes are gone.
        for status in DownloadStatus.allCases {
            var from = row
            from.status = status
            #expect(from.nextAttempt(reason: nil).status == .queued && unpinned.nextAttempt(reason: nil).status == .partial, "\(status)")
        }
    }
}

@Suite struct ServerJobTests {
    /// The index keeps a job as text: `creating` before the create's answer, else the server's id.
    @Test func aJobReadsBackFromTheIndexAsItWasKept() {
        for job: ServerJob in [.creating, .made("42"), .made("7/3")] { #expect(ServerJob(persisted: job.persisted) == job) }
        #expect(ServerJob(persisted: "creating") == .creating && ServerJob.creating.id == nil && ServerJob.made("9").id == "9")
    }
}
