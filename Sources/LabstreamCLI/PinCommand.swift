import CLinux
import Foundation
import LabstreamCore
import LabstreamFS

/// `labstream pin|unpin|pause|resume|retry|cancel PATH…`: sets `user.labstream.pin` or
/// `user.labstream.action` on paths inside a live mount; the daemon acts on every file below.
enum PinCommand {
    static let spec = Arguments.Spec(valued: Context.globalValued.union(["--quality"]), flags: Context.globalFlags.union(["--wait", "--json"]))

    static func run(_ argv: [String], pin: Bool) throws -> Int32 {
        let args = try Arguments.parse(argv, spec: spec)
        if args.flag("-h") || args.flag("--help") { printOut(Help.pin); return ExitCode.ok }
        guard !args.positionals.isEmpty else { throw UsageError("usage: labstream \(pin ? "pin" : "unpin") PATH…") }
        let quality = try args.value("--quality").map { text throws(UsageError) -> Quality in
            guard pin else { throw UsageError("--quality goes with pin, not unpin") }
            guard let q = Quality(text) else { throw UsageError("--quality takes \(Quality.spellings)") }
            return q
        }
        let value = pin ? quality?.description ?? "1" : "0"
        let context = Context(args: args)
        if DaemonLock.holder(context.layout) == nil, args.positionals.allSatisfy({ StatusCommand.xattr($0, "state") == nil }) {
            return try pinInIndex(context, args.positionals, pinned: pin, quality: quality)
        }
        try set("pin", to: value, on: args.positionals, saying: pin ? "Pinned" : "Unpinned", quiet: args.flag("--json"), context: context)
        guard pin && args.flag("--wait") else { return ExitCode.ok }
        sayOnInterrupt()
        if let quality, quality != .original { return try waitForCopies(args.positionals, quality: quality, json: args.flag("--json")) }
        return try wait(args.positionals, json: args.flag("--json"), context: context)
    }

    /// Ctrl-C ends the wait, not the download: say so, and how to follow it. The text is made
    /// before the handler is installed, so the handler only writes it.
    static func sayOnInterrupt() {
        _ = pinInterruptMessage.count
        signal(SIGINT) { _ in
            pinInterruptMessage.withUnsafeBufferPointer { _ = write(2, $0.baseAddress, $0.count) }
            _exit(130)
        }
    }

    /// Follows copies at `quality` (each file's `user.labstream.copies`) until every one is
    /// complete or unverified (0), or one fails (74). A file whose original already meets the
    /// quality is pinned as itself and followed as such.
    static func waitForCopies(_ paths: [String], quality: Quality, json: Bool) throws -> Int32 {
        var last = ""
        var keptOriginals = Set<String>()
        while true {
            let entries = try paths.flatMap { try StatusCommand.fromMount($0) }
            var states: [(path: String, state: String, done: Bool)] = []
            for e in entries {
                let copies = StatusCommand.xattr(e.path, "copies") ?? ""
                let mine = copies.split(separator: ";").first { $0.hasPrefix(quality.description + "=") }
                guard let mine else {
                    // No copy was made: the original is within the cap and was pinned as itself.
                    if !json && keptOriginals.insert(e.path).inserted { printOut("\(e.path): the original is within \(quality); keeping it") }
                    states.append((e.path, e.state, PinWait.finished(state: e.state, reason: e.reason)))
                    continue
                }
                let state = String(mine.split(separator: "=").last ?? "")
                // A finished copy is in the tree beside the original, with its own reason; it is
                // not done for the user until it can be opened there. Its extension is what it
                // turned out to be (`ContainerSniff`), so it is found by its stem.
                let folder = (e.path as NSString).deletingLastPathComponent
                let named = DerivedCopy.fileName(besides: (e.path as NSString).lastPathComponent, quality: quality)
                let stem = String(named.dropLast(DerivedCopy.container.count))
                let copy = ((try? FileManager.default.contentsOfDirectory(atPath: folder)) ?? [])
                    .first { $0.hasPrefix(stem) && !$0.dropFirst(stem.count).contains(".") }.map { folder + "/" + $0 }
                let done = (state == "complete" || state == "unverified") && copy != nil
                    && PinWait.finished(state: state, reason: copy.flatMap { StatusCommand.xattr($0, "reason") })
                states.append((e.path, state, done))
            }
            let done = states.filter(\.done).count
            let failed = states.filter { $0.state == "failed" }
            let line = json ? "{\"quality\":\"\(quality)\",\"files\":\(states.count),\"done\":\(done),\"failed\":\(failed.count)}"
                            : "\(quality): \(done)/\(states.count) copies ready"
            if line != last { printOut(line); last = line }
            if done + failed.count == states.count {
                for f in failed { writeToStderr("labstream: the \(quality) copy of \(f.path) failed; see labstream status") }
                return failed.isEmpty ? ExitCode.ok : ExitCode.ioErr
            }
            usleep(250_000)   // a progress display, not synchronisation: the daemon owns the state
        }
    }

