import Glibc
import LabstreamCore
import Testing

@Suite struct ConfigTests {
    @Test func qualitiesPerServerAndPerLibrary() throws {
        let text = """
            [server "home"]
            type = plex
            url = http://pms:32400
            quality = 10mbps
            quality.Kids Shows = 2mbps

            [server "den"]
            type = emby
            url = http://den:8096/emby
            """
        let c = try LabstreamConfig.parse(text)
        #expect(c.qualities == ["home": .capped(megabitsPerSecond: 10), "home/Kids Shows": .capped(megabitsPerSecond: 2), "den": .original])
        #expect(try LabstreamConfig.parse(c.serialized()).qualities == c.qualities)  // written back as read
        #expect(throws: LabstreamConfig.ParseError.self) { try LabstreamConfig.parse("[server \"x\"]\ntype = plex\nurl = http://p\nquality.Movies = 3mbps\n") }
    }

    @Test func parsesServersAndCache() throws {
        let text = """
            # comment
            [server "home"]
            type = jellyfin
            url = http://media.local:8096
            user = alice

            [server "cabin"]
            type = jellyfin
            url = https://cabin.example/jf/

            [cache]
            segment_size = 32M
            read_chunk = 512K
            fetch_timeout = 10
            max_size = 50G
            connections_per_file = 4
            fetch_threads = 8
            """
        let c = try LabstreamConfig.parse(text)
        #expect(c.servers.map(\.name) == ["home", "cabin"])
        #expect(c.server(named: "home")?.user == "alice")
        #expect(c.server(named: "cabin")?.user == nil)
        #expect(c.sizes.segmentSize == 32 << 20)
        #expect(c.sizes.readChunk == 512 << 10)
        #expect(c.fetchTimeout == 10)
        #expect(c.maxCacheSize == 50 << 30 && c.connectionsPerFile == 4 && c.maxConcurrentFiles == 3)
        #expect(c.fetchThreads == 8 && LabstreamConfig().fetchThreads == 16)
        #expect(try LabstreamConfig.parse(c.serialized()) == c)
    }

    @Test(arguments: [
        ("[server home]\ntype = jellyfin", 1, "[server \"NAME\"]"),
        ("[server \"a\"]\ntype = plexx\n", 2, "unsupported server type"),
        ("[server \"a\"]\ntoken = abc\n", 2, "secrets do not belong"),
        ("url = x", 1, "outside any section"),
        ("[cache]\nsegment_size = 2G", 2, "between 1M and 512M"),
        ("[cache]\nsegment_size = lots", 2, "not a size"),
        ("[cache]\nfetch_threads = 0", 2, "from 1 to 64"),
        ("[server \"a\"]\nnonsense", 2, "expected 'key = value'"),
        ("[server \"../etc\"]\n", 1, "may use only letters"),
        ("[weird]", 1, "unknown section")
    ])
    func errorsNameTheLineAndTheFix(text: String, line: Int, fragment: String) {
        #expect {
            _ = try LabstreamConfig.parse(text)
        } throws: { error in
            guard let e = error as? LabstreamConfig.ParseError else { return false }
            return e.line == line && e.message.contains(fragment)
        }
    }

    @Test func serverWithoutURLIsRejected() {
        #expect(throws: LabstreamConfig.ParseError.self) { try LabstreamConfig.parse("[server \"a\"]\ntype = jellyfin\n") }
    }

    @Test func sizes() {
        #expect(LabstreamConfig.parseSize("16M") == 16 << 20)
        #expect(LabstreamConfig.parseSize("1g") == 1 << 30)
        #expect(LabstreamConfig.parseSize("4096") == 4096)
        #expect(LabstreamConfig.parseSize("-1") == nil)
        #expect(LabstreamConfig.parseSize("99999999999999999999G") == nil)
    }
}

@Suite struct ErrnoMapTests {
    @Test(arguments: [
        (LabstreamError.notFound("x"), ENOENT), (.readOnly, EROFS), (.notADirectory("x"), ENOTDIR), (.isADirectory("x"), EISDIR),
        (.fetchFailed("x"), EIO), (.serverUnavailable("x"), EIO), (.timedOut("x"), EIO), (.remoteChanged("x"), ESTALE),
        (.noSpace("x"), ENOSPC), (.overBudget("x"), ENOSPC), (.noAttribute, ENODATA), (.attributeBufferTooSmall, ERANGE),
        (.unsupportedAttributeWrite("x"), EPERM),
        (.localSideFile("x", stored: false), EPERM),
        (.storage("x"), EIO), (.invalidArgument("x"), EINVAL)
    ])
    func mapsEveryError(error: LabstreamError, expected: Int32) {
        #expect(ErrnoMap.errno(for: error) == expected)
    }

