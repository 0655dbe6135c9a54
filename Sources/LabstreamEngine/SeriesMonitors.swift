import Foundation
import LabstreamBackends
import LabstreamCore
import LabstreamStore
import Synchronization

/// Keeps monitored series in step with their servers: after each catalog reload (and when a
/// monitor is made or changed, or its server answers again) every monitor of a server that is
/// online is evaluated by `SeriesMonitorPolicy` and its plan carried out: pins made (one
/// transaction per evaluation), pins let go, copies removed. Nothing happens for a server that
/// is not answering: an offline monitor waits.
///
/// A monitor's own pins are recorded (`monitored_episodes`) before they are made, so a stop in
/// the middle leaves an intent the next evaluation completes, never a pin that looks like the
/// person's. The person's pin of an episode makes it theirs; their unpin of a monitored episode
/// is remembered, and the monitor leaves it alone.
final class SeriesMonitors: Sendable {
    let worker = Worker(name: "monitors")
    /// Servers to evaluate at the next pass.
    let due = Mutex<Set<String>>([])
    /// What each monitor held after its last evaluation, for `status` and `monitor list`.
    let lastPlans = Mutex<[String: SeriesMonitorPolicy.Plan]>([:])
    /// Whether a monitor's cap held `key` back at its last evaluation (its `status` says so).
    func heldByCap(_ key: FileKey) -> Bool { lastPlans.withLock { $0.values.contains { $0.heldByCap.contains(key) } } }

    static func id(_ server: String, _ series: String) -> String { server + "\u{0}" + series }

    func start(_ engine: any MonitorHost) {
        worker.start { [self] _ in
            let servers = due.withLock { d -> Set<String> in
                defer { d.removeAll() }
                return d
            }
            for server in servers.sorted() {
                do throws(LabstreamError) { try evaluating.withLock { _ throws(LabstreamError) in try evaluate(server, engine: engine) } } catch {
                    engine.log("monitors on \(server): \(error.userMessage); trying again at the next refresh")
                }
            }
            return nil
        }
    }

    func stop() { worker.stop() }

    /// Evaluates `servers`' monitors soon (on the monitors' own thread).
    func schedule(_ servers: some Sequence<String>) {
        due.withLock { $0.formUnion(servers) }
        worker.wake()
    }

