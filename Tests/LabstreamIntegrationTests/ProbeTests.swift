import Foundation
import LabstreamCore
import LabstreamDemo
import LabstreamEngine
import LabstreamFixture
import Testing

@Suite struct ProbeVerdictTests {
    @Test func verdicts() {
        var good = ProbeObservation()
        good.loaded = true; good.duration = 10; good.hasVideo = true; good.reachedPlayback = true; good.advancedAfterSeek = true
        #expect(ProbeVerdict.judge(good) == .complete)
        var truncated = good
        truncated.advancedAfterSeek = false; truncated.endedAfterSeek = true
        if case .failed = ProbeVerdict.judge(truncated) {} else { Issue.record("truncation must fail") }
        var audio = good
        audio.hasVideo = false
        if case .unverified = ProbeVerdict.judge(audio) {} else { Issue.record("audio-only is unverified where a video is expected") }
        audio.hasAudio = true
        #expect(ProbeVerdict.judge(audio, expecting: .audio) == .complete)
        var silent = audio
        silent.hasAudio = false
        if case .failed = ProbeVerdict.judge(silent, expecting: .audio) {} else { Issue.record("a track without audio fails") }
        var truncatedTrack = audio
        truncatedTrack.advancedAfterSeek = false; truncatedTrack.endedAfterSeek = true
        if case .failed = ProbeVerdict.judge(truncatedTrack, expecting: .audio) {} else { Issue.record("a truncated track fails") }
        var broken = ProbeObservation()
        broken.endFileError = "unrecognized file format"
        #expect(ProbeVerdict.judge(broken) == .failed("mpv: unrecognized file format"))
        var slow = good
        slow.timedOut = true; slow.advancedAfterSeek = false
        #expect(ProbeVerdict.judge(slow) == .unverified("probe timed out"))
        var damaged = good
        damaged.decodeError = "ffmpeg/video: h264: error while decoding MB 3 7"
        #expect(ProbeVerdict.judge(damaged) == .failed("decoding failed: ffmpeg/video: h264: error while decoding MB 3 7"))
        var none = ProbeObservation()
        none.mpvAvailable = false
        #expect(ProbeVerdict.judge(none) == .unverified("libmpv unavailable"))
        var crashed = good
        crashed.problem = "the playback probe crashed on this file (signal 11); it is kept, playback not proven"
        #expect(ProbeVerdict.judge(crashed) == .unverified(crashed.problem!))
        var noDuration = good
        noDuration.duration = nil
        #expect(ProbeVerdict.judge(noDuration) == .unverified("no duration"))
    }

    @Test func imageVerdicts() {
        var shown = ProbeObservation()
        shown.loaded = true; shown.hasVideo = true; shown.reachedPlayback = true; shown.imageFormat = "jpg"
        // No duration, no seek: one decoded picture is the proof.
        #expect(ProbeVerdict.judge(shown, expecting: .image, serverFormat: "jpeg") == .complete)
        var damaged = shown
        damaged.decodeError = "ffmpeg/video: mjpeg: overread 8"
        #expect(ProbeVerdict.judge(damaged, expecting: .image) == .failed("decoding failed: ffmpeg/video: mjpeg: overread 8"))
        var unopened = ProbeObservation()
        unopened.loaded = true; unopened.imageFormat = "png"
        #expect(ProbeVerdict.judge(unopened, expecting: .image) == .failed("mpv could not decode the png image"))
        var raw = ProbeObservation()
        raw.loaded = true
        if case .unverified = ProbeVerdict.judge(raw, expecting: .image, serverFormat: "nef") {
        } else {
            Issue.record("a raw camera file is unproven, not failed")
        }
        #expect(ProbeVerdict.judge(raw, expecting: .image, serverFormat: "JPEG") == .failed("the server calls it a jpg image, but its bytes are not one"))
        var heic = raw
        heic.imageFormat = "heic"; heic.endFileError = "unrecognized file format"
        if case .unverified = ProbeVerdict.judge(heic, expecting: .image, serverFormat: "heic") {} else { Issue.record("HEIC mpv cannot open is unproven") }
    }
}

