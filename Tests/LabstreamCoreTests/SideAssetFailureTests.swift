import LabstreamCore
import Testing

/// A side asset's failure is stored as a code and parameter and read back as itself; an older
/// index's sentences become their cases.
@Suite struct SideAssetFailureTests {
    static let all: [SideAssetFailure] = [
        .noBytes, .notTextSubtitle, .subtitleNotText, .subtitleUnparsed(format: "vtt"), .notAnImage, .doesNotDecode("mpv: invalid data"),
        .noRoute, .signInRefused(status: 401), .notOnServer, .httpStatus(500), .requestFailed("could not connect to the server")
    ]

    @Test func everyFailureIsStoredAsACodeAndReadBackAsItself() {
        for failure in Self.all {
            let stored = failure.persisted
            #expect(stored.code == failure.code && !stored.code.contains(" "), "\(failure)")
            #expect(SideAssetFailure(persisted: stored.code, parameter: stored.parameter) == failure, "\(failure)")
            // Every sentence this release writes reads back as its case (an older index's words).
            #expect(SideAssetFailure(sentence: failure.sentence) == failure, "\(failure.sentence)")
        }
        #expect(SideAssetFailure.httpStatus(502).sentence == "the server answered HTTP 502")
        #expect(SideAssetFailure.subtitleUnparsed(format: "srt").sentence == "the bytes do not parse as SRT subtitles")
    }

    @Test func wordsNoReleaseWroteAreAFailedRequestsWords() {
        #expect(SideAssetFailure(sentence: "timed out: connect") == .requestFailed("timed out: connect"))
        #expect(SideAssetFailure(sentence: "the server answered HTTP soon") == .requestFailed("the server answered HTTP soon"))
        #expect(SideAssetFailure(persisted: "from_a_later_release", parameter: nil) == .requestFailed("from_a_later_release"))
        #expect(SideAssetFailure(persisted: "from_a_later_release", parameter: "its words") == .requestFailed("its words"))
    }
}
