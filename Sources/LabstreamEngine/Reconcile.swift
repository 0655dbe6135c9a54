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
        /// Stored copies no row owned, taken back from their sidecars (bytes checked).
        public var adopted: [FileKey] = []
        public var vanished: [FileKey] = []
        /// Rows whose copies are one file on disk with another row's, recorded as shared again.
        public var reshared: [FileKey] = []
        public var malformed: [String] = []
    }

    /// Sets aside partial files no row owns (`orphans/`), and takes back those a row owns again;
    /// rows whose file vanished go back to not-local (a new attempt); malformed rows are
    /// quarantined (kept verbatim, their files too), never guessed. Nothing is deleted but
    /// cleared partials a crash left (`.part.fresh`, empty by construction). Copies that are one
    /// file under two names are recorded as shared (`OfflineIndex.relinkSharedCopies`).
    public static func run(index: OfflineIndex, layout: DataLayout, now: Int64, log: (String) -> Void) throws(LabstreamError) -> Report {
        var report = Report()
        report.malformed = try index.quarantineMalformedDownloads(now: now)
        for m in report.malformed {
            log(
                "the index row for \(m) is damaged; it was moved to the index's quarantine table as it was, and its file kept. The file will be fetched again when read."
            )
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
        // Copies set aside earlier that describe themselves come back to be adopted below.
        for name in ((try? fm.contentsOfDirectory(atPath: layout.orphansDir)) ?? []).sorted()
        where name.hasSuffix(".part") && !fm.fileExists(atPath: layout.partialsDir + "/" + name)
            && CopySidecar.read(CopySidecar.path(ofPartial: layout.orphansDir + "/" + name)) != nil
        {
            try makeDirectories(layout.partialsDir)
            if rename(layout.orphansDir + "/" + name, layout.partialsDir + "/" + name) == 0 {
                rename(CopySidecar.path(ofPartial: layout.orphansDir + "/" + name), CopySidecar.path(ofPartial: layout.partialsDir + "/" + name))
            }
        }
        let names = (try? fm.contentsOfDirectory(atPath: layout.partialsDir)) ?? []
        // A cleared partial, or a shared one's link (`OfflineIndex.shareCopy`), a crash caught before it took the name.
        for name in names.sorted() where name.hasSuffix(".part.fresh") || name.hasSuffix(".part.share") {
            unlink(layout.partialsDir + "/" + name)
        }
        for name in names.sorted() where name.hasSuffix(".part") && !owned.contains("partials/" + name) {
            if let key = adopt(name, index: index, layout: layout, now: now) {
                report.adopted.append(key)
                log("took back \(name) as \(key): its sidecar describes it and its bytes match their digests")
                continue
            }
            try makeDirectories(layout.orphansDir)
            let target = layout.orphansDir + "/" + name
            // One set aside before under the same name is older: keep both.
            let free = fm.fileExists(atPath: target) ? target + ".\(now)" : target
            if rename(layout.partialsDir + "/" + name, free) == 0 {
                rename(CopySidecar.path(ofPartial: layout.partialsDir + "/" + name), CopySidecar.path(ofPartial: free))
                report.setAside.append(name)
                log(
                    "set \(name) aside in \(layout.orphansDir): no index row owns it. `labstream repair` takes such files back with the index's backup; `labstream orphans --purge` deletes them"
                )
            }
        }
        // A sidecar whose copy is gone describes nothing.
        for name in names where name.hasSuffix(".part.meta") && !fm.fileExists(atPath: layout.partialsDir + "/" + String(name.dropLast(5))) {
            unlink(layout.partialsDir + "/" + name)
        }
        for var row in try index.downloads() where !row.present.isEmpty {
            guard !fm.fileExists(atPath: layout.absolute(row.partialPath)) else { continue }
            row = row.nextAttempt(reason: StatusReason.localFileVanished)
            try index.saveDownload(row, now: now)
            report.vanished.append(row.key)
            log("\(row.key): its local file vanished; its bytes will be fetched again")
        }
        // A rebuilt index (a fresh one, or a backup older than a share) took both names of a
        // shared copy back without the record that they are one file: budgets and `du` would
        // count it twice until it was shared again.
        report.reshared = try index.relinkSharedCopies()
        if !report.reshared.isEmpty {
            log("\(report.reshared.count) stored copies are one file on disk with another's; each such file counts once again")
        }
        return report
    }

    /// Takes back `partials/NAME` from its sidecar when no row has its key: a row with the
    /// segments whose bytes still match their digests (nothing else is trusted), pinned as it
    /// was; a whole copy is checked again (size, playback probe). Returns the key adopted.
    static func adopt(_ name: String, index: OfflineIndex, layout: DataLayout, now: Int64) -> FileKey? {
        let path = layout.partialsDir + "/" + name
        guard let record = CopySidecar.read(CopySidecar.path(ofPartial: path)), (try? index.download(record.key)) == .some(nil) else { return nil }
        var st = stat()
        guard stat(path, &st) == 0, Int64(st.st_size) == record.total else { return nil }
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var good: [OfflineIndex.Segment] = []
        var buffer = [UInt8](repeating: 0, count: 1 << 20)
        for segment in record.segments.values.sorted(by: { $0.range.lower < $1.range.lower }) {
            let hasher = SegmentDigest.hasher(like: segment.digest)
            var offset = segment.range.lower
            while offset < segment.range.upper {
                let want = Int(min(Int64(buffer.count), segment.range.upper - offset))
                let n = buffer.withUnsafeMutableBytes { pread(fd, $0.baseAddress, want, off_t(offset)) }
                guard n > 0 else { break }
                buffer.withUnsafeBytes { hasher.update(UnsafeRawBufferPointer(rebasing: $0[0..<n])) }
                offset += Int64(n)
            }
            if offset == segment.range.upper && hasher.finish() == segment.digest { good.append(segment) }
        }
        guard !good.isEmpty else { return nil }
        let present = RangeSet(good.map(\.range))
        let whole = present.contains(ByteRange(0, record.total))
        let row = DownloadRow(
            key: record.key, status: whole ? .unverified : (record.pinned ? .queued : .partial), attempt: record.attempt,
            validator: record.validator, total: record.total, present: present, partialPath: "partials/" + name,
            reason: whole ? StatusReason.awaitingValidation : nil, awaitingValidation: whole, pinned: record.pinned,
            sourceTag: record.sourceTag)
        for segment in good { guard (try? index.saveDownload(row, committing: segment, now: now)) == true else { return nil } }
        return record.key
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
