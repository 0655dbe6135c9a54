import LabstreamCore
import LabstreamStore

/// Series monitors kept across a rebuilt library (issue 41 item 3): a monitor is kept by its
/// series' id, which the rebuild changed too; once a sync adopted its episodes' stored copies,
/// `RebuiltSeries` says where it goes. On Silo the server's own monitor follows at the next
/// evaluation (`SeriesSubscriptionPolicy.leftBehind`).
enum MonitorAdoption {
    /// The monitored series' episodes as listed before the sync replaces the catalog; nil when
    /// nothing can move (no stored copy vanished, or no monitor).
    static func before(server: String, index: OfflineIndex, vanished: [FileIdentity]) -> (monitors: [SeriesMonitor], episodes: [RebuiltSeries.Episode])? {
        guard !vanished.isEmpty, let monitors = try? index.monitors(server: server), !monitors.isEmpty,
            let episodes = try? index.listedEpisodes(server: server, series: Set(monitors.map(\.seriesId)))
        else { return nil }
        return (monitors, episodes)
    }

    /// Moves each monitor whose series vanished to the series its adopted episodes name now, or
    /// says in the log why it stays.
    static func carry(
        _ before: (monitors: [SeriesMonitor], episodes: [RebuiltSeries.Episode])?, adopted: [(from: FileKey, to: FileKey)], server: String,
        index: OfflineIndex, log: Logger
    ) {
        guard let before, let after = try? index.listedEpisodes(server: server) else { return }
        let pairs = adopted.map { (from: $0.from.itemId, to: $0.to.itemId) }
        var monitored = Set(before.monitors.map(\.seriesId))
        for monitor in before.monitors {
            switch RebuiltSeries.outcome(monitor, before: before.episodes, after: after, adopted: pairs, monitored: monitored) {
            case nil: continue
            case .leave(let why)?:
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
