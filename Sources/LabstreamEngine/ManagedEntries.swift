import Foundation
import LabstreamBackends
import LabstreamCore
import LabstreamStore
import Synchronization

/// Keeps a managed registry (Silo's download entries) in step with the pins: a pinned file is
/// registered (the intent recorded first; a create whose answer was lost is looked up, never
/// sent again), its progress and completion are reported, its bytes come through the entry,
/// and an unpinned file's entry is deleted through the cleanup journal. `ManagedEntryPolicy`
/// decides each step; this file only carries them out.
final class ManagedEntries: Sendable {
    /// Servers whose entries were listed in this run: the first pass of a run reconciles what
    /// changed while the daemon was away (an entry revoked, one made by a lost answer).
    let listed = Mutex<Set<String>>([])
    /// Servers whose stored entries were handed to their backend as byte routes.
    let routed = Mutex<Set<String>>([])
    /// A server whose last pass failed is asked again at this time.
    let nextTry = Mutex<[String: (due: Date, failures: Int)]>([:])
    /// Set by pins, verdicts and finished fills; a pass without it runs at most once a second.
    let poked = Atomic<Bool>(true)
    let lastPass = Mutex<Date>(.distantPast)
    /// When each server's entries in preparation are next read back, and how often they were.
    let preparing = Mutex<[String: (due: Date, polls: Int)]>([:])
    /// Failed attempts the server's entries were read back for (a refused fetch may be a revoked entry).
    let failuresSeen = Mutex<Set<String>>([])
    /// A copy at a preset whose size its entry's file route did not say is asked again at this time.
    let nextProbe = Mutex<[FileKey: Date]>([:])

    /// Registry servers whose pass runs now, and those with files pinned (or retried) since
    /// their last pass began.
    let inPass = Mutex<Set<String>>([])
    let due = Mutex<Set<String>>([])
    /// Wakes the registries' thread (`TransferEngine.entries`); set before the engine starts it.
    let wakeUp = Hook<@Sendable () -> Void>()

    func poke() {
        poked.store(true, ordering: .relaxed)
        wakeUp.function?()
    }

    /// Files of `servers` were pinned or retried: their registry has its say (an entry made or
    /// read back) before the fill fetches them.
    func pinned(_ servers: Set<String>) {
        due.withLock { $0.formUnion(servers) }
        poke()
    }

    /// Whether the fill leaves `server`'s files alone for now: it keeps a registry, and a pass
    /// runs for it or is due since a pin, which may make or read back the entry its bytes come
    /// through. Other servers' files never wait on a registry, nor on its other passes.
    func holdsFill(_ server: String, engine: any ServerAccess) -> Bool {
        guard inPass.withLock({ $0.contains(server) }) || due.withLock({ $0.contains(server) }) else { return false }
        return engine.backend(for: server) is any ManagedDownloadRegistry
    }

    /// Set when a step left work for the very next pass (an entry to read back).
    let again = Atomic<Bool>(false)

    /// `server` has a new backend (signed in again): the next pass hands it the stored entries'
    /// byte routes and reads the server's entries back.
    func rebind(_ server: String) {
        routed.withLock { _ = $0.remove(server) }
        relist(server)
    }

    /// The next pass, a second from now at most, reads `server`'s entries back first.
    func relist(_ server: String) {
        listed.withLock { _ = $0.remove(server) }
        again.store(true, ordering: .relaxed)
        poke()
    }

