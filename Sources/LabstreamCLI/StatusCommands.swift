import CLinux
import Foundation
import LabstreamCore
import LabstreamDaemon
import LabstreamFS
import LabstreamFUSE
import LabstreamStore

enum StatusCommand {
    static let spec = Arguments.Spec(valued: Context.globalValued, flags: Context.globalFlags.union(["--json", "--watch"]))

    static func run(_ argv: [String]) throws -> Int32 {
        let args = try Arguments.parse(argv, spec: spec)
        if args.flag("-h") || args.flag("--help") { printOut(Help.status); return ExitCode.ok }
        if args.flag("--watch") { return try watch(args) }
        let context = Context(args: args)
        var entries: [FileStatus] = []
        // With no daemon on the data dir (none mounted since, or one killed), what the index has
        // under way moves no more: it is said as such, not as the last daemon left it.
        let daemon = DaemonLock.holder(context.layout) != nil
        var underWay = false
        func asStored(_ stored: [FileStatus]) -> [FileStatus] {
            guard !daemon else { return stored }
            underWay = underWay || stored.contains(where: \.wasUnderWay)
            return stored.map { $0.withoutDaemon() }
        }
        if args.positionals.isEmpty {
            entries = asStored(try fromIndex(context))
        } else {
            // With no daemon, a catalog path (`SERVER/LIBRARY/…`) is answered from the index,
            // as `pin` takes one.
            for path in args.positionals {
                if xattr(path, "state") == nil && RemovedCopies.mayName(path, mountpoint: DaemonLock.holder(context.layout)?.mountpoint),
                    let removed = try? RemovedCopies.statuses(Reclaim.clean(path, mountpoint: nil), context: context), !removed.isEmpty
                {
                    // A removed server's copy, by the path `status` printed for it.
                    entries += asStored(removed)
                    continue
                }
                entries += try !daemon && xattr(path, "state") == nil ? asStored(fromIndex(context, catalogPath: path)) : fromMount(path, context: context)
            }
        }
        // A monitored series asked for: its monitor (what it holds, what it skipped and why, when
        // it looks next), above its files.
        let allReports = args.positionals.isEmpty ? [] : (try? MonitorCommand.reports(context)) ?? []
        let monitored = args.positionals.compactMap { MonitorCommand.report(for: $0, in: allReports, context: context) }
        if args.flag("--json") {
            let root = DaemonLock.holder(context.layout)?.mountpoint
            let monitors: [[String: Any]] = monitored.map { report in
                ["path": ((root.map { [$0] } ?? []) + [report.folder ?? ""]).joined(separator: "/"), "monitor": report.json]
            }
            guard !monitors.isEmpty else {
                printOut(jsonText(entries, pretty: true))
                return ExitCode.ok
            }
            // A monitor's object first, then the files in their one JSON form.
            let files = (try? JSONSerialization.jsonObject(with: Data(jsonText(entries).utf8)) as? [Any]) ?? []
            let data = try JSONSerialization.data(withJSONObject: monitors + files, options: [.sortedKeys, .prettyPrinted, .withoutEscapingSlashes])
            printOut(String(decoding: data, as: UTF8.self))
            return ExitCode.ok
        }
        if args.positionals.isEmpty, let mountpoint = DaemonLock.holder(context.layout)?.mountpoint {
            let servers = (try? context.loadConfig())?.servers ?? []
            for server in ((try? FileManager.default.contentsOfDirectory(atPath: mountpoint)) ?? []).sorted() {
                guard let state = xattr(mountpoint + "/" + server, "reachability") else { continue }
                let again = servers.first { $0.name == server && state == Reachability.authFailed.rawValue }
                printOut(
                    "server \(server): \(state)"
                        + (again.map { " (the stored sign-in was refused; transfers are paused: sign in again with `\($0.signInAgain)`)" } ?? ""))
            }
        }
        let now = Int64(Date().timeIntervalSince1970)
        for report in monitored { printOut("monitor: \(MonitorCommand.describe(report.monitor.settings)); \(report.summary(now: now))") }
        if !daemon, let dead = DaemonLock.read(context.layout), dead.mountpoint.hasPrefix("/") {
            // The lock still names a daemon that no longer holds it: it ended without unmounting.
            let stale = UnmountCommand.mountedType(at: dead.mountpoint) == "fuse.labstream"
            printOut(
                "The Labstream daemon is not running: pid \(dead.pid), which mounted \(dead.mountpoint), ended without unmounting (killed or crashed)"
                    + (stale
                        ? ". Nothing downloads until Labstream is mounted again: `labstream mount \(dead.mountpoint)` clears its dead mount first."
                        : ". Nothing downloads until Labstream is mounted again."))
        } else if underWay {
            printOut("The Labstream daemon is not running for this data directory: nothing downloads until Labstream is mounted.")
        }
        if entries.isEmpty { printOut(args.positionals.isEmpty ? "Nothing is stored locally yet." : "No files there.") }
        printOut(table(entries).joined(separator: "\n"), newline: !entries.isEmpty)
        return ExitCode.ok
    }

