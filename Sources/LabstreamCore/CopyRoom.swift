/// The room a pinned copy at another quality of unknown size (a live transcode or remux: its
/// size is known only once its stream ends) waits for before the free-space watch resumes it
/// (`FreeSpaceWatch`). Pure: what is known of the copy is a parameter.
///
/// What the server is asked to make, when that can be told: a remux about the original's size,
/// a capped copy its bitrate over the item's runtime. Never less than a quarter more than the
/// copy had written when the disk last filled under it: the room it failed on is known to be
/// too little, and resuming into it would only fill the disk again. With neither, room for its
/// first segment: if that was too little, the copy parks again knowing how far it got.
public enum CopyRoom {
    public static func needed(
        quality: Quality, originalSize: Int64, runtimeSeconds: Double?, writtenWhenFull: Int64?, firstSegment: Int64
    ) -> Int64 {
        var estimate: Int64 = 0
        switch quality {
        case .remux: estimate = originalSize
        case .capped:
            if let bps = quality.bitsPerSecond, let seconds = runtimeSeconds, seconds > 0, seconds < 1e7 {
                estimate = Int64(Double(bps) / 8 * seconds)
            }
        case .original: estimate = originalSize
        }
        let beyondFailure = writtenWhenFull.map { $0 > 0 ? $0 + $0 / 4 : 0 } ?? 0
        let needed = max(estimate, beyondFailure)
        return needed > 0 ? needed : firstSegment
    }
}