    /// A read the budget refused says so, and what to do about the budget: a full disk's words
    /// ("free space") sent people to a disk with room to spare.
    @Test func aBudgetRefusalSaysTheBudgetNotTheDisk() {
        let budget = LabstreamError.overBudget("reading a.mkv would take the cache over max_size (4.0 MiB) by 1.0 MiB").userMessage
        #expect(budget.hasPrefix("the storage budget is full, not the disk: reading a.mkv"), "\(budget)")
        #expect(budget.contains("Raise that max_size in labstream.conf (then send the daemon SIGHUP) or unpin files."), "\(budget)")
        #expect(!budget.contains("the disk is full") && !budget.contains("Free space"), "\(budget)")
        #expect(ExitCode.of(.overBudget("x")) == ExitCode.of(.noSpace("x")))
        #expect(LabstreamError.noSpace("writing p").userMessage.hasPrefix("the disk is full: writing p"))
    }

    /// The way to sign in again is said once: a reason naming the command is not followed by
    /// the general advice (a Silo sync failure gave both).
    @Test func signInAdviceIsGivenOnce() {
        let silo = LabstreamError.authenticationFailed("Silo ended this sign-in; sign in again with `labstream server add silo s --url http://h`")
        #expect(silo.userMessage.components(separatedBy: "labstream server add").count == 2, "\(silo.userMessage)")
        #expect(LabstreamError.authenticationFailed("the token was not accepted").userMessage.hasSuffix("Add the server again with `labstream server add`."))
    }

    @Test func syscallErrorsKeepENOSPC() {
        #expect(ErrnoMap.errno(for: SyscallError(function: "pwrite", context: "x", code: ENOSPC) as any Error) == ENOSPC)
        #expect(ErrnoMap.errno(for: SyscallError(function: "pwrite", context: "x", code: EACCES) as any Error) == EIO)
    }
}

@Suite struct RangeResponsePolicyTests {
    let expected = RangeExpectation(range: ByteRange(100, 200), total: 1000, validator: nil)

    @Test func exact206IsAcceptedAndPinsTheStrongETag() {
        let v = RangeResponsePolicy.judge(status: 206, contentRange: "bytes 100-199/1000", etag: "\"abc\"", lastModified: "Mon", expected: expected)
        #expect(v == .accept(validator: .etag("\"abc\""), total: 1000))
    }

    @Test func weakETagFallsBackToLastModified() {
        let v = RangeResponsePolicy.judge(status: 206, contentRange: "bytes 100-199/1000", etag: "W/\"abc\"", lastModified: "Mon", expected: expected)
        #expect(v == .accept(validator: .lastModified("Mon"), total: 1000))
    }

    @Test func misalignedOrMissingContentRangeIsRejected() {
        for header in ["bytes 101-200/1000", "bytes 100-198/1000", "garbage", "bytes 100-199"] {
            #expect(!RangeResponsePolicy.judge(status: 206, contentRange: header, etag: nil, lastModified: nil, expected: expected).isAccept)
        }
        #expect(!RangeResponsePolicy.judge(status: 206, contentRange: nil, etag: nil, lastModified: nil, expected: expected).isAccept)
    }

