import Foundation
import LabstreamCore

/// Short H.264/AAC clips made with ffmpeg: a movie library (MP4 and MKV) and a two-season show
/// with a special. Generated once into a cache directory, never committed.
public enum DemoMedia {
    public struct Clip: Sendable {
        public var file: String
        public var seconds: Int
        public var size: String
        public var pattern: String
        public var tone: Int
    }

    static let movies: [(title: String, year: Int, file: String)] = [
        ("Test Pattern", 2021, "test-pattern.mp4"),
        ("Color Bars", 2019, "color-bars.mkv"),
    ]

    static let episodes: [(season: Int, number: Int, title: String, file: String)] = [
        (0, 1, "Behind the Signal", "signal-s00e01.mkv"),
        (1, 1, "Pilot Tone", "signal-s01e01.mkv"),
        (1, 2, "Sweep", "signal-s01e02.mp4"),
        (2, 1, "Return Channel", "signal-s02e01.mkv"),
        (2, 2, "Test Card", "signal-s02e02.mp4"),
    ]

    /// Makes sure every clip exists in `directory`, generating missing ones with ffmpeg.
    public static func ensure(in directory: String, seconds: Int = 30, log: (String) -> Void) throws(LabstreamError) -> FixtureCatalog {
        do {
            try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        } catch {
            throw .storage("cannot create \(directory): \(error.localizedDescription)")
        }
        let patterns = ["testsrc2", "smptebars", "testsrc", "rgbtestsrc", "smptehdbars", "pal100bars", "yuvtestsrc"]
        let names = movies.map(\.file) + episodes.map(\.file)
        for (i, name) in names.enumerated() {
            let path = directory + "/" + name
            if FileManager.default.fileExists(atPath: path) { continue }
            log("generating \(name) with ffmpeg…")
            try generate(path: path, seconds: seconds, pattern: patterns[i % patterns.count], tone: 220 + 110 * i)
        }
        return FixtureCatalog(
            movies: movies.map { .init(title: $0.title, year: $0.year, file: directory + "/" + $0.file, container: ext($0.file)) },
            series: [.init(name: "Signal Tests", year: 2020, episodes: episodes.map {
                .init(season: $0.season, number: $0.number, title: $0.title, file: directory + "/" + $0.file, container: ext($0.file))
            })])
    }

    static func ext(_ file: String) -> String { String(file.split(separator: ".").last ?? "mkv") }

    /// One clip: a moving test pattern with a tone, H.264 + AAC, 1280×720.
    public static func generate(path: String, seconds: Int, pattern: String = "testsrc2", tone: Int = 440, size: String = "1280x720") throws(LabstreamError) {
        let tmp = path + ".tmp." + ext(path)
        let p = Process()
        p.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        p.arguments = ["ffmpeg", "-hide_banner", "-loglevel", "error", "-y",
                       "-f", "lavfi", "-i", "\(pattern)=size=\(size):rate=25",
                       "-f", "lavfi", "-i", "sine=frequency=\(tone):sample_rate=48000",
                       "-t", String(seconds), "-c:v", "libx264", "-preset", "ultrafast", "-pix_fmt", "yuv420p",
                       "-c:a", "aac", "-b:a", "96k", "-shortest", tmp]
        p.standardInput = FileHandle.nullDevice
        do { try p.run() } catch {
            throw .invalidArgument("ffmpeg is needed to make the demo media; install it with: sudo apt-get install ffmpeg")
        }
        p.waitUntilExit()
        guard p.terminationStatus == 0, rename(tmp, path) == 0 else {
            unlink(tmp)
            throw .storage("ffmpeg could not make \(path) (exit \(p.terminationStatus)); is ffmpeg installed with libx264?")
        }
    }
}
