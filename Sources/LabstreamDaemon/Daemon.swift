import CLinux
import Foundation
import LabstreamBackends
import LabstreamCore
import LabstreamEngine
import LabstreamFS
import LabstreamHTTP
import LabstreamStore
import Synchronization

/// The daemon: the one place its parts are made and wired (index, transfers, side files, the
/// filesystem engine, the sync scheduler, the control socket), and the one place that answers
/// its typed API (`handle`). The kernel mount is the caller's: `labstream mount` puts
/// `fs` behind FUSE; a test can run a daemon in-process with no mount at all.
public final class Daemon: Sendable {
    public let context: Context
    public let log: Logger
    public let index: OfflineIndex
    public let transfers: TransferEngine
    public let fs: FilesystemEngine
    /// What start-up left out (servers without credentials), for the person who mounted.
    public let notes: [String]
    let fetcher: SideAssetFetcher
    let scheduler: SyncScheduler
    let control: ControlChannel.Server?
    /// The local HTTP API and status page, when `[http]` asks for them.
    let web: WebAPI?
    /// A dispatch source is safe to use from any thread.
    nonisolated(unsafe) let heapTrim: any DispatchSourceTimer
    /// Servers mounted from the index, synced once the mount is up.
    let fromIndex: [String]
    let refreshInterval: TimeInterval
    let hooks: CompletionHooks
    /// Each server's event channel (opened once the mount answers).
    let channels: EventChannels

    /// Every configured server with credentials, by default through libcurl; a test passes its own.
    public typealias Backends = @Sendable (LabstreamConfig, Logger) throws -> [any MediaBackend]