    @Test func a200IsNeverAppended() {
        #expect(
            RangeResponsePolicy.judge(status: 200, contentRange: nil, etag: nil, lastModified: nil, expected: expected)
                == .restart("server ignored the Range header (200)"))
        var pinned = expected
        pinned.validator = .etag("\"abc\"")
        // A 200 to If-Range with the validator sent: the server ignores Range; the file is the same.
        #expect(
            RangeResponsePolicy.judge(status: 200, contentRange: nil, etag: "\"abc\"", lastModified: nil, expected: pinned)
                == .restart("server ignored the Range header (200)"))
        // With another validator, or none at all: the file changed.
        for (etag, modified) in [("\"new\"", nil), (nil, "Tue, 01 Dec 2026 10:00:00 GMT"), (nil, nil)] as [(String?, String?)] {
            if case .remoteChanged = RangeResponsePolicy.judge(status: 200, contentRange: nil, etag: etag, lastModified: modified, expected: pinned) {
            } else {
                Issue.record("a 200 to an If-Range request with \(String(describing: etag ?? modified)) means the file changed")
            }
        }
        var byDate = expected
        byDate.validator = .lastModified("Mon, 30 Nov 2026 10:00:00 GMT")
        if case .remoteChanged = RangeResponsePolicy.judge(
            status: 200, contentRange: nil, etag: nil, lastModified: "Tue, 01 Dec 2026 10:00:00 GMT",
            expected: byDate)
        {
        } else {
            Issue.record("a new Last-Modified in a 200 to If-Range means the file changed")
        }
    }

    /// To the end of a file of unknown size: any end is fine, only the start must match; a 200
    /// from byte 0 is all of the file even without a validator (nothing to mix it with).
    @Test func openEndedRequestsTakeTheRestOfTheFile() {
        let tail = RangeExpectation(range: .openEnded(from: 100), total: nil, validator: nil)
        #expect(ByteRange.openEnded(from: 100).httpRange == "bytes=100-" && ByteRange(0, 10).httpRange == "bytes=0-9")
        #expect(
            RangeResponsePolicy.judge(status: 206, contentRange: "bytes 100-4999/*", etag: nil, lastModified: nil, expected: tail)
                == .accept(validator: nil, total: nil))
        #expect(
            RangeResponsePolicy.judge(status: 206, contentRange: "bytes 100-4999/5000", etag: nil, lastModified: nil, expected: tail)
                == .accept(validator: nil, total: 5000))
        #expect(!RangeResponsePolicy.judge(status: 206, contentRange: "bytes 0-4999/5000", etag: nil, lastModified: nil, expected: tail).isAccept)
        #expect(
            RangeResponsePolicy.judge(status: 200, contentRange: nil, etag: nil, lastModified: nil, expected: tail)
                == .restart("server ignored the Range header (200)"))
        let whole = RangeExpectation(range: .openEnded(from: 0), total: nil, validator: nil)
        #expect(RangeResponsePolicy.judge(status: 200, contentRange: nil, etag: nil, lastModified: nil, expected: whole) == .accept(validator: nil, total: nil))
        // Nor is a request for the whole file of known size.
        #expect(
            RangeResponsePolicy.judge(
                status: 200, contentRange: nil, etag: nil, lastModified: nil,
                expected: RangeExpectation(range: ByteRange(0, 1000), total: 1000, validator: nil)) == .accept(validator: nil, total: 1000))
        // A closed range from 0 without a validator still may not take a 200 (later ranges could be another version).
        #expect(
            RangeResponsePolicy.judge(
                status: 200, contentRange: nil, etag: nil, lastModified: nil,
                expected: RangeExpectation(range: ByteRange(0, 100), total: nil, validator: nil)) == .restart("server ignored the Range header (200)"))
    }

    /// From byte 0, a whole-file 200 with the validator held (or a first one) is the range's
    /// beginning; without a validator, or from elsewhere, it is never used.
    @Test func aWholeFile200FromByteZeroWithAMatchingValidatorIsItsPrefix() {
        var fromZero = RangeExpectation(range: ByteRange(0, 100), total: 1000, validator: nil)
        #expect(
            RangeResponsePolicy.judge(status: 200, contentRange: nil, etag: "\"abc\"", lastModified: nil, expected: fromZero)
                == .acceptPrefix(validator: .etag("\"abc\"")))
        fromZero.validator = .etag("\"abc\"")
        #expect(
            RangeResponsePolicy.judge(status: 200, contentRange: nil, etag: "\"abc\"", lastModified: nil, expected: fromZero)
                == .acceptPrefix(validator: .etag("\"abc\"")))
        if case .remoteChanged = RangeResponsePolicy.judge(status: 200, contentRange: nil, etag: "\"new\"", lastModified: nil, expected: fromZero) {
        } else {
            Issue.record("a different validator means the file changed")
        }
        fromZero.validator = nil
        #expect(
            RangeResponsePolicy.judge(status: 200, contentRange: nil, etag: nil, lastModified: nil, expected: fromZero)
                == .restart("server ignored the Range header (200)"))
        #expect(
            RangeResponsePolicy.judge(status: 200, contentRange: nil, etag: "W/\"weak\"", lastModified: nil, expected: fromZero)
                == .restart("server ignored the Range header (200)"))  // weak validators prove nothing
        #expect(
            RangeResponsePolicy.judge(status: 200, contentRange: nil, etag: "\"abc\"", lastModified: nil, expected: expected)
                == .restart("server ignored the Range header (200)"))  // not from byte 0
    }

    @Test func changedValidatorOrTotalMeansTheFileChanged() {
        var pinned = expected
        pinned.validator = .etag("\"abc\"")
        let v = RangeResponsePolicy.judge(status: 206, contentRange: "bytes 100-199/1000", etag: "\"xyz\"", lastModified: nil, expected: pinned)
        if case .remoteChanged = v {} else { Issue.record("expected remoteChanged, got \(v)") }
        let t = RangeResponsePolicy.judge(status: 206, contentRange: "bytes 100-199/2000", etag: nil, lastModified: nil, expected: expected)
        if case .remoteChanged = t {} else { Issue.record("expected remoteChanged, got \(t)") }
        #expect(!RangeResponsePolicy.judge(status: 503, contentRange: nil, etag: nil, lastModified: nil, expected: expected).isAccept)
    }

    @Test func a416IsCheckedAgainstTheKnownTotal() {
        let same = RangeResponsePolicy.judge(status: 416, contentRange: "bytes */1000", etag: nil, lastModified: nil, expected: expected)
        if case .reject = same {} else { Issue.record("416 with the known total is our mistake, not a changed file: \(same)") }
        let other = RangeResponsePolicy.judge(status: 416, contentRange: "bytes */150", etag: nil, lastModified: nil, expected: expected)
        if case .remoteChanged = other {} else { Issue.record("416 with another total means the file changed: \(other)") }
    }

    @Test func encodedBodiesAreRefused() {
        let v = RangeResponsePolicy.judge(
            status: 206, contentRange: "bytes 100-199/1000", etag: nil, lastModified: nil,
            contentEncoding: "gzip", expected: expected)
        #expect(!v.isAccept)
        #expect(
            RangeResponsePolicy.judge(
                status: 206, contentRange: "bytes 100-199/1000", etag: nil, lastModified: nil,
                contentEncoding: "identity", expected: expected
            ).isAccept)
    }
}

