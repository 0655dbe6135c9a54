import CLinux
import Foundation
import LabstreamBackends
import LabstreamCore
import LabstreamDaemon
import LabstreamEngine
import LabstreamFS
import LabstreamFUSE
import LabstreamStore
import Synchronization

enum MountCommand {
    static let spec = Arguments.Spec(
        valued: Context.globalValued.union(["-o", "--ready-fd"]),
        flags: Context.globalFlags.union(["--foreground", "-f"]))

    static func run(_ argv: [String]) throws -> Int32 {
        let args = try Arguments.parse(argv, spec: spec)
        if args.flag("-h") || args.flag("--help") { printOut(Help.mount); return ExitCode.ok }
        guard args.positionals.count == 1 else { throw UsageError("usage: labstream mount MOUNTPOINT [--foreground] [-o OPTIONS]") }
        let options: MountOptions
        do { options = try MountOptions.parse(args.all("-o")) } catch { throw UsageError(error.message) }
        let mountpoint = try checkedMountpoint(args.positionals[0], allowOther: options.allowOther)
        let logLevel = try Logger.level(args)  // refused here, before any daemon starts
        var context = Context(args: args)
        if options.configDir != nil || options.dataDir != nil {
            context = Context(configDir: options.configDir ?? context.configDir, dataDir: options.dataDir ?? context.dataDir)
        }
        if args.flag("--foreground") || args.flag("-f") {
            let readyFD = args.value("--ready-fd").flatMap { Int32($0) }
            if let readyFD { closeInheritedDescriptors(keeping: readyFD) }
            // A daemonised child (it has a ready pipe) also logs to syslog/the journal.
            return MountedDaemon(
                context: context, mountpoint: mountpoint, options: options,
                logLevel: logLevel, syslog: readyFD != nil,
                report: { line in
                    guard let fd = readyFD else { return }
                    _ = Array((line + "\n").utf8).withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
                    close(fd)
                }
            ).run()
        }
        return try daemonize(argv, context: context, mountpoint: mountpoint)
    }

    static func checkedMountpoint(_ raw: String, allowOther: Bool = false) throws -> String {
        var st = stat()
        if stat(raw, &st) != 0 {
            if errno == ENOTCONN {
                // A crashed daemon's mount: clear it if it is ours, then carry on.
                let absolute = raw.hasPrefix("/") ? raw : FileManager.default.currentDirectoryPath + "/" + raw
                guard UnmountCommand.isLabstreamMount(absolute), FUSEMount.unmount(absolute), stat(raw, &st) == 0 else {
                    throw CLIError(ExitCode.tempFail, "\(raw) is a dead mount left by a previous daemon; clear it with: fusermount3 -u \(raw)")
                }
                writeToStderr("labstream: cleared the dead mount a previous daemon left at \(raw)")
                return try checkedMountpoint(raw, allowOther: allowOther)
            }
            throw CLIError(ExitCode.noInput, "the mountpoint \(raw) does not exist; create it with: mkdir -p \(raw)")
        }
        let isDirectory = st.st_mode & S_IFMT == S_IFDIR
        let path =
            isDirectory
            ? realpath(raw, nil).map { p in
                defer { free(p) }; return String(cString: p)
            } ?? raw : raw
        // A Labstream mount whose daemon is gone may still stat from the kernel's caches.
        if UnmountCommand.isLabstreamMount(path) && StatusCommand.xattr(path, "state") == nil {
            guard FUSEMount.unmount(path) else {
                throw CLIError(ExitCode.tempFail, "\(raw) is a dead mount left by a previous daemon; clear it with: fusermount3 -u \(raw)")
            }
            writeToStderr("labstream: cleared the dead mount a previous daemon left at \(raw)")
            return try checkedMountpoint(raw, allowOther: allowOther)
        }
        let device: MountPreflight.DeviceAccess =
            access("/dev/fuse", F_OK) != 0
            ? .missing
            : (access("/dev/fuse", R_OK | W_OK) != 0 ? .denied : .usable)
        let facts = MountPreflight.Facts(
            mountpoint: raw, isDirectory: isDirectory,
            entries: isDirectory ? ((try? FileManager.default.contentsOfDirectory(atPath: path)) ?? []) : [],
            mountedType: UnmountCommand.mountedType(at: path), device: device, allowOther: allowOther, euid: geteuid(),
            fuseConf: FileManager.default.contents(atPath: "/etc/fuse.conf").map { String(decoding: $0, as: UTF8.self) })
        if let (problem, message) = MountPreflight.check(facts) {
            let code: Int32
            switch problem {
            case .notADirectory, .notEmpty, .alreadyMounted: code = ExitCode.usage
            case .noDevice: code = ExitCode.unavailable
            case .deviceDenied: code = ExitCode.noPerm
            case .allowOtherNotPermitted: code = ExitCode.config
            }
            throw CLIError(code, message)
        }
        return path
    }