    /// Makes the daemon: reconciles the index with the disk, syncs the servers that have no
    /// catalog yet, builds the tree and starts the background work and the control socket.
    /// The data dir's lock must be held.
    public init(
        context: Context, options: MountOptions, log: Logger, controlSocket: Bool = true,
        backends makeBackends: Backends? = nil, mountpoint: String? = nil, events: @escaping EventStreamOpener = EventStreams.open
    ) throws(CLIError) {
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
        self.context = context
        self.log = log
        let index = try context.openIndex()
        self.index = index
        do { _ = try Reconcile.run(index: index, layout: context.layout, now: Int64(Date().timeIntervalSince1970), log: { log.warn($0) }) } catch {
            throw CLIError(error)
        }
        let backends: [any MediaBackend]
        do { backends = try makeBackends?(config, log) ?? context.backends(config, log: log) } catch { throw CLIError(any: error) }
        notes = config.servers.map(\.name).filter { name in !backends.contains { $0.serverName == name } }
            .map { "server \($0) has no stored credentials and is not mounted; add it again with `labstream server add`" }
        var settings = TransferEngine.Settings(
            sizes: config.sizes, readTimeout: config.fetchTimeout + config.connectTimeout,
            maxQueuedSegments: config.connectionsPerFile, maxConcurrentFiles: config.maxConcurrentFiles,
            checkpointBytes: max(1 << 20, config.sizes.segmentSize / 8),
            budget: config.budget,
            playbackProbe: config.playbackProbe, rateLimit: config.rateLimit)
        settings.qualities = config.qualities
        settings.fetchThreads = config.fetchThreads
        let transfers = TransferEngine(index: index, layout: context.layout, settings: settings, log: { log.info($0) })
        self.transfers = transfers
        for b in backends { transfers.setBackend(b) }

        // The `.nfo` beside each film and episode and in each series folder, made from the
        // index, the chapters the server knows (each file's user.labstream.chapters), and the
        // artwork and subtitles stored beside them.
        let fetcher = SideAssetFetcher(engine: transfers, mode: config.sideAssets)
        self.fetcher = fetcher
        let beside = Self.besideMedia(index: index, fetcher: fetcher, mode: config.sideAssets, log: log)
        // Set once `fs` exists; the scheduler's first syncs (before it does) need no rebuild.
        let tree = Mutex<FilesystemEngine?>(nil)
        let reload: @Sendable () -> Void = {
            guard let fs = tree.withLock({ $0 }) else { return }
            do {
                let files = try index.treeFiles()
                if log.verbose { log.debug("reload: the tree's files read\(MemoryNote.now())") }
                let made = beside(files)
                if log.verbose { log.debug("reload: the side files planned\(MemoryNote.now())") }
                fs.reload(files: files, generated: made.files, chapters: made.chapters)
                if log.verbose { log.debug("reload: the tree swapped\(MemoryNote.now())") }
                CLinux_release_free_memory()
                log.info("catalog reloaded from the index")
            } catch {
                log.warn("reloading the catalog failed: \(describe(error))")
            }
        }
        let scheduler = SyncScheduler(context: context, index: index, transfers: transfers, log: log, mounted: config, reload: reload)
        self.scheduler = scheduler
        channels = EventChannels(scheduler: scheduler, transfers: transfers, log: log, open: events)

        // A server with no catalog yet is synced before mounting; the others mount from the
        // index at once (knowing whether they answer, so the first listing is right) and
        // refresh once the mount is up.
        let known: Set<String>
        do { known = try index.serversWithCatalog() } catch { throw CLIError(error) }
        let mountedNames = backends.map(\.serverName)
        fromIndex = mountedNames.filter { known.contains($0) }
        for backend in backends where known.contains(backend.serverName) {
            let state = backend.checkReachability()
            if state != .online { transfers.markUnreachable(backend.serverName, state) }
        }
        scheduler.sync(mountedNames.filter { !known.contains($0) }, .first)
        refreshInterval = config.refreshInterval

        let access = try AccessPolicy.forDaemon(controlGroup: config.controlGroup)
        DataDirModes.apply(context.layout, access, log: log)
        let files: [TreeFile]
        do { files = try index.treeFiles() } catch { throw CLIError(error) }
        let made = beside(files)
        let fs = FilesystemEngine(
            transfers: transfers, files: files, generated: made.files, chapters: made.chapters,
            ownership: FilesystemEngine.Ownership(uid: options.uid ?? geteuid(), gid: options.gid ?? getegid(), umask: options.umask),
            sizes: config.sizes, offlineView: options.offlineView, access: access)
        self.fs = fs
        tree.withLock { $0 = fs }
        CLinux_release_free_memory()  // what reading the catalog needed is not what serving it needs

        let hooks = CompletionHooks(
            config: config, mountpoint: mountpoint, log: log, resolve: { [weak transfers] in transfers?.treePath(of: $0) },
            missingBeside: { key in fetcher.status(of: key).contains { $0.state == .missing } })
        self.hooks = hooks
        let recent = RecentEvents()
        transfers.onEvent { event in
            switch event {
            case .treeChanged: reload()  // a finished copy at another quality joins the tree
            case .pinned: fetcher.wake()  // what goes beside the pinned files comes with them
            case .verify(let keys): fetcher.verify(keys)
            case .preparing(let path): fetcher.listed(Array(path.dropLast()))  // its subtitles and artwork, as its folder's listing would
            case .mediaDropped(let key): fetcher.mediaDropped(key)
            case .serverOnline(let name): scheduler.serverOnline(name)
            case .finished(let key, let outcome, let reason):
                hooks.finished(key, outcome, reason: reason)
                recent.note(key, outcome, reason)
            }
        }
        transfers.onSideAssetsMissing { key in fetcher.status(of: key).contains { $0.state == .missing } }
        fetcher.onChange {
            reload()  // stored (or dropped) artwork and subtitles show
            hooks.sideAssetsChanged()  // a file waiting for them to be complete may now be
        }
        fs.onListed { fetcher.listed($0) }
        let channels = self.channels
        fs.onRootNotes { [transfers] in
            channels.states().sorted { $0.key < $1.key }.map { ("events." + $0.key, $0.value.attribute) }
                + (scheduler.nextRefresh.withLock { $0 }.map { [("next_refresh", String($0))] } ?? [])
                + [("fill", transfers.fillPasses.attribute)]
        }
        fs.onSideAssetStatus { fetcher.status(of: $0) }

        // The heap's free pages go back to the kernel once enough is held and no walk is under way.
        let trimPolicy = Mutex(HeapTrimPolicy(slack: CLinux_resident_slack_bytes()))
        heapTrim = DispatchSource.makeTimerSource(queue: DispatchQueue(label: "labstream.heap-trim", qos: .utility))
        heapTrim.schedule(deadline: .now() + 10, repeating: 10)
        heapTrim.setEventHandler {
            let slack = CLinux_resident_slack_bytes()
            if trimPolicy.withLock({ $0.tick(served: fs.takeServed(), slack: slack) }) { CLinux_release_free_memory() }
        }

        // Before the control socket: a listen address that cannot be had stops the mount here.
        web = try Self.startWeb(config, context: context, recent: recent, log: log)
        if web != nil { DataDirModes.apply(context.layout, access, log: log) }  // the token made just now
        var control: ControlChannel.Server?
        if controlSocket {
            let handle = Mutex<(@Sendable (DaemonRequest, Caller, @escaping (String) -> Void) -> DaemonResponse)?>(nil)
            do {
                control = try ControlChannel.Server(layout: context.layout, log: log, access: access) { request, caller, progress in
                    handle.withLock { $0 }?(request, caller, progress) ?? .failure(code: ExitCode.tempFail, message: "the daemon is starting; try again")
                }
            } catch {
                log.warn("no control socket (\(describe(error))); commands fall back to the mount's attributes")
            }
            self.control = control
            handle.withLock { [unowned self] in $0 = { self.handle($0, from: $1, progress: $2) } }
        } else {
            self.control = nil
        }
        transfers.startBackgroundFill()
        heapTrim.resume()
        fetcher.start()
        control?.start()
        if let web {
            web.listener.start(answer: { [unowned self] in self.answer($0, web: web) })
            log.info("HTTP API and status page on \(web.listener.address)")
        }
    }