@Suite struct SmallPolicyTests {
    @Test func isoDates() {
        #expect(ISODate.epochSeconds("1970-01-01T00:00:00Z") == 0)
        #expect(ISODate.epochSeconds("2024-03-01T12:00:00.0000000Z") == 1_709_294_400)
        #expect(ISODate.epochSeconds("2024-03-01T14:00:00+02:00") == 1_709_294_400)
        #expect(ISODate.epochSeconds("2024-03-01") == 1_709_251_200)
        #expect(ISODate.epochSeconds("not a date") == nil)
        #expect(ISODate.epochSeconds("2024-13-01") == nil)
    }

    @Test func statusTransitions() {
        #expect(DownloadStatus.partial.after(.bytesCommitted) == .partial)
        #expect(DownloadStatus.partial.after(.allBytesPresent) == .unverified)
        #expect(DownloadStatus.queued.after(.transferStarted) == .downloading)
        #expect(DownloadStatus.downloading.after(.interrupted) == .paused)
        #expect(DownloadStatus.failed.after(.retry) == .queued)
        #expect(DownloadStatus.unverified.after(.validated(playable: true)) == .complete)
        #expect(DownloadStatus.unverified.after(.validated(playable: nil)) == .unverified)
        #expect(DownloadStatus.complete.after(.retry) == nil)
        #expect(DownloadStatus.complete.after(.enqueued) == nil)
        #expect(DisplayState(status: nil) == .notLocal)
    }

    @Test func mountOptions() throws {
        let o = try MountOptions.parse(["allow_other,uid=1000,gid=100", "umask=027,_netdev,x-systemd.automount,ro"])
        #expect(o.allowOther && o.uid == 1000 && o.gid == 100 && o.umask == 0o027 && o.readOnly)
        #expect(o.fuseOptions == ["allow_other", "ro"])
        #expect(try MountOptions.parse(["allow_other"]).fuseOptions == ["allow_other"])
        #expect(throws: MountOptions.Invalid(message: "the Labstream mount is read-only; remove 'rw'")) { try MountOptions.parse(["rw"]) }
        #expect(throws: MountOptions.Invalid(message: "unknown mount option 'bogus'")) { try MountOptions.parse(["bogus"]) }
        #expect(throws: MountOptions.Invalid.self) { try MountOptions.parse(["uid=alice"]) }
        let helper = try MountOptions.parse(["config=/etc/x,data=/var/x,segment_size=32M,cache_max=10G,rate_limit=5M,offline_view=local,dev,suid,relatime"])
        #expect(helper.configDir == "/etc/x" && helper.dataDir == "/var/x" && helper.segmentSize == 32 << 20)
        #expect(helper.cacheMax == 10 << 30 && helper.rateLimit == 5 << 20 && helper.offlineView == .local)
        #expect(throws: MountOptions.Invalid.self) { try MountOptions.parse(["config=relative/path"]) }
        #expect(throws: MountOptions.Invalid.self) { try MountOptions.parse(["segment_size=2G"]) }
    }

