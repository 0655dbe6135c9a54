/// A download rate smoothed over a window of samples, and the time left at that rate. Bytes
/// arrive in bursts (a segment is committed at once, a read may find bytes fetched earlier), so
/// a rate between two neighbouring samples swings from zero to absurd; over a window it does not.
public struct RateMeter: Sendable {
    /// Seconds of history the rate is taken over.
    public var window: Double
    /// The shortest history that gives a rate at all.
    public var minimumSpan: Double
    private var samples: [(at: Double, bytes: Int64)] = []

    public init(window: Double = 8, minimumSpan: Double = 1.5) {
        self.window = window
        self.minimumSpan = minimumSpan
    }

    /// Records that `bytes` were present at time `at` (seconds, any monotonic origin).
    public mutating func record(_ bytes: Int64, at: Double) {
        // Fewer bytes than before: the file started over; its old history says nothing.
        if let last = samples.last, bytes < last.bytes || at < last.at { samples.removeAll() }
        samples.append((at, bytes))
        // Keep one sample older than the window, so the window is always spanned in full.
        while samples.count > 2 && samples[1].at <= at - window { samples.removeFirst() }
    }

    /// Bytes per second over the window; nil until the samples span `minimumSpan`.
    public var bytesPerSecond: Double? {
        guard let first = samples.first, let last = samples.last, last.at - first.at >= minimumSpan else { return nil }
        return Double(last.bytes - first.bytes) / (last.at - first.at)
    }

    /// Seconds until `total` bytes are present at the current rate; nil when nothing moves.
    public func secondsLeft(toReach total: Int64) -> Int? {
        guard let rate = bytesPerSecond, rate > 0, let last = samples.last else { return nil }
        return Int((Double(max(total - last.bytes, 0)) / rate).rounded(.up))
    }
}

/// Rates as people read them: `850 KB/s`, `12.5 MB/s` (decimal units, as network speeds are).
public enum RateText {
    public static func text(_ bytesPerSecond: Double?) -> String {
        guard let rate = bytesPerSecond else { return "-- MB/s" }
        if rate < 1_000_000 { return "\(Int((rate / 1000).rounded())) kB/s" }
        let mb = rate / 1_000_000
        return mb < 10 ? "\(Int((mb * 10).rounded()) / 10).\(Int((mb * 10).rounded()) % 10) MB/s" : "\(Int(mb.rounded())) MB/s"
    }

    /// `ETA 4 s`, `ETA 3 min`, `ETA 1 h 20 min`.
    public static func eta(_ seconds: Int?) -> String {
        guard let s = seconds else { return "" }
        if s < 60 { return "ETA \(s) s" }
        if s < 3600 { return "ETA \((s + 59) / 60) min" }
        return "ETA \(s / 3600) h \((s % 3600 + 59) / 60) min"
    }
}
