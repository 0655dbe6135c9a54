import Foundation
import LabstreamCore
import Testing

/// The typed values every door of the daemon speaks: commands decoded once from an attribute,
/// and one JSON form of a file's status that reads back as the same status.
@Suite struct FileCommandTests {
    @Test func everyAttributeWriteIsOneCommandAndWritesBackTheSame() throws {
        let cases: [(String, String, FileCommand)] = [
            ("pin", "1", .pin(quality: nil)), ("pin", " 0\n", .unpin), ("pin", "10mbps", .pin(quality: Quality("10mbps"))),
            ("pin", "original", .pin(quality: .original)), ("action", "pause", .queue(.pause)), ("action", "cancel", .queue(.cancel)),
            ("monitor", "latest-season,delete-watched", .monitor("latest-season,delete-watched")), ("monitor", "off", .monitor(nil)),
            ("monitor", "", .monitor(nil))
        ]
        for (name, value, command) in cases {
            #expect(try FileCommand(attribute: name, value: value) == command, "\(name)=\(value)")
            #expect(try FileCommand(attribute: command.attribute, value: command.value) == command)
        }
        #expect(FileCommand.pin(quality: nil).description == "pin=1" && FileCommand.queue(.retry).description == "action=retry")
    }

    @Test func aWriteThatIsNoCommandIsRefusedSayingWhatItTakes() {
        #expect(throws: LabstreamError.invalidArgument("user.labstream.action takes pause, resume, retry, cancel, verify")) {
            try FileCommand(attribute: "action", value: "explode")
        }
        #expect(throws: LabstreamError.self) { try FileCommand(attribute: "pin", value: "3mbps") }
        #expect(throws: LabstreamError.unsupportedAttributeWrite("user.labstream.state")) { try FileCommand(attribute: "state", value: "complete") }
    }

    @Test func commandsTravelAsJSONAndComeBackTheSame() throws {
        for command: FileCommand in [.pin(quality: Quality("2mbps")), .pin(quality: nil), .unpin, .queue(.verify), .monitor("all"), .monitor(nil)] {
            #expect(try JSONDecoder().decode(FileCommand.self, from: JSONEncoder().encode(command)) == command)
        }
        #expect(throws: DecodingError.self) { try JSONDecoder().decode(FileCommand.self, from: Data(#"{"pin":{"quality":"3mbps"}}"#.utf8)) }
    }

    /// A pin carries its queue priority; one from a client that sends none is a pin without one.
    @Test func aPinCarriesItsPriorityAndOneWithoutStillReads() throws {
        let high = FileCommand.pin(quality: nil, priority: .high)
        #expect(try JSONDecoder().decode(FileCommand.self, from: JSONEncoder().encode(high)) == high)
        #expect(try JSONDecoder().decode(FileCommand.self, from: Data(#"{"pin":{}}"#.utf8)) == .pin(quality: nil, priority: nil))
        #expect(throws: DecodingError.self) { try JSONDecoder().decode(FileCommand.self, from: Data(#"{"pin":{"priority":"urgent"}}"#.utf8)) }
    }

    /// A queue entry's one JSON form: snake_case bytes, the reason as its code and sentence.
    @Test func aQueueEntryTravelsAsJSON() throws {
        let entry = QueueEntry(
            path: "home/Movies/F.mkv", position: 2, priority: .low, state: .paused, present: 10, total: 100, rate: nil, eta: nil,
            reason: StatusReason.storageFull, pauseCause: .storageFull)
        let data = try JSONEncoder().encode(entry)
        #expect(try JSONDecoder().decode(QueueEntry.self, from: data) == entry)
        let object = try #require(try JSONSerialization.jsonObject(with: data) as? [String: Any])
        #expect(object["bytes_present"] as? Int == 10 && object["priority"] as? String == "low" && object["reason"] as? String == "storage_full")
        #expect(entry.line.hasPrefix("2.  [low]  paused  10%") && entry.line.contains("home/Movies/F.mkv"), "\(entry.line)")
    }
}

@Suite struct FileStatusJSONTests {
    let film = FileKey(server: "home", itemId: "i1", sourceId: "s1")

    func row(_ status: DownloadStatus, present: Int64, reason: StatusReason?, cause: PauseCause? = nil) -> DownloadRow {
        var r = DownloadRow(
            key: film, status: status, attempt: AttemptID(1), validator: nil, total: 100,
            present: present > 0 ? RangeSet([ByteRange(0, present)]) : RangeSet(), partialPath: "p", reason: reason)
        r.pauseCause = cause
        return r
    }

