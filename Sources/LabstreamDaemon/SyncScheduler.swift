import Foundation
import LabstreamBackends
import LabstreamCore
import LabstreamEngine
import LabstreamStore
import Synchronization

/// Every catalog sync the daemon runs goes through here, whatever asked for it: the first sync
/// of a server before mounting, the start-up sync after it, the periodic refresh, a server that
/// answers again after failing (catch-up), SIGHUP and `labstream sync`. One place keeps what
/// a sync's outcome means: the server's reachability, its run of failures, whether the tree
/// must be rebuilt.
final class SyncScheduler: Sendable {
    /// Why a sync runs; it decides how much is read and what a failure says.
    enum Trigger: Sendable {
        /// A server with no catalog yet (before mounting, or added by SIGHUP): everything.
        case first
        /// Right after mounting, and every refresh interval: what changed, unless a whole read is due.
        case startUp, refresh
        /// A server that answers again while its last sync failed.
        case catchUp
        /// `labstream sync [--full]`.
        case request(full: Bool)
        /// The server's event channel told of changes: what changed since the last sync.
        case event

        /// What a failure's log line adds: what the mount does meanwhile.
        var meanwhile: String {
            switch self {
            case .first: return " Its folder appears once it answers and a sync succeeds."
            case .startUp: return " Serving its last known catalog from the index."
            case .refresh: return " Keeping the catalog in the index."
            case .event: return " Keeping the catalog in the index; the periodic refresh tries again."
            case .catchUp, .request: return ""
            }
        }
    }

    let context: Context
    let index: OfflineIndex
    let transfers: TransferEngine
    let log: Logger
    /// The configuration the daemon mounted with, for when the file cannot be read now.
    let mounted: LabstreamConfig
    /// Rebuilds the tree from the index.
    let reload: @Sendable () -> Void
    /// Servers whose last sync failed (or that have no catalog yet), with the failures in a row.
    private let failures = Mutex<[String: Int]>([:])
    /// Servers a catch-up is syncing now.
    private let catchingUp = Mutex<Set<String>>([])
    /// When the periodic refresh runs next (seconds since the epoch; nil: never, or not yet planned).
    let nextRefresh = Mutex<Int64?>(nil)

    init(
        context: Context, index: OfflineIndex, transfers: TransferEngine, log: Logger, mounted: LabstreamConfig,
        reload: @escaping @Sendable () -> Void
    ) {
        self.context = context
        self.index = index
        self.transfers = transfers
        self.log = log
        self.mounted = mounted
        self.reload = reload
    }

    /// The servers configured now (SIGHUP may have added some since the mount).
    var configured: [LabstreamConfig.Server] { ((try? context.loadConfig()) ?? mounted).servers }

    /// Syncs `names` (nil: every configured server) for `trigger`, one after the other, and
    /// rebuilds the tree once if any brought a new catalog. A sync that changed nothing, or
    /// failed, leaves the tree (and the kernel's caches of it) alone.
    @discardableResult
    func sync(_ names: [String]? = nil, _ trigger: Trigger, progress: ((String) -> Void)? = nil) -> [SyncResult] {
        let servers = configured.filter { names?.contains($0.name) ?? true }
        let results = servers.map { syncOne($0, trigger, progress: progress) }
        if results.contains(where: \.changed) { reload() }
        return results
    }

    private func syncOne(_ server: LabstreamConfig.Server, _ trigger: Trigger, progress: ((String) -> Void)?) -> SyncResult {
        guard let backend = transfers.backend(for: server.name) else {
            return .failed(server.name, "\(server.name) has no stored credentials; add it again with `labstream server add`", code: ExitCode.noPerm)
        }
        do {
            let outcome: CatalogSync.Outcome
            switch trigger {
            case .first: outcome = try CatalogSync.run(backend, server: server, index: index, log: log, progress: progress)
            case .startUp, .refresh, .catchUp: outcome = try CatalogSync.scheduled(backend, server: server, index: index, log: log)
            case .request(let full):
                outcome = try CatalogSync.run(backend, server: server, index: index, log: log, incremental: !full, progress: progress)
            case .event: outcome = try CatalogSync.run(backend, server: server, index: index, log: log, incremental: true)
            }
            failures.withLock { _ = $0.removeValue(forKey: server.name) }
            if !outcome.changed { transfers.catalogUnchanged(server: server.name) }
            return .succeeded(outcome.server, files: outcome.files, changed: outcome.changed)
        } catch {
            let again = failures.withLock { f -> Bool in
                f[server.name, default: 0] += 1
                return f[server.name]! > 1
            }
            log.warn("sync \(server.name) failed\(again && trigger.isCatchUp ? " again" : ""): \(error.userMessage)\(trigger.meanwhile)")
            if let state = Self.reachability(after: error) { transfers.markUnreachable(server.name, state) }
            return .failed(server.name, error.userMessage, code: ExitCode.of(error))
        }
    }

    /// A server answers again: if its last sync failed (or it has no catalog yet), sync it now
    /// rather than at the next refresh (on a home server the mount often starts before the media
    /// server does). Each failure in a row waits longer before the next try.
    func serverOnline(_ name: String) {
        guard let failed = failures.withLock({ $0[name] }), catchingUp.withLock({ $0.insert(name).inserted }) else { return }
        defer { catchingUp.withLock { _ = $0.remove(name) } }
        if failed > 1 { Thread.sleep(forTimeInterval: ReachabilityPolicy().nextProbe(after: failed - 1)) }  // a schedule, not synchronisation
        sync([name], .catchUp)
    }

    /// Start-up syncs of the servers mounted from the index, then a refresh every `interval`
    /// seconds of those that answer (0: never). Runs on the caller's thread, until the process ends.
    func startUpAndRefresh(_ names: [String], every interval: TimeInterval) {
        sync(names, .startUp)
        guard interval > 0 else { return }
        while true {
            nextRefresh.withLock { $0 = Int64((Date().timeIntervalSince1970 + interval).rounded(.up)) }
            Thread.sleep(forTimeInterval: interval)  // a schedule, not synchronisation
            sync(configured.map(\.name).filter { transfers.reachability(of: $0) == .online }, .refresh)
        }
    }

    /// What a failed sync says about its server: nothing, when the failure was local (a full or
    /// broken disk is never reported as the server being offline).
    static func reachability(after error: LabstreamError) -> Reachability? {
        switch error {
        case .authenticationFailed: return .authFailed
        case .storage, .noSpace, .overBudget: return nil
        default: return .offline
        }
    }
}

extension SyncScheduler.Trigger {
    var isCatchUp: Bool {
        if case .catchUp = self { return true }
        return false
    }
}
