import Foundation
import LabstreamCore
import LabstreamStore

/// Start-up reconciliation of the index against the files on disk, before anything is served.
public enum Reconcile {
    public struct Report: Sendable, Hashable {
        public var orphansRemoved: [String] = []
        public var vanished: [FileKey] = []
        public var malformed: [String] = []
    }

    /// Removes partial files no row owns; rows whose file vanished go back to not-local (a new
    /// attempt); malformed rows are quarantined (kept verbatim, their files too), never guessed.
    public static func run(index: OfflineIndex, layout: DataLayout, now: Int64, log: (String) -> Void) throws(LabstreamError) -> Report {
        var report = Report()
        report.malformed = try index.quarantineMalformedDownloads(now: now)
        for m in report.malformed {
            log("the index row for \(m) is damaged; it was moved to the index's quarantine table as it was, and its file kept. The file will be fetched again when read.")
        }
        let owned = try index.partialPathsInUse()
        let names = (try? FileManager.default.contentsOfDirectory(atPath: layout.partialsDir)) ?? []
        // A `.part.fresh` is a cleared partial that a crash caught before it took the name.
        for name in names.sorted() where (name.hasSuffix(".part") && !owned.contains("partials/" + name)) || name.hasSuffix(".part.fresh") {
            if unlink(layout.partialsDir + "/" + name) == 0 {
                report.orphansRemoved.append(name)
                log("removed \(name): no index row owns it")
            }
        }
        for var row in try index.downloads() where !row.present.isEmpty {
            guard !FileManager.default.fileExists(atPath: layout.absolute(row.partialPath)) else { continue }
            row = DownloadRow(key: row.key, status: row.pinned ? .queued : .partial, attempt: row.attempt.next, validator: nil,
                              total: row.total, present: RangeSet(), partialPath: row.partialPath,
                              reason: "the local file vanished; fetching it again", pinned: row.pinned, sourceTag: row.sourceTag, job: row.job)
            try index.saveDownload(row, now: now)
            report.vanished.append(row.key)
            log("\(row.key): its local file vanished; its bytes will be fetched again")
        }
        return report
    }
}