    /// The text form: one aligned line per file (state, percent, sizes, path, why), and one
    /// indented line per copy or new version of it.
    static func table(_ entries: [FileStatus]) -> [String] {
        func sizes(_ present: Int64, _ total: Int64) -> String { "\(ByteCount.text(present)) of \(ByteCount.text(total))" }
        func percent(_ present: Int64, _ total: Int64) -> String { (total > 0 ? "\(present * 100 / total)%" : "100%").leftPadded(4) }
        let width = entries.map { sizes($0.present, $0.total).count }.max() ?? 0
        var lines: [String] = []
        for e in entries {
            let why = e.reason.map { "  (\($0.sentence))" } ?? ""
            lines.append(
                "\(e.state.rawValue.padding(toLength: 11, withPad: " ", startingAt: 0)) \(percent(e.present, e.total))  "
                    + "\(sizes(e.present, e.total).padding(toLength: width, withPad: " ", startingAt: 0))  \(e.path)\(why)")
            for part in e.copies + (e.newVersion.map { [$0] } ?? []) {
                let why = part.reason.map { "  (\($0.sentence))" } ?? ""
                lines.append(
                    "            \(part.label): \(part.state.rawValue) \(percent(part.present, part.total).trimmingCharacters(in: .whitespaces)), "
                        + "\(sizes(part.present, part.total))\(why)")
            }
        }
        return lines
    }

    /// `--watch`: a progress line per file that is moving (rate and ETA), redrawn in place on a
    /// terminal, one line per change when piped, or one JSON object per line with --json.
    /// Runs until interrupted.
    static func watch(_ args: Arguments) throws -> Int32 {
        let paths = args.positionals.isEmpty ? DaemonLock.holder(Context(args: args).layout).map { [$0.mountpoint] } ?? [] : args.positionals
        guard !paths.isEmpty else { throw CLIError(ExitCode.unavailable, "no Labstream daemon is running for this data dir; give a PATH inside a mount") }
        let json = args.flag("--json")
        let tty = isatty(1) == 1 && !json
        var meters = Meters()
        var shown: [String: String] = [:]
        var screen = LiveLines()
        while true {
            let context = Context(args: args)
            let entries = try paths.flatMap { try fromMount($0, context: context) }.filter { $0.state != .notLocal || !$0.copies.isEmpty }
            meters.record(entries)
            var lines: [String] = []
            for e in entries {
                // Piped, a file gets a line when it changes, not when only its rate does.
                let line = json ? jsonText(Progress(status: e, rate: meters.rate(e.path).map(Int.init), eta: meters.eta(e))) : progressLine(e, meters: meters)
                let change = json ? jsonText(e) : progressLine(e, meters: nil)
                if tty || shown[e.path] != change {
                    lines.append(line)
                    shown[e.path] = change
                }
            }
            if tty { screen.show(lines.isEmpty ? ["Nothing is downloading."] : lines) } else { lines.forEach { printOut($0) } }
            usleep(500_000)  // a display refresh, not synchronisation
        }
    }

    /// Smoothed rates per file (`RateMeter`), sampled on a monotonic clock.
    struct Meters {
        var byPath: [String: RateMeter] = [:]

        mutating func record(_ entries: [FileStatus]) {
            let at = monotonicSeconds()
            for e in entries { byPath[e.path, default: RateMeter()].record(e.present, at: at) }
        }

