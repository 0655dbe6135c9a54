import Foundation
import LabstreamCore
import LabstreamDaemon
import LabstreamStore

/// `labstream monitor add|set|remove|list`: a series folder's `user.labstream.monitor` in a live
/// mount (the daemon evaluates it); `list` reads the index, where the daemon keeps what each
/// monitor held and skipped, so it answers with no daemon running too.
enum MonitorCommand {
    static let spec = Arguments.Spec(
        valued: Context.globalValued.union(["--mode", "--max-storage"]),
        flags: Context.globalFlags.union(["--delete-watched", "--keep-watched", "--no-max-storage", "--json"]))

    static func run(_ argv: [String]) throws -> Int32 {
        let args = try Arguments.parse(argv, spec: spec)
        if args.flag("-h") || args.flag("--help") { printOut(Help.monitor); return ExitCode.ok }
        let context = Context(args: args)
        switch args.positionals.first {
        case "add"?, "set"?:
            let adding = args.positionals.first == "add"
            guard args.positionals.count == 2 else { throw UsageError("usage: labstream monitor \(adding ? "add" : "set") SERIES-FOLDER --mode MODE …") }
            // The arguments are checked before the path is looked at: a bad one is said as such,
            // whatever the series holds.
            let mode = try args.value("--mode").map { text throws(UsageError) -> SeriesMonitor.Mode in
                guard let parsed = SeriesMonitor.Mode(text) else { throw UsageError("--mode takes \(SeriesMonitor.Mode.spellings)") }
                return parsed
            }
            if adding && mode == nil { throw UsageError("monitor add needs --mode \(SeriesMonitor.Mode.spellings)") }
            let maxStorage = try args.value("--max-storage").map { size throws(UsageError) -> Int64 in
                guard let bytes = LabstreamConfig.parseSize(size), bytes > 0 else { throw UsageError("--max-storage takes a size such as 2G or 500M") }
                return bytes
            }
            let path = args.positionals[1]
            let current = try existing(path)
            if adding, current != nil { throw CLIError(ExitCode.usage, "\(path) is monitored already (\(current!)); change it with `labstream monitor set`") }
            if !adding, current == nil { throw CLIError(ExitCode.noInput, "\(path) is not monitored; start with `labstream monitor add`") }
            var settings: (mode: SeriesMonitor.Mode, deleteWatched: Bool, maxStorage: Int64?)?
            if let current {
                do throws(LabstreamError) { settings = try SeriesMonitor.parseSettings(current) } catch { throw CLIError(error) }
            }
            if let mode { settings = (mode, settings?.deleteWatched ?? false, settings?.maxStorage) }
            guard var chosen = settings else { throw UsageError("monitor add needs --mode \(SeriesMonitor.Mode.spellings)") }
            if args.flag("--delete-watched") { chosen.deleteWatched = true }
            if args.flag("--keep-watched") { chosen.deleteWatched = false }
            if let maxStorage { chosen.maxStorage = maxStorage }
            if args.flag("--no-max-storage") { chosen.maxStorage = nil }
            let value = SeriesMonitor(server: "", seriesId: "", mode: chosen.mode, deleteWatched: chosen.deleteWatched, maxStorage: chosen.maxStorage).settings
            try PinCommand.send(.monitor(value), to: [path], saying: adding ? "Monitoring" : "Changed the monitor of", quiet: true, context: context)
            printOut("\(adding ? "Monitoring" : "Changed the monitor of") \(path): \(describe(value))")
            return ExitCode.ok
        case "remove"?:
            guard args.positionals.count == 2 else { throw UsageError("usage: labstream monitor remove SERIES-FOLDER|SERVER/SERIES-ID") }
            let path = args.positionals[1]
            if StatusCommand.xattr(path, "state") == nil { return try remove(named: path, context) }
            guard try existing(path) != nil else { throw CLIError(ExitCode.noInput, "\(path) is not monitored") }
            try PinCommand.send(.monitor(nil), to: [path], saying: "Stopped monitoring", quiet: true, context: context)
            printOut("Stopped monitoring \(path); its episodes stay pinned and stored (unpin them to let them go)")
            return ExitCode.ok
        case "list"?:
            return try list(args.flag("--json"), context)
        default:
            throw UsageError("usage: labstream monitor add|set|remove SERIES-FOLDER … | monitor remove SERVER/SERIES-ID | monitor list [--json]")
        }
    }