    /// The mount answers: the servers mounted from the index are synced, then every server
    /// that answers is refreshed at the configured interval, on a thread of the daemon's own.
    public func mounted() {
        let scheduler = self.scheduler, names = fromIndex, interval = refreshInterval
        let thread = Thread { scheduler.startUpAndRefresh(names, every: interval) }
        thread.name = "catalog-refresh"
        thread.start()
        channels.follow(transfers.serverNames)
    }

    /// SIGHUP: re-read the configuration and credentials (servers added or removed), the access
    /// group and the storage budget, sync the servers that have no catalog yet, and rebuild the
    /// tree, all without unmounting.
    public func reconfigure() {
        do {
            let fresh = try context.loadConfig()
            let known = try index.serversWithCatalog()
            let access = try AccessPolicy.forDaemon(controlGroup: fresh.controlGroup)
            if access != fs.access {
                fs.setAccess(access)
                DataDirModes.apply(context.layout, access, log: log)
                control?.share(access)
                log.info("access: changes now for \(access.attribute)")
            }
            transfers.setBudget(fresh.budget)
            let backends = try context.backends(fresh, log: log)
            for backend in backends { transfers.setBackend(backend) }
            scheduler.sync(backends.map(\.serverName).filter { !known.contains($0) }, .first)
            // A removed server's channel closes; the others open anew with what was just read
            // (a server signed in again has a new token).
            channels.follow([])
            channels.follow(backends.map(\.serverName).filter { name in fresh.servers.contains { $0.name == name } })
            log.info("configuration reloaded: \(fresh.servers.map(\.name).joined(separator: ", "))")
        } catch {
            log.warn("reloading the configuration failed, keeping the old one: \(describe(error))")
        }
        scheduler.reload()
    }

