import LabstreamCore
import Testing

@Suite struct LogPolicyTests {
    @Test(arguments: [
        ("GET http://h/Items?api_key=s3cr3t&limit=5 failed", "GET http://h/Items?api_key=[redacted]&limit=5 failed"),
        ("plex said 401 for /library/sections?X-Plex-Token=abcDEF", "plex said 401 for /library/sections?X-Plex-Token=[redacted]"),
        ("header Authorization: MediaBrowser Client=\"x\", Token=\"t0k\"", "header Authorization: [redacted]"),
        ("MediaBrowser Client=\"Labstream\", Token=\"t0k\", Version=\"1\"", "MediaBrowser Client=\"Labstream\", Token=\"[redacted]\", Version=\"1\""),
        ("{\"AccessToken\":\"abc\",\"User\":1}", "{\"AccessToken\":\"[redacted]\",\"User\":1}"),
        ("{\"Username\":\"a\",\"Pw\":\"hunter2\"}", "{\"Username\":\"a\",\"Pw\":\"[redacted]\"}"),
        ("X-Emby-Token: deadbeef sent", "X-Emby-Token: [redacted] sent"),
        ("nothing secret: mytoken=visible, tokens are fine", "nothing secret: mytoken=visible, tokens are fine"),
        ("sync demo: 10 files in 2 libraries", "sync demo: 10 files in 2 libraries")
    ])
    func secretsAreMasked(pair: (String, String)) {
        #expect(LogRedaction.redact(pair.0) == pair.1)
    }

    @Test func levelsParseAndOrder() {
        #expect(LogLevel("WARN") == .warning && LogLevel("debug") == .debug && LogLevel("loud") == nil)
        #expect(LogLevel.error < .warning && LogLevel.info < .debug)
        #expect(LogLevel.allCases.map(\.name) == ["error", "warning", "info", "debug"])
    }
}
