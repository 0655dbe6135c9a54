import Foundation
import LabstreamBackends
import LabstreamCore
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
            guard let file = files[pair.to], confirmed(pair.from, as: file, backend: backend, index: index) else {
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

    /// Whether the probe's ranges of the new item read alike with what is stored.
    static func confirmed(_ old: FileKey, as file: TreeFile, backend: any MediaBackend, index: OfflineIndex) -> Bool {
        guard let row = try? index.download(old), row.total == file.size,
            let segments = try? index.segments(old, attempt: row.attempt),
            let checks = AdoptionProbe.plan(size: row.total, segments: segments.map { ($0.range, $0.digest) })
        else { return false }
        guard let local = FileHandle(forReadingAtPath: index.dataRoot + "/" + row.partialPath) else { return false }
        defer { try? local.close() }
        var read: [ByteRange: (count: Int64, digest: String)] = [:]
        var stored: [ByteRange: String] = [:]
        for check in checks {
            let like = check.digest ?? segments.first { $0.range.contains(check.range) }?.digest
            var request = backend.rangeRequest(for: file, range: check.range, validator: nil)
            request.bodyLimit = Int(check.range.count)
            guard let answer = try? backend.transport.call(request), answer.status == 206 else { return false }
            read[check.range] = (Int64(answer.body.count), digest(answer.body, like: like))
            if check.digest == nil {
                guard (try? local.seek(toOffset: UInt64(check.range.lower))) != nil,
                    let bytes = try? local.read(upToCount: Int(check.range.count)), bytes.count == check.range.count
                else { return false }
                stored[check.range] = digest(Array(bytes), like: like)
            }
        }
        return AdoptionProbe.confirms(checks, read: read, stored: stored)
    }

    static func digest(_ bytes: [UInt8], like stored: String?) -> String {
        let hasher = SegmentDigest.hasher(like: stored)
        bytes.withUnsafeBytes { hasher.update($0) }
        return hasher.finish()
    }
}
