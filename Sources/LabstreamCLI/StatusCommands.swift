import CLinux
import Foundation
import LabstreamCore
import LabstreamFS
import LabstreamFUSE
import LabstreamStore

enum StatusCommand {
    static let spec = Arguments.Spec(valued: Context.globalValued, flags: Context.globalFlags.union(["--json", "--watch"]))

    struct Entry {
        var path: String
        var state: String
        var present: Int64
        var total: Int64
        var reason: String?
    }

    static func run(_ argv: [String]) throws -> Int32 {
        let args = try Arguments.parse(argv, spec: spec)
        if args.flag("-h") || args.flag("--help") { printOut(Help.status); return ExitCode.ok }
        if args.flag("--watch") { return try watch(args) }
        var entries: [Entry] = []
        if args.positionals.isEmpty {
            entries = try fromIndex(Context(args: args))
        } else {
            for path in args.positionals { entries += try fromMount(path, context: Context(args: args)) }
        }
        if args.flag("--json") {
            let rows: [[String: Any]] = entries.map { e in
                var r: [String: Any] = ["path": e.path, "state": e.state, "bytes_present": e.present, "bytes_total": e.total]
                if let reason = e.reason { r["reason"] = reason }
                return r
            }
            let data = try JSONSerialization.data(withJSONObject: rows, options: [.sortedKeys, .prettyPrinted, .withoutEscapingSlashes])
            printOut(String(decoding: data, as: UTF8.self))
        } else {
            if args.positionals.isEmpty, let mountpoint = DaemonLock.holder(Context(args: args).layout)?.mountpoint {
                for server in ((try? FileManager.default.contentsOfDirectory(atPath: mountpoint)) ?? []).sorted() {
                    if let state = xattr(mountpoint + "/" + server, "reachability") { printOut("server \(server): \(state)") }
                }
            }
            if entries.isEmpty { printOut("Nothing is stored locally yet.") }
            for e in entries {
                let percent = e.total > 0 ? Int(e.present * 100 / e.total) : 100
                printOut("\(e.state.padding(toLength: 11, withPad: " ", startingAt: 0)) \(String(percent).leftPadded(3))%  \(e.present)/\(e.total)  \(e.path)\(e.reason.map { "  (\($0))" } ?? "")")
            }
        }
        return ExitCode.ok
    }

    /// `--watch`: a progress line per file that is moving (rate and ETA), redrawn in place on a
    /// terminal, one line per change when piped, or one JSON object per line with --json.
    /// Runs until interrupted.
    static func watch(_ args: Arguments) throws -> Int32 {
        let paths = args.positionals.isEmpty ? DaemonLock.holder(Context(args: args).layout).map { [$0.mountpoint] } ?? [] : args.positionals
        guard !paths.isEmpty else { throw CLIError(ExitCode.unavailable, "no Labstream daemon is running for this data dir; give a PATH inside a mount") }
        let tty = isatty(1) == 1 && !args.flag("--json")
        var previous: [String: (bytes: Int64, at: Date)] = [:]
        var shown: [String: String] = [:]
        while true {
            let now = Date()
            let context = Context(args: args)
            let entries = try paths.flatMap { try fromMount($0, context: context) }.filter { $0.state != "not-local" }
            var lines: [String] = []
            for e in entries {
                let line = progressLine(e, previous: &previous, now: now, json: args.flag("--json"))
                if tty || shown[e.path] != line.components(separatedBy: " MB/s")[0] {
                    lines.append(line)
                    shown[e.path] = line.components(separatedBy: " MB/s")[0]
                }
            }
            if tty { printOut("\u{1B}[H\u{1B}[2J" + lines.joined(separator: "\n")) } else { lines.forEach { printOut($0) } }
            usleep(500_000)   // a display refresh, not synchronisation
        }
    }