    /// The catalog's episodes of every monitored series of `server`, with what the monitor and
    /// the person did to each, planned and carried out.
    func evaluate(_ server: String, engine: any MonitorHost) throws(LabstreamError) {
        var monitors = try engine.index.monitors(server: server)
        guard !monitors.isEmpty else { return }
        let items = try engine.index.catalog(server: server).flatMap(\.items).filter { $0.kind == .episode }
        refreshLookup(server, monitors: monitors, items: items)
        // Offline, a monitor waits: nothing is pinned, let go or removed on old news (its plan
        // only says what it holds and what waits for the server).
        let online = engine.reachability(of: server) == .online
        if online, let registry = engine.backend(for: server) as? any SeriesSubscriptions {
            // The server's monitors failing (busy, refused, not offered) does not stop them
            // being evaluated here: the pins register one by one instead of by the server's sync.
            do throws(LabstreamError) {
                monitors = try mirror(monitors, to: registry, server: server, engine: engine)
                refreshLookup(server, monitors: monitors, items: items)
            } catch {
                engine.log("\(server): its own series monitors could not be kept this time (\(error.userMessage)); evaluating them here")
                monitors = try engine.index.monitors(server: server)
            }
        }
        var monitored = try engine.index.monitoredEpisodes(server: server)
        // An episode counts as pinned when its file or a copy of it at another quality is.
        let pinnedFiles = Set(try engine.index.pinnedManaged(server: server).map { DerivedCopy.parse($0.key)?.base ?? $0.key })
        // Watched state from the server itself where a refresh does not carry it, once for all;
        // where the query and the episodes' own flags disagree, the log says so each time.
        var watched: Set<String>?
        if online, let source = engine.backend(for: server) as? any WatchedState {
            let series = Set(monitors.map(\.seriesId))
            let verdict = WatchedAgreement.resolve(
                try source.watchedEpisodes(ofSeries: monitors.map(\.seriesId)),
                among: Set(items.filter { $0.seriesId.map(series.contains) ?? false }.map(\.id)))
            watched = verdict.watched
            if verdict.disagreeing > 0 {
                engine.log(
                    "\(server): its watched query listed \(verdict.disagreeing) episode\(verdict.disagreeing == 1 ? "" : "s") of monitored series "
                        + "that \(verdict.disagreeing == 1 ? "its" : "their") own watched state in the same answer calls unwatched; "
                        + "taking \(verdict.disagreeing == 1 ? "it" : "them") as unwatched (kept, never removed on that word)")
            }
        }
        for monitor in monitors {
            let episodes = items.filter { $0.seriesId == monitor.seriesId }.compactMap { item -> (MonitoredEpisode, TreeFile)? in
                let record = monitored[item.id].flatMap { $0.seriesId == monitor.seriesId ? $0 : nil }
                // The version kept: the one the monitor or the person pinned, else the first listed.
                let files = item.sources.compactMap { engine.catalogFile(FileKey(server: server, itemId: item.id, sourceId: $0.id)) }
                guard
                    let file = files.first(where: { $0.key.sourceId == record?.sourceId }) ?? files.first(where: { pinnedFiles.contains($0.key) })
                        ?? files.first
                else { return nil }
                let pinned = pinnedFiles.contains(file.key)
                let byMonitor = record?.state == .pinned
                return (
                    MonitoredEpisode(
                        key: file.key, season: item.seasonNumber ?? 0, episode: item.episodeNumber ?? 0, size: file.size,
                        played: watched?.contains(item.id) ?? item.played, pinnedByHand: pinned && !byMonitor, pinnedByMonitor: pinned && byMonitor,
                        declined: record?.state == .declined, open: engine.isOpen(file.key)), file
                )
            }
            let fileOf = Dictionary(episodes.map { ($0.0.key, $0.1) }, uniquingKeysWith: { a, _ in a })
            let plan = SeriesMonitorPolicy.plan(monitor, episodes: episodes.map(\.0), online: online)
            lastPlans.withLock { $0[Self.id(server, monitor.seriesId)] = plan }
            // Kept in the index: `monitor list` and `status` tell it with no daemon running too.
            // Only what is said of the monitor: failing to keep it stops no pin.
            try? engine.index.saveMonitorOutcome(server: server, series: monitor.seriesId, plan.outcome)
            guard online else { continue }
            if !plan.pin.isEmpty {
                for key in plan.pin {
                    let row = OfflineIndex.MonitoredRow(seriesId: monitor.seriesId, sourceId: key.sourceId, state: .pinned)
                    try engine.index.setMonitoredEpisode(server: server, item: key.itemId, row)
                    monitored[key.itemId] = row
                }
                try engine.setPinned(true, files: plan.pin.compactMap { fileOf[$0] }, quality: nil, priority: nil, by: .monitor)
            }
            let letGo = plan.unpin + plan.remove
            if !letGo.isEmpty {
                try engine.setPinned(false, files: letGo.compactMap { fileOf[$0] }, quality: nil, priority: nil, by: .monitor)
                for key in letGo {
                    try engine.index.setMonitoredEpisode(server: server, item: key.itemId, nil)
                    monitored[key.itemId] = nil
                }
            }
            if !plan.remove.isEmpty {
                try engine.control(.cancel, files: plan.remove.compactMap { fileOf[$0] }, reason: StatusReason.monitorLetGo)
            }
            if !(plan.pin.isEmpty && letGo.isEmpty) {
                engine.log(
                    "monitor of \(server)/\(monitor.seriesId) (\(monitor.settings)): pinned \(plan.pin.count), let go of \(plan.unpin.count), "
                        + "removed \(plan.remove.count); holds \(plan.holds.count) episodes (\(plan.heldBytes) bytes)"
                        + (plan.heldByCap.isEmpty ? "" : ", \(plan.heldByCap.count) held by the cap"))
            }
        }
    }

