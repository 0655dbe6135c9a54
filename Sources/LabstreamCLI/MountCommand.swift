import CLinux
import Foundation
import LabstreamBackends
import LabstreamCore
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
            return Daemon(
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

/// The mounted daemon: index, transfers, filesystem engine, FUSE loop, signals.
struct Daemon {
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
        let log = Logger(level: logLevel, syslog: syslog)
        do {
            return try serve(log: log, signals: set)
        } catch let e as CLIError {
            log.error(e.message)
            report("error \(e.code) \(e.message)")
            return e.code
        } catch {
            log.error("\(error)")
            report("error \(ExitCode.software) \(error)")
            return ExitCode.software
        }
    }

    /// What a failed sync says about its server: nothing, when the failure was local (a full or
    /// broken disk is never reported as the server being offline).
    static func reachability(after error: any Error) -> Reachability? {
        switch error as? LabstreamError {
        case .authenticationFailed?: return .authFailed
        case .storage?, .noSpace?: return nil
        default: return .offline
        }
    }

    func serve(log: Logger, signals: sigset_t) throws -> Int32 {
        CLinux_map_large_allocations()
        var config = try context.loadConfig()
        if let size = options.segmentSize { config.sizes.segmentSize = size }
        if let max = options.cacheMax { config.maxCacheSize = max }
        if let rate = options.rateLimit { config.rateLimit = rate }
        guard !config.servers.isEmpty else {
            throw CLIError(
                ExitCode.config,
                "no servers are configured in \(context.configPath); add one with: labstream server add jellyfin NAME --url URL --user USER --password-stdin")
        }
        let lock = try DaemonLock.acquire(context.layout, mountpoint: mountpoint)
        defer { lock.release() }
        let index = try context.openIndex()
        do { _ = try Reconcile.run(index: index, layout: context.layout, now: Int64(Date().timeIntervalSince1970), log: { log.warn($0) }) } catch {
            throw CLIError(error)
        }
        let backends = try context.backends(config, log: log)
        let skipped = config.servers.map(\.name).filter { name in !backends.contains { $0.serverName == name } }
            .map { "server \($0) has no stored credentials and is not mounted; add it again with `labstream server add`" }
        var settings = TransferEngine.Settings(
            sizes: config.sizes, readTimeout: config.fetchTimeout + config.connectTimeout,
            maxQueuedSegments: config.connectionsPerFile, maxConcurrentFiles: config.maxConcurrentFiles,
            checkpointBytes: max(1 << 20, config.sizes.segmentSize / 8),
            limits: .init(maxSize: config.maxCacheSize, minFree: config.minFree),
            playbackProbe: config.playbackProbe, rateLimit: config.rateLimit)
        settings.qualities = config.qualities
        let transfers = TransferEngine(index: index, layout: context.layout, settings: settings, log: { log.info($0) })
        for b in backends { transfers.setBackend(b) }

        // A server with no catalog yet is synced before mounting; the others mount from the
        // index at once and refresh in the background.
        let known: Set<String>
        do { known = try index.serversWithCatalog() } catch { throw CLIError(error) }
        var later: [(any MediaBackend, LabstreamConfig.Server)] = []
        // Servers with no catalog yet or whose last sync failed, with the failures in a row: one
        // that answers again is synced at once (`catchUp`).
        let unsynced = Mutex<[String: Int]>([:])
        for backend in backends {
            let server = config.server(named: backend.serverName)!
            if known.contains(server.name) {
                // Know at once whether it answers, so the first listing already has the right view.
                let state = backend.checkReachability()
                if state != .online { transfers.markUnreachable(server.name, state) }
                later.append((backend, server))
                continue
            }
            do { _ = try CatalogSync.run(backend, server: server, index: index, log: log) } catch {
                log.warn("sync \(server.name) failed: \(describe(error)) Its folder appears once it answers and a sync succeeds.")
                if let state = Self.reachability(after: error) { transfers.markUnreachable(server.name, state) }
                unsynced.withLock { $0[server.name] = 1 }
            }
        }
        let files: [TreeFile]
        do { files = try index.treeFiles() } catch { throw CLIError(error) }
        let ownership = FilesystemEngine.Ownership(uid: options.uid ?? geteuid(), gid: options.gid ?? getegid(), umask: options.umask)
        // The `.nfo` beside each film and episode and in each series folder, made from the index,
        // and the chapters the server knows, as each file's user.labstream.chapters.
        // The artwork and subtitles stored beside them join the same list.
        let sideAssets = config.sideAssets
        let fetcher = SideAssetFetcher(engine: transfers, mode: sideAssets)
        let beside: @Sendable ([TreeFile]) -> (files: [GeneratedFile], chapters: [FileKey: String]) = { files in
            var made: (files: [GeneratedFile], chapters: [FileKey: String]) = ([], [:])
            var catalogs: [String: [LibraryCatalog]] = [:]
            for (server, tree) in TreeFile.byServer(files) {
                let libraries = fetcher.catalog(server: server)
                if sideAssets != .off {
                    // Each document's size from the index's cache; only the new or changed are made.
                    let (nfos, new) = SideFiles.nfos(tree: tree, libraries: libraries, known: (try? index.documentSizes(server: server)) ?? [:]) {
                        try? index.document($0)
                    }
                    made.files += nfos
                    if !new.isEmpty {
                        do { try index.storeDocumentSizes(server: server, new) } catch { log.warn(describe(error)) }
                    }
                }
                made.chapters.merge(SideFiles.chapters(tree: tree, libraries: libraries)) { a, _ in a }
                catalogs[server] = libraries
            }
            made.files += fetcher.replan(tree: files, catalogs: catalogs)
            return made
        }
        let made = beside(files)
        let fs = FilesystemEngine(
            transfers: transfers, files: files, generated: made.files, chapters: made.chapters, ownership: ownership,
            sizes: config.sizes, offlineView: options.offlineView)
        CLinux_release_free_memory()  // what reading the catalog needed is not what serving it needs
        let trimPolicy = Mutex(HeapTrimPolicy(slack: CLinux_resident_slack_bytes()))
        transfers.startBackgroundFill()
        let control: ControlChannel.Server?
        do { control = try ControlChannel.Server(layout: context.layout, fs: fs, log: log) } catch {
            control = nil
            log.warn("no control socket (\(describe(error))); commands fall back to the mount's attributes")
        }
        control?.start()
        defer {
            control?.stop()
            transfers.stop()
            // Leave everything in index.sqlite itself, not in its write-ahead log.
            if let error = index.checkpoint() { log.warn("checkpointing the index: \(error)") }
            do { try index.backUp() } catch { log.warn(error.userMessage) }
        }
        let mount: FUSEMount
        do { mount = try FUSEMount(engine: fs, mountpoint: mountpoint, options: options.fuseOptions) } catch { throw CLIError(error) }
        fs.onInvalidate { parent, name in mount.invalidate(parent: parent, name: name) }
        fs.onAttributesChanged { ino in mount.invalidateAttributes(ino) }
        // The heap's free pages go back to the kernel once enough is held and no walk is under way.
        let heapTrim = DispatchSource.makeTimerSource(queue: DispatchQueue(label: "labstream.heap-trim", qos: .utility))
        heapTrim.schedule(deadline: .now() + 10, repeating: 10)
        heapTrim.setEventHandler {
            let slack = CLinux_resident_slack_bytes()
            if trimPolicy.withLock({ $0.tick(served: fs.takeServed(), slack: slack) }) { CLinux_release_free_memory() }
        }
        heapTrim.resume()
        defer { heapTrim.cancel() }

        let reload: @Sendable () -> Void = {
            do {
                let files = try index.treeFiles()
                let made = beside(files)
                fs.reload(files: files, generated: made.files, chapters: made.chapters)
                CLinux_release_free_memory()
                log.info("catalog reloaded from the index")
            } catch {
                log.warn("reloading the catalog failed: \(describe(error))")
            }
        }
        transfers.onTreeChange(reload)  // a finished copy at another quality joins the tree
        fetcher.onChange(reload)  // stored (or dropped) artwork and subtitles show
        transfers.onSideAssetsMissing { key in fetcher.status(of: key).contains { $0.state == .missing } }
        fs.onListed { fetcher.listed($0) }
        fs.onSideAssetStatus { fetcher.status(of: $0) }
        transfers.onMediaDropped { fetcher.mediaDropped($0) }
        transfers.onPinned { fetcher.wake() }
        transfers.onVerify { fetcher.verify($0) }
        fetcher.start()
        defer { fetcher.stop() }
        // A server that answers again and has no good catalog is synced now, not at the next
        // refresh (on a home server the mount usually starts before the media server does).
        // A sync that fails again waits longer before the next try.
        let syncing = Mutex<Set<String>>([])
        let configured = self.context
        let mounted = config
        transfers.onServerOnline { name in
            guard let failures = unsynced.withLock({ $0[name] }), syncing.withLock({ $0.insert(name).inserted }) else { return }
            defer { syncing.withLock { _ = $0.remove(name) } }
            guard let backend = transfers.backend(for: name), let server = ((try? configured.loadConfig()) ?? mounted).server(named: name) else { return }
            if failures > 1 { Thread.sleep(forTimeInterval: ReachabilityPolicy().nextProbe(after: failures - 1)) }  // a schedule, not synchronisation
            do {
                _ = try CatalogSync.scheduled(backend, server: server, index: index, log: log)
                unsynced.withLock { _ = $0.removeValue(forKey: name) }
                reload()
            } catch {
                log.warn("sync \(name) failed again: \(describe(error))")
                unsynced.withLock { $0[name, default: 0] += 1 }
                if let state = Self.reachability(after: error) { transfers.markUnreachable(name, state) }
            }
        }
        let context = self.context
        // SIGHUP: re-read the config and credentials (servers added or removed), sync servers
        // that have no catalog yet, and reload the tree, all without unmounting.
        let reconfigure: @Sendable () -> Void = {
            do {
                let fresh = try context.loadConfig()
                let known = try index.serversWithCatalog()
                for backend in try context.backends(fresh, log: log) {
                    transfers.setBackend(backend)
                    let server = fresh.server(named: backend.serverName)!
                    if !known.contains(server.name) {
                        do { _ = try CatalogSync.run(backend, server: server, index: index, log: log) } catch {
                            log.warn("sync \(server.name) failed: \(describe(error))")
                            if let state = Self.reachability(after: error) { transfers.markUnreachable(server.name, state) }
                        }
                    }
                }
                log.info("configuration reloaded: \(fresh.servers.map(\.name).joined(separator: ", "))")
            } catch {
                log.warn("reloading the configuration failed, keeping the old one: \(describe(error))")
            }
            reload()
        }
        let signalThread = Thread {
            var set = signals
            while true {
                var sig: Int32 = 0
                guard sigwait(&set, &sig) == 0 else { continue }
                if sig == SIGHUP { reconfigure(); continue }
                log.info("signal \(sig): unmounting \(mount.mountpoint)")
                mount.requestUnmount()
                return
            }
        }
        signalThread.start()

        let pending = later
        let refreshEvery = config.refreshInterval
        let everyone = backends.map { ($0, config.server(named: $0.serverName)!) }
        // `labstream sync` while mounted: the daemon syncs and reloads its own tree.
        control?.onSync { name, full, progress in
            var results: [[String: Any]] = []
            // The servers configured now (SIGHUP may have added some since the mount).
            let servers = ((try? context.loadConfig())?.servers ?? everyone.map(\.1)).filter { name == nil || $0.name == name }
            for server in servers {
                guard let backend = transfers.backend(for: server.name) else {
                    results.append([
                        "server": server.name, "error": "\(server.name) has no stored credentials; add it again with `labstream server add`",
                        "code": Int(ExitCode.noPerm)
                    ])
                    continue
                }
                results.append(
                    CatalogSync.report(backend, server: server, index: index, log: log, incremental: !full, progress: progress) { error in
                        if let state = Self.reachability(after: error) { transfers.markUnreachable(server.name, state) }
                    })
            }
            // A sync that changed nothing, or failed, leaves the tree (and the kernel's caches of it) alone.
            if CatalogSync.changedCatalog(results) { reload() }
            for r in results where r["changed"] as? Bool == false { transfers.catalogUnchanged(server: r["server"] as? String ?? "") }
            return results
        }
        let ready = Thread { [self] in
            // stat() of the root is answered only once the loop runs: then the mount is live.
            var st = stat()
            _ = stat(mountpoint, &st)
            log.info("mounted \(files.count) files at \(mountpoint)")
            report((["ready"] + skipped).joined(separator: "\t"))
            // The tree reloads only when a sync brought something: rebuilding it for an unchanged
            // catalog costs a folder walk (`find`) its shared listings just as it starts.
            var synced = false
            for (backend, server) in pending {
                do {
                    let outcome = try CatalogSync.scheduled(backend, server: server, index: index, log: log)
                    unsynced.withLock { _ = $0.removeValue(forKey: server.name) }
                    synced = synced || outcome.changed
                    if !outcome.changed { transfers.catalogUnchanged(server: server.name) }
                } catch {
                    log.warn("sync \(server.name) failed: \(describe(error)) Serving its last known catalog from the index.")
                    if let state = Self.reachability(after: error) { transfers.markUnreachable(server.name, state) }
                    unsynced.withLock { $0[server.name, default: 0] += 1 }
                }
            }
            if synced { reload() }
            // Periodic refresh: what changed since the last sync (a server that can tell says
            // removals by its counts), and once a day everything, in case a count hid one.
            guard refreshEvery > 0 else { return }
            while true {
                Thread.sleep(forTimeInterval: refreshEvery)  // a schedule, not synchronisation
                var refreshed = false
                for (backend, server) in everyone where transfers.reachability(of: server.name) == .online {
                    do {
                        let outcome = try CatalogSync.scheduled(backend, server: server, index: index, log: log)
                        unsynced.withLock { _ = $0.removeValue(forKey: server.name) }
                        refreshed = refreshed || outcome.changed
                        if !outcome.changed { transfers.catalogUnchanged(server: server.name) }
                    } catch {
                        log.warn("refresh of \(server.name) failed: \(describe(error)) Keeping the catalog in the index.")
                        if let state = Self.reachability(after: error) { transfers.markUnreachable(server.name, state) }
                        unsynced.withLock { $0[server.name, default: 0] += 1 }
                    }
                }
                if refreshed { reload() }
            }
        }
        ready.start()
        let rc = mount.run()
        log.info("unmounted \(mountpoint) (loop returned \(rc))")
        return ExitCode.ok
    }
}
