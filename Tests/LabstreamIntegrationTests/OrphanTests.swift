import Foundation
import LabstreamCore
import Testing

/// A removed server's stored copies can always be reclaimed: `server remove --delete-files`
/// deletes them; without it they are listed by title in `orphans`, and what `status` prints for
/// them is a path `status`, `unpin`, `cancel` and `orphans --purge PATH` take, while mounted.
@Suite(.serialized) struct OrphanTests {
    static let beta = "test/Movies/Beta (2002)/Beta (2002).mp4"
    static let gamma = "test/Movies/Gamma/Gamma.mkv"
    static let pilot = "test/Shows/Show (2020)/Season 01/Show (2020) - S01E01 - Pilot.mkv"

    /// Bytes under the data dir's partials (what stored copies take on disk).
    func stored(_ m: MountedLabstream) -> Int64 {
        let dir = m.dataDir + "/partials"
        return ((try? FileManager.default.contentsOfDirectory(atPath: dir)) ?? []).reduce(Int64(0)) { sum, name in
            var st = stat()
            return stat(dir + "/" + name, &st) == 0 ? sum + Int64(st.st_blocks) * 512 : sum
        }
    }

    func state(_ m: MountedLabstream, _ rel: String) -> String? {
        guard let out = try? m.cli(["status", "--json", m.path(rel)]).stdout,
            let rows = try? JSONSerialization.jsonObject(with: Data(out.utf8)) as? [[String: Any]]
        else { return nil }
        return rows.first?["state"] as? String
    }

    func pinAll(_ m: MountedLabstream, _ paths: [String]) throws {
        for rel in paths { #expect(try m.cli(["pin", m.path(rel)]).code == 0) }
        for rel in paths { #expect(eventually { ["complete", "unverified"].contains(state(m, rel) ?? "") }, "\(rel): \(state(m, rel) ?? "nil")") }
    }

    @Test func aRemovedServersCopiesAreListedByTitleAndFreedWhileMounted() throws {
        let m = try MountedLabstream("orphans-listed", cacheConfig: "side_assets = off")
        try m.mount()
        defer { stopDaemon(at: m.mountpoint, pid: m.daemonPid, env: m.env) }
        try pinAll(m, [Self.beta, Self.gamma, Self.pilot])
        let before = stored(m)
        #expect(before >= 5 << 20)

        let remove = try m.cli(["server", "remove", "test"])
        #expect(remove.code == 0 && remove.stdout.contains("labstream orphans"), "\(remove.stdout) \(remove.stderr)")
        // Listed by title, with their bytes.
        let orphans = try m.cli(["orphans"])
        #expect(orphans.code == 0)
        for rel in [Self.beta, Self.gamma, Self.pilot] { #expect(orphans.stdout.contains("\t\(rel)\t(server test was removed"), "\(orphans.stdout)") }
        #expect(!orphans.stdout.contains("no longer in the catalog"))
        // What status prints is a path its commands take.
        let all = try m.cli(["status"]).stdout
        #expect(all.contains(Self.beta) && !all.contains("no longer in the catalog"), "\(all)")
        let one = try m.cli(["status", "--json", Self.beta])
        let rows = try JSONSerialization.jsonObject(with: Data(one.stdout.utf8)) as? [[String: Any]]
        #expect(
            one.code == 0 && rows?.first?["path"] as? String == Self.beta && rows?.first?["bytes_present"] as? Int == 3 << 20, "\(one.stdout) \(one.stderr)")
        #expect(try m.cli(["unpin", Self.beta]).code == 0)
        #expect(try m.cli(["orphans"]).stdout.contains("\t\(Self.beta)\t(server test was removed)"))

        // orphans --purge PATH frees that one while mounted; cancel frees another.
        let purge = try m.cli(["orphans", "--purge", Self.gamma])
        #expect(purge.code == 0, "\(purge.code) \(purge.stderr)")
        #expect(!(try m.cli(["orphans"]).stdout.contains(Self.gamma)))
        let cancel = try m.cli(["cancel", Self.beta])
        #expect(cancel.code == 0, "\(cancel.code) \(cancel.stderr)")
        #expect(!(try m.cli(["orphans"]).stdout.contains(Self.beta)))
        #expect(stored(m) <= before - (3 << 20) - 700 * 1024, "\(stored(m)) of \(before)")
        // A path that names nothing deletes nothing.
        let typo = try m.cli(["orphans", "--purge", "test/Shows/Nope"])
        #expect(typo.code == 66 && typo.stderr.contains("labstream orphans"), "\(typo.code) \(typo.stderr)")
        // The rest goes with a bare --purge, still mounted.
        #expect(try m.cli(["orphans", "--purge"]).code == 0)
        #expect(!(try m.cli(["orphans"]).stdout.contains(Self.pilot)))
        #expect(stored(m) < 64 << 10, "\(stored(m))")
        try m.unmount()
    }

    @Test func serverRemoveDeleteFilesFreesItsCopies() throws {
        let m = try MountedLabstream("orphans-delete", cacheConfig: "side_assets = off")
        try m.mount()
        defer { stopDaemon(at: m.mountpoint, pid: m.daemonPid, env: m.env) }
        try pinAll(m, [Self.beta, Self.gamma])
        #expect(stored(m) >= 3 << 20)
        let remove = try m.cli(["server", "remove", "test", "--delete-files"])
        #expect(remove.code == 0 && remove.stdout.contains("Deleted its 2 downloaded files"), "\(remove.stdout) \(remove.stderr)")
        #expect(stored(m) < 64 << 10, "\(stored(m))")
        #expect(!(try m.cli(["orphans"]).stdout.contains("test/")))
        try m.unmount()
    }
}