    /// Keeps the server's own monitors (subscriptions) in step with `monitors`, then lets the
    /// server register what each is due; returns the monitors as they now are (settings changed
    /// on the server are taken, never overwritten). A server that does not offer monitoring
    /// leaves them as they are: they are evaluated here all the same.
    func mirror(
        _ monitors: [SeriesMonitor], to registry: any SeriesSubscriptions, server: String,
        engine: any MonitorHost
    ) throws(LabstreamError) -> [SeriesMonitor] {
        guard try registry.keepsMonitors() else {
            if refusedOnce.withLock({ $0.insert(server).inserted }) { engine.log("\(server) keeps no series monitors of its own; evaluating them here") }
            return monitors
        }
        let remote = try registry.subscriptions()
        // A monitor moved to its series' new id (a rebuilt library): the server's, naming the
        // old id, goes; the loop below makes one for the new id.
        for stale in SeriesSubscriptionPolicy.leftBehind(monitors, remote: remote) {
            do throws(LabstreamError) {
                let deleted = try registry.unsubscribe(stale)
                let said =
                    deleted
                    ? "named \(stale.seriesId), the series' id before its library was rebuilt; deleted there, and made again for the new id"
                    : "(of the series' id before its library was rebuilt) changed on the server meanwhile; it was not deleted there"
                engine.log("\(server): monitor \(stale.id) \(said)")
            } catch {
                engine.log("\(server): deleting monitor \(stale.id) (of the series' old id) failed: \(error.userMessage); it stays there")
            }
        }
        let bySeries = Dictionary(remote.map { ($0.seriesId, $0) }, uniquingKeysWith: { a, _ in a })
        var out: [SeriesMonitor] = []
        var registered = 0
        for original in monitors {
            var monitor = original
            var subscription: SeriesSubscription?
            switch SeriesSubscriptionPolicy.step(monitor, remote: bySeries[monitor.seriesId]) {
            case .keep(let held):
                subscription = held
            case .create:
                // An existing one (a lost answer's) comes back unchanged: it is then brought in step.
                let made = try registry.subscribe(monitor)
                subscription = made.sameSettings(as: monitor) ? made : try registry.update(made, to: monitor)
                engine.log("\(server): monitor of \(monitor.seriesId) kept on the server as \(made.id)")
            case .update(let held):
                subscription = try registry.update(held, to: monitor)
                if subscription == nil { engine.log("\(server): monitor \(held.id) changed on the server meanwhile; it is read again") }
            case .adopt(let theirs):
                monitor.mode = theirs.mode
                monitor.deleteWatched = theirs.deleteWatched
                monitor.maxStorage = theirs.maxStorage
                subscription = theirs
                engine.log("\(server): monitor \(theirs.id) was changed on the server; taking its settings (\(monitor.settings))")
            }
            if let subscription {
                monitor.remoteId = subscription.id
                monitor.remoteEtag = subscription.etag
            }
            // Recorded before the sync: a sync that fails must not lose which server monitor is
            // this one's (removing the monitor deletes that one by its id).
            if monitor != original { try engine.index.saveMonitor(monitor) }
            if let subscription, subscription.active {
                do throws(LabstreamError) {
                    // nil: changed there since it was read. The validator seen stays, so the
                    // next evaluation sees a newer one and takes the server's settings; a
                    // forgotten validator would read as "changed here" and overwrite them.
                    if let made = try registry.sync(subscription) { registered += made }
                } catch {
                    guard case .refused(let why) = error else { throw error }
                    engine.log("\(server): syncing monitor \(subscription.id) was refused: \(why)")
                }
            }
            out.append(monitor)
        }
        // What the server registered is read back before the pins look for entries.
        if registered > 0 {
            engine.log("\(server): its monitors registered \(registered) episodes")
            engine.relistEntries(of: server)
        }
        return out
    }

    /// The server's monitor of a series whose monitor was removed here is deleted too (its
    /// entries stay); a changed validator is read again once. Best effort: a server that does
    /// not answer keeps it, and says so in the log.
    func unmirror(_ monitor: SeriesMonitor, engine: any MonitorHost) {
        guard let registry = engine.backend(for: monitor.server) as? any SeriesSubscriptions, let id = monitor.remoteId else { return }
        do throws(LabstreamError) {
            for _ in 0..<2 {
                guard let held = try registry.subscriptions().first(where: { $0.id == id }) else { return }
                if try registry.unsubscribe(held) { return }
            }
            engine.log("\(monitor.server): monitor \(id) keeps changing on the server; it was not deleted there")
        } catch {
            engine.log("\(monitor.server): deleting monitor \(id) on the server failed: \(error.userMessage); it stays there")
        }
    }

