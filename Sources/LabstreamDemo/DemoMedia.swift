import Foundation
import LabstreamCore

/// What `labstream demo` serves: films, one series, an album and a single, each a file here.
public struct DemoLibrary: Sendable {
    public struct Movie: Sendable {
        public var title: String
        public var year: Int?
        public var file: String
        public var container: String

        public init(title: String, year: Int?, file: String, container: String) {
            self.title = title
            self.year = year
            self.file = file
            self.container = container
        }
    }

    public struct Episode: Sendable {
        public var season: Int
        public var number: Int
        public var title: String
        public var file: String
        public var container: String

        public init(season: Int, number: Int, title: String, file: String, container: String) {
            self.season = season
            self.number = number
            self.title = title
            self.file = file
            self.container = container
        }
    }

    public struct Series: Sendable {
        public var name: String
        public var year: Int?
        public var episodes: [Episode]

        public init(name: String, year: Int?, episodes: [Episode]) {
            self.name = name
            self.year = year
            self.episodes = episodes
        }
    }

    public struct Track: Sendable {
        public var title: String
        public var album: String?
        public var albumArtist: String
        public var disc: Int?
        public var number: Int?
        public var year: Int?
        public var file: String
        public var container: String
    }

    public var movies: [Movie]
    public var series: [Series]
    public var tracks: [Track]

    public init(movies: [Movie], series: [Series] = [], tracks: [Track] = []) {
        self.movies = movies
        self.series = series
        self.tracks = tracks
    }
}

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
        ("Color Bars", 2019, "color-bars.mkv")
    ]

    static let episodes: [(season: Int, number: Int, title: String, file: String)] = [
        (0, 1, "Behind the Signal", "signal-s00e01.mkv"),
        (1, 1, "Pilot Tone", "signal-s01e01.mkv"),
        (1, 2, "Sweep", "signal-s01e02.mp4"),
        (2, 1, "Return Channel", "signal-s02e01.mkv"),
        (2, 2, "Test Card", "signal-s02e02.mp4")
    ]

    /// A small music library: an album of tones on two discs and a single without an album.
    static let tracks: [(title: String, album: String?, disc: Int?, number: Int?, tone: Int, file: String)] = [
        ("A 440", "Test Tones", 1, 1, 440, "tones-1-01.flac"),
        ("E 330", "Test Tones", 1, 2, 330, "tones-1-02.flac"),
        ("Low C", "Test Tones", 2, 1, 131, "tones-2-01.flac"),
        ("Sweep", nil, nil, nil, 880, "sweep.flac")
    ]

    /// Makes sure every clip exists in `directory`, generating missing ones with ffmpeg.
    public static func ensure(in directory: String, seconds: Int = 30, log: (String) -> Void) throws(LabstreamError) -> DemoLibrary {
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
        for track in tracks where !FileManager.default.fileExists(atPath: directory + "/" + track.file) {
            log("generating \(track.file) with ffmpeg…")
            try generateTone(path: directory + "/" + track.file, seconds: min(seconds, 8), frequency: track.tone)
        }
        return DemoLibrary(
            movies: movies.map { .init(title: $0.title, year: $0.year, file: directory + "/" + $0.file, container: ext($0.file)) },
            series: [
                .init(
                    name: "Signal Tests", year: 2020,
                    episodes: episodes.map {
                        .init(season: $0.season, number: $0.number, title: $0.title, file: directory + "/" + $0.file, container: ext($0.file))
                    })
            ],
            tracks: tracks.map {
                .init(
                    title: $0.title, album: $0.album, albumArtist: "Oscillator", disc: $0.disc, number: $0.number, year: 2022,
                    file: directory + "/" + $0.file, container: "flac")
            })
    }

    /// One track: a sine tone in FLAC.
    public static func generateTone(path: String, seconds: Int, frequency: Int) throws(LabstreamError) {
        try ffmpeg(["-f", "lavfi", "-i", "sine=frequency=\(frequency):sample_rate=44100", "-t", String(seconds), "-c:a", "flac"], to: path)
    }

    static func ext(_ file: String) -> String { String(file.split(separator: ".").last ?? "mkv") }

    /// One clip: a moving test pattern with a tone, H.264 + AAC, 1280×720.
    public static func generate(path: String, seconds: Int, pattern: String = "testsrc2", tone: Int = 440, size: String = "1280x720") throws(LabstreamError) {
        try ffmpeg(
            [
                "-f", "lavfi", "-i", "\(pattern)=size=\(size):rate=25", "-f", "lavfi", "-i", "sine=frequency=\(tone):sample_rate=48000",
                "-t", String(seconds), "-c:v", "libx264", "-preset", "ultrafast", "-pix_fmt", "yuv420p", "-c:a", "aac", "-b:a", "96k", "-shortest"
            ],
            to: path)
    }

    /// Runs ffmpeg with `arguments` into a temporary file renamed to `path` once whole.
    static func ffmpeg(_ arguments: [String], to path: String) throws(LabstreamError) {
        let tmp = path + ".tmp." + ext(path)
        let p = Process()
        p.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        p.arguments = ["ffmpeg", "-hide_banner", "-loglevel", "error", "-y"] + arguments + [tmp]
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