    /// One pass over every registry server. Returns when it wants to run again without a wake-up.
    /// Returns when it wants to run again without a wake-up, and whether it ran.
    func pass(_ engine: any ManagedEntriesHost) -> (Date?, Bool) {
        let now = Date()
        let last = lastPass.withLock { $0 }
        // Throttled: the pass after this one comes a second after the last, so nothing it was
        // woken for waits longer than that.
        guard poked.load(ordering: .relaxed) || now.timeIntervalSince(last) >= 1 else { return (last.addingTimeInterval(1), false) }
        lastPass.withLock { $0 = now }
        // Each registry server is marked running before its pin is taken: the fill never sees neither.
        let registries = engine.serverNames.filter { engine.backend(for: $0) is any ManagedDownloadRegistry }
        inPass.withLock { $0.formUnion(registries) }
        due.withLock { $0.subtract(registries) }
        poked.store(false, ordering: .relaxed)
        defer { inPass.withLock { $0.removeAll() } }
        var soonest: Date?
        for server in registries {
            defer { inPass.withLock { _ = $0.remove(server) } }
            guard let registry = engine.backend(for: server) as? any ManagedDownloadRegistry else { continue }
            if routed.withLock({ $0.insert(server).inserted }) {
                for entry in ((try? engine.index.managedEntries(server: server)) ?? [:]).values {
                    if let key = entry.key(server: server) { registry.routeBytes(of: key, through: entry.routesBytes ? entry.id : nil) }
                }
            }
            guard engine.reachability(of: server) == .online else { continue }
            if let wait = nextTry.withLock({ $0[server] }), wait.due > now {
                soonest = min(soonest ?? wait.due, wait.due)
                continue
            }
            do throws(LabstreamError) {
                try keep(server, registry: registry, engine: engine)
                nextTry.withLock { _ = $0.removeValue(forKey: server) }
            } catch {
                if case .authenticationFailed = error { engine.markUnreachable(server, .authFailed) }
                let failures = (nextTry.withLock { $0[server]?.failures } ?? 0) + 1
                var delay = 5.0
                if case .retry(let d) = engine.retry.decide(
                    .transientTransport, failures: failures, now: now.timeIntervalSince1970,
                    random: Double.random(in: 0...1), persistent: true)
                {
                    delay = max(d, 1)
                }
                let due = now.addingTimeInterval(delay)
                nextTry.withLock { $0[server] = (due, failures) }
                listed.withLock { _ = $0.remove(server) }  // what the failed step did is read back first
                engine.log("download entries on \(server): \(error.userMessage); trying again in \(Int(delay)) s")
                soonest = min(soonest ?? due, due)
            }
        }
        if again.exchange(false, ordering: .relaxed) { soonest = min(soonest ?? now.addingTimeInterval(1), now.addingTimeInterval(1)) }
        for (_, poll) in preparing.withLock({ $0 }) { soonest = min(soonest ?? poll.due, poll.due) }
        for due in nextProbe.withLock({ $0.values }) where due > now { soonest = min(soonest ?? due, due) }
        return (soonest, true)
    }

    /// Brings `server`'s entries in step with its pinned files, one step per item.
    func keep(_ server: String, registry: any ManagedDownloadRegistry, engine: any ManagedEntriesHost) throws(LabstreamError) {
        let rows = try engine.index.pinnedManaged(server: server)
        let pinned = Dictionary(grouping: rows, by: \.key.itemId)
        var stored = try engine.index.managedEntries(server: server)
        // A fetch that failed for good while its entry looked servable: the server may have ended the entry.
        let unexplained = rows.filter { row in
            row.status == .failed && stored[row.key.itemId].map { $0.holds(row.key) && !$0.endsFetching } == true
                && failuresSeen.withLock { $0.insert("\(row.key)/\(row.attempt)").inserted }
        }
        if !listed.withLock({ $0.contains(server) }) || !unexplained.isEmpty || stored.values.contains(where: { $0.id == nil }) {
            stored = try relist(server, registry: registry, stored: stored, pinned: Set(pinned.keys), engine: engine)
        }
        // An entry the server is preparing is read back at a backed-off pace until it is ready.
        if stored.values.contains(where: { $0.status == "preparing" }) {
            let now = Date()
            let poll = preparing.withLock { $0[server] } ?? (due: now, polls: 0)
            if poll.due <= now {
                relist(server)
                preparing.withLock { $0[server] = (now.addingTimeInterval(min(pow(2, Double(poll.polls)), 30)), poll.polls + 1) }
            }
        } else {
            preparing.withLock { _ = $0.removeValue(forKey: server) }
        }
        // A copy at a preset whose bytes are all here joins the tree beside its original.
        if rows.contains(where: { DerivedCopy.parse($0.key) != nil && [.complete, .unverified].contains($0.status) && engine.catalogFile($0.key) == nil }) {
            engine.treeChanged()
        }
        for (item, entry) in try registerSeasons(server, rows: rows, stored: stored, registry: registry, engine: engine) { stored[item] = entry }
        for item in Set(pinned.keys).union(stored.keys).sorted() {
            let entry = stored[item]
            let candidates = pinned[item] ?? []
            // One entry per item: it holds the pinned file it names, else the first pinned one.
            let row = candidates.first { entry?.holds($0.key) == true } ?? (entry == nil ? candidates.first : nil)
            let step = ManagedEntryPolicy.step(
                pinned: row != nil, local: row.map { local($0, entry: entry, engine: engine) }, entry: entry,
                besideStored: row.map { !engine.sideAssetsMissing($0.key) } ?? true)
            try take(step, server: server, item: item, row: row, entry: entry, registry: registry, engine: engine)
        }
        for stale in rows where DerivedCopy.parse(stale.key) != nil && stale.total == 0 {
            // As the steps above left it (one may have failed it).
            guard let row = try engine.index.download(stale.key), row.pinned, row.total == 0,
                [.queued, .downloading, .preparing].contains(row.status), let entry = stored[row.key.itemId],
                entry.holds(row.key), entry.id != nil, !entry.endsFetching, entry.status != "preparing"
            else { continue }
            learnSize(row, quality: entry.quality, registry: registry, engine: engine)
        }
    }

