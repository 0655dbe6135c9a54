/// Says one thing about a file once, not once per read: a player that keeps reading a file
/// whose fetches fail the same way made the log repeat a line many times a second. The same
/// words (`key`: the line without what varies, such as a byte range) within `window` seconds of
/// when they were last written are left out, and the next time they are written they say how
/// often they were. Pure: the clock is a parameter.
public struct RepeatedLines: Sendable {
    public static let window: Double = 60
    /// Keys kept at most (one file says few different things).
    static let kept = 32
    private var said: [String: (at: Double, leftOut: Int)] = [:]

    public init() {}

    /// The line to write for `line` now, or nil to leave it out.
    public mutating func admit(_ line: String, key: String? = nil, now: Double) -> String? {
        let key = key ?? line
        if let last = said[key], now - last.at < Self.window {
            said[key] = (last.at, last.leftOut + 1)
            return nil
        }
        let leftOut = said[key]?.leftOut ?? 0
        said[key] = (now, 0)
        if said.count > Self.kept, let oldest = said.min(by: { $0.value.at < $1.value.at })?.key { said[oldest] = nil }
        return leftOut > 0 ? line + " (and \(leftOut) more times like it in the \(Int(Self.window)) s before)" : line
    }
}