    /// One file's progress: a bar, percent, state, rate and ETA (or a JSON object); `previous`
    /// remembers the last sample per path for the rate.
    static func progressLine(_ e: Entry, previous: inout [String: (bytes: Int64, at: Date)], now: Date, json: Bool) -> String {
        let rate = previous[e.path].map { p in Double(e.present - p.bytes) / max(now.timeIntervalSince(p.at), 0.001) } ?? 0
        previous[e.path] = (e.present, now)
        let eta = rate > 0 ? Int(Double(e.total - e.present) / rate) : nil
        if json {
            return "{\"path\":\(jsonQuote(e.path)),\"state\":\"\(e.state)\",\"bytes_present\":\(e.present),\"bytes_total\":\(e.total),\"rate\":\(Int(rate))\(eta.map { ",\"eta\":\($0)" } ?? "")}"
        }
        let fraction = e.total > 0 ? Double(e.present) / Double(e.total) : 1
        let bar = String(repeating: "#", count: Int(fraction * 20)) + String(repeating: "-", count: 20 - Int(fraction * 20))
        return "[\(bar)] \(Int(fraction * 100))% \(e.state) \(Int(rate / 1_000_000)) MB/s\(eta.map { " ETA \($0) s" } ?? "")  \(e.path)"
    }

    static func jsonQuote(_ s: String) -> String {
        let data = (try? JSONSerialization.data(withJSONObject: [s], options: [.withoutEscapingSlashes])) ?? Data("[\"\"]".utf8)
        return String(String(decoding: data, as: UTF8.self).dropFirst().dropLast())
    }

    /// Status of PATH (a file, or every file below a folder): from this data dir's daemon over
    /// its control socket when PATH is in its mount, else from the live mount's xattrs.
    static func fromMount(_ path: String, context: Context? = nil) throws -> [Entry] {
        if let context, let holder = DaemonLock.holder(context.layout), let relative = ControlChannel.relative(path, to: holder.mountpoint),
           let answer = try ControlChannel.send(context.layout, ["op": "status", "paths": [relative]]),
           let rows = answer["entries"] as? [[String: Any]] {
            return entries(rows, below: holder.mountpoint)
        }
        return try fromXattrs(path)
    }

    /// The status of `paths` for a follower: from the daemon, which answers once something
    /// changed past `after` (or after a second), with where its change counter now stands; nil
    /// when there is no daemon to ask (the caller then looks again on its own schedule).
    static func follow(_ paths: [String], after: Int?, context: Context) throws -> (entries: [Entry], change: Int)? {
        guard let holder = DaemonLock.holder(context.layout) else { return nil }
        let relative = paths.compactMap { ControlChannel.relative($0, to: holder.mountpoint) }
        guard relative.count == paths.count else { return nil }
        var request: [String: Any] = ["op": "status", "paths": relative]
        if let after { request["after"] = after; request["wait"] = 1 }
        guard let answer = try ControlChannel.send(context.layout, request), let rows = answer["entries"] as? [[String: Any]],
              let change = (answer["change"] as? NSNumber)?.intValue else { return nil }
        return (entries(rows, below: holder.mountpoint), change)
    }

    /// The daemon's status rows, with paths under `mountpoint`.
    static func entries(_ rows: [[String: Any]], below mountpoint: String) -> [Entry] {
        rows.map { r in
            Entry(path: mountpoint + "/" + (r["path"] as? String ?? ""), state: r["state"] as? String ?? "not-local",
                  present: (r["bytes_present"] as? NSNumber)?.int64Value ?? 0, total: (r["bytes_total"] as? NSNumber)?.int64Value ?? 0,
                  reason: r["reason"] as? String)
        }
    }

    static func fromXattrs(_ path: String) throws -> [Entry] {
        guard let state = xattr(path, "state") else {
            throw CLIError(ExitCode.noInput, "\(path) is not inside a live Labstream mount (or does not exist)")
        }
        var isDir: ObjCBool = false
        if FileManager.default.fileExists(atPath: path, isDirectory: &isDir), !isDir.boolValue { return [entry(path, state: state)] }
        var out: [Entry] = []
        let walker = FileManager.default.enumerator(atPath: path)
        while let rel = walker?.nextObject() as? String {
            let full = path + "/" + rel
            var sub: ObjCBool = false
            if FileManager.default.fileExists(atPath: full, isDirectory: &sub), !sub.boolValue, let s = xattr(full, "state") {
                out.append(entry(full, state: s))
            }
        }
        return out.sorted { $0.path < $1.path }
    }

    static func entry(_ path: String, state: String) -> Entry {
        let bytes = (xattr(path, "bytes") ?? "0/0").split(separator: "/").map { Int64($0) ?? 0 }
        return Entry(path: path, state: state, present: bytes.first ?? 0, total: bytes.count > 1 ? bytes[1] : 0, reason: xattr(path, "reason"))
    }

    static func xattr(_ path: String, _ name: String) -> String? {
        var buffer = [UInt8](repeating: 0, count: 4096)
        let n = getxattr(path, FilesystemEngine.xattrPrefix + name, &buffer, buffer.count)
        guard n >= 0 else { return nil }
        return String(decoding: buffer[0..<n], as: UTF8.self)
    }

    /// Where a row shows in the tree: its file, or its original's for a copy at another quality
    /// or a new version still arriving.
    static func catalogPath(_ key: FileKey, _ paths: [FileKey: String]) -> String {
        if let path = paths[key] { return path }
        if let copy = DerivedCopy.parse(key), let base: String = paths[copy.base] { return base + " [\(copy.quality) copy]" }
        if let original = NextVersion.base(of: key), let base: String = paths[original] { return base + " [new version]" }
        return "(no longer in the catalog) \(key)"
    }

    /// Every file with local bytes, from the index (works with no daemon running).
    static func fromIndex(_ context: Context) throws -> [Entry] {
        guard FileManager.default.fileExists(atPath: context.layout.indexPath) else { return [] }
        let index = try context.openIndex()
        let root = DaemonLock.holder(context.layout)?.mountpoint
        do {
            let paths = Dictionary(try index.treeFiles().map { ($0.key, $0.path.joined(separator: "/")) }, uniquingKeysWith: { a, _ in a })
            return try index.downloads().map { row in
                let rel = catalogPath(row.key, paths)
                return Entry(path: root.map { $0 + "/" + rel } ?? rel, state: DisplayState(status: row.status).rawValue,
                             present: min(row.present.byteCount, row.total), total: row.total, reason: row.reason)
            }
        } catch { throw CLIError(error) }
    }
}

