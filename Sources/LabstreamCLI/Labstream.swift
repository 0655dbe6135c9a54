import CLinux
import Glibc
import LabstreamBackends
import LabstreamCore
import LabstreamDaemon

/// The `labstream` command: dispatches to a subcommand and turns every failure into one
/// message on stderr and a sysexits code.
public enum Labstream {
    static let commands: Set<String> = [
        "server", "mount", "unmount", "umount", "status", "sync", "demo", "pin", "unpin",
        "pause", "resume", "retry", "cancel", "verify", "pause-all", "resume-all", "repair", "orphans", "monitor", "queue", "priority",
        "-h", "--help", "help", "--version", "version"
    ]

    public static func main(_ argv: [String]) -> Int32 {
        CLinux_use_one_malloc_arena()  // before any other thread exists
        let invokedAs = argv.first.map { String($0.split(separator: "/").last ?? "") } ?? ""
        // mount(8) runs mount.labstream; mount.fuse3 runs `labstream SOURCE MOUNTPOINT -o …`.
        let helper = invokedAs.hasPrefix("mount.") || (argv.count >= 3 && !commands.contains(argv[1]) && !argv[1].hasPrefix("-"))
        var rest = Array(argv.dropFirst())
        if helper {
            _ = MountedDaemon.blockSignals()
            return report { try MountHelper.run(rest) }
        }
        // Global options go anywhere on the line, before the command too.
        var leading: [String] = []
        while let first = rest.first, first.hasPrefix("-"), !commands.contains(first) {
            leading.append(rest.removeFirst())
            if Context.globalValued.contains(first), let value = rest.first { leading.append(value); rest.removeFirst() }
        }
        guard let command = rest.first else {
            if leading.isEmpty {
                writeToStderr(Help.main)
            } else {
                writeToStderr("labstream: no command after \(leading.joined(separator: " "))\nRun `labstream --help` for usage.")
            }
            return ExitCode.usage
        }
        rest = leading + rest.dropFirst()
        if command == "mount" || command == "demo" {
            _ = MountedDaemon.blockSignals()
        } else {
            // A starter may have had them blocked (libdispatch threads do): Ctrl-C and SIGTERM
            // must still end a plain command such as `status --watch`.
            var set = sigset_t()
            sigemptyset(&set)
            for s in [SIGTERM, SIGINT, SIGHUP] { sigaddset(&set, s) }
            pthread_sigmask(SIG_UNBLOCK, &set, nil)
        }
        return report {
            switch command {
            case "server": return try ServerCommands.run(rest)
            case "mount": return try MountCommand.run(rest)
            case "unmount", "umount": return try UnmountCommand.run(rest)
            case "status": return try StatusCommand.run(rest)
            case "sync": return try SyncCommand.run(rest)
            case "pin": return try PinCommand.run(rest, pin: true)
            case "unpin": return try PinCommand.run(rest, pin: false)
            case "pause", "resume", "retry", "cancel", "verify": return try PinCommand.control(QueueAction(rawValue: command)!, rest, all: false)
            case "pause-all": return try PinCommand.control(.pause, rest, all: true)
            case "resume-all": return try PinCommand.control(.resume, rest, all: true)
            case "queue": return try QueueCommand.run(rest)
            case "priority": return try QueueCommand.priority(rest)
            case "monitor": return try MonitorCommand.run(rest)
            case "repair": return try RepairCommand.run(rest)
            case "orphans": return try RepairCommand.orphans(rest)
            case "demo": return try DemoCommand.run(rest)
            case "-h", "--help", "help":
                printOut(Help.main)
                return ExitCode.ok
            case "--version", "version":
                printOut("labstream \(LabstreamVersion.current)")
                return ExitCode.ok
            default:
                throw UsageError("unknown command '\(command)'")
            }
        }
    }

    /// Runs a command and turns every failure into one message on stderr and a sysexits code.
    static func report(_ body: () throws -> Int32) -> Int32 {
        do {
            return try body()
        } catch let e as UsageError {
            writeToStderr("labstream: \(e.message)\nRun `labstream --help` for usage.")
            return ExitCode.usage
        } catch let e as CLIError {
            writeToStderr("labstream: \(e.message)")
            return e.code
        } catch let e as LabstreamError {
            writeToStderr("labstream: \(e.userMessage)")
            return ExitCode.of(e)
        } catch {
            writeToStderr("labstream: \(error)")
            return ExitCode.software
        }
    }
}
