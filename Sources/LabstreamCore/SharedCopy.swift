/// One stored copy for one file reached through two servers (issue 41 item 4): households point
/// Jellyfin and Plex at the same disk. Before a file of one server is fetched, a whole copy that
/// another server's file has here may be the same file; these are the decisions around it. The
/// match is `IdentityMatch`'s rule (kind, size, container, season and episode, a provider id in
/// common and none differing), bytes confirm it (`AdoptionProbe`), and the copy is shared by a
/// hard link in the data dir, so each path keeps its own name for the same bytes.
public enum SharedCopy {
    /// A whole stored copy of another server's file: what its server says of it, and which file
    /// on disk holds its bytes (`group`: its device and inode; copies already sharing have one).
    public struct Stored: Sendable, Hashable {
        public var identity: FileIdentity
        public var group: String

        public init(identity: FileIdentity, group: String) {
            self.identity = identity
            self.group = group
        }
    }

    /// The stored copy `wanted` may share, where that is beyond doubt: every stored copy that
    /// matches is one file on disk (copies already sharing it count once). Another server's path
    /// says nothing of this one's (each mounts the disk where it likes), so paths are not
    /// compared. nil: none, or two different files match (doubtful: each is fetched on its own).
    public static func source(for wanted: FileIdentity, among stored: [Stored]) -> Stored? {
        let matches = stored.filter { $0.identity.key.server != wanted.key.server && sameFile(wanted, $0.identity) }
        guard let first = matches.min(by: { $0.identity.key.description < $1.identity.key.description }),
            matches.allSatisfy({ $0.group == first.group })
        else { return nil }
        return first
    }

    /// `IdentityMatch`'s rule across two servers: as if both were one server's, paths left out.
    static func sameFile(_ a: FileIdentity, _ b: FileIdentity) -> Bool {
        var a = a, b = b
        a.path = nil
        b.path = nil
        b.key.server = a.key.server
        return IdentityMatch.same(a, b)
    }

    /// A whole or partial stored copy as a rebuilt index found it (`Reconcile`): its row, the
    /// file on disk that holds its bytes (`group`: device and inode), its length, whether every
    /// byte is present, and what its catalog says of it (nil while the catalog is not read yet).
    public struct Linked: Sendable, Hashable {
        public var key: FileKey
        public var group: String
        public var total: Int64
        public var whole: Bool
        public var identity: FileIdentity?

        public init(key: FileKey, group: String, total: Int64, whole: Bool, identity: FileIdentity?) {
            self.key = key
            self.group = group
            self.total = total
            self.whole = whole
            self.identity = identity
        }
    }

    /// The sharing an index rebuilt from the copies' sidecars lost, found again from the disk:
    /// whole copies of one length that are one file (one inode under two names in `partials/`,
    /// which only a share links) are one shared copy, unless what their catalogs say tells them
    /// apart (`sameFile`, where both are known: a catalog not read yet says nothing against it;
    /// each row's bytes were checked against its own digests when it was taken back). Returns
    /// each such row's file; a group with anything doubtful is left out whole, so its bytes are
    /// counted under each name, as before.
    public static func relinked(_ copies: [Linked]) -> [FileKey: String] {
        var out: [FileKey: String] = [:]
        for members in Dictionary(grouping: copies.filter(\.whole), by: \.group).values where members.count > 1 {
            let known = members.compactMap(\.identity)
            guard Set(members.map(\.total)).count == 1, Set(members.map(\.key)).count == members.count,
                known.allSatisfy({ a in known.allSatisfy { b in a.key == b.key || sameFile(a, b) } })
            else { continue }
            for m in members { out[m.key] = m.group }
        }
        return out
    }

    /// The recorded check of a shared file's other name (`checked`: the fingerprint of a file
    /// whose every byte matched its digests, `device:inode:size:mtime:ctime`) once one of its
    /// names went: dropping a name changes nothing of the file but its change time, so a check
    /// that held just before (`recorded == before`) holds for the file as it is now (`after`),
    /// provided nothing else moved (the same file, length and modification time). nil: the
    /// check is not carried over, and the file is checked against its digests again when read.
    public static func keptCheck(recorded: String?, before: String?, after: String?) -> String? {
        guard let recorded, let before, let after, recorded == before else { return nil }
        let b = before.split(separator: ":"), a = after.split(separator: ":")
        guard b.count == 5, a.count == 5, a.prefix(4).elementsEqual(b.prefix(4)) else { return nil }
        return after
    }

    /// Bytes counted once per file on disk: `bytes` per row, `groups` the file each shared row's
    /// bytes are (rows absent from it hold files of their own). A group's bytes are counted for
    /// the first of its rows that holds any (by key), and the others count nothing, so `du` over
    /// the mount adds a shared file once, and whichever path stays after one goes shows its
    /// bytes. Returns the rows whose bytes another row counts, and how many bytes the rows' own
    /// counts hold twice (what a total of them takes off).
    public static func counted(bytes: [FileKey: Int64], groups: [FileKey: String]) -> (uncounted: Set<FileKey>, surplus: Int64) {
        var members: [String: [FileKey]] = [:]
        for (key, group) in groups where (bytes[key] ?? 0) > 0 { members[group, default: []].append(key) }
        var uncounted = Set<FileKey>()
        var surplus: Int64 = 0
        for keys in members.values where keys.count > 1 {
            let sorted = keys.sorted { $0.description < $1.description }
            for key in sorted.dropFirst() {
                uncounted.insert(key)
                surplus += bytes[key] ?? 0
            }
        }
        return (uncounted, surplus)
    }

    /// Eviction's view of shared copies: evicting one name of a shared file frees nothing while
    /// another holds it. A file whose every name may be evicted is one candidate, its bytes on
    /// the first name (its `companions` go with it); one that some name keeps (pinned, open,
    /// filling) frees nothing, so none of its names is a candidate.
    public static func evictable(_ candidates: [EvictionPolicy.Candidate], groups: [FileKey: String]) -> (
        candidates: [EvictionPolicy.Candidate], companions: [FileKey: [FileKey]]
    ) {
        var members: [String: [EvictionPolicy.Candidate]] = [:]
        for c in candidates where c.bytes > 0 { if let g = groups[c.key] { members[g, default: []].append(c) } }
        var bytes: [FileKey: Int64] = [:]
        var companions: [FileKey: [FileKey]] = [:]
        for group in members.values where group.count > 1 {
            let sorted = group.sorted { $0.key.description < $1.key.description }
            let free = sorted.allSatisfy { !$0.pinned && !$0.open && !$0.inTransfer }
            for c in sorted.dropFirst() { bytes[c.key] = 0 }
            if free { companions[sorted[0].key] = sorted.dropFirst().map(\.key) } else { bytes[sorted[0].key] = 0 }
        }
        let out = candidates.map { c -> EvictionPolicy.Candidate in
            var c = c
            if let b = bytes[c.key] { c.bytes = b }
            return c
        }
        return (out, companions)
    }
}
