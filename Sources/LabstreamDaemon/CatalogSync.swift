import Foundation
import LabstreamBackends
import LabstreamCore
import LabstreamStore

/// Fetches a server's catalog and replaces it in the index in one transaction. A failure at
/// any point leaves the previous catalog in place.
public enum CatalogSync {
    public struct Outcome: Sendable {
        public var server: String
        public var files: Int
        /// false: nothing changed (the server said so, or a full read found every row as it
        /// was), and the index was left as it was.
        public var changed = true
    }

    /// Seconds before the last sync that an incremental refresh still asks for: the server's
    /// clock and ours may disagree a little, and asking twice costs nothing.
    static let overlap: Int64 = 600

    /// One sync of a server at a time: two at once (the daemon's start-up sync and a `labstream
    /// sync`, say) each held a whole catalog (440 MiB at the peak for 100 000 items, against 290
    /// for one) and wrote the same rows. A second waits for the first, then runs.
    static let oneAtATime = KeyedGate()

    /// A sync the daemon schedules itself: what changed, unless a whole read is due.
    public static func scheduled(
        _ backend: any MediaBackend, server: LabstreamConfig.Server, index: OfflineIndex, log: Logger
    ) throws(LabstreamError) -> Outcome {
        let lastFull = try index.servers().first { $0.name == server.name }?.lastFullSync
        return try run(
            backend, server: server, index: index, log: log,
            incremental: !FullRefreshPolicy.due(lastFull: lastFull, now: Int64(Date().timeIntervalSince1970)))
    }

    /// A full sync, or with `incremental` only what changed since the last sync merged into the
    /// stored catalog (when the backend can tell, removals by its counts; else a full one). When
    /// nothing changed, only the sync's time is written.
    public static func run(
        _ backend: any MediaBackend, server: LabstreamConfig.Server, index: OfflineIndex,
        log: Logger, incremental: Bool = false, progress: ((String) -> Void)? = nil
    ) throws(LabstreamError) -> Outcome {
        try oneAtATime.run(server.name) { () throws(LabstreamError) in
            try runAlone(backend, server: server, index: index, log: log, incremental: incremental, progress: progress)
        }
    }

    private static func runAlone(
        _ backend: any MediaBackend, server: LabstreamConfig.Server, index: OfflineIndex,
        log: Logger, incremental: Bool, progress: ((String) -> Void)?
    ) throws(LabstreamError) -> Outcome {
        let started = Date()
        let report: (String) -> Void = { step in
            log.debug("sync \(server.name): \(step)\(log.verbose ? MemoryNote.now() : "")")
            progress?("\(server.name): \(step)")
        }
        var merged: [LibraryCatalog]?
        var staged: StagedDetails?
        defer { staged?.discard() }
        if incremental, let last = try index.servers().first(where: { $0.name == server.name })?.lastSync,
            let source = backend as? any IncrementalCatalog
        {
            let outline = try index.catalogOutline(server: server.name)
            if log.verbose { log.debug("sync \(server.name): the stored outline read\(MemoryNote.now())") }
            let names = Dictionary(outline.libraries.map { ($0.id, $0.name) }, uniquingKeysWith: { a, _ in a })
            staged = try StagedDetails(index: index, server: server.name)
            // The stored catalog, without details, is read at the first change, and each page is
            // applied to it as it arrives: the changed set is never held whole (every item changed
            // held it twice over, and each page's raw answer, at 1 158 MiB for 100 000 items).
            var merge: CatalogMerge?
            var changedItems = 0
            let told = try source.fetchChanges(since: last - overlap, known: outline, progress: report, stash: staged) {
                (change: LibraryCatalog) throws(LabstreamError) in
                guard !change.items.isEmpty || names[change.id] != change.name else { return }
                if merge == nil {
                    merge = CatalogMerge(try index.catalog(server: server.name, reading: .withoutDetails))
                    if log.verbose { log.debug("sync \(server.name): the stored catalog read to merge into\(MemoryNote.now())") }
                }
                merge?.apply(change)
                changedItems += change.items.count
            }
            if told, merge == nil {
                // Rewriting 100 000 unchanged rows (and rebuilding the tree) is what made an
                // unchanged re-sync cost a full one.
                try index.noteSynced(server: server.name, now: Int64(Date().timeIntervalSince1970))
                let files = try index.fileCount(server: server.name)
                log.info("sync \(server.name): nothing changed since the last sync (\(Int(Date().timeIntervalSince(started) * 1000)) ms)")
                return Outcome(server: server.name, files: files, changed: false)
            }
            if told, let libraries = merge?.libraries {
                merge = nil
                merged = libraries
                try staged?.finish()
                log.info("sync \(server.name): \(changedItems) items changed since the last sync")
            } else {
                // What was staged and merged goes: the whole read stages its own.
                staged?.discard()
                staged = nil
            }
        }
        let full = merged == nil
        var libraries: [LibraryCatalog]
        if let merged {
            libraries = merged
        } else {
            staged = try StagedDetails(index: index, server: server.name)
            libraries = try backend.fetchCatalog(progress: report, stash: staged)
            try staged?.finish()
        }
        merged = nil
        libraries = learnUnknownSizes(libraries, backend: backend, server: server.name, log: log) {
            (try? index.catalog(server: server.name, reading: .withoutDetails)) ?? []
        }
        if log.verbose { log.debug("sync \(server.name): the catalog read\(MemoryNote.now())") }
        let tree = TreeBuilder.build(server: server.name, libraries: libraries)
        if log.verbose { log.debug("sync \(server.name): the tree built\(MemoryNote.now())") }
        let skipped = libraries.reduce(0) { $0 + $1.items.filter { $0.sources.isEmpty }.count }
        if skipped > 0 { log.info("sync \(server.name): \(skipped) items have no media file and are not shown") }
        let vanished = CopyAdoption.vanished(server: server.name, index: index, tree: tree)
        let monitored = MonitorAdoption.before(server: server.name, index: index, libraries: libraries)
        var changed = try index.replaceCatalog(
            server: OfflineIndex.ServerRow(name: server.name, type: server.kind.rawValue, url: server.url, serverId: nil, lastSync: nil),
            libraries: libraries, tree: tree, now: Int64(Date().timeIntervalSince1970), staged: staged, full: full)
        if log.verbose { log.debug("sync \(server.name): the catalog saved\(MemoryNote.now())") }
        let adopted = CopyAdoption.adopt(vanished, tree: tree, backend: backend, index: index, log: log)
        MonitorAdoption.carry(monitored, adopted: adopted, server: server.name, index: index, log: log)
        changed = !adopted.isEmpty || changed
        log.info("sync \(server.name): \(tree.count) files in \(libraries.count) libraries (\(Int(Date().timeIntervalSince(started) * 1000)) ms)")
        // A verified copy to fall back to if the index is ever damaged (`labstream repair`).
        do { try index.backUp(unlessNewerThan: 600) } catch { log.warn(error.userMessage) }
        if log.verbose { log.debug("sync \(server.name): the index backed up\(MemoryNote.now())") }
        return Outcome(server: server.name, files: tree.count, changed: changed)
    }

