import CLinux
import Foundation
import LabstreamCore
import LabstreamDaemon
import LabstreamFS

/// `labstream pin|unpin|pause|resume|retry|cancel PATH…`: sets `user.labstream.pin` or
/// `user.labstream.action` on paths inside a live mount; the daemon acts on every file below.
enum PinCommand {
    static let spec = Arguments.Spec(valued: Context.globalValued.union(["--quality", "--priority"]), flags: Context.globalFlags.union(["--wait", "--json"]))

    static func run(_ argv: [String], pin: Bool) throws -> Int32 {
        let args = try Arguments.parse(argv, spec: spec)
        if args.flag("-h") || args.flag("--help") { printOut(Help.pin); return ExitCode.ok }
        guard !args.positionals.isEmpty else { throw UsageError("usage: labstream \(pin ? "pin" : "unpin") PATH…") }
        let quality = try args.value("--quality").map { text throws(UsageError) -> Quality in
            guard pin else { throw UsageError("--quality goes with pin, not unpin") }
            guard let q = Quality(text) else { throw UsageError("--quality takes \(Quality.spellings)") }
            return q
        }
        let priority = try args.value("--priority").map { text throws(UsageError) -> QueuePriority in
            guard pin else { throw UsageError("--priority goes with pin, not unpin") }
            guard let p = QueuePriority(rawValue: text) else { throw UsageError("--priority takes \(QueuePriority.spellings)") }
            return p
        }
        let context = Context(args: args)
        if DaemonLock.holder(context.layout) == nil, args.positionals.allSatisfy({ StatusCommand.xattr($0, "state") == nil }) {
            let code = try pinInIndex(context, args.positionals, pinned: pin, quality: quality, priority: priority)
            guard pin && args.flag("--wait") else { return code }
            throw CLIError(
                ExitCode.unavailable,
                "nothing downloads until Labstream is mounted, so there is nothing to wait for: mount, then run `labstream pin --wait` on the files in the mount"
            )
        }
        // Before the request goes: the daemon starts fetching at once, and a Ctrl-C that came
        // before the handler (a loaded machine) ended the wait saying nothing.
        if pin && args.flag("--wait") { sayOnInterrupt() }
        try send(
            pin ? .pin(quality: quality, priority: priority) : .unpin, to: args.positionals, saying: pin ? "Pinned" : "Unpinned", quiet: args.flag("--json"),
            context: context)
        guard pin && args.flag("--wait") else { return ExitCode.ok }
        if let quality, quality != .original { return try waitForCopies(args.positionals, quality: quality, json: args.flag("--json"), context: context) }
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

    /// Follows copies at `quality` (each file's `copies`) until every one is complete or
    /// unverified (0), or one fails (74). A file whose original already meets the quality is
    /// pinned as itself and followed as such.
    static func waitForCopies(_ paths: [String], quality: Quality, json: Bool, context: Context) throws -> Int32 {
        var last = ""
        var keptOriginals = Set<String>()
        var change: Int?
        while true {
            let followed = try StatusCommand.follow(paths, after: change, context: context)
            let entries = try followed?.entries ?? paths.flatMap { try StatusCommand.fromMount($0) }
            // `copy` false: the original, already within the quality, kept as itself.
            var states: [(path: String, state: DisplayState, reason: StatusReason?, done: Bool, copy: Bool)] = []
            for e in entries {
                guard let mine = e.copies.first(where: { $0.quality == quality.description }) else {
                    // No copy was made: the original is within the cap and was pinned as itself.
                    if !json && keptOriginals.insert(e.path).inserted { printOut("\(e.path): the original is within \(quality); keeping it") }
                    states.append((e.path, e.state, e.reason, PinWait.finished(state: e.state.rawValue, reason: e.reason), false))
                    continue
                }
                // A finished copy is in the tree beside the original; it is not done for the
                // user until it can be opened there. Its extension is what it turned out to be
                // (`ContainerSniff`), so it is found by its stem.
                let folder = (e.path as NSString).deletingLastPathComponent
                let named = DerivedCopy.fileName(besides: (e.path as NSString).lastPathComponent, quality: quality)
                let stem = String(named.dropLast(DerivedCopy.container.count))
                let inTree = ((try? FileManager.default.contentsOfDirectory(atPath: folder)) ?? [])
                    .contains { $0.hasPrefix(stem) && !$0.dropFirst(stem.count).contains(".") }
                states.append((e.path, mine.state, mine.reason, inTree && PinWait.finished(state: mine.state.rawValue, reason: mine.reason), true))
            }
            let done = states.filter(\.done).count
            let failed = states.filter { $0.state == .failed }
            let why = states.first { !$0.done && $0.state != .failed && $0.reason != nil }
            let copies = states.filter(\.copy), originals = states.filter { !$0.copy }
            let line: String
            if json {
                var object: [String: Any] = [
                    "quality": "\(quality)", "files": states.count, "done": done, "failed": failed.count, "no_copy_needed": originals.count
                ]
                if let why { object["waiting"] = waitingObject(path: why.path, state: why.state, reason: why.reason) }
                line = StatusCommand.jsonLine(object)
            } else {
                // Copies are counted as copies; an original kept as itself is not one (it said
                // "copies ready: 1 of 1" of none).
                var parts: [String] = []
                if !copies.isEmpty { parts.append("copies ready: \(copies.filter(\.done).count) of \(copies.count)") }
                if !originals.isEmpty {
                    parts.append(
                        "no copy needed for \(originals.count == 1 ? "the original" : "\(originals.count) originals") (already within \(quality)); "
                            + "originals ready: \(originals.filter(\.done).count) of \(originals.count)")
                }
                line =
                    "\(quality): " + parts.joined(separator: "; ")
                    + (why.map { "; waiting: \(($0.path as NSString).lastPathComponent): \($0.reason?.sentence ?? $0.state.rawValue)" } ?? "")
            }
            if line != last { printOut(line); last = line }
            if done + failed.count == states.count {
                for f in failed { writeToStderr("labstream: the \(quality) copy of \(f.path) failed: \(f.reason?.sentence ?? "no reason given")") }
                guard failed.isEmpty else { return ExitCode.ioErr }
                sayFailedSideAssets(entries)
                return ExitCode.ok
            }
            if let followed {
                change = followed.change
            } else {
                usleep(250_000)  // a progress display, not synchronisation: the daemon owns the state
            }
        }
    }

    /// `{"path", "state", "reason", "message"}` of a file holding a wait.
    static func waitingObject(path: String, state: DisplayState, reason: StatusReason?, cause: PauseCause? = nil) -> [String: Any] {
        var object: [String: Any] = ["path": path, "state": state.rawValue]
        if let code = StatusReason.code(reason, state: state, cause: cause) { object["reason"] = code.rawValue }
        if let sentence = reason?.sentence { object["message"] = sentence }
        return object
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
        try send(
            .queue(action), to: paths,
            saying: ["pause": "Paused", "resume": "Resumed", "retry": "Retrying", "cancel": "Cancelled", "verify": "Verifying"][action.rawValue]!, quiet: false,
            context: Context(args: args))
        return ExitCode.ok
    }

    /// Asks `command` of every path: of the daemon over its control socket when the path is
    /// inside the mount of this data dir's daemon, else through the mount's attribute.
    static func send(_ command: FileCommand, to paths: [String], saying verb: String, quiet: Bool, context: Context) throws {
        let holder = DaemonLock.holder(context.layout)
        var parkedAgain: [ParkedAgain] = []
        // Every path is acted on before a retry that parked again is told (75: try later).
        for path in paths {
            // A removed server's copy, by the path `status` printed for it.
            if StatusCommand.xattr(path, "state") == nil && RemovedCopies.mayName(path, mountpoint: holder?.mountpoint) {
                let clean = Reclaim.clean(path, mountpoint: nil)
                if holder != nil {
                    _ = try ControlChannel.send(context.layout, .perform(command, paths: [clean]))
                } else {
                    try RemovedCopies.perform(command, path: clean, context: context)
                }
                if !quiet { printOut("\(verb) \(path)") }
                continue
            }
            if let holder, let relative = ControlChannel.relative(path, to: holder.mountpoint),
                let answer = try ControlChannel.send(context.layout, .perform(command, paths: [relative]), orNilWhenClosed: true)
            {
                if !quiet { printOut("\(verb) \(path)") }
                if case .performed(_, let again?) = answer { parkedAgain += again }
                continue
            }
            // Only a Labstream mount answers user.labstream.state: never set attributes elsewhere.
            guard StatusCommand.xattr(path, "state") != nil else {
                throw CLIError(ExitCode.noInput, "\(path) is not inside a live Labstream mount (or does not exist)")
            }
            if case .pin(_, let priority?) = command {
                throw CLIError(
                    ExitCode.unavailable,
                    "\(path) is in a mount whose daemon this data dir does not run, and only the daemon's control socket takes a priority: "
                        + "pin it with that daemon's --data-dir, or without --priority \(priority.rawValue)")
            }
            // A resume or retry through the attribute returns once its files landed bytes or
            // parked again (`FilesystemEngine.setxattr`): their attributes then say which.
            let resuming = command == .queue(.resume) || command == .queue(.retry)
            let parked = resuming ? Dictionary(try StatusCommand.fromXattrs(path).filter(\.waitsForRoom).map { ($0.path, $0.present) }) { a, _ in a } : [:]
            let value = Array(command.value.utf8)
            if setxattr(path, FilesystemEngine.xattrPrefix + command.attribute, value, value.count, 0) != 0 {
                let code = errno
                if code == ENOTSUP || code == ENOENT || code == EOPNOTSUPP {
                    throw CLIError(ExitCode.noInput, "\(path) is not inside a live Labstream mount (or does not exist)")
                }
                if code == EPERM, let side = ["generated", "side_asset"].first(where: { StatusCommand.xattr(path, $0) != nil }) {
                    throw CLIError(.localSideFile(path, stored: side == "side_asset"))
                }
                if code == EACCES,
                    let refused = StatusCommand.mountRoot(of: path).flatMap({ StatusCommand.xattr($0, "access") }).flatMap(AccessPolicy.refusal(attribute:))
                {
                    throw CLIError(ExitCode.noPerm, "\(path) was left as it was: \(refused.sentence)")
                }
                if code == EROFS {
                    throw CLIError(
                        ExitCode.noPerm,
                        "\(path) is on a Labstream mount mounted with -o ro, which takes no attribute writes: run this as the user whose daemon serves it (with its data dir), or mount without ro"
                    )
                }
                throw CLIError(ExitCode.ioErr, "\(verb.lowercased()) \(path) failed: \(String(cString: strerror(code))); see the daemon's log")
            }
            if !quiet { printOut("\(verb) \(path)") }
            if !parked.isEmpty {
                // The free space is that daemon's disk's, which only it can measure.
                parkedAgain += try StatusCommand.fromXattrs(path).filter { $0.waitsForRoom && parked[$0.path] != nil }.map { ParkedAgain($0, free: nil) }
            }
        }
        guard parkedAgain.isEmpty else { throw CLIError(ExitCode.tempFail, parkedAgain.map(\.sentence).joined(separator: "\nlabstream: ")) }
    }

    /// With no daemon running, pins act on the index directly (safe: the next mount picks them
    /// up) and say so. Paths are catalog paths (`SERVER/LIBRARY/…`), as `labstream status` shows.
    static func pinInIndex(_ context: Context, _ paths: [String], pinned: Bool, quality: Quality?, priority: QueuePriority? = nil) throws -> Int32 {
        guard quality == nil || quality == .original else {
            throw CLIError(ExitCode.unavailable, "no Labstream daemon is running: a pin at \(quality!) needs it (the server decides the route); mount first")
        }
        let index = try context.openIndex()
        let tree: [TreeFile]
        do { tree = try index.treeFiles() } catch { throw CLIError(error) }
        var targets: [TreeFile] = []
        for path in paths {
            let clean = path.split(separator: "/").joined(separator: "/")
            let matches = tree.filter {
                let p = $0.path.joined(separator: "/"); return p == clean || p.hasPrefix(clean + "/")
            }
            if matches.isEmpty && !pinned, (try? RemovedCopies.named([clean], index: index)) != nil {
                try RemovedCopies.perform(.unpin, path: clean, context: context)
                continue
            }
            guard !matches.isEmpty else {
                throw CLIError(
                    ExitCode.noInput, "no Labstream daemon is running and '\(path)' is not a catalog path (SERVER/LIBRARY/…, as `labstream status` shows)")
            }
            targets += matches
        }
        do {
            _ = try index.setPinned(pinned, files: targets, layout: context.layout, now: Int64(Date().timeIntervalSince1970), priority: priority)
        } catch { throw CLIError(error) }
        printOut(
            "No daemon is running: \(pinned ? "pinned" : "unpinned") \(targets.count) files in the index\(pinned ? "; they download when Labstream next mounts" : "")."
        )
        return ExitCode.ok
    }

    /// A failed poster or subtitle does not fail a pin (it is tried again later), but is said.
    static func sayFailedSideAssets(_ entries: [FileStatus]) {
        for e in entries {
            for a in e.sideAssets where a.state == .failed {
                writeToStderr("labstream: \(e.path): \(a.name) could not be fetched (\(a.reason ?? "no reason given")); it is tried again later")
            }
        }
    }

    /// Follows the pinned files until every one is complete or unverified (0), or one fails (74),
    /// or nothing moves because some are paused until the user acts (75, saying what to do).
    /// Whatever holds the wait is said: the reason of each file still waiting.
    static func wait(_ paths: [String], json: Bool, context: Context) throws -> Int32 {
        let tty = isatty(1) == 1 && !json
        var last = ""
        var meters = StatusCommand.Meters()
        var overall = RateMeter()
        var screen = LiveLines()
        var change: Int?
        while true {
            // The daemon answers as soon as a row changes; without one, the mount's xattrs are read again.
            let followed = try StatusCommand.follow(paths, after: change, context: context)
            let entries = try followed?.entries ?? paths.flatMap { try StatusCommand.fromMount($0) }
            let present = entries.reduce(0) { $0 + $1.present }, total = entries.reduce(0) { $0 + $1.total }
            meters.record(entries)
            overall.record(present, at: monotonicSeconds())
            func finished(_ e: FileStatus) -> Bool { PinWait.finished(state: e.state.rawValue, reason: e.reason) }
            let verdict = PinWait.verdict(entries.map { (state: $0.state.rawValue, reason: $0.reason, cause: $0.pauseCause) })
            let failed = entries.filter { $0.state == .failed }
            let waiting = entries.filter { !finished($0) && $0.state != .failed }
            let held = waiting.filter { $0.reason != nil }
            let done = entries.filter(finished).count
            let line: String, sameAs: String
            if json {
                var object: [String: Any] = ["bytes_present": present, "bytes_total": total, "files": entries.count, "done": done, "failed": failed.count]
                if !held.isEmpty {
                    object["waiting"] = held.prefix(10).map { waitingObject(path: $0.path, state: $0.state, reason: $0.reason, cause: $0.pauseCause) }
                }
                sameAs = StatusCommand.jsonLine(object)
                if let rate = overall.bytesPerSecond { object["rate"] = Int(rate) }
                if let eta = overall.secondsLeft(toReach: total) { object["eta"] = eta }
                line = StatusCommand.jsonLine(object)
            } else {
                let percent = total > 0 ? Int(present * 100 / total) : 100
                sameAs =
                    "\(percent)%  \(ByteCount.text(present)) of \(ByteCount.text(total))  files done: \(done) of \(entries.count)"
                    + (held.first.map { e in
                        "; waiting: \((e.path as NSString).lastPathComponent): \(e.reason?.sentence ?? e.state.rawValue)"
                            + (held.count > 1 ? " (and \(held.count - 1) more)" : "")
                    } ?? "")
                line = sameAs
            }
            if tty {
                // On a terminal: a bar per file (rate, ETA, reason), those still on their way
                // first, the total last with the overall rate, redrawn in place.
                let shown = (waiting + entries.filter { !waiting.contains($0) }).prefix(12)
                let bars = shown.map { StatusCommand.progressLine($0, meters: meters) }
                let more = entries.count > shown.count ? ["… and \(entries.count - shown.count) more"] : []
                let rate = waiting.isEmpty ? "" : "  \(RateText.text(overall.bytesPerSecond)) \(RateText.eta(overall.secondsLeft(toReach: total)))"
                screen.show(bars + more + [line + rate])
            } else if sameAs != last {
                printOut(line)
                last = sameAs
            }
            switch verdict {
            case .following: break
            case .done:
                sayFailedSideAssets(entries)
                return ExitCode.ok
            case .failed:
                for f in failed { writeToStderr("labstream: \(f.path) failed: \(f.reason?.sentence ?? "unknown reason")") }
                return ExitCode.ioErr
            case .held:
                for f in entries where PinWait.held(state: f.state.rawValue, cause: f.pauseCause) {
                    writeToStderr("labstream: " + PinWait.heldMessage(path: f.path, reason: f.reason, cause: f.pauseCause))
                }
                return ExitCode.tempFail
            }
            if let followed {
                change = followed.change
            } else {
                usleep(250_000)  // a progress display, not synchronisation: the daemon owns the state
            }
        }
    }
}

/// Seconds on a clock that never jumps (for rates).
func monotonicSeconds() -> Double {
    var now = timespec()
    clock_gettime(CLOCK_MONOTONIC, &now)
    return Double(now.tv_sec) + Double(now.tv_nsec) / 1e9
}

/// What Ctrl-C during `pin --wait` says (a global, so the signal handler captures nothing).
let pinInterruptMessage: [UInt8] = Array(
    "\nlabstream: stopped waiting; the download goes on in the background. Follow it with: labstream status --watch\n".utf8)
