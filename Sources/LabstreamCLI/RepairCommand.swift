import Foundation
import LabstreamCore
import LabstreamDaemon
import LabstreamEngine
import LabstreamStore

/// `labstream repair`: a damaged index is moved aside (never deleted) and its last verified
/// backup put in its place; stored files it owns that were set aside come back.
/// `labstream orphans [--purge]`: what is set aside, and deleting it on request only.
enum RepairCommand {
    static let spec = Arguments.Spec(valued: Context.globalValued, flags: Context.globalFlags)
    static let orphansSpec = Arguments.Spec(valued: Context.globalValued, flags: Context.globalFlags.union(["--purge"]))

    static func run(_ argv: [String]) throws -> Int32 {
        let args = try Arguments.parse(argv, spec: spec)
        if args.flag("-h") || args.flag("--help") { printOut(Help.repair); return ExitCode.ok }
        guard args.positionals.isEmpty else { throw UsageError("repair takes no arguments") }
        let context = Context(args: args)
        let layout = context.layout
        let lock = try DaemonLock.acquire(layout, mountpoint: "(labstream repair)")
        defer { lock.release() }
        let fm = FileManager.default
        let healthy = fm.fileExists(atPath: layout.indexPath) && (try? OfflineIndex(path: layout.indexPath)) != nil
        if !healthy {
            let stamp = ISODate.string(epochSeconds: Int64(Date().timeIntervalSince1970)).filter { $0.isNumber }
            do {
                if let aside = try OfflineIndex.moveAside(indexPath: layout.indexPath, stamp: String(stamp.prefix(14))) {
                    printOut("moved the damaged index to \(aside) (kept; delete it yourself once you no longer need it)")
                }
                if try OfflineIndex.restoreBackupIfMissing(indexPath: layout.indexPath) {
                    let date = (try? fm.attributesOfItem(atPath: layout.indexBackupPath)[.modificationDate] as? Date).map { "\($0)" } ?? "?"
                    printOut("restored the index from its backup of \(date) (\(layout.indexBackupPath))")
                } else {
                    printOut(
                        "there is no backup of the index (\(layout.indexBackupPath)); a fresh index takes back every stored copy whose description and bytes still match, and the next mount rebuilds the catalog from the servers"
                    )
                }
            } catch { throw CLIError(error) }
        }
        let index = try context.openIndex()
        let report: Reconcile.Report
        do { report = try Reconcile.run(index: index, layout: layout, now: Int64(Date().timeIntervalSince1970), log: { _ in }) } catch {
            throw CLIError(error)
        }
        let stored = ((try? index.downloads()) ?? []).filter { !$0.present.isEmpty }.count
        if healthy && report.readopted.isEmpty && report.adopted.isEmpty && report.reshared.isEmpty { printOut("the index is healthy; nothing to repair") }
        if !report.readopted.isEmpty { printOut("took back \(report.readopted.count) stored files from \(layout.orphansDir)") }
        if !report.adopted.isEmpty { printOut("took back \(report.adopted.count) stored copies from their own descriptions (.part.meta)") }
        if !report.reshared.isEmpty {
            printOut("recorded \(report.reshared.count) stored copies as one file shared between servers again (counted once)")
        }
        printOut("\(stored) files have local bytes")
        let left = Reconcile.orphans(layout)
        if !left.isEmpty {
            printOut(
                "\(left.count) files (\(left.reduce(0) { $0 + $1.bytes }) bytes) stay set aside in \(layout.orphansDir): no index row owns them. `labstream orphans --purge` deletes them"
            )
        }
        return ExitCode.ok
    }

    static func orphans(_ argv: [String]) throws -> Int32 {
        let args = try Arguments.parse(argv, spec: orphansSpec)
        if args.flag("-h") || args.flag("--help") { printOut(Help.repair); return ExitCode.ok }
        let context = Context(args: args)
        let layout = context.layout
        let found = Reconcile.orphans(layout)
        // The stored copies of removed servers, by the path each had in the mount.
        let removed: [OfflineIndex.RemovedCopy] =
            FileManager.default.fileExists(atPath: layout.indexPath) ? try RemovedCopies.named([], index: try context.openIndex()) : []
        if args.flag("--purge") {
            // While mounted too: set-aside files belong to no index row, and the daemon lets go of
            // a removed server's copies itself before they are deleted.
            let paths = args.positionals.map { Reclaim.clean($0, mountpoint: nil) }
            let aside = found.filter { o in paths.isEmpty || paths.contains { Reclaim.clean(layout.orphansDir + "/" + o.name, mountpoint: nil) == $0 } }
            let copies = paths.filter { p in !aside.contains { Reclaim.clean(layout.orphansDir + "/" + $0.name, mountpoint: nil) == p } }
            var freed: (files: Int, bytes: Int64) = (0, 0)
            for o in aside where unlink(layout.orphansDir + "/" + o.name) == 0 { freed = (freed.files + 1, freed.bytes + o.bytes) }
            if paths.isEmpty ? !removed.isEmpty : !copies.isEmpty {
                let purged = try RemovedCopies.purge(copies, context: context)
                freed = (freed.files + purged.files, freed.bytes + purged.bytes)
            }
            printOut("deleted \(freed.files) files (\(ByteCount.text(freed.bytes)))")
            return ExitCode.ok
        }
        if found.isEmpty && removed.isEmpty { printOut("nothing is set aside in \(layout.orphansDir), and no removed server left files") }
        for o in found { printOut("\(o.bytes)\t\(layout.orphansDir)/\(o.name)") }
        for copy in removed { printOut("\(copy.bytes)\t\(copy.path)\t(server \(copy.key.server) was removed\(copy.pinned ? "; pinned" : ""))") }
        return ExitCode.ok
    }
}