    let refusedOnce = Mutex<Set<String>>([])

    /// Monitored series by episode (`server`/item) and monitors by series, so an attribute read
    /// asks no index.
    /// `episodes`: how many episodes with a file each monitored series has (a series folder holds
    /// them all, a season folder fewer).
    let lookup = Mutex<(seriesOf: [String: String], monitors: [String: SeriesMonitor], episodes: [String: Int])>(([:], [:], [:]))

    func refreshLookup(_ server: String, monitors: [SeriesMonitor], items: [CatalogItem]) {
        let series = Set(monitors.map(\.seriesId))
        lookup.withLock { l in
            l.seriesOf = l.seriesOf.filter { !$0.key.hasPrefix(server + "/") }
            l.monitors = l.monitors.filter { !$0.key.hasPrefix(server + "\u{0}") }
            l.episodes = l.episodes.filter { !$0.key.hasPrefix(server + "\u{0}") }
            for item in items where !item.sources.isEmpty {
                guard let s = item.seriesId, series.contains(s) else { continue }
                l.seriesOf[server + "/" + item.id] = s
                l.episodes[Self.id(server, s), default: 0] += 1
            }
            for m in monitors { l.monitors[Self.id(server, m.seriesId)] = m }
        }
    }

    /// The monitor of the series `files` (a series folder's) belong to, and what it held at its
    /// last evaluation.
    func monitor(of files: [TreeFile]) -> (SeriesMonitor, SeriesMonitorPolicy.Plan?)? {
        guard let first = files.first else { return nil }
        let server = first.key.server
        // Every episode of the one monitored series (not a library's folder, nor one season's).
        return lookup.withLock { l -> SeriesMonitor? in
            guard let series = l.seriesOf[server + "/" + first.key.itemId],
                files.allSatisfy({ $0.key.server == server && l.seriesOf[server + "/" + $0.key.itemId] == series }),
                Set(files.map(\.key.itemId)).count == l.episodes[Self.id(server, series)]
            else { return nil }
            return l.monitors[Self.id(server, series)]
        }.map { monitor in (monitor, lastPlans.withLock { $0[Self.id(server, monitor.seriesId)] }) }
    }

    /// Makes, changes (`settings`) or removes (nil) the monitor of the series whose folder holds
    /// `files`: every episode file of one series, as the series folder does.
    func set(_ settings: String?, folder files: [TreeFile], engine: any MonitorHost) throws(LabstreamError) {
        guard let server = files.first?.key.server, files.allSatisfy({ $0.key.server == server && $0.kind == .episode }) else {
            throw .invalidArgument("a monitor is set on a series folder (every file in it an episode of one series)")
        }
        let episodes = try engine.index.catalog(server: server).flatMap(\.items).filter { $0.kind == .episode }
        let seriesOf = Dictionary(episodes.map { ($0.id, $0.seriesId ?? "") }, uniquingKeysWith: { a, _ in a })
        let series = Set(files.map { seriesOf[$0.key.itemId] ?? "" })
        guard series.count == 1, let seriesId = series.first, !seriesId.isEmpty else {
            throw .invalidArgument("a monitor is set on one series' folder; this folder holds episodes of \(series.count) series")
        }
        let ofSeries = episodes.filter { $0.seriesId == seriesId }
        let inTree = Set(
            ofSeries.flatMap { item in item.sources.compactMap { engine.catalogFile(FileKey(server: server, itemId: item.id, sourceId: $0.id))?.key } })
        guard inTree.isSubset(of: Set(files.map(\.key))) else {
            throw .invalidArgument("set the monitor on the series folder itself, not on one of its seasons")
        }
        let existing = try engine.index.monitors(server: server).first { $0.seriesId == seriesId }
        if let settings {
            let parsed = try SeriesMonitor.parseSettings(settings)
            var monitor =
                existing
                ?? SeriesMonitor(
                    server: server, seriesId: seriesId, mode: parsed.mode,
                    baseline: Set(ofSeries.map(\.id)), created: engine.now())
            monitor.mode = parsed.mode
            monitor.deleteWatched = parsed.deleteWatched
            monitor.maxStorage = parsed.maxStorage
            try engine.index.saveMonitor(monitor)
            engine.log("\(existing == nil ? "monitoring" : "monitor changed:") \(server)/\(seriesId) (\(monitor.settings))")
        } else {
            guard let existing else { return }
            try remove(existing, engine: engine)
        }
        refreshLookup(server, monitors: try engine.index.monitors(server: server), items: episodes)
        schedule([server])
    }