/// The real libmpv probe on media made with ffmpeg.
@Suite struct MPVProbeTests {
    static let media: String = {
        let dir = "/tmp/labstream-probe-media"
        try? FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        for ext in ["mp4", "mkv"] where !FileManager.default.fileExists(atPath: "\(dir)/good.\(ext)") {
            try? DemoMedia.generate(path: "\(dir)/good.\(ext)", seconds: 4, size: "320x240")
        }
        return dir
    }()

    func cut(_ source: String, to target: String, fraction: Double) throws -> String {
        let data = try Data(contentsOf: URL(fileURLWithPath: source))
        try data.prefix(Int(Double(data.count) * fraction)).write(to: URL(fileURLWithPath: target))
        return target
    }

    func verdict(_ path: String) -> ProbeOutcome { ProbeVerdict.judge(PlaybackProbe.observe(path: path, timeout: 10)) }

    @Test func goodFilesAreComplete() {
        #expect(verdict(Self.media + "/good.mp4") == .complete)
        #expect(verdict(Self.media + "/good.mkv") == .complete)
    }

    @Test func brokenFilesFail() throws {
        let scratch = Scratch("probe")
        // ffmpeg's MP4 keeps its index at the end: cut short, it does not even load.
        let mp4 = try cut(Self.media + "/good.mp4", to: scratch.path + "/cut.mp4", fraction: 0.5)
        let mkv = try cut(Self.media + "/good.mkv", to: scratch.path + "/cut.mkv", fraction: 0.5)
        let faststart = scratch.path + "/faststart.mp4"
        let remux = try runProcess("/usr/bin/ffmpeg", ["-v", "error", "-y", "-i", Self.media + "/good.mp4", "-c", "copy", "-movflags", "+faststart", faststart])
        try #require(remux.code == 0)
        let faststartCut = try cut(faststart, to: scratch.path + "/faststart-cut.mp4", fraction: 0.5)
        let random = scratch.path + "/random.mkv"
        writeRandomFile(random, size: 300_000, seed: 3)
        let empty = scratch.path + "/empty.mkv"
        _ = FileManager.default.createFile(atPath: empty, contents: Data())
        for path in [mp4, mkv, faststartCut, random, empty] {
            let v = verdict(path)
            if case .failed = v {} else { Issue.record("\(path): \(v)") }
        }
    }

    /// The probe runs in a helper process: a helper that is missing, fails or crashes leaves the
    /// file unverified with the reason, and the caller carries on.
    @Test func aMissingFailingOrCrashingHelperLeavesTheFileUnverifiedSayingWhy() throws {
        let scratch = Scratch("probe-helper")
        let good = Self.media + "/good.mp4"
        let missing = PlaybackProbe.observe(path: good, helper: scratch.path + "/nowhere")
        #expect(missing.problem?.contains("missing") == true && missing.problem?.contains("reinstall") == true, "\(missing)")
        let failing = PlaybackProbe.observe(path: good, helper: "/bin/false")
        #expect(failing.problem?.contains("failed (exit 1)") == true, "\(failing)")
        let crasher = scratch.path + "/crash.sh"
        try "#!/bin/sh\nkill -SEGV $$\n".write(toFile: crasher, atomically: true, encoding: .utf8)
        chmod(crasher, 0o755)
        let crashed = PlaybackProbe.observe(path: good, helper: crasher)
        #expect(crashed.problem?.contains("crashed on this file (signal 11)") == true, "\(crashed)")
        if case .unverified = ProbeVerdict.judge(crashed) {} else { Issue.record("a crashed probe proves nothing either way") }
        // The real helper beside the test binary answers.
        #expect(PlaybackProbe.observe(path: good).problem == nil)
    }

