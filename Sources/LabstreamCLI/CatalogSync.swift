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

    static func run(_ backend: any MediaBackend, server: LabstreamConfig.Server, index: OfflineIndex,
                    log: Logger, progress: ((String) -> Void)? = nil) throws(LabstreamError) -> Outcome {
        let started = Date()
        let libraries = try backend.fetchCatalog { step in
            log.debug("sync \(server.name): \(step)")
            progress?("\(server.name): \(step)")
        }
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
