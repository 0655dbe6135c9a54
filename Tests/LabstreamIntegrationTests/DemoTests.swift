import Foundation
import LabstreamCore
import LabstreamFixture
import Testing

/// `make demo`'s command, as the README's first line runs it.
@Suite(.serialized) struct DemoTests {
    /// The embedded server's generated library is mounted in the foreground and reads byte for
    /// byte; Ctrl-C unmounts and ends the command. A demo profile's index it cannot use (one
    /// left by an older build) is moved aside with its bytes, not deleted, and a fresh one made.
    @Test func theDemoMountsItsLibraryAndCtrlCEndsIt() throws {
        let scratch = Scratch("demo")
        let data = scratch.sub("data"), mountpoint = scratch.sub("mnt")
        // Short clips made here, so the demo does not spend a minute making its own.
        let catalog = try DemoMedia.ensure(in: data + "/demo/media", seconds: 2) { _ in }
        try FileManager.default.createDirectory(atPath: data + "/demo/data", withIntermediateDirectories: true)
        let leftover = Data("not an index of this Labstream".utf8)
        try leftover.write(to: URL(fileURLWithPath: data + "/demo/data/index.sqlite"))

        let demo = Process()
        demo.executableURL = URL(fileURLWithPath: labstreamBinary)
        demo.arguments = ["demo", mountpoint]
        demo.environment = ProcessInfo.processInfo.environment.merging(
            ["LABSTREAM_DATA_DIR": data, "LABSTREAM_CONFIG_DIR": scratch.sub("config")]) { _, new in new }
        let output = Pipe()
        demo.standardOutput = output
        demo.standardError = output
        try demo.run()
        defer { if demo.isRunning { demo.interrupt(); demo.waitUntilExit() } }

        let movie = try #require(catalog.movies.first)
        let shown = mountpoint + "/demo/Movies/\(movie.title) (\(movie.year!))/\(movie.title) (\(movie.year!)).\(movie.container)"
        #expect(eventually(timeout: 60) { FileManager.default.fileExists(atPath: shown) })
        #expect(try sha256(shown) == sha256(movie.file))
        let episodes = try FileManager.default.subpathsOfDirectory(atPath: mountpoint + "/demo/Shows").filter { $0.hasSuffix(".mkv") || $0.hasSuffix(".mp4") }
        #expect(episodes.count == catalog.series.first?.episodes.count)
        // And its music: an album of two discs, a single; a track plays as it is.
        let music = Set(try FileManager.default.subpathsOfDirectory(atPath: mountpoint + "/demo/Music").filter { $0.hasSuffix(".flac") })
        #expect(
            music == [
                "Oscillator/Test Tones (2022)/1-01 - A 440.flac", "Oscillator/Test Tones (2022)/1-02 - E 330.flac",
                "Oscillator/Test Tones (2022)/2-01 - Low C.flac", "Oscillator/Singles/Sweep.flac"
            ], "\(music)")
        let track = mountpoint + "/demo/Music/Oscillator/Test Tones (2022)/1-01 - A 440.flac"
        #expect(try runProcess("/usr/bin/mpv", ["--vo=null", "--ao=null", "--length=1", track]).code == 0)
        let aside = try FileManager.default.contentsOfDirectory(atPath: data + "/demo/data").filter { $0.hasPrefix("index.sqlite.unusable-") }
        #expect(aside.count == 1)
        #expect(FileManager.default.contents(atPath: data + "/demo/data/" + (aside.first ?? "")) == leftover)

        demo.interrupt()  // Ctrl-C
        demo.waitUntilExit()
        let said = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        #expect(demo.terminationStatus == 0, "\(said)")
        #expect(said.contains("it was moved to") && said.contains("Press Ctrl-C"), "\(said)")
        #expect(!FileManager.default.fileExists(atPath: shown))  // unmounted
    }
}
