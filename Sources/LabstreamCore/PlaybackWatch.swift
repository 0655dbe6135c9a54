/// Whether a handle's reads are a player playing, as opposed to a scanner looking (issue 42.2):
/// playing is a sustained sequential read, a run of reads each beginning where the last ended
/// that covers `minimumRun` bytes (half the file for one shorter than twice that). A scanner's
/// reads of a file's head and its tail never make such a run; a player crosses it within
/// seconds of playing (16 MiB is 13 s at 10 Mbit/s). Once playing, a handle stays so until it
/// is released or its reads stop for `idleAfter` seconds (`stopped`): a seek in the player
/// starts a new run but does not end playback. Pure: the caller says when each read was.
public struct PlaybackWatch: Sendable, Hashable {
    public static let defaultMinimumRun: Int64 = 16 << 20
    /// Reads stopped this long: the player paused or went away.
    public static let idleAfter: Double = 60

    public let minimumRun: Int64
    /// How far a read may begin from where the last one ended and still continue the run (the
    /// kernel splits and reorders nearby reads a little).
    public let slack: Int64
    public private(set) var runStart: Int64 = -1
    public private(set) var nextExpected: Int64 = -1
    public private(set) var lastRead: Double = 0
    public private(set) var playing = false

    public init(minimumRun: Int64 = Self.defaultMinimumRun, slack: Int64 = 1 << 20) {
        self.minimumRun = minimumRun
        self.slack = slack
    }

    /// The sequential run a file of `total` bytes needs before its reader counts as playing.
    public func runNeeded(total: Int64) -> Int64 { max(min(minimumRun, total / 2), 1) }

    /// Records a read at `now`; true only at the read that makes the handle playing.
    public mutating func observe(read: ByteRange, total: Int64, now: Double) -> Bool {
        let sequential = nextExpected >= 0 && read.lower >= nextExpected - slack && read.lower <= nextExpected + slack
        if !sequential { runStart = read.lower }
        nextExpected = read.upper
        lastRead = now
        guard !playing, total > 0, read.upper - runStart >= runNeeded(total: total) else { return false }
        playing = true
        return true
    }

    /// Whether playback stopped: the handle played and has not read for `idleAfter` seconds.
    public func stopped(now: Double, idleAfter: Double = Self.idleAfter) -> Bool { playing && now - lastRead > idleAfter }
}
