/// Which episode follows the one being played (issue 42.2): the next by season, then episode
/// number, among the series' episodes in the catalog. Specials (season 0) follow only specials,
/// and nothing follows an episode the server gave no numbers.
public enum NextEpisode {
    public struct Episode: Sendable, Hashable {
        public var itemId: String
        public var season: Int
        public var episode: Int

        public init(itemId: String, season: Int, episode: Int) {
            self.itemId = itemId
            self.season = season
            self.episode = episode
        }

        var order: (Int, Int, String) { (season, episode, itemId) }
    }

    public static func after(_ current: Episode, among episodes: [Episode]) -> Episode? {
        episodes.filter { candidate in
            candidate.itemId != current.itemId && (candidate.season == 0) == (current.season == 0)
                && (candidate.season, candidate.episode) > (current.season, current.episode)
        }.min { $0.order < $1.order }
    }
}