    /// Sources the server lists without a size (not yet probed on its side) would show as empty
    /// files: a one-byte ranged request asks the server for the total (`sizeOf`), so they can be
    /// read and pinned like any other. At most `limit` per sync.
    /// `known`: the stored catalog, whose sizes stand for sources whose tag has not changed
    /// (read only when some source needs one). Jellyfin's photos all come without a size.
    public static func learnUnknownSizes(
        _ libraries: [LibraryCatalog], backend: any MediaBackend, server: String, log: Logger,
        known: () -> [LibraryCatalog] = { [] }, limit: Int = 2000
    ) -> [LibraryCatalog] {
        var out = libraries
        var asked = 0, learned = 0, kept = 0
        var stored: [FileKey: MediaSource]?
        for l in out.indices {
            for i in out[l].items.indices {
                for s in out[l].items[i].sources.indices where out[l].items[i].sources[s].size == nil {
                    let source = out[l].items[i].sources[s]
                    let key = FileKey(server: server, itemId: out[l].items[i].id, sourceId: source.id)
                    if stored == nil {
                        stored = Dictionary(
                            known().flatMap { lib in
                                lib.items.flatMap { item in item.sources.map { (FileKey(server: server, itemId: item.id, sourceId: $0.id), $0) } }
                            },
                            uniquingKeysWith: { a, _ in a })
                    }
                    if let before = stored?[key], let size = before.size, let tag = source.etag, before.etag == tag {
                        out[l].items[i].sources[s].size = size
                        kept += 1
                        continue
                    }
                    guard asked < limit else { continue }
                    asked += 1
                    let probe = TreeFile(path: [], key: key, size: 0, modified: 0, etag: source.etag, remoteItemId: source.itemId)
                    guard let total = (try? backend.transport.sizeOf(backend.rangeRequest(for: probe, range: ByteRange(0, 1), validator: nil)))?.size else {
                        continue
                    }
                    out[l].items[i].sources[s].size = total
                    learned += 1
                }
            }
        }
        if asked > 0 { log.info("sync \(server): \(asked) files had no size in the catalog; the server gave \(learned) of them") }
        if kept > 0 { log.debug("sync \(server): \(kept) unsized files keep the size learnt before (unchanged tag)") }
        return out
    }

    /// One server's sync as the line a user reads (the same whether the CLI or the daemon ran
    /// it). Errors also go to `failed`.
    public static func report(
        _ backend: any MediaBackend, server: LabstreamConfig.Server, index: OfflineIndex, log: Logger, incremental: Bool,
        progress: ((String) -> Void)?, failed: (LabstreamError) -> Void = { _ in }
    ) -> SyncResult {
        do {
            let outcome = try run(backend, server: server, index: index, log: log, incremental: incremental, progress: progress)
            return .succeeded(outcome.server, files: outcome.files, changed: outcome.changed)
        } catch {
            failed(error)
            return .failed(server.name, error.userMessage, code: ExitCode.of(error))
        }
    }
}
