import Foundation
import LabstreamBackends
import LabstreamCore
import LabstreamEngine
import LabstreamStore

/// Stored copies kept across a rebuilt library (issue 41 item 3): after a sync, a stored copy
/// whose item vanished is adopted by the one appeared item it is, where what the server says
/// of both agrees (`IdentityMatch`) and a few small ranges of the new item read alike with what
/// is stored (`AdoptionProbe`). Anything doubtful stays orphaned, as before.
enum CopyAdoption {
    /// What the server said of the stored files, read before the sync replaces it (the index
    /// drops a vanished item's row, provider ids and all). Empty, and nothing read, when every
    /// stored copy's file is still listed.
    static func vanished(server: String, index: OfflineIndex, tree: [TreeFile]) -> [FileIdentity] {
        let listed = TreeFileLookup(tree)
        guard
            let stored = try? index.downloads().filter({
                $0.key.server == server && $0.key.kind == .original && !$0.present.isEmpty && !listed.contains($0.key)
            }), !stored.isEmpty
        else { return [] }
        let keys = Set(stored.map(\.key))
        let catalog = (try? index.catalog(server: server)) ?? []
        return identities(server: server, libraries: catalog, paths: (try? index.sourcePaths(server: server)) ?? [:]).filter { keys.contains($0.key) }
    }

    /// `paths`: each source's path on the server, as the index keeps them beside the catalog.
    static func identities(server: String, libraries: [LibraryCatalog], paths: [FileKey: String]) -> [FileIdentity] {
        libraries.flatMap { library in
            library.items.flatMap { item in
                item.sources.map { s in
                    let key = FileKey(server: server, itemId: item.id, sourceId: s.id)
                    return FileIdentity(
                        key: key, kind: item.kind, providerIds: item.details?.ids ?? [:], size: s.size, container: s.container,
                        path: s.path ?? paths[key], season: item.seasonNumber, episode: item.episodeNumber)
                }
            }
        }
    }

    /// Adopts what can be confirmed; returns the adopted pairs.
    @discardableResult
    static func adopt(
        vanished: [FileIdentity], tree: [TreeFile], backend: any MediaBackend, index: OfflineIndex, log: Logger
    ) -> [(from: FileKey, to: FileKey)] {
        guard !vanished.isEmpty, let server = vanished.first?.key.server else { return [] }
        let held = Set(((try? index.downloads()) ?? []).filter { !$0.present.isEmpty }.map(\.key))
        // As stored, not as read: a whole read's details (provider ids) went to the index's stash.
        let appeared = identities(
            server: server, libraries: (try? index.catalog(server: server)) ?? [], paths: (try? index.sourcePaths(server: server)) ?? [:]
        ).filter { !held.contains($0.key) }
        let files = Dictionary(tree.map { ($0.key, $0) }, uniquingKeysWith: { a, _ in a })
        var adopted: [(from: FileKey, to: FileKey)] = []
        for pair in IdentityMatch.pairs(vanished: vanished, appeared: appeared) {
            guard let file = files[pair.to], let row = try? index.download(pair.from),
                CopyProbe.confirm(row, as: file, partial: index.dataRoot + "/" + row.partialPath, backend: backend, index: index).agrees
            else {
                log.info("sync \(server): \(pair.from) looks like \(pair.to), but its bytes could not be confirmed; it stays orphaned")
                continue
            }
            do {
                try index.adoptCopy(from: pair.from, to: pair.to, sourceTag: file.etag)
                adopted.append(pair)
                log.info("sync \(server): \(pair.from) is now \(pair.to) on the server; its stored copy was confirmed and kept")
            } catch { log.warn(error.userMessage) }
        }
        return adopted
    }
}
