import Foundation
import LabstreamCore
import LabstreamDaemon
import LabstreamStore

/// The stored copies of removed servers as the CLI meets them: named by the path they had in
/// the mount (as `status` and `orphans` print them), acted on by the daemon when one runs on
/// the data dir, else in the index directly.
enum RemovedCopies {
    /// Whether `path` may name a removed server's copy: it is neither inside the mount nor a
    /// file here.
    static func mayName(_ path: String, mountpoint: String?) -> Bool {
        if let mountpoint, ControlChannel.relative(path, to: mountpoint) != nil { return false }
        return !FileManager.default.fileExists(atPath: path)
    }

    /// The copies `paths` name (none: all), refusing a path that names none.
    static func named(_ paths: [String], index: OfflineIndex) throws -> [OfflineIndex.RemovedCopy] {
        let copies: [OfflineIndex.RemovedCopy]
        do { copies = try index.removedCopies() } catch { throw CLIError(error) }
        for path in paths where Reclaim.named(copies.map(\.path), by: [path]).isEmpty {
            throw CLIError(
                ExitCode.noInput, "\(path) is neither inside a live Labstream mount nor a stored copy of a removed server (`labstream orphans` lists those)")
        }
        return Reclaim.named(copies.map(\.path), by: paths).map { copies[$0] }
    }

    /// `command` on the copies `path` names, with no daemon running: cancel frees them, unpin
    /// unpins them; nothing else applies to a file no server serves.
    static func perform(_ command: FileCommand, path: String, context: Context) throws {
        let index = try context.openIndex()
        let copies = try named([path], index: index)
        switch command {
        case .queue(.cancel): do { try index.purge(copies.map(\.key), layout: context.layout) } catch { throw CLIError(error) }
        case .unpin: do { try index.unpinRemoved(copies.map(\.key)) } catch { throw CLIError(error) }
        default:
            throw CLIError(
                ExitCode.noInput,
                "\(path) is a stored copy of a removed server: only `labstream cancel` or `labstream orphans --purge` (which free it) and `unpin` act on it")
        }
    }

    /// Frees the copies `paths` name (none: all): through the daemon when one runs, else here.
    static func purge(_ paths: [String], context: Context) throws -> (files: Int, bytes: Int64) {
        if DaemonLock.holder(context.layout) != nil,
            case .reclaimed(let files, let bytes)? = try ControlChannel.send(context.layout, .reclaim(server: nil, paths: paths))
        {
            return (files, bytes)
        }
        guard FileManager.default.fileExists(atPath: context.layout.indexPath) else { return (0, 0) }
        let index = try context.openIndex()
        let copies = try named(paths, index: index)
        do { return try index.purge(copies.map(\.key), layout: context.layout) } catch { throw CLIError(error) }
    }

    /// Their statuses, by the path each had, from the index.
    static func statuses(_ path: String, context: Context) throws -> [FileStatus] {
        guard FileManager.default.fileExists(atPath: context.layout.indexPath) else { return [] }
        let index = try context.openIndex()
        return try named([path], index: index).compactMap { copy in
            guard let row = (try? index.download(copy.key)) ?? nil else { return nil }
            return FileStatus(path: copy.path, size: row.total, row: row, related: [])
        }
    }
}
