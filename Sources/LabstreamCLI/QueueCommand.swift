import Foundation
import LabstreamCore
import LabstreamDaemon

/// `labstream queue [--json]`, `labstream queue move PATH --first|--before OTHER` and
/// `labstream priority PATH… high|normal|low`: the download queue, asked of this data dir's
/// daemon over its typed API (the control socket); the order is worked on only while mounted.
enum QueueCommand {
    static let spec = Arguments.Spec(valued: Context.globalValued.union(["--before"]), flags: Context.globalFlags.union(["--json", "--first"]))
    static let prioritySpec = Arguments.Spec(valued: Context.globalValued, flags: Context.globalFlags)

    static func run(_ argv: [String]) throws -> Int32 {
        let args = try Arguments.parse(argv, spec: spec)
        if args.flag("-h") || args.flag("--help") { printOut(Help.downloadQueue); return ExitCode.ok }
        let context = Context(args: args)
        if args.positionals.first == "move" { return try move(Array(args.positionals.dropFirst()), args: args, context: context) }
        guard args.positionals.isEmpty, !args.flag("--first"), args.value("--before") == nil else {
            throw UsageError("usage: labstream queue [--json] | labstream queue move PATH --first|--before OTHER")
        }
        let mountpoint = try daemon(context)
        guard case .queue(let entries)? = try ControlChannel.send(context.layout, .queue) else { throw unanswered(context) }
        let shown = entries.map { e -> QueueEntry in
            var e = e
            e.path = mountpoint + "/" + e.path
            return e
        }
        if args.flag("--json") {
            printOut(StatusCommand.jsonText(shown, pretty: true))
        } else if shown.isEmpty {
            printOut("Nothing is waiting: every pinned file is complete.")
        } else {
            for e in shown { printOut(e.line) }
        }
        return ExitCode.ok
    }

    static func move(_ paths: [String], args: Arguments, context: Context) throws -> Int32 {
        let before = args.value("--before")
        guard paths.count == 1, args.flag("--first") != (before != nil) else {
            throw UsageError("usage: labstream queue move PATH --first | labstream queue move PATH --before OTHER")
        }
        let mountpoint = try daemon(context)
        let path = try relative(paths[0], mountpoint)
        let other = try before.map { try relative($0, mountpoint) }
        guard case .performed? = try ControlChannel.send(context.layout, .moveInQueue(path: path, before: other)) else { throw unanswered(context) }
        printOut("Moved \(paths[0]) " + (before.map { "before \($0)" } ?? "to the front of the queue"))
        return ExitCode.ok
    }

    /// `labstream priority PATH… high|normal|low`.
    static func priority(_ argv: [String]) throws -> Int32 {
        let args = try Arguments.parse(argv, spec: prioritySpec)
        if args.flag("-h") || args.flag("--help") { printOut(Help.downloadQueue); return ExitCode.ok }
        guard args.positionals.count >= 2, let level = args.positionals.last.flatMap(QueuePriority.init(rawValue:)) else {
            throw UsageError("usage: labstream priority PATH… \(QueuePriority.spellings)")
        }
        let context = Context(args: args)
        let mountpoint = try daemon(context)
        let paths = Array(args.positionals.dropLast())
        let relatives = try paths.map { try relative($0, mountpoint) }
        guard case .performed(let files, _)? = try ControlChannel.send(context.layout, .prioritize(level, paths: relatives)) else {
            throw unanswered(context)
        }
        printOut("Priority \(level.rawValue) for \(files) pinned \(files == 1 ? "file" : "files") at \(paths.joined(separator: ", "))")
        return ExitCode.ok
    }

    /// The mountpoint of this data dir's daemon; the queue lives there.
    static func daemon(_ context: Context) throws -> String {
        guard let holder = DaemonLock.holder(context.layout) else {
            throw CLIError(
                ExitCode.unavailable,
                "no Labstream daemon is running for this data dir, and the download queue is worked on only while mounted: mount first (`labstream mount MOUNTPOINT`)"
            )
        }
        return holder.mountpoint
    }

    static func relative(_ path: String, _ mountpoint: String) throws -> String {
        guard let relative = ControlChannel.relative(path, to: mountpoint) else {
            throw CLIError(ExitCode.noInput, "\(path) is not inside \(mountpoint), the mount of this data dir's daemon")
        }
        return relative
    }

    static func unanswered(_ context: Context) -> CLIError {
        CLIError(
            ExitCode.unavailable,
            "the daemon's control socket \(ControlChannel.path(context.layout)) did not take the request; is the daemon starting? try again")
    }
}
