import Foundation
import LabstreamCore
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
        } else { Issue.record("a 6 s file where the server says 9 s: \(ProbeVerdict.judge(seen, expecting: .audio, serverDuration: 9))") }
        let flac = scratch.path + "/track.flac"
        #expect(try runProcess("/usr/bin/ffmpeg", ["-v", "error", "-y", "-f", "lavfi", "-i", "sine=frequency=220:duration=6", flac]).code == 0)
        #expect(ProbeVerdict.judge(PlaybackProbe.observe(path: flac, timeout: 10), expecting: .audio) == .complete)
        // A track cut short fails, short as it is.
        let cutTrack = try cut(flac, to: scratch.path + "/cut.flac", fraction: 0.5)
        if case .failed = ProbeVerdict.judge(PlaybackProbe.observe(path: cutTrack, timeout: 10), expecting: .audio) {} else {
            Issue.record("a track cut in half: \(ProbeVerdict.judge(PlaybackProbe.observe(path: cutTrack, timeout: 10), expecting: .audio))")
        }
        let random = scratch.path + "/random.flac"
        writeRandomFile(random, size: 200_000, seed: 9)
        if case .failed = ProbeVerdict.judge(PlaybackProbe.observe(path: random, timeout: 10), expecting: .audio) {} else { Issue.record("random bytes as a track") }
    }
}