    @Test func validatorsPersist() {
        for v in [Validator.etag("\"a:b\""), .lastModified("Tue, 14 Nov 2023 22:13:20 GMT")] {
            #expect(Validator(persisted: v.description) == v)
        }
        #expect(Validator(persisted: "junk") == nil)
    }
}

@Suite struct ISODateFormatTests {
    @Test func formatsAndParsesBack() {
        for t: Int64 in [0, 86399, 951_782_400, 1_700_000_000, 1_764_558_245, 4_102_444_800] {
            #expect(ISODate.epochSeconds(ISODate.string(epochSeconds: t)) == t)
        }
        #expect(ISODate.string(epochSeconds: 1_700_000_000) == "2023-11-14T22:13:20.000Z")
        #expect(ISODate.string(epochSeconds: 951_782_400) == "2000-02-29T00:00:00.000Z")
    }

    @Test func mergingChangesKeepsTheRest() {
        let a = CatalogItem(id: "a", kind: .movie, title: "A", sources: [MediaSource(id: "a", size: 1)])
        let b = CatalogItem(id: "b", kind: .movie, title: "B", sources: [MediaSource(id: "b", size: 1)])
        var b2 = b
        b2.title = "B2"
        let c = CatalogItem(id: "c", kind: .movie, title: "C", sources: [MediaSource(id: "c", size: 1)])
        var merge = CatalogMerge([LibraryCatalog(id: "L", name: "Movies", items: [a, b]), LibraryCatalog(id: "S", name: "Shows", items: [])])
        merge.apply(LibraryCatalog(id: "L", name: "Films", items: [b2, c]))
        #expect(merge.libraries.map(\.name) == ["Films", "Shows"])
        #expect(merge.libraries[0].items.map(\.title) == ["A", "B2", "C"])
    }

    /// Pages of one library applied one after the other: an item changed twice keeps its last
    /// state and its one place, an item of another library with the same id is another item, a
    /// library no stored catalog had joins, and series details merge.
    @Test func changesAppliedPageByPageReplaceInPlace() {
        func movie(_ id: String, _ title: String) -> CatalogItem { CatalogItem(id: id, kind: .movie, title: title, sources: [MediaSource(id: id, size: 1)]) }
        var merge = CatalogMerge([
            LibraryCatalog(id: "L", name: "Movies", items: [movie("a", "A"), movie("b", "B")]),
            LibraryCatalog(id: "S", name: "Shows", items: [movie("a", "other A")], seriesDetails: ["s1": ItemDetails(plot: "one")])
        ])
        merge.apply(LibraryCatalog(id: "L", name: "Movies", items: [movie("b", "B2"), movie("c", "C")]))
        merge.apply(LibraryCatalog(id: "L", name: "Movies", items: [movie("a", "A2"), movie("c", "C2")]))
        merge.apply(LibraryCatalog(id: "S", name: "Shows", items: [], seriesDetails: ["s2": ItemDetails(plot: "two")]))
        merge.apply(LibraryCatalog(id: "N", name: "New", items: [movie("a", "new A")]))
        #expect(merge.libraries.map(\.id) == ["L", "S", "N"])
        #expect(merge.libraries[0].items.map(\.title) == ["A2", "B2", "C2"])
        #expect(merge.libraries[1].items.map(\.title) == ["other A"])
        #expect(merge.libraries[1].seriesDetails.keys.sorted() == ["s1", "s2"])
        #expect(merge.libraries[2].items.map(\.title) == ["new A"])
    }
}

@Suite struct FullRefreshPolicyTests {
    @Test func theWholeCatalogIsReadOnceADayCountedFromTheLastWholeRead() {
        let now: Int64 = 1_764_800_000
        #expect(FullRefreshPolicy.due(lastFull: nil, now: now))
        #expect(!FullRefreshPolicy.due(lastFull: now, now: now))
        #expect(!FullRefreshPolicy.due(lastFull: now - FullRefreshPolicy.interval + 1, now: now))
        #expect(FullRefreshPolicy.due(lastFull: now - FullRefreshPolicy.interval, now: now))
        #expect(FullRefreshPolicy.due(lastFull: now + 3600, now: now))  // the clock went back
    }
}
