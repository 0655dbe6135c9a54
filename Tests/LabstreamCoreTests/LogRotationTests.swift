import LabstreamCore
import Testing

@Suite struct LogRotationTests {
    @Test func aLineThatWouldPassTheCapStartsANewFile() {
        let r = LogRotation(maxSize: 100, files: 2)
        #expect(!r.rotatesBefore(lineBytes: 40, currentSize: 60))
        #expect(r.rotatesBefore(lineBytes: 41, currentSize: 60))
        // An empty file takes any line whole: a line longer than the cap is never cut.
        #expect(!r.rotatesBefore(lineBytes: 500, currentSize: 0))
    }

    @Test func renamesMoveTheOldestFirst() {
        let plan = LogRotation(maxSize: 100, files: 3).renames(of: "/d/labstream.log")
        #expect(plan.unlink == nil)
        #expect(plan.moves.map(\.from) == ["/d/labstream.log.2", "/d/labstream.log.1", "/d/labstream.log"])
        #expect(plan.moves.map(\.to) == ["/d/labstream.log.3", "/d/labstream.log.2", "/d/labstream.log.1"])
        let none = LogRotation(maxSize: 100, files: 0).renames(of: "/d/labstream.log")
        #expect(none.unlink == "/d/labstream.log" && none.moves.isEmpty)
    }

    @Test func settingsParseFromTheDaemonSection() throws {
        let c = try LabstreamConfig.parse("[daemon]\nlog_max_size = 64K\nlog_files = 5\n")
        #expect(c.logRotation == LogRotation(maxSize: 64 << 10, files: 5))
        #expect(try LabstreamConfig.parse("").logRotation == .default)
        #expect(throws: LabstreamConfig.ParseError.self) { try LabstreamConfig.parse("[daemon]\nlog_max_size = 10\n") }
        #expect(throws: LabstreamConfig.ParseError.self) { try LabstreamConfig.parse("[daemon]\nlog_files = 100\n") }
        let round = try LabstreamConfig.parse(c.serialized())
        #expect(round.logRotation == c.logRotation)
    }
}
