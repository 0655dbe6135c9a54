/// What a server's answer to a journaled cleanup (stop an encoding, cancel a job) means for the
/// intent: done, try again later, or refused for good (the server will never do it: asking at
/// every mount forever helps no one).
public enum CleanupAnswer: Sendable, Hashable {
    case done
    case again
    case refused

    /// `status` nil: no answer at all.
    public static func of(status: Int?) -> CleanupAnswer {
        guard let status else { return .again }
        if (200..<300).contains(status) || status == 404 { return .done }  // 404: nothing left to clean
        if [408, 429].contains(status) || ((500..<600).contains(status) && status != 501) { return .again }
        return .refused  // other 4xx, 501 Not Implemented, anything odd
    }
}