    /// A copy at a preset whose entry is ready learns its size from the entry's file route, here
    /// rather than in the fill: the fill then fetches it like any file.
    func learnSize(_ queued: DownloadRow, quality: Quality, registry: any ManagedDownloadRegistry, engine: any ManagedEntriesHost) {
        if let due = nextProbe.withLock({ $0[queued.key] }), due > Date() { return }
        var row = queued
        guard var shown = engine.derivedTreeFile(row) else { return }
        shown.size = 1
        // What the copy turns out to be is known from its first bytes: until then it is said
        // as the original's copy, never by a name it may not have.
        let named = (DerivedCopy.parse(row.key).flatMap { engine.catalogFile($0.base) }?.path ?? shown.path).joined(separator: "/")
        do throws(LabstreamError) {
            let probe = try registry.transport.sizeOf(registry.rangeRequest(for: shown, range: ByteRange(0, 1), validator: nil))
            guard let size = probe.size, size > 0 else {
                throw LabstreamError.malformedResponse("the copy's file route did not say its size (HTTP \(probe.status))")
            }
            row = row.nextAttempt(reason: nil)
            row.apply(.enqueued)
            row.total = size
            _ = try engine.index.saveDownload(row, now: engine.now())
            nextProbe.withLock { _ = $0.removeValue(forKey: row.key) }
            engine.log("\(named): the server's \(quality) copy is ready (\(size) bytes)")
        } catch {
            nextProbe.withLock { $0[row.key] = Date().addingTimeInterval(5) }
            engine.log("\(named): the server's \(quality) copy: \(error.userMessage); trying again shortly")
        }
    }

    /// Seasons whose every episode (one version each) is pinned and none registered are
    /// registered in one batch each (downloads-api.md § 4.1), their intents recorded first like
    /// a single create's. Returns the entries made; what the server skipped is said.
    func registerSeasons(
        _ server: String, rows: [DownloadRow], stored: [String: ManagedEntry], registry: any ManagedDownloadRegistry,
        engine: any ManagedEntriesHost
    ) throws(LabstreamError) -> [String: ManagedEntry] {
        let waiting = rows.filter { row in
            stored[row.key.itemId] == nil && row.status != .failed && DerivedCopy.parse(row.key) == nil && engine.catalogFile(row.key)?.kind == .episode
        }
        guard waiting.count > 1 else { return [:] }
        let episodes = try engine.index.catalog(server: server).flatMap(\.items).filter { $0.kind == .episode }
        let rowOf = Dictionary(waiting.map { ($0.key.itemId, $0) }, uniquingKeysWith: { a, _ in a })
        var made: [String: ManagedEntry] = [:]
        let seasons = Dictionary(grouping: episodes) { SeasonKey(series: $0.seriesId ?? "", season: $0.seasonNumber ?? -1) }
        for (season, items) in seasons.sorted(by: { ($0.key.series, $0.key.season) < ($1.key.series, $1.key.season) })
        where !season.series.isEmpty && season.season >= 0 && items.count > 1 && items.allSatisfy({ rowOf[$0.id] != nil && $0.sources.count == 1 }) {
            for item in items {
                let key = rowOf[item.id]!.key
                try engine.index.saveManagedEntry(ManagedEntry(itemId: item.id, sourceId: key.sourceId, kind: key.kind, id: nil), server: server)
            }
            let batch = "labstream-" + UUID().uuidString.lowercased()
            let answer: (made: [ManagedEntry], skipped: [(episode: String, reason: String)])
            do { answer = try registry.registerSeason(series: season.series, season: season.season, batch: batch) } catch {
                if case .remoteChanged = error { relist(server) } else { throw error }
                continue
            }
            for entry in answer.made where rowOf[entry.itemId] != nil {
                try engine.index.saveManagedEntry(entry, server: server)
                if let key = entry.key(server: server) { registry.routeBytes(of: key, through: entry.routesBytes ? entry.id : nil) }
                made[entry.itemId] = entry
            }
            // A skipped episode is said with the server's reason; a pinned one's intent goes: it
            // is asked for on its own, and told why if refused.
            for skipped in answer.skipped {
                if rowOf[skipped.episode] != nil { try engine.index.removeManagedEntry(server: server, item: skipped.episode) }
                engine.log("\(server): the server skipped episode \(skipped.episode) of batch \(batch): \(skipped.reason)")
            }
            engine.log("\(server): registered season \(season.season) of \(season.series) as batch \(batch) (\(answer.made.count) entries)")
            engine.sideAssetsDue()  // their manifests name what goes beside them
            engine.wakeValidation()
        }
        return made
    }