    /// `labstream pause|resume|retry|cancel PATH…` and `pause-all` / `resume-all`.
    static func control(_ action: QueueAction, _ argv: [String], all: Bool) throws -> Int32 {
        let args = try Arguments.parse(argv, spec: spec)
        if args.flag("-h") || args.flag("--help") { printOut(Help.queue); return ExitCode.ok }
        var paths = args.positionals
        if all {
            guard paths.isEmpty else { throw UsageError("usage: labstream \(action.rawValue)-all") }
            guard let holder = DaemonLock.holder(Context(args: args).layout) else {
                throw CLIError(ExitCode.unavailable, "no Labstream daemon is running for this data dir; nothing to \(action.rawValue)")
            }
            paths = [holder.mountpoint]
        }
        guard !paths.isEmpty else { throw UsageError("usage: labstream \(action.rawValue) PATH…") }
        try set("action", to: action.rawValue, on: paths, saying: ["pause": "Paused", "resume": "Resumed", "retry": "Retrying", "cancel": "Cancelled", "verify": "Verifying"][action.rawValue]!, quiet: false, context: Context(args: args))
        return ExitCode.ok
    }

    /// Sets `user.labstream.ATTRIBUTE` on every path: through the daemon's control socket when
    /// the path is inside the mount of this data dir's daemon, else through the mount itself.
    static func set(_ attribute: String, to text: String, on paths: [String], saying verb: String, quiet: Bool, context: Context) throws {
        let holder = DaemonLock.holder(context.layout)
        for path in paths {
            if let holder, let relative = ControlChannel.relative(path, to: holder.mountpoint),
               try ControlChannel.send(context.layout, ["op": "set", "name": attribute, "value": text, "paths": [relative]]) != nil {
                if !quiet { printOut("\(verb) \(path)") }
                continue
            }
            // Only a Labstream mount answers user.labstream.state: never set attributes elsewhere.
            guard StatusCommand.xattr(path, "state") != nil else {
                throw CLIError(ExitCode.noInput, "\(path) is not inside a live Labstream mount (or does not exist)")
            }
            let value = Array(text.utf8)
            if setxattr(path, FilesystemEngine.xattrPrefix + attribute, value, value.count, 0) != 0 {
                let code = errno
                if code == ENOTSUP || code == ENOENT || code == EOPNOTSUPP {
                    throw CLIError(ExitCode.noInput, "\(path) is not inside a live Labstream mount (or does not exist)")
                }
                throw CLIError(ExitCode.ioErr, "\(verb.lowercased()) \(path) failed: \(String(cString: strerror(code))); see the daemon's log")
            }
            if !quiet { printOut("\(verb) \(path)") }
        }
    }