    /// Answers one request of the daemon's API (the control socket's, and any other door's)
    /// asked by `caller`: a change only when the access policy allows them (as an attribute
    /// write). A door passes the caller it saw; the default is this process itself.
    public func handle(_ request: DaemonRequest, from caller: Caller = .thisProcess, progress: @escaping (String) -> Void = { _ in }) -> DaemonResponse {
        if request.access == .change, let refused = fs.access.refusal(caller) {
            log.warn("control: refused a change from uid \(caller.uid): \(refused.code.rawValue)")
            return .failure(code: ExitCode.noPerm, message: refused.sentence)
        }
        switch request {
        case .sync(let server, let full):
            if let server, !scheduler.configured.contains(where: { $0.name == server }) {
                return .failure(code: ExitCode.noInput, message: CLIError.noSuchServer(server).message)
            }
            return .synced(scheduler.sync(server.map { [$0] }, .request(full: full), progress: progress))
        case .status(let paths, let after, let wait):
            let inodes: [(String, UInt64)]
            // A stored copy of a removed server answers from its row, by the path it had.
            let removed = paths.filter { (try? resolve([$0])) == nil }
            var gone: [FileStatus] = []
            do {
                inodes = try resolve(paths.filter { !removed.contains($0) })
                if !removed.isEmpty {
                    for copy in try removedCopies(named: removed) {
                        guard let row = try? index.download(copy.key) else { continue }
                        gone.append(FileStatus(path: copy.path, size: row.total, row: row, related: []))
                    }
                }
            } catch { return .failure(code: error.code, message: error.message) }
            // `after`: answer once a download row changed past that point, so a follower needs
            // no polling; `change` says where it now stands.
            let change = after.map { transfers.waitForChange(after: $0, timeout: min(wait ?? 1, 10)) } ?? transfers.changeCount
            return .statuses(entries: inodes.flatMap { path, ino in fs.statuses(below: ino, named: path) } + gone, change: change)
        case .queue:
            return .queue(transfers.queue())
        case .prioritize(let priority, let paths):
            do throws(CLIError) {
                var files = 0
                for (path, ino) in try resolve(paths) {
                    do { files += try transfers.setPriority(priority, files: fs.treeFiles(under: ino), named: path) } catch { throw CLIError(error) }
                }
                return .performed(files: files)
            } catch {
                return .failure(code: error.code, message: error.message)
            }
        case .moveInQueue(let path, let before):
            do throws(CLIError) {
                let (_, ino) = try resolve([path])[0]
                let other = try before.map { p throws(CLIError) in try resolve([p])[0] }
                do {
                    let target = try other.map { p, i throws(LabstreamError) in (files: try fs.treeFiles(under: i), named: p) }
                    return .performed(files: try transfers.move(fs.treeFiles(under: ino), named: path, before: target))
                } catch { throw CLIError(error) }
            } catch {
                return .failure(code: error.code, message: error.message)
            }
        case .reclaim(let server, let paths):
            do throws(CLIError) {
                let freed: (files: Int, bytes: Int64)
                if let server {
                    do {
                        transfers.forget(try index.downloads().filter { $0.key.server == server }.map(\.key))
                        freed = try index.purgeServer(server, layout: context.layout)
                    } catch { throw CLIError(error) }
                } else {
                    let copies = try removedCopies(named: paths)
                    transfers.forget(copies.map(\.key))
                    do { freed = try index.purge(copies.map(\.key), layout: context.layout) } catch { throw CLIError(error) }
                }
                transfers.forget([])
                log.info("control: freed \(freed.files) stored files (\(ByteCount.text(freed.bytes))) of \(server.map { "server \($0)" } ?? "removed servers")")
                return .reclaimed(files: freed.files, bytes: freed.bytes)
            } catch {
                return .failure(code: error.code, message: error.message)
            }
        case .perform(let command, let paths):
            do throws(CLIError) {
                // A monitor whose series left the catalog has no folder: `monitor list` names it
                // SERVER/SERIES-ID, and that name removes it. Every name is checked before any
                // monitor goes, so a typo removes nothing.
                let named = command == .monitor(nil) ? paths.filter { (try? resolve([$0])) == nil } : []
                if !named.isEmpty {
                    let monitors: [SeriesMonitor]
                    do { monitors = try index.monitors() } catch { throw CLIError(error) }
                    for name in named where MonitorReference.named(name, among: monitors) == nil {
                        throw CLIError(
                            ExitCode.noInput,
                            "\(name) is neither a series folder in the mounted catalog nor a monitor's SERVER/SERIES-ID (`labstream monitor list` shows each monitor's); no monitor was removed"
                        )
                    }
                    for name in named {
                        do { _ = try transfers.removeMonitor(named: name) } catch { throw CLIError(error) }
                    }
                    log.info("control: removed the monitor of \(named.joined(separator: ", ")) by its name")
                    guard named.count < paths.count else { return .performed(files: named.count) }
                }
                // A stored copy of a removed server is named by the path it had: cancel frees it,
                // unpin leaves it listed in `labstream orphans`.
                let removed = paths.filter { !named.contains($0) && (try? resolve([$0])) == nil }
                if !removed.isEmpty {
                    let copies = try removedCopies(named: removed)
                    switch command {
                    case .queue(.cancel):
                        transfers.forget(copies.map(\.key))
                        do { try index.purge(copies.map(\.key), layout: context.layout) } catch { throw CLIError(error) }
                        transfers.forget([])
                    case .unpin:
                        do { try index.unpinRemoved(copies.map(\.key)) } catch { throw CLIError(error) }
                    default:
                        throw CLIError(
                            ExitCode.noInput,
                            "\(removed[0]) is a stored copy of a removed server: only `labstream cancel` or `labstream orphans --purge` (which free it) and `unpin` act on it"
                        )
                    }
                    guard removed.count < paths.count else { return .performed(files: copies.count) }
                }
                let inodes = try resolve(paths.filter { !removed.contains($0) && !named.contains($0) })
                let parked = command == .queue(.resume) || command == .queue(.retry) ? fs.pausedForRoom(inodes) : [:]
                for (_, ino) in inodes {
                    do { try fs.perform(command, at: ino) } catch { throw CLIError(error) }
                }
                log.info("control: \(command) on \(inodes.count) paths")
                let again = parked.isEmpty ? [] : fs.parkedAgain(parked, inodes).map { ParkedAgain($0, free: transfers.freeSpace) }
                return .performed(files: inodes.count, parkedAgain: parked.isEmpty ? nil : again)
            } catch {
                return .failure(code: error.code, message: error.message)
            }
        }
    }