        func rate(_ path: String) -> Double? { byPath[path]?.bytesPerSecond }
        func eta(_ e: FileStatus) -> Int? { byPath[e.path]?.secondsLeft(toReach: e.total) }
    }

    /// One file's progress line: a bar, percent, state, rate and ETA when `meters` is given, the
    /// reason when there is one, the path.
    static func progressLine(_ e: FileStatus, meters: Meters?) -> String {
        let fraction = e.total > 0 ? Double(e.present) / Double(e.total) : 1
        let filled = min(Int(fraction * 20), 20)
        let bar = String(repeating: "#", count: filled) + String(repeating: "-", count: 20 - filled)
        var line = "[\(bar)] \(String(Int(fraction * 100)).leftPadded(3))% \(e.state.rawValue)"
        if let meters, e.state == .downloading || e.state == .queued || e.state == .partial {
            line += " \(RateText.text(meters.rate(e.path))) \(RateText.eta(meters.eta(e)))"
        }
        line += "  \(e.path)"
        if let why = e.reason?.sentence { line += "  (\(why))" }
        for part in e.copies + (e.newVersion.map { [$0] } ?? []) { line += "  [\(part.label): \(part.state.rawValue)]" }
        return line
    }

    /// One file's status with its rate (bytes a second) and time left: `--watch --json`'s lines.
    struct Progress: Encodable {
        var status: FileStatus
        var rate: Int?
        var eta: Int?

        enum Keys: String, CodingKey { case rate, eta }

        func encode(to encoder: any Encoder) throws {
            try status.encode(to: encoder)
            var c = encoder.container(keyedBy: Keys.self)
            try c.encodeIfPresent(rate, forKey: .rate)
            try c.encodeIfPresent(eta, forKey: .eta)
        }
    }