    /// With no daemon running, pins act on the index directly (safe: the next mount picks them
    /// up) and say so. Paths are catalog paths (`SERVER/LIBRARY/…`), as `labstream status` shows.
    static func pinInIndex(_ context: Context, _ paths: [String], pinned: Bool, quality: Quality?) throws -> Int32 {
        guard quality == nil || quality == .original else {
            throw CLIError(ExitCode.unavailable, "no Labstream daemon is running: a pin at \(quality!) needs it (the server decides the route); mount first")
        }
        let index = try context.openIndex()
        let tree: [TreeFile]
        do { tree = try index.treeFiles() } catch { throw CLIError(error) }
        var targets: [TreeFile] = []
        for path in paths {
            let clean = path.split(separator: "/").joined(separator: "/")
            let matches = tree.filter { let p = $0.path.joined(separator: "/"); return p == clean || p.hasPrefix(clean + "/") }
            guard !matches.isEmpty else {
                throw CLIError(ExitCode.noInput, "no Labstream daemon is running and '\(path)' is not a catalog path (SERVER/LIBRARY/…, as `labstream status` shows)")
            }
            targets += matches
        }
        do { _ = try index.setPinned(pinned, files: targets, layout: context.layout, now: Int64(Date().timeIntervalSince1970)) } catch { throw CLIError(error) }
        printOut("No daemon is running: \(pinned ? "pinned" : "unpinned") \(targets.count) files in the index\(pinned ? "; they download when Labstream next mounts" : "").")
        return ExitCode.ok
    }

    /// Follows the pinned files until every one is complete or unverified (0), or one fails (74),
    /// or nothing moves because some are paused until the user acts (75, saying what to do).
    static func wait(_ paths: [String], json: Bool, context: Context) throws -> Int32 {
        let tty = isatty(1) == 1 && !json
        var last = ""
        var samples: [String: (bytes: Int64, at: Date)] = [:]
        var change: Int?
        while true {
            // The daemon answers as soon as a row changes; without one, the mount's xattrs are read again.
            let followed = try StatusCommand.follow(paths, after: change, context: context)
            let entries = try followed?.entries ?? paths.flatMap { try StatusCommand.fromMount($0) }
            let present = entries.reduce(0) { $0 + $1.present }, total = entries.reduce(0) { $0 + $1.total }
            func finished(_ e: StatusCommand.Entry) -> Bool { PinWait.finished(state: e.state, reason: e.reason) }
            let verdict = PinWait.verdict(entries.map { (state: $0.state, reason: $0.reason) })
            let failed = entries.filter { $0.state == DisplayState.failed.rawValue }
            let line: String
            if json {
                line = "{\"bytes_present\":\(present),\"bytes_total\":\(total),\"files\":\(entries.count),\"done\":\(entries.filter(finished).count),\"failed\":\(failed.count)}"
            } else {
                let percent = total > 0 ? Int(present * 100 / total) : 100
                line = "\(percent)%  \(present)/\(total) bytes  \(entries.count) files"
            }
            if tty {
                // On a terminal: a bar with rate and ETA per file, the total last, redrawn in place.
                let now = Date()
                let bars = entries.map { StatusCommand.progressLine($0, previous: &samples, now: now, json: false) }
                printOut("\u{1B}[H\u{1B}[2J" + (bars + [line]).joined(separator: "\n"))
            } else if line != last {
                printOut(line)
                last = line
            }
            switch verdict {
            case .following: break
            case .done: return ExitCode.ok
            case .failed:
                for f in failed { writeToStderr("labstream: \(f.path) failed: \(f.reason ?? "unknown reason")") }
                return ExitCode.ioErr
            case .held:
                for f in entries where PinWait.held(state: f.state, reason: f.reason) {
                    writeToStderr("labstream: " + PinWait.heldMessage(path: f.path, reason: f.reason))
                }
                return ExitCode.tempFail
            }
            if let followed { change = followed.change } else {
                usleep(250_000)   // a progress display, not synchronisation: the daemon owns the state
            }
        }
    }
}

/// What Ctrl-C during `pin --wait` says (a global, so the signal handler captures nothing).
let pinInterruptMessage: [UInt8] = Array(
    "\nlabstream: stopped waiting; the download goes on in the background. Follow it with: labstream status --watch\n".utf8)