    /// Starts `labstream mount … --foreground` in a new session and returns once it reports the
    /// mount live (0) or its error (its exit code).
    static func daemonize(_ argv: [String], context: Context, mountpoint: String) throws -> Int32 {
        var fds: [Int32] = [0, 0]
        guard pipe(&fds) == 0 else { throw CLIError(ExitCode.osErr, "pipe: \(String(cString: strerror(errno)))") }
        let (readEnd, writeEnd) = (fds[0], fds[1])
        _ = fcntl(readEnd, F_SETFD, FD_CLOEXEC)
        do { try makeDirectories(context.dataDir) } catch { throw CLIError(error) }
        let logFD = open(context.layout.logPath, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0o600)
        let devNull = open("/dev/null", O_RDWR | O_CLOEXEC)

        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_adddup2(&actions, devNull, 0)
        posix_spawn_file_actions_adddup2(&actions, logFD >= 0 ? logFD : devNull, 1)
        posix_spawn_file_actions_adddup2(&actions, logFD >= 0 ? logFD : devNull, 2)
        var attr = posix_spawnattr_t()
        posix_spawnattr_init(&attr)
        defer { posix_spawnattr_destroy(&attr) }
        posix_spawnattr_setflags(&attr, Int16(CLinux_POSIX_SPAWN_SETSID))

        let childArgs =
            ["labstream", "mount"] + argv + [
                "--foreground", "--ready-fd", String(writeEnd),
                "--config-dir", context.configDir, "--data-dir", context.dataDir
            ]
        var cArgs: [UnsafeMutablePointer<CChar>?] = childArgs.map { strdup($0) } + [nil]
        defer { cArgs.forEach { free($0) } }
        var pid: pid_t = 0
        let rc = posix_spawn(&pid, selfExecutable(), &actions, &attr, &cArgs, environ)
        close(writeEnd)
        if logFD >= 0 { close(logFD) }
        close(devNull)
        guard rc == 0 else { close(readEnd); throw CLIError(ExitCode.osErr, "cannot start the daemon: \(String(cString: strerror(rc)))") }

        var message = [UInt8]()
        var byte: UInt8 = 0
        while true {
            let n = read(readEnd, &byte, 1)
            if n < 0 && errno == EINTR { continue }
            if n <= 0 || byte == 10 { break }
            message.append(byte)
        }
        close(readEnd)
        let text = String(decoding: message, as: UTF8.self)
        if text == "ready" || text.hasPrefix("ready\t") {
            printOut("Mounted at \(mountpoint) (daemon pid \(pid)). Stop it with: labstream unmount \(mountpoint)")
            // What the daemon left out, said here and not only in its log.
            for note in text.split(separator: "\t").dropFirst() { writeToStderr("labstream: \(note)") }
            return ExitCode.ok
        }
        var status: Int32 = 0
        waitpid(pid, &status, 0)
        if text.hasPrefix("error ") {
            let rest = text.dropFirst(6)
            let space = rest.firstIndex(of: " ") ?? rest.endIndex
            throw CLIError(Int32(rest[..<space]) ?? ExitCode.software, String(rest[space...]).trimmingCharacters(in: .whitespaces))
        }
        throw CLIError(ExitCode.software, "the daemon exited during start-up; see \(context.layout.logPath)")
    }
}

