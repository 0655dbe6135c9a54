import Foundation
import LabstreamCore

/// Monitored series and what each monitor did to its episodes.
extension OfflineIndex {
    /// What a monitor did to one episode.
    public enum MonitoredState: String, Sendable, Hashable {
        /// The monitor pinned it.
        case pinned
        /// The person unpinned it after the monitor had: it is left alone.
        case declined
    }

    public struct MonitoredRow: Sendable, Hashable {
        public var seriesId: String
        public var sourceId: String
        public var state: MonitoredState

        public init(seriesId: String, sourceId: String, state: MonitoredState) {
            self.seriesId = seriesId
            self.sourceId = sourceId
            self.state = state
        }
    }

    /// Every monitor (of `server`, when given).
    public func monitors(server: String? = nil) throws(LabstreamError) -> [SeriesMonitor] {
        try read("monitors") {
            let condition = server == nil ? "" : " WHERE server=?"
            return try db.query(
                "SELECT server, series_id, mode, delete_watched, max_storage, baseline, created, remote_id, remote_etag FROM monitors\(condition) ORDER BY server, series_id",
                server.map { [SQLValue.text($0)] } ?? []
            ).compactMap { r in
                guard let server = r[0].text, let series = r[1].text, let mode = r[2].text.flatMap(SeriesMonitor.Mode.init) else { return nil }
                let baseline = Set((r[5].text ?? "").split(separator: "\n").map(String.init))
                return SeriesMonitor(
                    server: server, seriesId: series, mode: mode, deleteWatched: r[3].int == 1, maxStorage: r[4].int,
                    baseline: baseline, created: r[6].int ?? 0, remoteId: r[7].text, remoteEtag: r[8].text)
            }
        }
    }

    public func saveMonitor(_ monitor: SeriesMonitor) throws(LabstreamError) {
        do {
            try db.run(
                "INSERT OR REPLACE INTO monitors(server, series_id, mode, delete_watched, max_storage, baseline, created, remote_id, remote_etag) VALUES(?,?,?,?,?,?,?,?,?)",
                [
                    .text(monitor.server), .text(monitor.seriesId), .text(monitor.mode.description), .int(monitor.deleteWatched ? 1 : 0),
                    monitor.maxStorage.map(SQLValue.int) ?? .null, .text(monitor.baseline.sorted().joined(separator: "\n")), .int(monitor.created),
                    monitor.remoteId.map(SQLValue.text) ?? .null, monitor.remoteEtag.map(SQLValue.text) ?? .null
                ])
        } catch { throw .storage("recording the monitor of \(monitor.server)/\(monitor.seriesId) failed: \(error)") }
    }

    /// What the monitor held and skipped at its last evaluation (nothing happens for a monitor
    /// removed meanwhile).
    public func saveMonitorOutcome(server: String, series: String, _ outcome: MonitorOutcome) throws(LabstreamError) {
        do {
            try db.run(
                "UPDATE monitors SET held_episodes=?, held_bytes=?, in_scope=?, skipped=? WHERE server=? AND series_id=?",
                [
                    .int(Int64(outcome.episodes)), .int(outcome.bytes), .int(Int64(outcome.inScope)), .text(outcome.skippedCodes), .text(server),
                    .text(series)
                ])
        } catch { throw .storage("recording what the monitor of \(server)/\(series) holds failed: \(error)") }
    }

    /// What the monitor held and skipped at its last evaluation; nil before its first.
    public func monitorOutcome(server: String, series: String) throws(LabstreamError) -> MonitorOutcome? {
        try read("a monitor's outcome") {
            guard
                let r = try db.query(
                    "SELECT held_episodes, held_bytes, in_scope, skipped FROM monitors WHERE server=? AND series_id=?", [.text(server), .text(series)]
                ).first, let episodes = r[0].int, let bytes = r[1].int, let inScope = r[2].int
            else { return nil }
            return MonitorOutcome(episodes: Int(episodes), bytes: bytes, inScope: Int(inScope), skipped: MonitorOutcome.skipped(codes: r[3].text ?? ""))
        }
    }

    /// Forgets the monitor and what it did; the pins it made stay (the person's now).
    public func removeMonitor(server: String, series: String) throws(LabstreamError) {
        do {
            try db.transaction { c in
                try c.run("DELETE FROM monitors WHERE server=? AND series_id=?", [.text(server), .text(series)])
                try c.run("DELETE FROM monitored_episodes WHERE server=? AND series_id=?", [.text(server), .text(series)])
                try c.run("DELETE FROM left_series WHERE server=? AND series_id=?", [.text(server), .text(series)])
            }
        } catch { throw .storage("removing the monitor of \(server)/\(series) failed: \(error)") }
    }

    /// What monitors did to `server`'s episodes, by item.
    public func monitoredEpisodes(server: String) throws(LabstreamError) -> [String: MonitoredRow] {
        try read("monitored episodes") {
            var out: [String: MonitoredRow] = [:]
            for r in try db.query("SELECT item_id, series_id, source_id, state FROM monitored_episodes WHERE server=?", [.text(server)]) {
                guard let item = r[0].text, let series = r[1].text, let source = r[2].text, let state = r[3].text.flatMap(MonitoredState.init) else { continue }
                out[item] = MonitoredRow(seriesId: series, sourceId: source, state: state)
            }
            return out
        }
    }

    public func setMonitoredEpisode(server: String, item: String, _ row: MonitoredRow?) throws(LabstreamError) {
        do {
            if let row {
                try db.run(
                    "INSERT OR REPLACE INTO monitored_episodes(server, item_id, series_id, source_id, state) VALUES(?,?,?,?,?)",
                    [.text(server), .text(item), .text(row.seriesId), .text(row.sourceId), .text(row.state.rawValue)])
            } else {
                try db.run("DELETE FROM monitored_episodes WHERE server=? AND item_id=?", [.text(server), .text(item)])
            }
        } catch { throw .storage("recording what the monitor did to \(server)/\(item) failed: \(error)") }
    }

    /// What the server says of one item (its `.nfo`, a track's duration); nil when nothing.
    public func itemDetails(server: String, item: String) throws(LabstreamError) -> ItemDetails? {
        try read("item details") {
            Self.decodeDetails(try db.query("SELECT details FROM items WHERE server=? AND id=?", [.text(server), .text(item)]).first?[0].text)
        }
    }
}
