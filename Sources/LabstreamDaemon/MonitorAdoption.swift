import LabstreamCore
import LabstreamStore

/// Series monitors kept across a rebuilt library (issue 41 item 3): a monitor is kept by its
/// series' id, which the rebuild changed too; once a sync adopted its episodes' stored copies (or,
/// with none, by its series' provider ids), `RebuiltSeries` says where it goes. On Silo the
/// server's own monitor follows at the next evaluation (`SeriesSubscriptionPolicy.leftBehind`).
enum MonitorAdoption {
    /// What the index said before the sync replaces the catalog: the monitors, their series'
    /// episodes and provider ids, and every series then listed.
    struct Before {
        var monitors: [SeriesMonitor]
        var episodes: [RebuiltSeries.Episode]
        var ids: [String: [String: String]]
        var series: Set<String>
        /// The monitored series that left at an earlier sync with nothing in their place, as kept
        /// then (`OfflineIndex.LeftSeries`): their episodes and ids above are those; why each
        /// stays was said then.
        var kept: Set<String>
    }

    /// nil when nothing can move: no monitor, or every monitored series is still in `libraries`
    /// (the catalog the sync is about to save), or those that are not were gone before too and
    /// nothing of them was kept.
    static func before(server: String, index: OfflineIndex, libraries: [LibraryCatalog]) -> Before? {
        guard let monitors = try? index.monitors(server: server), !monitors.isEmpty else { return nil }
        var missing = Set(monitors.map(\.seriesId))
        for library in libraries {
            for item in library.items { if let series = item.seriesId { missing.remove(series) } }
            if missing.isEmpty { return nil }
        }
        guard let listed = try? index.listedEpisodes(server: server, series: missing), let kept = try? index.leftSeries(server: server, series: missing)
        else { return nil }
        // A series removed at an earlier sync (its library taken away, to be added again) is as
        // it was kept then: its episodes' numbers carry the baseline, its ids find it again.
        let episodes =
            listed
            + kept.flatMap { series, left in
                left.episodes.map { RebuiltSeries.Episode(itemId: $0.itemId, seriesId: series, season: $0.season, episode: $0.episode) }
            }
        guard !episodes.isEmpty, var ids = try? index.seriesProviderIds(server: server, series: missing), let series = try? index.listedSeries(server: server)
        else { return nil }
        for (id, left) in kept where ids[id] == nil && !left.ids.isEmpty { ids[id] = left.ids }
        return Before(monitors: monitors, episodes: episodes, ids: ids, series: series, kept: Set(kept.keys))
    }

    /// Moves each monitor whose series vanished to the series its adopted episodes name now (or,
    /// with none adopted, the one new series its provider ids name), or says in the log why it stays.
    static func carry(_ before: Before?, adopted: [(from: FileKey, to: FileKey)], server: String, index: OfflineIndex, log: Logger) {
        guard let before, let after = try? index.listedEpisodes(server: server) else { return }
        let pairs = adopted.map { (from: $0.from.itemId, to: $0.to.itemId) }
        let new = Set(after.compactMap(\.seriesId)).subtracting(before.series)
        let ids = ((try? index.seriesProviderIds(server: server, series: new)) ?? [:]).merging(before.ids) { _, old in old }
        let identities = RebuiltSeries.Identities(ids: ids, new: new)
        var monitored = Set(before.monitors.map(\.seriesId))
        for monitor in before.monitors {
            switch RebuiltSeries.outcome(monitor, before: before.episodes, after: after, adopted: pairs, monitored: monitored, identities: identities) {
            case nil: continue
            case .leave(let why)?:
                guard !before.kept.contains(monitor.seriesId) else { continue }
                // Kept for a later sync: the catalog's rows of the series go now.
                let left = OfflineIndex.LeftSeries(
                    ids: before.ids[monitor.seriesId] ?? [:], episodes: before.episodes.filter { $0.seriesId == monitor.seriesId })
                do throws(LabstreamError) { try index.keepLeftSeries(server: server, series: monitor.seriesId, left) } catch { log.warn(error.userMessage) }
                log.info("sync \(server): the monitor of \(monitor.seriesId) stays under that id, which the server no longer lists: \(why.sentence)")
            case .move(let move)?:
                do throws(LabstreamError) {
                    try index.moveMonitor(server: server, move)
                    monitored.remove(move.from)
                    monitored.insert(move.to)
                    log.info("sync \(server): the monitor of \(move.from) is now of \(move.to), the id its series has since its library was rebuilt")
                } catch { log.warn(error.userMessage) }
            }
        }
    }
}