    /// An audio file is judged as audio when it is a track (decodes, plays, seeks), and stays
    /// unverified when a video was expected; a cut-short track fails like a cut-short film.
    @Test func anAudioFileIsJudgedAsAudioWhenItIsATrack() throws {
        let scratch = Scratch("probe-audio")
        let audio = scratch.path + "/audio.mka"
        let make = try runProcess("/usr/bin/ffmpeg", ["-v", "error", "-y", "-f", "lavfi", "-i", "sine=frequency=440:duration=6", "-c:a", "aac", audio])
        try #require(make.code == 0)
        let seen = PlaybackProbe.observe(path: audio, timeout: 10)
        #expect(seen.hasAudio && !seen.hasVideo, "\(seen)")
        if case .unverified = ProbeVerdict.judge(seen) {} else { Issue.record("audio where a video was expected: \(ProbeVerdict.judge(seen))") }
        #expect(ProbeVerdict.judge(seen, expecting: .audio) == .complete, "\(seen)")
        // Checked against the server's duration: within a second it is the track, else not.
        #expect(ProbeVerdict.judge(seen, expecting: .audio, serverDuration: 6.4) == .complete, "\(seen)")
        if case .failed(let why) = ProbeVerdict.judge(seen, expecting: .audio, serverDuration: 9) {
            #expect(why.contains("the server says 9.0 s"), "\(why)")
        } else {
            Issue.record("a 6 s file where the server says 9 s: \(ProbeVerdict.judge(seen, expecting: .audio, serverDuration: 9))")
        }
        let flac = scratch.path + "/track.flac"
        #expect(try runProcess("/usr/bin/ffmpeg", ["-v", "error", "-y", "-f", "lavfi", "-i", "sine=frequency=220:duration=6", flac]).code == 0)
        #expect(ProbeVerdict.judge(PlaybackProbe.observe(path: flac, timeout: 10), expecting: .audio) == .complete)
        // A track cut short fails, short as it is.
        let cutTrack = try cut(flac, to: scratch.path + "/cut.flac", fraction: 0.5)
        if case .failed = ProbeVerdict.judge(PlaybackProbe.observe(path: cutTrack, timeout: 10), expecting: .audio) {
        } else {
            Issue.record("a track cut in half: \(ProbeVerdict.judge(PlaybackProbe.observe(path: cutTrack, timeout: 10), expecting: .audio))")
        }
        let random = scratch.path + "/random.flac"
        writeRandomFile(random, size: 200_000, seed: 9)
        if case .failed = ProbeVerdict.judge(PlaybackProbe.observe(path: random, timeout: 10), expecting: .audio) {
        } else {
            Issue.record("random bytes as a track")
        }
    }

    /// A photo is judged by decoding its one picture: whole JPEG/PNG files are complete, cut or
    /// forged ones fail, and a format mpv cannot read (no known signature) stays unverified.
    @Test func anImageIsJudgedByDecodingIt() throws {
        let scratch = Scratch("probe-image")
        func image(_ name: String) throws -> String {
            let path = scratch.path + "/" + name
            try #require(
                try runProcess("/usr/bin/ffmpeg", ["-v", "error", "-y", "-f", "lavfi", "-i", "testsrc=size=320x240", "-frames:v", "1", path]).code == 0)
            return path
        }
        func judged(_ path: String, as format: String?) -> ProbeOutcome {
            ProbeVerdict.judge(PlaybackProbe.observe(path: path, expecting: .image, timeout: 10), expecting: .image, serverFormat: format)
        }
        let jpg = try image("good.jpg"), png = try image("good.png")
        let seen = PlaybackProbe.observe(path: jpg, expecting: .image, timeout: 10)
        #expect(seen.imageFormat == "jpg" && seen.reachedPlayback, "\(seen)")
        #expect(judged(jpg, as: "jpg") == .complete)
        #expect(judged(png, as: "png") == .complete)
        // Cut short: the JPEG's decoder complains, the PNG does not load.
        for (source, format) in [(jpg, "jpg"), (png, "png")] {
            let cutImage = try cut(source, to: scratch.path + "/cut." + format, fraction: 0.45)
            if case .failed = judged(cutImage, as: format) {} else { Issue.record("a cut \(format): \(judged(cutImage, as: format))") }
        }
        // Random bytes the server calls a JPEG fail; bytes of no format anyone names stay unproven.
        let random = scratch.path + "/random.jpg"
        writeRandomFile(random, size: 5_000, seed: 11)
        #expect(judged(random, as: "jpg") == .failed("the server calls it a jpg image, but its bytes are not one"))
        let raw = scratch.path + "/random.cr2"
        writeRandomFile(raw, size: 5_000, seed: 11)
        if case .unverified = judged(raw, as: "cr2") {} else { Issue.record("an unknown format: \(judged(raw, as: "cr2"))") }
    }
}
