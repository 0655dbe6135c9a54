import CMpv
import Foundation
import LabstreamCore

/// A headless libmpv playback probe: load, reach playback, seek to about 90 % and advance; a
/// still image (`image`) only has to be decoded and shown once.
/// `mpv_wait_event` blocks, so each probe runs on the calling (dedicated) thread, never on
/// Swift's cooperative pool.
public enum MPVProbe {
    public static func observe(path: String, timeout: Double = 10, image: Bool = false) -> ProbeObservation {
        var o = ProbeObservation()
        if image { o.imageFormat = ContainerSniff.imageExtension(ofHeader: header(of: path)) }
        guard let mpv = mpv_create() else {
            o.mpvAvailable = false
            return o
        }
        defer { mpv_terminate_destroy(mpv) }
        for (k, v) in [
            ("config", "no"), ("terminal", "no"), ("vo", "null"), ("ao", "null"), ("idle", "yes"), ("hwdec", "no"),
            ("load-scripts", "no"), ("ytdl", "no"), ("cache", "no"), ("audio-display", "no")
        ] {
            mpv_set_option_string(mpv, k, v)
        }
        guard mpv_initialize(mpv) >= 0 else {
            o.mpvAvailable = false
            return o
        }
        mpv_request_log_messages(mpv, "error")
        command(mpv, ["loadfile", path])
        let deadline = Date().addingTimeInterval(timeout)
        var seekTarget: Double?
        // One stray decoder complaint (seen on good files under load) proves nothing; a damaged
        // stream produces a burst of them.
        var decodeErrors: [String] = []
        func takeLog(_ event: mpv_event) {
            guard event.event_id == MPV_EVENT_LOG_MESSAGE, o.loaded,
                let message = event.data?.assumingMemoryBound(to: mpv_event_log_message.self).pointee, let text = message.text
            else { return }
            let prefix = message.prefix.map { String(cString: $0) } ?? ""
            // Decoder errors only: demuxer trouble shows up as end-file errors or truncation.
            if prefix.hasPrefix("ffmpeg/video") || prefix.hasPrefix("ffmpeg/audio") || prefix == "vd" || prefix == "ad" {
                decodeErrors.append("\(prefix): \(String(cString: text).trimmingCharacters(in: .whitespacesAndNewlines))")
                // An image is one picture: one complaint is a damaged one.
                if decodeErrors.count >= (image ? 1 : 3) { o.decodeError = decodeErrors[0] }
            }
        }
        func drainLogs() {
            while let queued = mpv_wait_event(mpv, 0)?.pointee, queued.event_id != MPV_EVENT_NONE { takeLog(queued) }
        }
        while true {
            let remaining = deadline.timeIntervalSinceNow
            if remaining <= 0 { o.timedOut = true; return o }
            guard let event = mpv_wait_event(mpv, min(remaining, 0.05))?.pointee else { continue }
            switch event.event_id {
            case MPV_EVENT_FILE_LOADED:
                o.loaded = true
                o.duration = double(mpv, "duration")
                let tracks = int(mpv, "track-list/count") ?? 0
                o.hasVideo = (0..<max(tracks, 0)).contains { i in
                    string(mpv, "track-list/\(i)/type") == "video" && string(mpv, "track-list/\(i)/albumart") != "yes"
                }
                o.hasAudio = (0..<max(tracks, 0)).contains { string(mpv, "track-list/\($0)/type") == "audio" }
                if !o.hasVideo && !o.hasAudio { return o }  // nothing to play
                if image && !o.hasVideo { return o }
            case MPV_EVENT_PLAYBACK_RESTART:
                if image {
                    // The picture was decoded and handed to the (null) video output. mpv hands out
                    // queued events before log lines, so the decoder's complaints about this
                    // picture are read now.
                    o.reachedPlayback = true
                    drainLogs()
                    return o
                }
                if seekTarget == nil {
                    o.reachedPlayback = true
                    guard let d = o.duration, d > 0 else { return o }
                    // About 90 %, but at least a second and a half before the end: a short
                    // track must have time left to be seen playing on (a truncated file still
                    // ends at once there).
                    let target = max(min(d * 0.9, d - 1.5), d * 0.5)
                    seekTarget = target
                    command(mpv, ["seek", String(format: "%.3f", target), "absolute"])
                }
            case MPV_EVENT_END_FILE:
                let end = event.data?.assumingMemoryBound(to: mpv_event_end_file.self).pointee
                drainLogs()
                if let end, end.reason == MPV_END_FILE_REASON_ERROR {
                    o.endFileError = String(cString: mpv_error_string(end.error))
                } else if !image, seekTarget != nil, !o.advancedAfterSeek {
                    o.endedAfterSeek = true
                } else if !image, seekTarget == nil {
                    o.endedAfterSeek = o.reachedPlayback  // ended before the late seek could run
                }
                return o
            case MPV_EVENT_LOG_MESSAGE:
                takeLog(event)
            case MPV_EVENT_NONE:
                break
            default:
                break
            }
            // Play on a little past the seek target so decode errors there are seen; mpv hands
            // out queued events before log lines, so the decoder's complaints about what played
            // are read before the verdict (a damaged file was once judged complete without them).
            if let target = seekTarget, let t = double(mpv, "playback-time"), t > target + 0.05 {
                o.advancedAfterSeek = true
                if t > target + 0.25 { drainLogs() }
                if t > target + 0.25 || o.decodeError != nil { return o }
            }
        }
    }

    static func header(of path: String) -> [UInt8] {
        guard let handle = FileHandle(forReadingAtPath: path) else { return [] }
        defer { try? handle.close() }
        return [UInt8]((try? handle.read(upToCount: 16)) ?? Data())
    }

    static func command(_ mpv: OpaquePointer, _ args: [String]) {
        var cArgs: [UnsafePointer<CChar>?] = args.map { UnsafePointer(strdup($0)) } + [nil]
        defer { cArgs.forEach { free(UnsafeMutablePointer(mutating: $0)) } }
        _ = cArgs.withUnsafeMutableBufferPointer { mpv_command(mpv, $0.baseAddress) }
    }

    static func double(_ mpv: OpaquePointer, _ name: String) -> Double? {
        var v: Double = 0
        return mpv_get_property(mpv, name, MPV_FORMAT_DOUBLE, &v) >= 0 ? v : nil
    }

    static func int(_ mpv: OpaquePointer, _ name: String) -> Int64? {
        var v: Int64 = 0
        return mpv_get_property(mpv, name, MPV_FORMAT_INT64, &v) >= 0 ? v : nil
    }

    static func string(_ mpv: OpaquePointer, _ name: String) -> String? {
        guard let p = mpv_get_property_string(mpv, name) else { return nil }
        defer { mpv_free(p) }
        return String(cString: p)
    }
}