    /// Removes `monitor`, and its server's own (best effort); its pins stay.
    func remove(_ monitor: SeriesMonitor, engine: any MonitorHost) throws(LabstreamError) {
        try engine.index.removeMonitor(server: monitor.server, series: monitor.seriesId)
        unmirror(monitor, engine: engine)
        lastPlans.withLock { _ = $0.removeValue(forKey: Self.id(monitor.server, monitor.seriesId)) }
        engine.log("no longer monitoring \(monitor.server)/\(monitor.seriesId); its pins stay")
    }

    /// Removes the monitor `name` names as `MonitorReference` spells it (`SERVER/SERIES-ID`): one
    /// whose series left the catalog has no folder to be named by. nil when no monitor has that
    /// name.
    /// Never asked on the FUSE thread (a name is no path), so it may wait for an evaluation.
    func remove(named name: String, engine: any MonitorHost) throws(LabstreamError) -> SeriesMonitor? {
        try evaluating.withLock { _ throws(LabstreamError) -> SeriesMonitor? in
            guard let monitor = MonitorReference.named(name, among: try engine.index.monitors()) else { return nil }
            try remove(monitor, engine: engine)
            let items = try engine.index.catalog(server: monitor.server).flatMap(\.items).filter { $0.kind == .episode }
            refreshLookup(monitor.server, monitors: try engine.index.monitors(server: monitor.server), items: items)
            return monitor
        }
    }

    /// Held while a server's monitors are evaluated: an evaluation works from the monitors it
    /// read, and would make a removed one's server monitor again and record it anew. A removal by
    /// name waits for it. (A folder's removal comes on the FUSE thread, which must not wait on an
    /// evaluation that may need the kernel.)
    let evaluating = Mutex<Void>(())

    /// The person pinned or unpinned `keys` themselves: a pin makes a monitored episode theirs,
    /// an unpin tells its monitor to leave it alone.
    func personPinned(_ pinned: Bool, _ keys: [FileKey], engine: any MonitorHost) {
        let servers = Set(keys.map(\.server))
        for server in servers {
            guard let monitored = try? engine.index.monitoredEpisodes(server: server), !monitored.isEmpty else { continue }
            for key in keys where key.server == server {
                guard var row = monitored[key.itemId], row.sourceId == key.sourceId || !pinned else { continue }
                row.state = .declined
                try? engine.index.setMonitoredEpisode(server: server, item: key.itemId, pinned ? nil : row)
            }
        }
    }
}

/// Who pins or unpins: the person (a command, an attribute write) or a series monitor.
public enum PinOrigin: Sendable {
    case person, monitor
}

/// All series monitors may ask of the transfer engine.
protocol MonitorHost: ServerAccess {
    var index: OfflineIndex { get }
    func catalogFile(_ key: FileKey) -> TreeFile?
    func isOpen(_ key: FileKey) -> Bool
    func now() -> Int64
    func setPinned(_ pinned: Bool, files targets: [TreeFile], quality: Quality?, priority: QueuePriority?, by origin: PinOrigin) throws(LabstreamError)
    func control(_ action: QueueAction, files targets: [TreeFile], reason: StatusReason?) throws(LabstreamError)
    /// The server's download registry changed under a monitor: read it back, then fill.
    func relistEntries(of server: String)
}

extension TransferEngine: MonitorHost {
    func relistEntries(of server: String) {
        managed.relist(server)
        filler.wake()
    }
}