enum SyncCommand {
    static let spec = Arguments.Spec(valued: Context.globalValued, flags: Context.globalFlags)

    static func run(_ argv: [String]) throws -> Int32 {
        let args = try Arguments.parse(argv, spec: spec)
        if args.flag("-h") || args.flag("--help") { printOut(Help.sync); return ExitCode.ok }
        guard args.positionals.count <= 1 else { throw UsageError("usage: labstream sync [NAME]") }
        let context = Context(args: args)
        let config = try context.loadConfig()
        let log = Logger(level: try Logger.level(args))
        var backends = try context.backends(config, log: log)
        if let name = args.positionals.first {
            guard config.server(named: name) != nil else {
                throw CLIError.noSuchServer(name)
            }
            backends = backends.filter { $0.serverName == name }
            guard !backends.isEmpty else { throw CLIError(ExitCode.noPerm, "\(name) has no stored credentials; add it again with `labstream server add`") }
        }
        guard !backends.isEmpty else { throw CLIError(ExitCode.config, "no servers to sync; add one with `labstream server add`") }
        let tty = isatty(1) == 1
        let show: (String) -> Void = { step in printOut(tty ? "\r\u{1B}[K" + step : step, newline: !tty) }
        // A running daemon syncs itself (and reloads its tree at once).
        if DaemonLock.holder(context.layout) != nil,
           let answer = try ControlChannel.send(context.layout, ["op": "sync", "server": args.positionals.first ?? NSNull()], progress: show),
           let results = answer["results"] as? [[String: Any]] {
            return CatalogSync.printResults(results, tty: tty)
        }
        let index = try context.openIndex()
        // Progress of a long sync: redrawn in place on a terminal, a line per step when piped.
        let results = backends.map { backend in
            CatalogSync.report(backend, server: config.server(named: backend.serverName)!, index: index, log: log, progress: show)
        }
        return CatalogSync.printResults(results, tty: tty)
    }
}

enum UnmountCommand {
    static let spec = Arguments.Spec(valued: Context.globalValued, flags: Context.globalFlags)

