import Foundation
import LabstreamCore
import LabstreamStore

/// Start-up reconciliation of the index against the files on disk, before anything is served.
public enum Reconcile {
    public struct Report: Sendable, Hashable {
        /// Partial files no row owns, moved to `orphans/` (never deleted here).
        public var setAside: [String] = []
        /// Files in `orphans/` that a row owns again (a restored index), moved back.
        public var readopted: [String] = []
        public var vanished: [FileKey] = []
        public var malformed: [String] = []
    }

    /// Sets aside partial files no row owns (`orphans/`), and takes back those a row owns again;
    /// rows whose file vanished go back to not-local (a new attempt); malformed rows are
    /// quarantined (kept verbatim, their files too), never guessed. Nothing is deleted but
    /// cleared partials a crash left (`.part.fresh`, empty by construction).
    public static func run(index: OfflineIndex, layout: DataLayout, now: Int64, log: (String) -> Void) throws(LabstreamError) -> Report {
        var report = Report()
        report.malformed = try index.quarantineMalformedDownloads(now: now)
        for m in report.malformed {
            log("the index row for \(m) is damaged; it was moved to the index's quarantine table as it was, and its file kept. The file will be fetched again when read.")
        }
        let owned = try index.partialPathsInUse()
        let fm = FileManager.default
        for name in ((try? fm.contentsOfDirectory(atPath: layout.orphansDir)) ?? []).sorted()
        where owned.contains("partials/" + name) && !fm.fileExists(atPath: layout.partialsDir + "/" + name) {
            try makeDirectories(layout.partialsDir)
            if rename(layout.orphansDir + "/" + name, layout.partialsDir + "/" + name) == 0 {
                report.readopted.append(name)
                log("took \(name) back from \(layout.orphansDir): an index row owns it again")
            }
        }
        let names = (try? fm.contentsOfDirectory(atPath: layout.partialsDir)) ?? []
        for name in names.sorted() where name.hasSuffix(".part.fresh") {
            unlink(layout.partialsDir + "/" + name)   // a cleared partial a crash caught before it took the name
        }
        for name in names.sorted() where name.hasSuffix(".part") && !owned.contains("partials/" + name) {
            try makeDirectories(layout.orphansDir)
            let target = layout.orphansDir + "/" + name
            // One set aside before under the same name is older: keep both.
            let free = fm.fileExists(atPath: target) ? target + ".\(now)" : target
            if rename(layout.partialsDir + "/" + name, free) == 0 {
                report.setAside.append(name)
                log("set \(name) aside in \(layout.orphansDir): no index row owns it. `labstream repair` takes such files back with the index's backup; `labstream orphans --purge` deletes them")
            }
        }
        for var row in try index.downloads() where !row.present.isEmpty {
            guard !fm.fileExists(atPath: layout.absolute(row.partialPath)) else { continue }
            row = DownloadRow(key: row.key, status: row.pinned ? .queued : .partial, attempt: row.attempt.next, validator: nil,
                              total: row.total, present: RangeSet(), partialPath: row.partialPath,
                              reason: "the local file vanished; fetching it again", pinned: row.pinned, sourceTag: row.sourceTag, job: row.job)
            try index.saveDownload(row, now: now)
            report.vanished.append(row.key)
            log("\(row.key): its local file vanished; its bytes will be fetched again")
        }
        return report
    }

    /// The files set aside in `orphans/`, with their sizes on disk.
    public static func orphans(_ layout: DataLayout) -> [(name: String, bytes: Int64)] {
        ((try? FileManager.default.contentsOfDirectory(atPath: layout.orphansDir)) ?? []).sorted().map { name in
            var st = stat()
            let bytes = stat(layout.orphansDir + "/" + name, &st) == 0 ? Int64(st.st_blocks) * 512 : 0
            return (name, bytes)
        }
    }
}
