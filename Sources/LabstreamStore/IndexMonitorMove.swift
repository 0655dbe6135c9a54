import Foundation
import LabstreamCore

/// A monitor moved to the id a rebuilt library gave its series (issue 41 item 3; `RebuiltSeries`).
extension OfflineIndex {
    /// The episodes `server`'s catalog lists (not the orphans kept for their bytes), of
    /// `series` only when given: what `RebuiltSeries` compares before and after a sync.
    public func listedEpisodes(server: String, series: Set<String>? = nil) throws(LabstreamError) -> [RebuiltSeries.Episode] {
        if let series, series.isEmpty { return [] }
        return try read("the catalog's episodes") {
            let only = series.map { " AND i.series_id IN (\(Array(repeating: "?", count: $0.count).joined(separator: ",")))" } ?? ""
            let rows = try db.query(
                """
                SELECT DISTINCT i.id, i.series_id, i.season, i.episode FROM items i JOIN media_sources m ON m.server = i.server AND m.item_id = i.id
                WHERE i.server = ? AND i.kind = 'episode' AND m.orphaned = 0\(only)
                """, [SQLValue.text(server)] + (series ?? []).sorted().map(SQLValue.text))
            return rows.compactMap { r in
                r[0].text.map { RebuiltSeries.Episode(itemId: $0, seriesId: r[1].text, season: r[2].int.map(Int.init), episode: r[3].int.map(Int.init)) }
            }
        }
    }

    /// The series `server`'s catalog lists episodes of: before a sync, what tells the series new
    /// since it.
    public func listedSeries(server: String) throws(LabstreamError) -> Set<String> {
        try read("the catalog's series") {
            let rows = try db.query(
                """
                SELECT DISTINCT i.series_id FROM items i JOIN media_sources m ON m.server = i.server AND m.item_id = i.id
                WHERE i.server = ? AND i.kind = 'episode' AND m.orphaned = 0 AND i.series_id IS NOT NULL
                """, [.text(server)])
            return Set(rows.compactMap { $0[0].text })
        }
    }

    /// Each series' provider ids as the catalog stored them (its details' `ids`), of `series`
    /// only when given; a series without any is absent.
    public func seriesProviderIds(server: String, series: Set<String>? = nil) throws(LabstreamError) -> [String: [String: String]] {
        if let series, series.isEmpty { return [:] }
        return try read("the catalog's series details") {
            let only = series.map { " AND series_id IN (\(Array(repeating: "?", count: $0.count).joined(separator: ",")))" } ?? ""
            let rows = try db.query(
                "SELECT series_id, details FROM series_details WHERE server = ?\(only)", [SQLValue.text(server)] + (series ?? []).sorted().map(SQLValue.text))
            var out: [String: [String: String]] = [:]
            for r in rows {
                if let id = r[0].text, let ids = Self.decodeDetails(r[1].text)?.ids, !ids.isEmpty { out[id] = ids }
            }
            return out
        }
    }

    /// A monitored series that left the catalog with nothing in its place, as it was then.
    public struct LeftSeries: Sendable, Hashable, Codable {
        public var ids: [String: String]
        public var episodes: [RebuiltSeries.Episode]

        public init(ids: [String: String], episodes: [RebuiltSeries.Episode]) {
            self.ids = ids
            self.episodes = episodes
        }
    }

    /// The kept snapshots of `series` (those that have one).
    public func leftSeries(server: String, series: Set<String>) throws(LabstreamError) -> [String: LeftSeries] {
        if series.isEmpty { return [:] }
        return try read("the series that left the catalog") {
            let marks = Array(repeating: "?", count: series.count).joined(separator: ",")
            let rows = try db.query(
                "SELECT series_id, snapshot FROM left_series WHERE server = ? AND series_id IN (\(marks))",
                [SQLValue.text(server)] + series.sorted().map(SQLValue.text))
            var out: [String: LeftSeries] = [:]
            for r in rows {
                guard let id = r[0].text, let text = r[1].text, let kept = try? JSONDecoder().decode(LeftSeries.self, from: Data(text.utf8)) else { continue }
                out[id] = kept
            }
            return out
        }
    }

    /// Keeps `series`' snapshot until its monitor moves (`moveMonitor`) or is removed.
    public func keepLeftSeries(server: String, series: String, _ snapshot: LeftSeries) throws(LabstreamError) {
        do {
            let text = String(decoding: try JSONEncoder().encode(snapshot), as: UTF8.self)
            try db.run("INSERT OR REPLACE INTO left_series(server, series_id, snapshot) VALUES(?,?,?)", [.text(server), .text(series), .text(text)])
        } catch { throw .storage("keeping what the monitored series \(server)/\(series) was failed: \(error)") }
    }

    /// Moves the monitor of `move.from` to `move.to` in one transaction: its settings, server
    /// record and last outcome stay; its baseline becomes `move.baseline`; what it did to each
    /// episode goes to the new item (`move.items`; an adopted copy's row moved with the copy
    /// already). Refuses (nothing changed) when `move.to` has a monitor.
    public func moveMonitor(server: String, _ move: RebuiltSeries.Move) throws(LabstreamError) {
        do {
            try db.transaction { c in
                guard try c.query("SELECT 1 FROM monitors WHERE server=? AND series_id=?", [.text(server), .text(move.to)]).first == nil else {
                    throw AdoptionRefused(why: "\(server)/\(move.to) has a monitor of its own")
                }
                try c.run(
                    "UPDATE monitors SET series_id=?, baseline=? WHERE server=? AND series_id=?",
                    [.text(move.to), .text(move.baseline.sorted().joined(separator: "\n")), .text(server), .text(move.from)])
                for (old, new) in move.items.sorted(by: { $0.key < $1.key }) where old != new {
                    guard try c.query("SELECT 1 FROM monitored_episodes WHERE server=? AND item_id=?", [.text(server), .text(new)]).first == nil else {
                        continue
                    }
                    try c.run(
                        "UPDATE monitored_episodes SET item_id=? WHERE server=? AND item_id=? AND series_id=?",
                        [.text(new), .text(server), .text(old), .text(move.from)])
                }
                try c.run("UPDATE monitored_episodes SET series_id=? WHERE server=? AND series_id=?", [.text(move.to), .text(server), .text(move.from)])
                try c.run("DELETE FROM left_series WHERE server=? AND series_id=?", [.text(server), .text(move.from)])
            }
        } catch let refused as AdoptionRefused {
            throw .storage("moving the monitor of \(server)/\(move.from) to \(move.to) refused: \(refused.why); nothing was changed")
        } catch {
            throw .storage("moving the monitor of \(server)/\(move.from) to \(move.to) failed (\(error)); nothing was changed")
        }
    }
}
