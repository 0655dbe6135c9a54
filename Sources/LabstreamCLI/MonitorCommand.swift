import Foundation
import LabstreamCore
import LabstreamStore

/// `labstream monitor add|set|remove|list`: a series folder's `user.labstream.monitor` in a live
/// mount (the daemon evaluates it); `list` reads the index, and the mount for what each holds.
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
            try PinCommand.set("monitor", to: value, on: [path], saying: adding ? "Monitoring" : "Changed the monitor of", quiet: true, context: context)
            printOut("\(adding ? "Monitoring" : "Changed the monitor of") \(path): \(describe(value))")
            return ExitCode.ok
        case "remove"?:
            guard args.positionals.count == 2 else { throw UsageError("usage: labstream monitor remove SERIES-FOLDER") }
            let path = args.positionals[1]
            guard try existing(path) != nil else { throw CLIError(ExitCode.noInput, "\(path) is not monitored") }
            try PinCommand.set("monitor", to: "off", on: [path], saying: "Stopped monitoring", quiet: true, context: context)
            printOut("Stopped monitoring \(path); its episodes stay pinned and stored (unpin them to let them go)")
            return ExitCode.ok
        case "list"?:
            return try list(args.flag("--json"), context)
        default:
            throw UsageError("usage: labstream monitor add|set|remove SERIES-FOLDER … | monitor list [--json]")
        }
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

    /// What `user.labstream.monitor_holds` says, as numbers.
    static func holds(_ text: String?) -> [String: Int64] {
        var out: [String: Int64] = [:]
        for pair in (text ?? "").split(separator: " ") {
            let kv = pair.split(separator: "=", maxSplits: 1)
            if kv.count == 2, let n = Int64(kv[1]) { out[String(kv[0])] = n }
        }
        return out
    }

    static func list(_ json: Bool, _ context: Context) throws -> Int32 {
        guard FileManager.default.fileExists(atPath: context.layout.indexPath) else {
            if json { printOut("[]") } else { printOut("No monitored series.") }
            return ExitCode.ok
        }
        let index = try context.openIndex()
        let monitors: [SeriesMonitor]
        do { monitors = try index.monitors() } catch { throw CLIError(error) }
        let mountpoint = DaemonLock.holder(context.layout)?.mountpoint
        let paths = (try? index.treeFiles()) ?? []
        var rows: [[String: Any]] = []
        // Each server's episodes by series, read once.
        var episodesOf: [String: [String: Set<String>]] = [:]
        for server in Set(monitors.map(\.server)) {
            let episodes = ((try? index.catalog(server: server)) ?? []).flatMap(\.items).filter { $0.kind == .episode }
            episodesOf[server] = Dictionary(grouping: episodes, by: { $0.seriesId ?? "" }).mapValues { Set($0.map(\.id)) }
        }
        for monitor in monitors {
            let items = episodesOf[monitor.server]?[monitor.seriesId] ?? []
            // The series folder: SERVER/LIBRARY/Series (Year) above every episode's season folder.
            let folder = paths.first { $0.key.server == monitor.server && items.contains($0.key.itemId) }.map { $0.path.prefix(3).joined(separator: "/") }
            var row: [String: Any] = [
                "server": monitor.server, "series_id": monitor.seriesId, "mode": monitor.mode.description,
                "delete_watched": monitor.deleteWatched, "settings": monitor.settings
            ]
            if let folder { row["path"] = folder }
            if let cap = monitor.maxStorage { row["max_storage"] = cap }
            if let mountpoint, let folder {
                let held = holds(StatusCommand.xattr(mountpoint + "/" + folder, "monitor_holds"))
                if let n = held["episodes"] { row["episodes"] = n }
                if let n = held["bytes"] { row["bytes"] = n }
                if let n = held["held_by_cap"] { row["held_by_cap"] = n }
            }
            rows.append(row)
        }
        if json {
            let data = try JSONSerialization.data(withJSONObject: rows, options: [.sortedKeys, .prettyPrinted, .withoutEscapingSlashes])
            printOut(String(decoding: data, as: UTF8.self))
            return ExitCode.ok
        }
        if rows.isEmpty { printOut("No monitored series.") }
        for row in rows {
            // A series gone from the server's catalog has no folder: its server and id.
            let shown = row["path"] as? String ?? "\(row["server"] as? String ?? "?")/\(row["series_id"] as? String ?? "?") (not in the catalog)"
            var line = "\(shown)\t\(describe(row["settings"] as? String ?? ""))"
            if let n = row["episodes"] as? Int64, let bytes = row["bytes"] as? Int64 {
                line += "\tholds \(n) episodes, \(ByteCount.text(bytes))" + ((row["max_storage"] as? Int64).map { " of \(ByteCount.text($0))" } ?? "")
                if let held = row["held_by_cap"] as? Int64, held > 0 { line += "; \(held) held by the cap" }
            }
            printOut(line)
        }
        return ExitCode.ok
    }
}