    /// The one JSON form of a value (sorted keys; one line unless `pretty`).
    static func jsonText(_ value: some Encodable, pretty: Bool = false) -> String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = pretty ? [.sortedKeys, .prettyPrinted, .withoutEscapingSlashes] : [.sortedKeys, .withoutEscapingSlashes]
        return (try? encoder.encode(value)).map { String(decoding: $0, as: UTF8.self) } ?? "{}"
    }

    static func jsonLine(_ object: [String: Any]) -> String {
        let data = (try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys, .withoutEscapingSlashes])) ?? Data("{}".utf8)
        return String(decoding: data, as: UTF8.self)
    }

    /// Status of PATH (a file, or every file below a folder): from this data dir's daemon over
    /// its control socket when PATH is in its mount, else from the live mount's xattrs.
    static func fromMount(_ path: String, context: Context? = nil) throws -> [FileStatus] {
        if let context, let holder = DaemonLock.holder(context.layout), let relative = ControlChannel.relative(path, to: holder.mountpoint),
            case .statuses(let rows, _)? = try ControlChannel.send(context.layout, .status(paths: [relative]), orNilWhenClosed: true)
        {
            return entries(rows, below: holder.mountpoint)
        }
        return try fromXattrs(path)
    }

    /// The status of `paths` for a follower: from the daemon, which answers once something
    /// changed past `after` (or after a second), with where its change counter now stands; nil
    /// when there is no daemon to ask (the caller then looks again on its own schedule).
    static func follow(_ paths: [String], after: Int?, context: Context) throws -> (entries: [FileStatus], change: Int)? {
        guard let holder = DaemonLock.holder(context.layout) else { return nil }
        let relative = paths.compactMap { ControlChannel.relative($0, to: holder.mountpoint) }
        guard relative.count == paths.count else { return nil }
        guard
            case .statuses(let rows, let change)? = try ControlChannel.send(
                context.layout, .status(paths: relative, after: after, wait: after.map { _ in 1 }), orNilWhenClosed: true)
        else { return nil }
        return (entries(rows, below: holder.mountpoint), change)
    }

    /// The daemon's status rows, with paths under `mountpoint`.
    static func entries(_ rows: [FileStatus], below mountpoint: String) -> [FileStatus] {
        rows.map {
            var e = $0; e.path = mountpoint + "/" + e.path; return e
        }
    }

    static func fromXattrs(_ path: String) throws -> [FileStatus] {
        guard let state = xattr(path, "state") else {
            throw CLIError(ExitCode.noInput, "\(path) is not inside a live Labstream mount (or does not exist)")
        }
        var isDir: ObjCBool = false
        if FileManager.default.fileExists(atPath: path, isDirectory: &isDir), !isDir.boolValue { return [entry(path, state: state)] }
        var out: [FileStatus] = []
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

    /// A file's status from its attributes (`copies` gives its copies' states only).
    static func entry(_ path: String, state: String) -> FileStatus {
        let bytes = (xattr(path, "bytes") ?? "0/0").split(separator: "/").map { Int64($0) ?? 0 }
        let copies = (xattr(path, "copies") ?? "").split(separator: ";").compactMap { pair -> FileStatus.Part? in
            let halves = pair.split(separator: "=").map(String.init)
            guard halves.count == 2 else { return nil }
            return FileStatus.Part(quality: halves[0], state: DisplayState(rawValue: halves[1]) ?? .partial, present: 0, total: 0, reason: nil)
        }
        let shown = DisplayState(rawValue: state) ?? .notLocal
        return FileStatus(
            path: path, state: shown, present: bytes.first ?? 0, total: bytes.count > 1 ? bytes[1] : 0,
            reason: xattr(path, "reason").map { StatusReason(sentence: $0, state: shown) },
            pauseCause: xattr(path, "pause_cause").flatMap(PauseCause.init(rawValue:)),
            pinned: xattr(path, "pinned") == "1", copies: copies,
            sideAssets: SideAssetStatus.parse(attribute: xattr(path, "side_assets") ?? ""))
    }

    /// The root of the mount `path` is on: the last folder up from it on the same device.
    static func mountRoot(of path: String) -> String? {
        var st = stat()
        guard stat(path, &st) == 0 else { return nil }
        var at = URL(fileURLWithPath: path).standardized
        while at.path != "/" {
            let up = at.deletingLastPathComponent()
            var parent = stat()
            guard stat(up.path, &parent) == 0, parent.st_dev == st.st_dev else { return at.path }
            at = up
        }
        return at.path
    }

    static func xattr(_ path: String, _ name: String) -> String? {
        var buffer = [UInt8](repeating: 0, count: 4096)
        let n = getxattr(path, FilesystemEngine.xattrPrefix + name, &buffer, buffer.count)
        guard n >= 0 else { return nil }
        return String(decoding: buffer[0..<n], as: UTF8.self)
    }

    /// Every file with local bytes (or copies), from the index (works with no daemon running),
    /// in the same model the daemon answers with.
    static func fromIndex(_ context: Context) throws -> [FileStatus] {
        guard FileManager.default.fileExists(atPath: context.layout.indexPath) else { return [] }
        let index = try context.openIndex()
        let root = DaemonLock.holder(context.layout)?.mountpoint
        do {
            let tree = Dictionary(try index.treeFiles().map { ($0.key, $0) }, uniquingKeysWith: { a, _ in a })
            // A removed server's copies by the path they had (not in the mount: no mount point).
            let removed = Dictionary(try index.removedCopies().map { ($0.key, $0.path) }, uniquingKeysWith: { a, _ in a })
            return FileStatus.gather(
                try index.downloads(),
                path: { key in tree[key].map { ((root.map { [$0] } ?? []) + $0.path).joined(separator: "/") } ?? removed[key] },
                size: { tree[$0]?.size })
        } catch { throw CLIError(error) }
    }

    /// Every catalog file at or below `catalogPath`, from the index: what the daemon would
    /// answer for the same file in its mount.
    static func fromIndex(_ context: Context, catalogPath: String) throws -> [FileStatus] {
        let clean = catalogPath.split(separator: "/").joined(separator: "/")
        let notCatalog = CLIError(
            ExitCode.noInput, "no Labstream daemon is running and '\(catalogPath)' is not a catalog path (SERVER/LIBRARY/…, as `labstream status` shows)")
        guard FileManager.default.fileExists(atPath: context.layout.indexPath) else { throw notCatalog }
        let index = try context.openIndex()
        let files: [TreeFile], rows: [FileKey: [DownloadRow]]
        do {
            files = try index.treeFiles().filter {
                let p = $0.path.joined(separator: "/"); return p == clean || p.hasPrefix(clean + "/")
            }
            rows = Dictionary(grouping: try index.downloads(), by: { FileStatus.owner(of: $0.key) })
        } catch { throw CLIError(error) }
        guard !files.isEmpty else { throw notCatalog }
        return files.filter { files.count == 1 || DerivedCopy.parse($0.key) == nil }.map { f in
            let mine = rows[f.key] ?? []
            return FileStatus(
                path: f.path.joined(separator: "/"), size: f.size, row: mine.first { $0.key == f.key },
                related: mine.filter { $0.key != f.key }, orphaned: f.orphaned)
        }.sorted { $0.path < $1.path }
    }

}

