import LabstreamCore
import Testing

/// A file's failures are said once, not once per read.
@Suite struct RepeatedLinesTests {
    @Test func theSameWordsAreSaidOnceAMinuteWithHowOftenTheyCame() {
        var lines = RepeatedLines()
        #expect(lines.admit("fetch of bytes 0-1 failed: HTTP 404", key: "404", now: 0) == "fetch of bytes 0-1 failed: HTTP 404")
        #expect(lines.admit("fetch of bytes 1-2 failed: HTTP 404", key: "404", now: 0.1) == nil)
        #expect(lines.admit("fetch of bytes 2-3 failed: HTTP 404", key: "404", now: 59) == nil)
        // Other words are said at once.
        #expect(lines.admit("fetch of bytes 2-3 failed: HTTP 500", key: "500", now: 59) == "fetch of bytes 2-3 failed: HTTP 500")
        // A minute on, said again, with how often it was left out.
        #expect(
            lines.admit("fetch of bytes 3-4 failed: HTTP 404", key: "404", now: 60.5)
                == "fetch of bytes 3-4 failed: HTTP 404 (and 2 more times like it in the 60 s before)")
        #expect(lines.admit("fetch of bytes 9-10 failed: HTTP 404", key: "404", now: 121) == "fetch of bytes 9-10 failed: HTTP 404")
        // Without a key, the line is its own.
        #expect(lines.admit("x", now: 0) == "x" && lines.admit("x", now: 1) == nil)
    }
}
