import LabstreamCore
import Testing

@Suite struct SideAssetStatusTests {
    let stored = SideAssetStatus(name: "poster.jpg", state: .stored)
    let missing = SideAssetStatus(name: "Film (2001).eng.srt", state: .missing)
    let failed = SideAssetStatus(name: "fanart.…", state: .failed, reason: "the server answered HTTP 500")

    @Test func aPinnedWholeFileWaitsForWhatIsMissingBesideIt() {
        for state in [DisplayState.complete, .unverified] {
            let shown = FileStatus.shown(state: state, reason: nil, pinned: true, sideAssets: [stored, missing])
            #expect(shown.state == .downloading)
            #expect(shown.reason == StatusReason.fetchingSideAssets)
            #expect(StatusReason.code(shown.reason, state: shown.state) == .fetchingSideAssets)
            #expect(!PinWait.finished(state: shown.state.rawValue, reason: shown.reason))
        }
    }

    @Test func storedOrFailedAssetsLetItBeComplete() {
        // A failure has been tried and reported (and is tried again later): it does not hold the pin.
        let shown = FileStatus.shown(state: .complete, reason: nil, pinned: true, sideAssets: [stored, failed])
        #expect(shown.state == .complete)
        #expect(shown.reason == nil)
        #expect(FileStatus.shown(state: .complete, reason: nil, pinned: true, sideAssets: []).state == .complete)
    }

    @Test func onlyAPinnedFileWhoseMediaIsDoneIsHeld() {
        #expect(FileStatus.shown(state: .complete, reason: nil, pinned: false, sideAssets: [missing]).state == .complete)
        let checking = FileStatus.shown(state: .unverified, reason: StatusReason.awaitingValidation, pinned: true, sideAssets: [missing])
        #expect(checking.state == .unverified && checking.reason == StatusReason.awaitingValidation)
        for state in [DisplayState.downloading, .queued, .failed, .paused, .partial] {
            #expect(FileStatus.shown(state: state, reason: .said("x"), pinned: true, sideAssets: [missing]) == (state, .said("x")))
        }
    }

    /// A copy kept at a quality (`pin --quality`) stands for its file: pinned, it waits for the
    /// artwork and subtitles beside the original as a pinned original would.
    @Test func aPinnedCopyWaitsForWhatIsMissingBesideItsOriginal() {
        let film = FileKey(server: "s", itemId: "i", sourceId: "f")
        func row(_ key: FileKey, pinned: Bool) -> DownloadRow {
            var r = DownloadRow(
                key: key, status: .unverified, attempt: AttemptID(1), validator: nil, total: 10, present: RangeSet([ByteRange(0, 10)]),
                partialPath: "p", reason: .said("no probe"))
            r.pinned = pinned
            return r
        }
        let copy = DerivedCopy.key(of: film, quality: Quality("10mbps")!)
        var status = FileStatus(path: "x", size: 10, row: nil, related: [row(copy, pinned: true)])
        status.attach(sideAssets: [stored, missing])
        #expect(status.copies.map(\.state) == [.downloading] && status.copies.first?.reason == StatusReason.fetchingSideAssets)
        var tried = FileStatus(path: "x", size: 10, row: nil, related: [row(copy, pinned: true)])
        tried.attach(sideAssets: [stored, failed])
        #expect(tried.copies.map(\.state) == [.unverified])  // a failed one has been tried
        var unpinned = FileStatus(path: "x", size: 10, row: nil, related: [row(copy, pinned: false)])
        unpinned.attach(sideAssets: [missing])
        #expect(unpinned.copies.map(\.state) == [.unverified])
    }

    @Test func theAttributeRoundTrips() {
        let all = [stored, missing, SideAssetStatus(name: "a=b.srt", state: .failed)]
        let text = SideAssetStatus.attribute(all)
        #expect(text == "poster.jpg=stored;Film (2001).eng.srt=missing;a=b.srt=failed")
        #expect(SideAssetStatus.parse(attribute: text) == all.map { SideAssetStatus(name: $0.name, state: $0.state) })
        #expect(SideAssetStatus.parse(attribute: "junk;x=unknown;;y=stored") == [SideAssetStatus(name: "y", state: .stored)])
    }

    @Test func attachingSetsTheShownState() {
        var status = FileStatus(path: "f", state: .complete, present: 10, total: 10, reason: nil, pinned: true)
        status.attach(sideAssets: [missing])
        #expect(status.state == .downloading && status.sideAssets == [missing])
    }
}