    func roundTrip(_ status: FileStatus) throws -> (FileStatus, [String: Any]) {
        let data = try JSONEncoder().encode(status)
        return (try JSONDecoder().decode(FileStatus.self, from: data), try #require(try JSONSerialization.jsonObject(with: data) as? [String: Any]))
    }

    @Test func aStatusReadsBackAsTheSameStatusWhateverItsReason() throws {
        let copy = DerivedCopy.key(of: film, quality: Quality("2mbps")!)
        var copyRow = row(.preparing, present: 0, reason: StatusReason.preparing(job: "7"))
        copyRow.key = copy
        let statuses = [
            FileStatus(path: "home/Movies/F.mkv", size: 100, row: row(.paused, present: 30, reason: StatusReason.storageFull, cause: .storageFull)),
            FileStatus(path: "a", size: 100, row: row(.unverified, present: 100, reason: StatusReason.awaitingValidation)),
            FileStatus(path: "b", size: 100, row: row(.paused, present: 10, reason: StatusReason.pausedByUser, cause: .user), related: [copyRow]),
            FileStatus(path: "c", size: 100, row: row(.failed, present: 100, reason: .said("mpv: unrecognized file format"))),
            // Reasons with parameters come back as their case, parameters and all.
            FileStatus(
                path: "f", size: 100, row: row(.queued, present: 10, reason: .waitingForServer(.serverUnavailable("HTTP 503"), retryIn: 3.2))),
            FileStatus(path: "g", size: 100, row: row(.paused, present: 10, reason: .signInRefused(server: "home"), cause: .signInRefused)),
            FileStatus(path: "h", size: 100, row: row(.downloading, present: 10, reason: .retrying("timed out: x", fromByte: 10))),
            FileStatus(path: "i", size: 100, row: row(.queued, present: 0, reason: .fileChanged("ETag", refetching: true))),
            FileStatus(path: "j", size: 100, row: row(.preparing, present: 0, reason: .preparingEntry(quality: "10mbps", entry: "e1"))),
            FileStatus(path: "d", size: 100, row: nil, orphaned: true),
            FileStatus(
                path: "e", state: .complete, present: 100, total: 100, reason: nil, pinned: true,
                newVersion: .init(quality: nil, state: .downloading, present: 5, total: 120, reason: nil),
                sideAssets: [
                    SideAssetStatus(name: "poster.jpg", state: .failed, reason: SideAssetFailure.notOnServer.sentence, code: SideAssetFailure.notOnServer.code),
                    SideAssetStatus(name: "F.eng.srt", state: .stored)
                ])
        ]
        for status in statuses {
            let (back, _) = try roundTrip(status)
            #expect(back == status, "\(status.path)")
        }
    }

    /// A copy's or a next version's kind is a field of its key, beside the server's own id,
    /// on a wire too; a key of another kind is another key.
    @Test func aKeysKindIsAFieldBesideTheServersId() throws {
        let film = FileKey(server: "home", itemId: "i", sourceId: "s")
        let copy = DerivedCopy.key(of: film, quality: .capped(megabitsPerSecond: 10))
        #expect(film.kind == .original && film.base == film && DerivedCopy.parse(film) == nil && NextVersion.base(of: film) == nil)
        #expect(copy.kind == .copy(.capped(megabitsPerSecond: 10)) && copy.base == film && copy.sourceId == "s" && copy != film)
        #expect(DerivedCopy.parse(copy)?.base == film && NextVersion.base(of: copy) == nil)
        let next = NextVersion.key(of: film)
        #expect(next.kind == .nextVersion && next.base == film && next.sourceId == "s" && next != film && next != copy)
        for key in [film, copy, next] {
            #expect(try JSONDecoder().decode(FileKey.self, from: JSONEncoder().encode(key)) == key, "\(key)")
            #expect(FileKey(server: key.server, itemId: key.itemId, sourceId: key.base.sourceId, kind: key.kind) == key)
        }
        #expect(FileKind(persisted: "copy", quality: "10mbps") == copy.kind && FileKind(persisted: "next", quality: nil) == .nextVersion)
        #expect(FileKind(persisted: "copy", quality: "original") == nil && FileKind(persisted: "copy", quality: nil) == nil)
        #expect(FileKind(persisted: "sideways", quality: nil) == nil)
    }

    @Test func theJSONSaysTheReasonAsACodeAndASentence() throws {
        let (_, full) = try roundTrip(
            FileStatus(path: "p", size: 100, row: row(.paused, present: 30, reason: StatusReason.storageFull, cause: .storageFull)))
        #expect(full["reason"] as? String == "storage_full" && full["state"] as? String == "paused")
        #expect((full["message"] as? String)?.contains("disk is full") == true && full["bytes_present"] as? Int == 30 && full["bytes_total"] as? Int == 100)
        let (_, plain) = try roundTrip(FileStatus(path: "q", size: 100, row: nil))
        #expect(plain["reason"] == nil && plain["message"] == nil && plain["state"] as? String == "not-local" && plain["pinned"] as? Bool == false)
    }
}