    /// `monitor remove SERVER/SERIES-ID`: a monitor whose series left the catalog has no folder in
    /// the mount; `monitor list` shows it by that name. The running daemon removes it (and its
    /// server's own monitor, where the server keeps one).
    static func remove(named name: String, _ context: Context) throws -> Int32 {
        var monitors: [SeriesMonitor] = []
        if FileManager.default.fileExists(atPath: context.layout.indexPath) {
            let index = try context.openIndex()
            do throws(LabstreamError) { monitors = try index.monitors() } catch { throw CLIError(error) }
        }
        guard let monitor = MonitorReference.named(name, among: monitors) else {
            throw CLIError(
                ExitCode.noInput,
                "\(name) is neither a series folder inside a live Labstream mount nor a monitor's SERVER/SERIES-ID; `labstream monitor list` shows each monitor (one whose series left the catalog by its SERVER/SERIES-ID)"
            )
        }
        let shown = MonitorReference.name(of: monitor)
        guard try ControlChannel.send(context.layout, .perform(.monitor(nil), paths: [shown])) != nil else {
            throw CLIError(
                ExitCode.unavailable,
                "the monitor of \(shown) is removed by the running daemon, and none runs for this data dir: mount it (`labstream mount DIR`), then run this again"
            )
        }
        printOut("Stopped monitoring \(shown); its episodes stay pinned and stored (unpin them to let them go)")
        return ExitCode.ok
    }

    /// The series folder's monitor settings; nil when it has none. Only a live mount answers.
    static func existing(_ path: String) throws -> String? {
        guard StatusCommand.xattr(path, "state") != nil else {
            throw CLIError(ExitCode.noInput, "\(path) is not inside a live Labstream mount (or does not exist); monitors are set on a mounted series folder")
        }
        return StatusCommand.xattr(path, "monitor")
    }

    /// `latest-season,delete-watched,max-storage=2147483648` said for a person.
    static func describe(_ settings: String) -> String {
        settings.split(separator: ",").map { word -> String in
            if word.hasPrefix("max-storage="), let n = Int64(word.dropFirst("max-storage=".count)) { return "at most \(ByteCount.text(n))" }
            return word == "delete-watched" ? "watched episodes removed" : String(word)
        }.joined(separator: ", ")
    }

    /// A monitor as `monitor list` and `status` tell it: its settings and folder from the index,
    /// what it held and skipped at its last evaluation (kept in the index by the daemon), and when
    /// it looks next.
    struct Report {
        var monitor: SeriesMonitor
        /// `SERVER/LIBRARY/Series (Year)`; nil for a series gone from the catalog.
        var folder: String?
        var outcome: MonitorOutcome?
        var next: NextLook
        /// Its server's event channel is open: a change the server tells is looked at at once.
        var eventsOpen = false

        /// The public JSON form: counts, `skipped` by code, `next_look` as a code (and a time).
        var json: [String: Any] {
            var row: [String: Any] = [
                "server": monitor.server, "series_id": monitor.seriesId, "mode": monitor.mode.description,
                "delete_watched": monitor.deleteWatched, "settings": monitor.settings
            ]
            if let folder { row["path"] = folder }
            if let cap = monitor.maxStorage { row["max_storage"] = cap }
            if let outcome {
                row["episodes"] = outcome.episodes
                row["bytes"] = outcome.bytes
                row["in_scope"] = outcome.inScope
                row["held_by_cap"] = outcome.skipped[.overCap] ?? 0
                row["skipped"] = Dictionary(uniqueKeysWithValues: outcome.skipped.map { ($0.key.rawValue, $0.value) })
            }
            var next: [String: Any] = ["when": self.next.code]
            if case .atRefresh(let at) = self.next { next["at"] = at }
            if eventsOpen { next["on_server_change"] = true }
            row["next_look"] = next
            return row
        }

        /// `holds 0 episodes, 0 B of 700 KiB; skipped: 2 watched (delete-watched), …; next look: …`.
        func summary(now: Int64) -> String {
            var parts: [String] = []
            if let outcome {
                parts.append(
                    "holds \(outcome.episodes) episode\(outcome.episodes == 1 ? "" : "s"), \(ByteCount.text(outcome.bytes))"
                        + (monitor.maxStorage.map { " of \(ByteCount.text($0))" } ?? ""))
                let skipped = outcome.skipped.keys.sorted().map { MonitorCommand.words($0, outcome.skipped[$0]!, mode: monitor.mode) }
                if !skipped.isEmpty { parts.append("skipped: " + skipped.joined(separator: ", ")) }
            } else {
                parts.append("not evaluated yet")
            }
            parts.append(
                "next look: " + (eventsOpen ? "as soon as \(monitor.server) tells of a change, and " : "")
                    + MonitorCommand.words(next, server: monitor.server, now: now))
            return parts.joined(separator: "; ")
        }
    }

    /// Why episodes were skipped, for a person.
    static func words(_ why: MonitorSkip, _ n: Int, mode: SeriesMonitor.Mode) -> String {
        switch why {
        case .watched: return "\(n) watched (delete-watched lets them go)"
        case .overCap: return "\(n) held back by the cap"
        case .declined: return "\(n) you unpinned (left alone)"
        case .offline: return "\(n) waiting for the server, which is not answering"
        case .nothingInScope:
            return "nothing in its scope (\(mode)) yet" + (n > 0 ? ": the series' \(n) episode\(n == 1 ? " is" : "s are") outside it" : "")
        }
    }

