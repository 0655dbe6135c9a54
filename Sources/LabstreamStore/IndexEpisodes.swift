import LabstreamCore

extension OfflineIndex {
    /// The numbered episodes of the series `itemId` belongs to (itself among them), each with
    /// the ids of its sources on the server: what `NextEpisode` picks from. Empty for an item
    /// of no series. One query, made once per playback, on a fetch pool thread (never a FUSE
    /// read's): it searches the series' items by `items_series` (server, series_id).
    public func seriesEpisodes(server: String, of itemId: String) throws(LabstreamError) -> [(episode: NextEpisode.Episode, sources: [String])] {
        try read("the series' episodes") {
            let rows = try db.query(Self.seriesEpisodesQuery, [.text(server), .text(server), .text(itemId)])
            var out: [(episode: NextEpisode.Episode, sources: [String])] = []
            for r in rows {
                guard let id = r[0].text, let season = r[1].int, let number = r[2].int, let source = r[3].text else { continue }
                if out.last?.episode.itemId == id {
                    out[out.count - 1].sources.append(source)
                } else {
                    out.append((NextEpisode.Episode(itemId: id, season: Int(season), episode: Int(number)), [source]))
                }
            }
            return out
        }
    }

    // CROSS JOIN keeps the series' items the outer loop (SQLite never reorders one): left to
    // itself, the planner walked every media source of the server and looked each item up.
    static let seriesEpisodesQuery = """
        SELECT i.id, i.season, i.episode, m.id FROM items i CROSS JOIN media_sources m ON m.server = i.server AND m.item_id = i.id
        WHERE i.server = ? AND i.kind = 'episode' AND i.season IS NOT NULL AND i.episode IS NOT NULL AND m.orphaned = 0
        AND i.series_id = (SELECT series_id FROM items WHERE server = ? AND id = ?)
        ORDER BY i.season, i.episode, i.id, m.id
        """
}