/// The running binary's real path (so the daemon's process name is `labstream`, not `exe`).
func selfExecutable() -> String {
    var buffer = [CChar](repeating: 0, count: 4096)
    let n = readlink("/proc/self/exe", &buffer, buffer.count - 1)
    guard n > 0 else { return "/proc/self/exe" }
    return String(decoding: buffer[0..<n].map { UInt8(bitPattern: $0) }, as: UTF8.self)
}

/// A daemon must not keep its starter's descriptors open: whoever waits on the starter (a shell,
/// systemd, a test harness watching a socket) would otherwise wait on the daemon too.
func closeInheritedDescriptors(keeping keep: Int32) {
    guard let names = try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd") else { return }
    for fd in names.compactMap({ Int32($0) }) where fd > 2 && fd != keep {
        close(fd)
    }
}

/// `labstream mount --foreground`: the daemon (`LabstreamDaemon.Daemon`) behind a FUSE mount,
/// with the data dir's lock, signals, and the report to whoever started it.
struct MountedDaemon {
    let context: Context
    let mountpoint: String
    let options: MountOptions
    let logLevel: LogLevel
    var syslog = false
    /// Told "ready" once the mount answers, or "error CODE MESSAGE" if start-up fails.
    let report: @Sendable (String) -> Void

    /// SIGTERM, SIGINT and SIGHUP are taken by one thread with sigwait. Call this before any
    /// other thread starts so that every thread inherits the mask.
    static func blockSignals() -> sigset_t {
        var set = sigset_t()
        sigemptyset(&set)
        for s in [SIGTERM, SIGINT, SIGHUP] { sigaddset(&set, s) }
        pthread_sigmask(SIG_BLOCK, &set, nil)
        return set
    }

    func run() -> Int32 {
        // A peer gone away (the starter interrupted before "ready", a CLI client that quit) is
        // an error on that write, not the end of the daemon.
        signal(SIGPIPE, SIG_IGN)
        let set = Self.blockSignals()
        // A daemonised daemon's stderr is DATA_DIR/labstream.log, which it keeps bounded; in the
        // foreground (a terminal, a systemd unit's journal) whoever reads stderr keeps it.
        let rotating =
            syslog
            ? RotatingLogFile(path: context.layout.logPath, rotation: (try? context.loadConfig())?.logRotation ?? .default, standardStreams: true) : nil
        let log = Logger(level: logLevel, syslog: syslog, rotating: rotating)
        do {
            return try serve(log: log, signals: set)
        } catch {
            log.error(error.message)
            report("error \(error.code) \(error.message)")
            return error.code
        }
    }

    func serve(log: Logger, signals: sigset_t) throws(CLIError) -> Int32 {
        let lock = try DaemonLock.acquire(context.layout, mountpoint: mountpoint)
        defer { lock.release() }
        let daemon = try Daemon(context: context, options: options, log: log, mountpoint: mountpoint)
        defer { daemon.stop() }
        let mount: FUSEMount
        do { mount = try FUSEMount(engine: daemon.fs, mountpoint: mountpoint, options: options.fuseOptions) } catch { throw CLIError(error) }
        daemon.fs.onInvalidate { parent, name in mount.invalidate(parent: parent, name: name) }
        daemon.fs.onAttributesChanged { ino in mount.invalidateAttributes(ino) }
        let signalThread = Thread {
            var set = signals
            while true {
                var sig: Int32 = 0
                guard sigwait(&set, &sig) == 0 else { continue }
                if sig == SIGHUP { daemon.reconfigure(); continue }
                log.info("signal \(sig): unmounting \(mount.mountpoint)")
                mount.requestUnmount()
                return
            }
        }
        signalThread.start()
        let ready = Thread { [self] in
            // stat() of the root is answered only once the loop runs: then the mount is live.
            var st = stat()
            _ = stat(mountpoint, &st)
            log.info("mounted \(daemon.fs.fileCount) files at \(mountpoint)")
            report((["ready"] + daemon.notes).joined(separator: "\t"))
            daemon.mounted()
        }
        ready.start()
        let rc = mount.run()
        log.info("unmounted \(mountpoint) (loop returned \(rc))")
        return ExitCode.ok
    }
}
