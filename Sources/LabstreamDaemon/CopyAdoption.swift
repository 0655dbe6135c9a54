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
    /// The stored files whose items are gone from the server, as it described them.
    struct Vanished {
        /// Those whose items vanished at this sync.
        var now: [FileIdentity] = []
        /// Those orphaned at an earlier sync (a library removed, then added again later).
        var earlier: [FileIdentity] = []
        /// The files of an earlier one's size listed before this sync: each was weighed against
        /// it when one of the two appeared, so only a file this sync brings may be it now (a
        /// refused match is not probed again at every sync).
        var listedBefore: Set<FileKey> = []
    }

    /// What the server said of the stored files, read before the sync replaces it (the index
    /// drops a vanished item's row, provider ids and all; an orphan's is kept beside it).
    /// Nothing read but the stored copies when every stored copy's file is still listed.
    static func vanished(server: String, index: OfflineIndex, tree: [TreeFile]) -> Vanished {
        let listed = TreeFileLookup(tree)
        var out = Vanished()
        out.earlier = ((try? index.orphanIdentities(server: server)) ?? []).filter { !listed.contains($0.key) }
        out.listedBefore = (try? index.listedKeys(server: server, sizes: Set(out.earlier.compactMap(\.size)))) ?? []
        let earlier = Set(out.earlier.map(\.key))
        guard
            let stored = try? index.downloads().filter({
                $0.key.server == server && $0.key.kind == .original && !$0.present.isEmpty && !listed.contains($0.key) && !earlier.contains($0.key)
            }), !stored.isEmpty
        else { return out }
        out.now = (try? index.listedIdentities(server: server, keys: Set(stored.map(\.key)))) ?? []
        return out
    }

    /// Adopts what can be confirmed; returns the adopted pairs.
    @discardableResult
    static func adopt(
        _ gone: Vanished, tree: [TreeFile], backend: any MediaBackend, index: OfflineIndex, log: Logger
    ) -> [(from: FileKey, to: FileKey)] {
        let vanished = gone.now + gone.earlier
        guard !vanished.isEmpty, let server = vanished.first?.key.server else { return [] }
        let held = Set(((try? index.downloads()) ?? []).filter { !$0.present.isEmpty }.map(\.key))
        // As stored, not as read: a whole read's details (provider ids) went to the index's stash.
        // Only files of a vanished one's size can be it: no table of the whole catalog is made
        // (a sync with an orphan kept for months reads this each time).
        let sizes = Set(vanished.compactMap(\.size))
        let appeared = ((try? index.listedIdentities(server: server, keys: index.listedKeys(server: server, sizes: sizes))) ?? []).filter {
            !held.contains($0.key)
        }
        let earlier = Set(gone.earlier.map(\.key))
        let files = Dictionary(tree.map { ($0.key, $0) }, uniquingKeysWith: { a, _ in a })
        var adopted: [(from: FileKey, to: FileKey)] = []
        for pair in IdentityMatch.pairs(vanished: vanished, appeared: appeared) where !(earlier.contains(pair.from) && gone.listedBefore.contains(pair.to)) {
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