    struct SeasonKey: Hashable {
        var series: String
        var season: Int
    }

    /// Where a pinned row's copy stands, for the policy.
    func local(_ row: DownloadRow, entry: ManagedEntry?, engine: any ManagedEntriesHost) -> LocalCopy {
        if row.status == .failed { return .failed }
        guard row.total > 0, row.present.contains(ByteRange(0, row.total)) else { return .fetching }
        let judged = engine.judges(with: entry.flatMap { $0.checks(row.key) ? $0 : nil })
        return row.awaitingValidation && judged ? .awaitingCheck : .finished
    }

    func relist(
        _ server: String, registry: any ManagedDownloadRegistry, stored: [String: ManagedEntry], pinned: Set<String>,
        engine: any ManagedEntriesHost
    ) throws(LabstreamError) -> [String: ManagedEntry] {
        let remote = try registry.entries()
        let now = ManagedEntryPolicy.reconcile(stored: stored, remote: remote, pinned: pinned)
        for (item, old) in stored where now[item] == nil {
            try engine.index.removeManagedEntry(server: server, item: item)
            if let key = old.key(server: server) { registry.routeBytes(of: key, through: nil) }
        }
        for (item, entry) in now where stored[item] != entry {
            if stored[item]?.id == nil, stored[item] != nil {
                engine.log("\(server): adopted download entry \(entry.id ?? "?") for \(item), made by an earlier try whose answer was lost")
            }
            try engine.index.saveManagedEntry(entry, server: server)
            if let key = entry.key(server: server) { registry.routeBytes(of: key, through: entry.routesBytes ? entry.id : nil) }
            engine.wakeValidation()  // a finished copy found its entry: its integrity can be checked
            // Pinned again before its journaled delete went through: the entry is in use, kept.
            for intent in engine.journal.pending where intent.kind == .deleteEntry && intent.server == server && intent.session == entry.id {
                try engine.journal.remove(intent)
                engine.log("download entry \(intent.session) on \(server) is in use again; it is kept")
            }
        }
        listed.withLock { _ = $0.insert(server) }
        return now
    }

    func take(
        _ step: ManagedEntryPolicy.Step, server: String, item: String, row: DownloadRow?, entry: ManagedEntry?,
        registry: any ManagedDownloadRegistry, engine: any ManagedEntriesHost
    ) throws(LabstreamError) {
        switch step {
        case .none:
            return
        case .lookUp:
            relist(server)
        case .register:
            // A copy at a preset is registered as its original at that preset.
            let copy = row.flatMap { DerivedCopy.parse($0.key) }
            guard let row, let file = engine.catalogFile(copy?.base ?? row.key) else { return }
            // The intent first: after a stop or a lost answer the server is asked what it made.
            try engine.index.saveManagedEntry(ManagedEntry(itemId: item, sourceId: row.key.sourceId, kind: row.key.kind, id: nil), server: server)
            let made: Registration
            do { made = try registry.register(file, quality: copy?.quality ?? .original) } catch {
                guard case .refused(let why) = error else { throw error }
                // Refused for good (not offered, not allowed): the copy fails saying so; a retry asks again.
                try engine.index.removeManagedEntry(server: server, item: item)
                if let shown = engine.treeFile(for: row) { try engine.stopFetching(shown, reason: .said(why)) }
                engine.log("\(file.path.joined(separator: "/")): \(why)")
                return
            }
            switch made {
            case .made(let made):
                var entry = made
                entry.sourceId = row.key.sourceId
                entry.kind = row.key.kind
                try engine.index.saveManagedEntry(entry, server: server)
                registry.routeBytes(of: row.key, through: entry.routesBytes ? entry.id : nil)
                engine.log("\(file.path.joined(separator: "/")): registered with \(server) as download entry \(entry.id ?? "?")")
                engine.wakeValidation()
                engine.sideAssetsDue()  // its manifest names what goes beside it
                let next = ManagedEntryPolicy.step(
                    pinned: true, local: local(row, entry: entry, engine: engine), entry: entry,
                    besideStored: !engine.sideAssetsMissing(row.key))
                if case .report = next { try take(next, server: server, item: item, row: row, entry: entry, registry: registry, engine: engine) }
            case .exists:
                relist(server)  // someone else's change (or a lost answer's): read it, never overwrite it
            }
        case .report(let state):
            guard let entry else { return }
            // Each event later than the last: the server ignores one no newer than its last (§ 4.3).
            let at = max(Int64(Date().timeIntervalSince1970 * 1000), (entry.reportedAt ?? 0) + 1)
            guard let now = try registry.report(entry, state, at: at) else {
                relist(server)  // the revision moved on
                return
            }
            try engine.index.saveManagedEntry(now, server: server)
        case .remove:
            guard let entry, let id = entry.id else { return }
            let intent = CleanupJournal.Intent(kind: .deleteEntry, server: server, session: id, created: engine.now())
            try engine.journal.add(intent)
            try engine.index.removeManagedEntry(server: server, item: item)
            if let key = entry.key(server: server) { registry.routeBytes(of: key, through: nil) }
            Self.delete(intent, backend: registry, engine: engine)
        case .stop(let why):
            guard let row, let file = engine.catalogFile(row.key) else { return }
            try engine.stopFetching(file, reason: why)
            engine.log("\(file.path.joined(separator: "/")): \(why.sentence)")
        }
    }

