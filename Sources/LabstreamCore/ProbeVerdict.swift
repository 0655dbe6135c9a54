/// What a playback probe saw of a local file.
public struct ProbeObservation: Sendable, Hashable, Codable {
    public var mpvAvailable = true
    /// Why no observation could be made (the probe helper is missing, or crashed on the file).
    public var problem: String?
    public var timedOut = false
    public var loaded = false
    /// mpv's error text when the file ended in an error.
    public var endFileError: String?
    public var duration: Double?
    public var hasVideo = false
    public var hasAudio = false
    public var reachedPlayback = false
    /// The seek to about 90 % of the duration landed and playback time moved past it.
    public var advancedAfterSeek = false
    /// Playback ended (EOF) right after the late seek instead of advancing.
    public var endedAfterSeek = false
    /// The first error mpv logged while decoding, if any (a damaged stream).
    public var decodeError: String?
    /// What an image's first bytes say it is (`ContainerSniff.imageExtension`), when the file
    /// was checked as an image.
    public var imageFormat: String?

    public init() {}
}

/// The completion check's verdict on a file whose bytes are all present.
public enum ProbeOutcome: Sendable, Hashable {
    /// Proven playable.
    case complete
    /// Kept, but playability could not be proven.
    case unverified(String)
    /// Kept with no check made: the playback probe is off.
    case probeOff
    /// Kept aside for inspection; the row is retryable.
    case failed(String)
}

/// mpv events and properties → outcome. Pure.
public enum ProbeVerdict {
    /// `expecting`: what the file is meant to hold (a track is audio; cover art is not video).
    /// `serverDuration`: how long the server says a track plays (seconds); one that plays more
    /// than a second longer or shorter is not the server's track.
    /// `serverFormat`: the file type the server gives an image (its container or extension).
    public static func judge(
        _ o: ProbeObservation, expecting: MediaKind = .video, serverDuration: Double? = nil,
        serverFormat: String? = nil
    ) -> ProbeOutcome {
        if let problem = o.problem { return .unverified(problem) }
        guard o.mpvAvailable else { return .unverified("libmpv unavailable") }
        if expecting == .image { return judgeImage(o, serverFormat: serverFormat) }
        if let error = o.endFileError { return .failed("mpv: \(error)") }
        guard o.loaded else { return o.timedOut ? .unverified("probe timed out before the file loaded") : .failed("mpv could not load the file") }
        switch expecting {
        case .video: guard o.hasVideo else { return .unverified("audio-only or exotic container; playback not proven") }
        case .audio: guard o.hasAudio else { return .failed("no audio stream: not a playable audio file") }
        case .image: break
        }
        if o.endedAfterSeek { return .failed("playback stopped after seeking to 90 %: the file looks truncated") }
        if let error = o.decodeError { return .failed("decoding failed: \(error)") }
        guard let d = o.duration, d > 0 else { return .unverified("no duration") }
        if expecting == .audio, let expected = serverDuration, expected > 0, abs(d - expected) > 1 {
            return .failed("it plays \(seconds(d)), the server says \(seconds(expected)): a damaged or different file")
        }
        if o.timedOut { return .unverified("probe timed out") }
        guard o.reachedPlayback else { return .unverified("playback never started") }
        return o.advancedAfterSeek ? .complete : .unverified("playback did not advance after seeking to 90 %")
    }

    /// An image is proven by decoding its picture cleanly. One that does not decode is failed
    /// only when its bytes or the server say it is a format mpv reads (a camera's raw file is
    /// kept, unproven).
    static func judgeImage(_ o: ProbeObservation, serverFormat: String?) -> ProbeOutcome {
        if o.loaded && o.hasVideo && o.reachedPlayback && o.endFileError == nil && o.decodeError == nil { return .complete }
        if o.timedOut && !o.loaded { return .unverified("probe timed out before the image loaded") }
        let decodable = ["jpg", "png", "gif", "webp", "bmp", "tif"]
        let claimed = serverFormat.map { ["jpeg": "jpg", "tiff": "tif"][$0.lowercased()] ?? $0.lowercased() }
        guard let format = o.imageFormat.flatMap({ decodable.contains($0) ? $0 : nil }) ?? claimed.flatMap({ decodable.contains($0) ? $0 : nil }) else {
            return .unverified("an image format Labstream cannot decode (\(o.imageFormat ?? claimed ?? "unrecognised bytes")); not proven")
        }
        if o.imageFormat != format { return .failed("the server calls it a \(format) image, but its bytes are not one") }
        if let error = o.decodeError { return .failed("decoding failed: \(error)") }
        guard o.loaded, o.hasVideo, o.endFileError == nil else {
            return .failed("mpv could not decode the \(format) image" + (o.endFileError.map { ": \($0)" } ?? ""))
        }
        return .unverified(o.timedOut ? "probe timed out" : "the picture was never shown")
    }

    static func seconds(_ s: Double) -> String { "\((s * 10).rounded() / 10) s" }
}
