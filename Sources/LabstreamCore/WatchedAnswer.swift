/// What a server's watched query answered: the episodes it listed as watched, and which of them
/// carry, in that same answer, their own watched flag saying otherwise (Jellyfin and Emby
/// `UserData.Played` false; a Silo progress row with `completed` false). A server that does not
/// apply the query's filter (Silo's Jellyfin-compatible API names filters it leaves unapplied)
/// lists every episode: trusting the query would take them all as watched.
public struct WatchedAnswer: Sendable, Hashable {
    public var listed: Set<String>
    public var ownFlagUnwatched: Set<String>

    public init(listed: Set<String>, ownFlagUnwatched: Set<String> = []) {
        self.listed = listed
        self.ownFlagUnwatched = ownFlagUnwatched
    }
}

/// Which episodes count as watched when the query and the episodes' own flags disagree. Pure.
public enum WatchedAgreement {
    /// The watched episodes of `episodes` (the monitored series'), and how many of them the
    /// query listed while their own flag says unwatched. Those count as unwatched: a watched
    /// episode is one a monitor may remove, and a copy is never removed on a doubtful word.
    public static func resolve(_ answer: WatchedAnswer, among episodes: Set<String>) -> (watched: Set<String>, disagreeing: Int) {
        let doubtful = answer.listed.intersection(answer.ownFlagUnwatched).intersection(episodes)
        return (answer.listed.subtracting(answer.ownFlagUnwatched), doubtful.count)
    }
}