    /// The background fill of a copy at a preset: it waits (`preparing`) while the server
    /// prepares its entry, and while the registry's thread learns its size from the entry's file
    /// route once it is ready (`learnSize`), then is fetched like any file. The managed pass
    /// registers it first.
    func fillCopy(_ queued: DownloadRow, engine: any ManagedEntriesHost) -> FileTransfer.FillState {
        var row = queued
        guard engine.backend(for: row.key.server) is any ManagedDownloadRegistry,
            let entry = (try? engine.index.managedEntry(server: row.key.server, item: row.key.itemId)) ?? nil,
            entry.holds(row.key), let id = entry.id, !entry.endsFetching
        else { return .idle }
        if entry.status == "preparing" {
            let why = StatusReason.preparingEntry(quality: "\(entry.quality)", entry: id)
            if row.status != .preparing || row.reason != why {
                row.apply(.preparationStarted(queued: false))
                row.reason = why
                _ = try? engine.index.saveDownload(row, now: engine.now())
                engine.noteChange()
            }
            return .waitUntil(preparing.withLock { $0[row.key.server]?.due } ?? Date().addingTimeInterval(1))
        }
        if row.total == 0 {
            // The registry's next pass asks its size; the pass wakes the fill after.
            let due = nextProbe.withLock { $0[row.key] } ?? .distantPast
            return .waitUntil(max(due, Date().addingTimeInterval(1)))
        }
        guard let file = engine.derivedTreeFile(row), let state = try? engine.fillTransfer(of: file) else { return .idle }
        return state
    }

    /// Deletes a journaled entry; the journal forgets it once the server has (or never will).
    static func delete(_ intent: CleanupJournal.Intent, backend: any MediaBackend, engine: any CleanupAccess) {
        guard let registry = backend as? any ManagedDownloadRegistry else { return }
        engine.settle(intent, status: registry.remove(entry: intent.session), doing: "deleting download entry \(intent.session)")
    }
}

/// All the download-entry registries' keeper may ask of the transfer engine.
protocol ManagedEntriesHost: ServerAccess, RowAccess, CatalogAccess, CleanupAccess, TransferDriving {
    /// The servers the engine has backends for.
    var serverNames: [String] { get }
    var retry: RetryPolicy { get }
    /// A server refused its sign-in: reads fail fast, and it is probed until it answers.
    func markUnreachable(_ server: String, _ state: Reachability)
    /// Whether a finished copy is judged at all (`entry`: its integrity data, if any).
    func judges(with entry: ManagedEntry?) -> Bool
    /// Whether something that belongs beside `key` is neither stored nor tried yet.
    func sideAssetsMissing(_ key: FileKey) -> Bool
    /// New entries' manifests name what goes beside their files: it is fetched with them.
    func sideAssetsDue()
    /// A finished copy found its entry: its integrity can be checked.
    func wakeValidation()
}

extension TransferEngine: ManagedEntriesHost {
    func sideAssetsDue() { tell(.pinned) }
}
