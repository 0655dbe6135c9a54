import LabstreamCore
import Testing

@Suite struct SharedCopyTests {
    func film(_ server: String, _ item: String, tmdb: String? = "12345", size: Int64 = 8_000, path: String? = nil) -> FileIdentity {
        FileIdentity(
            key: FileKey(server: server, itemId: item, sourceId: item), kind: .movie, providerIds: tmdb.map { ["tmdb": $0] } ?? [:], size: size,
            container: "mkv", path: path)
    }

    func stored(_ identity: FileIdentity, _ group: String) -> SharedCopy.Stored { SharedCopy.Stored(identity: identity, group: group) }

    @Test func anotherServersWholeCopyOfTheSameFileIsShared() {
        let plex = film("plex", "p1")
        // Each server mounts the disk where it likes: paths are not compared.
        let found = SharedCopy.source(for: plex, among: [stored(film("jf", "j1", path: "/media/a.mkv"), "1:10")])
        #expect(found?.identity.key.server == "jf")
        // Two names of one file on disk are one candidate.
        let two = SharedCopy.source(for: plex, among: [stored(film("jf", "j1"), "1:10"), stored(film("emby", "e1"), "1:10")])
        #expect(two?.group == "1:10")
    }

    @Test func aDoubtfulOrOwnServersMatchSharesNothing() {
        let plex = film("plex", "p1")
        // Two different files on disk that both look like it.
        #expect(SharedCopy.source(for: plex, among: [stored(film("jf", "j1"), "1:10"), stored(film("emby", "e1"), "1:11")]) == nil)
        #expect(SharedCopy.source(for: plex, among: [stored(film("jf", "j1", tmdb: "999"), "1:10")]) == nil)
        #expect(SharedCopy.source(for: plex, among: [stored(film("jf", "j1", tmdb: nil), "1:10")]) == nil)
        #expect(SharedCopy.source(for: plex, among: [stored(film("jf", "j1", size: 8_001), "1:10")]) == nil)
        // The same server's other item is not a shared copy (a rebuilt library is `IdentityMatch`'s).
        #expect(SharedCopy.source(for: plex, among: [stored(film("plex", "p2"), "1:10")]) == nil)
    }

    @Test func aSharedFileIsCountedOnceUnderItsFirstName() {
        let a = FileKey(server: "jf", itemId: "1", sourceId: "1"), b = FileKey(server: "plex", itemId: "2", sourceId: "2")
        let c = FileKey(server: "plex", itemId: "3", sourceId: "3")
        let counted = SharedCopy.counted(bytes: [a: 100, b: 100, c: 50], groups: [a: "1:10", b: "1:10"])
        #expect(counted.uncounted == [b] && counted.surplus == 100)
        // The name that stays after the first goes counts the bytes.
        #expect(SharedCopy.counted(bytes: [a: 0, b: 100], groups: [a: "1:10", b: "1:10"]).uncounted.isEmpty)
    }

    @Test func aSharedFileIsEvictedWithAllItsNamesOrNotAtAll() {
        let a = FileKey(server: "jf", itemId: "1", sourceId: "1"), b = FileKey(server: "plex", itemId: "2", sourceId: "2")
        func candidate(_ key: FileKey, pinned: Bool) -> EvictionPolicy.Candidate {
            EvictionPolicy.Candidate(key: key, bytes: 100, lastUse: 0, pinned: pinned, open: false, inTransfer: false)
        }
        let groups = [a: "1:10", b: "1:10"]
        let free = SharedCopy.evictable([candidate(a, pinned: false), candidate(b, pinned: false)], groups: groups)
        #expect(free.candidates.map(\.bytes) == [100, 0] && free.companions == [a: [b]])
        // Pinned under one path: evicting the other would free nothing.
        let kept = SharedCopy.evictable([candidate(a, pinned: false), candidate(b, pinned: true)], groups: groups)
        #expect(kept.candidates.map(\.bytes) == [0, 0] && kept.companions.isEmpty)
    }

    @Test func aRebuiltIndexFindsTheSharingAgainFromTheDisk() {
        func linked(_ identity: FileIdentity, _ group: String, whole: Bool = true, known: Bool = true, total: Int64 = 8_000) -> SharedCopy.Linked {
            SharedCopy.Linked(key: identity.key, group: group, total: total, whole: whole, identity: known ? identity : nil)
        }
        let jf = film("jf", "j1"), plex = film("plex", "p1"), other = film("emby", "e1")
        // One inode under two names: one shared copy, with or without a catalog read yet.
        #expect(SharedCopy.relinked([linked(jf, "1:10"), linked(plex, "1:10"), linked(other, "1:11")]) == [jf.key: "1:10", plex.key: "1:10"])
        #expect(SharedCopy.relinked([linked(jf, "1:10", known: false), linked(plex, "1:10", known: false)]).count == 2)
        // A file of its own is not shared, nor one whose copy is not whole, of another length,
        // or that the catalogs tell apart.
        #expect(SharedCopy.relinked([linked(jf, "1:10"), linked(plex, "1:11")]).isEmpty)
        #expect(SharedCopy.relinked([linked(jf, "1:10"), linked(plex, "1:10", whole: false)]).isEmpty)
        #expect(SharedCopy.relinked([linked(jf, "1:10"), linked(plex, "1:10", total: 9_000)]).isEmpty)
        #expect(SharedCopy.relinked([linked(jf, "1:10"), linked(film("plex", "p1", tmdb: "999"), "1:10")]).isEmpty)
    }

    @Test func aSurvivingNameKeepsItsCheckWhenOnlyTheChangeTimeMoved() {
        let checked = "66306:1234:8000:1700000000.5:1700000001.25"
        let unlinked = "66306:1234:8000:1700000000.5:1700000099.75"
        #expect(SharedCopy.keptCheck(recorded: checked, before: checked, after: unlinked) == unlinked)
        // A check already stale before, a write (modification time), another file or length: nothing is carried over.
        #expect(SharedCopy.keptCheck(recorded: "66306:1234:8000:1.0:2.0", before: checked, after: unlinked) == nil)
        #expect(SharedCopy.keptCheck(recorded: checked, before: checked, after: "66306:1234:8000:1700000050.0:1700000099.75") == nil)
        #expect(SharedCopy.keptCheck(recorded: checked, before: checked, after: "66306:9999:8000:1700000000.5:1700000099.75") == nil)
        #expect(SharedCopy.keptCheck(recorded: checked, before: checked, after: "66306:1234:8001:1700000000.5:1700000099.75") == nil)
        #expect(SharedCopy.keptCheck(recorded: checked, before: checked, after: nil) == nil)
        #expect(SharedCopy.keptCheck(recorded: nil, before: checked, after: unlinked) == nil)
    }
}