    /// When a monitor looks next, for a person.
    static func words(_ next: NextLook, server: String, now: Int64) -> String {
        switch next {
        case .atRefresh(let at):
            let minutes = max(0, (at - now + 59) / 60)
            let formatter = DateFormatter()
            formatter.dateFormat = "yyyy-MM-dd HH:mm"
            return "at the next catalog refresh, \(formatter.string(from: Date(timeIntervalSince1970: Double(at))))"
                + (minutes == 0 ? " (due now)" : " (in \(minutes) min)")
        case .whenServerAnswers: return "when \(server) answers again"
        case .atSync: return "at the next `labstream sync` (refresh_interval is 0)"
        case .atMount: return "once mounted (no daemon is running)"
        }
    }

    /// Every monitor's report, from the index (and the running daemon's mount for whether each
    /// server answers).
    static func reports(_ context: Context) throws -> [Report] {
        guard FileManager.default.fileExists(atPath: context.layout.indexPath) else { return [] }
        let index = try context.openIndex()
        let monitors: [SeriesMonitor]
        let lastSync: [String: Int64]
        do {
            monitors = try index.monitors()
            lastSync = Dictionary(try index.servers().compactMap { s in s.lastSync.map { (s.name, $0) } }, uniquingKeysWith: { a, _ in a })
        } catch { throw CLIError(error) }
        // `status` asks at every call: with no monitor, the tree is not read.
        guard !monitors.isEmpty else { return [] }
        let mountpoint = DaemonLock.holder(context.layout)?.mountpoint
        let refreshInterval = (try? context.loadConfig())?.refreshInterval ?? LabstreamConfig().refreshInterval
        let now = Int64(Date().timeIntervalSince1970)
        let paths = (try? index.treeFiles()) ?? []
        // The running daemon's own next refresh.
        let planned = mountpoint.flatMap { StatusCommand.xattr($0, "next_refresh") }.flatMap { Int64($0) }
        // Each server's episodes by series, read once.
        var episodesOf: [String: [String: Set<String>]] = [:]
        for server in Set(monitors.map(\.server)) {
            let episodes = ((try? index.catalog(server: server)) ?? []).flatMap(\.items).filter { $0.kind == .episode }
            episodesOf[server] = Dictionary(grouping: episodes, by: { $0.seriesId ?? "" }).mapValues { Set($0.map(\.id)) }
        }
        return monitors.map { monitor in
            let items = episodesOf[monitor.server]?[monitor.seriesId] ?? []
            // The series folder: SERVER/LIBRARY/Series (Year) above every episode's season folder.
            let folder = paths.first { $0.key.server == monitor.server && items.contains($0.key.itemId) }.map { $0.path.prefix(3).joined(separator: "/") }
            // A server the daemon has not marked (or a mount that does not say) counts as answering.
            let online = mountpoint.map { StatusCommand.xattr($0, "reachability." + monitor.server) ?? Reachability.online.rawValue }
            let next = SeriesMonitorPolicy.nextLook(
                daemon: mountpoint != nil, online: online == Reachability.online.rawValue, lastSync: lastSync[monitor.server],
                refreshInterval: refreshInterval, now: now, planned: planned)
            let events = mountpoint.flatMap { StatusCommand.xattr($0, "events." + monitor.server) }.flatMap(EventChannelState.init(attribute:))
            var eventsOpen = false
            if case .open? = events { eventsOpen = true }
            return Report(
                monitor: monitor, folder: folder, outcome: try? index.monitorOutcome(server: monitor.server, series: monitor.seriesId), next: next,
                eventsOpen: eventsOpen)
        }
    }

    /// The report of the monitored series whose folder `path` is: a path in the running daemon's
    /// mount, or (with no daemon) a catalog path.
    static func report(for path: String, in reports: [Report], context: Context) -> Report? {
        let clean: String
        if let mountpoint = DaemonLock.holder(context.layout)?.mountpoint {
            let absolute = URL(fileURLWithPath: path.hasPrefix("/") ? path : FileManager.default.currentDirectoryPath + "/" + path).standardized.path
            guard absolute.hasPrefix(mountpoint + "/") else { return nil }
            clean = String(absolute.dropFirst(mountpoint.count + 1))
        } else {
            clean = path.split(separator: "/").joined(separator: "/")
        }
        return reports.first { $0.folder == clean }
    }

    static func list(_ json: Bool, _ context: Context) throws -> Int32 {
        let reports = try reports(context)
        if json {
            let data = try JSONSerialization.data(withJSONObject: reports.map(\.json), options: [.sortedKeys, .prettyPrinted, .withoutEscapingSlashes])
            printOut(String(decoding: data, as: UTF8.self))
            return ExitCode.ok
        }
        if reports.isEmpty { printOut("No monitored series.") }
        let now = Int64(Date().timeIntervalSince1970)
        for report in reports {
            // A series gone from the server's catalog has no folder: its server and id.
            // The name that removes it, said on its line.
            let name = MonitorReference.name(of: report.monitor)
            let shown = report.folder ?? "\(name) (not in the catalog)"
            let remove = report.folder == nil ? "; `labstream monitor remove \(name)` removes it" : ""
            printOut("\(shown)\t\(describe(report.monitor.settings))\t\(report.summary(now: now))\(remove)")
        }
        return ExitCode.ok
    }
}
