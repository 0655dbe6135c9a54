import Foundation
import LabstreamBackends
import LabstreamCore
import LabstreamStore

/// Fetches a server's catalog and replaces it in the index in one transaction. A failure at
/// any point leaves the previous catalog in place.
enum CatalogSync {
    struct Outcome {
        var server: String
        var files: Int
    }

    /// Seconds before the last sync that an incremental refresh still asks for: the server's
    /// clock and ours may disagree a little, and asking twice costs nothing.
    static let overlap: Int64 = 600

    /// A full sync, or with `incremental` only what changed since the last sync merged into the
    /// stored catalog (when the backend can tell; else a full one). Removals need a full sync.
    static func run(_ backend: any MediaBackend, server: LabstreamConfig.Server, index: OfflineIndex,
                    log: Logger, incremental: Bool = false, progress: ((String) -> Void)? = nil) throws(LabstreamError) -> Outcome {
        let started = Date()
        let report: (String) -> Void = { step in
            log.debug("sync \(server.name): \(step)")
            progress?("\(server.name): \(step)")
        }
        var merged: [LibraryCatalog]?
        if incremental, let last = try index.servers().first(where: { $0.name == server.name })?.lastSync {
            let stored = try index.catalog(server: server.name)
            if let changes = try backend.fetchChanges(since: last - overlap, known: stored, progress: report) {
                merged = LibraryCatalog.merge(stored, changes)
                log.info("sync \(server.name): \(changes.reduce(0) { $0 + $1.items.count }) items changed since the last sync")
            }
        }
        let libraries: [LibraryCatalog]
        if let merged { libraries = merged } else { libraries = try backend.fetchCatalog(progress: report) }
        let tree = TreeBuilder.build(server: server.name, libraries: libraries)
        let skipped = libraries.reduce(0) { $0 + $1.items.filter { $0.sources.isEmpty }.count }
        if skipped > 0 { log.info("sync \(server.name): \(skipped) items have no media file and are not shown") }
        try index.replaceCatalog(
            server: OfflineIndex.ServerRow(name: server.name, type: server.type, url: server.url, serverId: nil, lastSync: nil),
            libraries: libraries, tree: tree, now: Int64(Date().timeIntervalSince1970))
        log.info("sync \(server.name): \(tree.count) files in \(libraries.count) libraries (\(Int(Date().timeIntervalSince(started) * 1000)) ms)")
        return Outcome(server: server.name, files: tree.count)
    }
}