/// Lines redrawn in place on a terminal: the cursor goes back over what was drawn last, each
/// line is rewritten and whatever is left below is cleared, so nothing flickers or scrolls.
struct LiveLines {
    var drawn = 0

    mutating func show(_ lines: [String]) {
        var size = winsize()
        let columns = ioctl(1, UInt(TIOCGWINSZ), &size) == 0 && size.ws_col > 0 ? Int(size.ws_col) : 200
        // A wrapped line would throw the count off: each is cut to the terminal's width.
        let fitted = lines.map { $0.count < columns ? $0 : String($0.prefix(columns - 2)) + "…" }
        var out = drawn > 0 ? "\u{1B}[\(drawn)F" : ""
        out += fitted.map { "\u{1B}[2K" + $0 }.joined(separator: "\n") + "\n\u{1B}[J"
        drawn = fitted.count
        printOut(out, newline: false)
    }
}

enum SyncCommand {
    static let spec = Arguments.Spec(valued: Context.globalValued, flags: Context.globalFlags.union(["--full"]))

    static func run(_ argv: [String]) throws -> Int32 {
        let args = try Arguments.parse(argv, spec: spec)
        if args.flag("-h") || args.flag("--help") { printOut(Help.sync); return ExitCode.ok }
        guard args.positionals.count <= 1 else { throw UsageError("usage: labstream sync [NAME] [--full]") }
        let full = args.flag("--full")
        let context = Context(args: args)
        let config = try context.loadConfig()
        // Run here, the sync speaks as a command: its result on standard output, and only
        // warnings on standard error unless a log level is asked for.
        let asked = args.flag("-v") || args.flag("--verbose") || args.value("--log-level") != nil
        let log = Logger(level: asked ? try Logger.level(args) : .warning, command: true)
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
            case .synced(let results)? = try ControlChannel.send(context.layout, .sync(server: args.positionals.first, full: full), progress: show)
        {
            return printResults(results, tty: tty)
        }
        let index = try context.openIndex()
        // Progress of a long sync: redrawn in place on a terminal, a line per step when piped.
        let results = backends.map { backend in
            CatalogSync.report(backend, server: config.server(named: backend.serverName)!, index: index, log: log, incremental: !full, progress: show)
        }
        return printResults(results, tty: tty)
    }

    /// Prints sync results (after progress redrawn in place on a terminal); the exit status is
    /// that of the last failure.
    static func printResults(_ results: [SyncResult], tty: Bool) -> Int32 {
        var code = ExitCode.ok
        for r in results {
            if let error = r.error {
                writeToStderr("labstream: sync \(r.server) failed: \(error)" + (error.contains("previous catalog") ? "" : " The previous catalog is kept."))
                code = r.code ?? ExitCode.software
            } else {
                printOut((tty ? "\r\u{1B}[K" : "") + "\(r.server): \(r.files ?? 0) files")
            }
        }
        return code
    }
}

enum UnmountCommand {
    static let spec = Arguments.Spec(valued: Context.globalValued, flags: Context.globalFlags)

    static func run(_ argv: [String]) throws -> Int32 {
        let args = try Arguments.parse(argv, spec: spec)
        if args.flag("-h") || args.flag("--help") { printOut(Help.unmount); return ExitCode.ok }
        guard args.positionals.count == 1 else { throw UsageError("usage: labstream unmount MOUNTPOINT") }
        let raw = args.positionals[0]
        let path =
            realpath(raw, nil).map { p in
                defer { free(p) }; return String(cString: p)
            } ?? raw
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
                    printOut(
                        "\(raw) is gone from the tree, but \(who) in it; the daemon serves \(busy.count == 1 ? "it" : "them") until closed. "
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