    /// The stored copies of removed servers `paths` name (none: all); a path that names none is
    /// refused, so a typo deletes nothing.
    func removedCopies(named paths: [String]) throws(CLIError) -> [OfflineIndex.RemovedCopy] {
        let copies: [OfflineIndex.RemovedCopy]
        do { copies = try index.removedCopies() } catch { throw CLIError(error) }
        for path in paths where Reclaim.named(copies.map(\.path), by: [path]).isEmpty {
            throw CLIError(
                ExitCode.noInput, "\(path) is not in the mounted catalog, nor a stored copy of a removed server (`labstream orphans` lists those)")
        }
        return Reclaim.named(copies.map(\.path), by: paths).map { copies[$0] }
    }

    /// The inode of each path below the mount's root.
    func resolve(_ paths: [String]) throws(CLIError) -> [(String, UInt64)] {
        try paths.map { path throws(CLIError) in
            let components = path.split(separator: "/").map(String.init)
            guard let ino = components.isEmpty ? FilesystemEngine.rootInode : fs.resolve(components) else {
                throw CLIError(ExitCode.noInput, "\(path) is not in the mounted catalog")
            }
            return (path, ino)
        }
    }

    /// Stops the background work and leaves the index whole: everything in index.sqlite itself
    /// (not in its write-ahead log) and a verified backup beside it.
    public func stop() {
        channels.stopAll()
        web?.listener.stop()
        control?.stop()
        fetcher.stop()
        heapTrim.cancel()
        transfers.stop()
        hooks.stop()
        if let error = index.checkpoint() { log.warn("checkpointing the index: \(error)") }
        do { try index.backUp() } catch { log.warn(error.userMessage) }
    }

    /// What is made beside the media of `files`: the `.nfo` documents (each one's size from the
    /// index's cache; only new or changed ones are made), the chapters, and the side assets
    /// the fetcher has stored.
    static func besideMedia(
        index: OfflineIndex, fetcher: SideAssetFetcher, mode: LabstreamConfig.SideAssets, log: Logger
    ) -> @Sendable ([TreeFile]) -> (files: [GeneratedFile], chapters: [FileKey: String]) {
        { files in
            var made: (files: [GeneratedFile], chapters: [FileKey: String]) = ([], [:])
            var catalogs: [String: [LibraryCatalog]] = [:]
            for (server, tree) in TreeFile.byServer(files) {
                let libraries = fetcher.catalog(server: server)
                if mode != .off {
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
    }
}