    static func run(_ argv: [String]) throws -> Int32 {
        let args = try Arguments.parse(argv, spec: spec)
        if args.flag("-h") || args.flag("--help") { printOut(Help.unmount); return ExitCode.ok }
        guard args.positionals.count == 1 else { throw UsageError("usage: labstream unmount MOUNTPOINT") }
        let raw = args.positionals[0]
        let path = realpath(raw, nil).map { p in defer { free(p) }; return String(cString: p) } ?? raw
        guard isLabstreamMount(path) else {
            throw CLIError(ExitCode.noInput, "\(raw) is not a Labstream mount")
        }
        // Files still open keep the daemon serving them after the (lazy) unmount: say who.
        let busy = openFiles(below: path)
        guard FUSEMount.unmount(path) else {
            throw CLIError(ExitCode.tempFail, "unmounting \(raw) failed: \(String(cString: strerror(errno)))")
        }
        // Wait for the daemon that held this mount to finish persisting and exit.
        let context = Context(args: args)
        if let holder = DaemonLock.holder(context.layout), holder.mountpoint == path {
            let fd = open(context.layout.lockPath, O_RDONLY | O_CLOEXEC)
            if fd >= 0 {
                if flock(fd, LOCK_SH | LOCK_NB) != 0 && !busy.isEmpty {
                    let who = busy.map { "pid \($0.pid) (\($0.command)) has \($0.files) file\($0.files == 1 ? "" : "s") open" }.joined(separator: ", ")
                    printOut("\(raw) is gone from the tree, but \(who) in it; the daemon serves \(busy.count == 1 ? "it" : "them") until closed. "
                             + "Waiting for that (Ctrl-C stops waiting; the daemon still finishes when the files are closed).")
                }
                flock(fd, LOCK_SH)
                flock(fd, LOCK_UN)
                close(fd)
            }
        }
        printOut("Unmounted \(raw).")
        return ExitCode.ok
    }

    static func isLabstreamMount(_ path: String) -> Bool { mountedType(at: path) == "fuse.labstream" }

    /// Processes with files open below `mountpoint` (their descriptors in /proc), and how many.
    static func openFiles(below mountpoint: String) -> [(pid: Int32, command: String, files: Int)] {
        let me = getpid()
        var out: [(Int32, String, Int)] = []
        for entry in (try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? [] {
            guard let pid = Int32(entry), pid != me else { continue }
            let fds = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/fd")) ?? []
            let open = fds.filter { fd in
                guard let target = try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/\(pid)/fd/\(fd)") else { return false }
                return target.hasPrefix(mountpoint + "/")
            }.count
            guard open > 0 else { continue }
            let command = readProcFile("/proc/\(pid)/comm").map { String(decoding: $0, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines) } ?? "?"
            out.append((pid, command, open))
        }
        return out.sorted { $0.0 < $1.0 }
    }

    /// The type of the filesystem mounted at `path` (the last one, if stacked), from mountinfo.
    static func mountedType(at path: String) -> String? {
        guard let data = readProcFile("/proc/self/mountinfo") else { return nil }
        var found: String?
        for line in String(decoding: data, as: UTF8.self).split(separator: "\n") {
            let fields = line.split(separator: " ").map(String.init)
            guard fields.count > 4, let dash = fields.firstIndex(of: "-"), dash + 1 < fields.count else { continue }
            let mountpoint = fields[4].replacingOccurrences(of: "\\040", with: " ")
            if mountpoint == path { found = fields[dash + 1] }
        }
        return found
    }
}

extension String {
    func leftPadded(_ width: Int) -> String { count >= width ? self : String(repeating: " ", count: width - count) + self }
}

/// Reads a /proc file to its end. Their size reads as 0, and Foundation's `contents(atPath:)`
/// then stops after the first 4 KiB.
func readProcFile(_ path: String) -> [UInt8]? {
    let fd = open(path, O_RDONLY | O_CLOEXEC)
    guard fd >= 0 else { return nil }
    defer { close(fd) }
    var out: [UInt8] = []
    var chunk = [UInt8](repeating: 0, count: 65536)
    while true {
        let n = chunk.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
        if n < 0 && errno == EINTR { continue }
        if n <= 0 { return out }
        out += chunk[0..<n]
    }
}
