import Foundation
import LabstreamBackends
import LabstreamCore
import LabstreamStore

/// A server name signed in again as another user, profile or server (`IdentityChange`, seed
/// 002): the new identity's catalog is read from the server, what only the old one could see
/// goes at once (its bytes freed), and what the old one left on the server (Silo's download
/// entries, its session) is cleaned up there with its own, old credentials.
public enum IdentitySwitch {
    public struct Outcome: Sendable {
        /// Stored files the new identity sees too: kept, not fetched again.
        public var kept = 0
        /// Stored files only the old identity saw: deleted, with the bytes they held.
        public var dropped = 0
        public var freed: Int64 = 0
        /// Monitors the old identity set up: dropped.
        public var monitors = 0
        /// The old profile's download entries deleted on the server, and those it kept (unreachable).
        public var entriesDeleted = 0
        public var entriesLeft = 0
        /// Whether the old session was ended on the server (nil: there was none to end).
        public var signedOut: Bool?

        /// What `server add` says about it.
        public var summary: String {
            var parts = ["the catalog was read again as the new sign-in"]
            if kept > 0 { parts.append("\(kept) stored \(kept == 1 ? "file it also sees stays" : "files it also sees stay")") }
            if dropped > 0 {
                let files = dropped == 1 ? "file" : "files", were = dropped == 1 ? "was" : "were"
                parts.append("\(dropped) stored \(files) only the old one saw \(were) deleted (\(ByteCount.text(freed)) freed)")
            }
            if monitors > 0 { parts.append("\(monitors) \(monitors == 1 ? "monitor" : "monitors") of the old one dropped (add them again)") }
            if entriesDeleted > 0 {
                parts.append("\(entriesDeleted) download \(entriesDeleted == 1 ? "entry" : "entries") of the old profile deleted on the server")
            }
            if entriesLeft > 0 { parts.append("\(entriesLeft) could not be deleted on the server (remove them in Silo)") }
            if signedOut == true { parts.append("the old session was signed out") }
            if signedOut == false { parts.append("the old session could not be signed out (it ends when it expires)") }
            return parts.joined(separator: "; ")
        }
    }

    /// `old`: the name's configuration and credentials before; `server`/`entry`: after. Runs
    /// before the new credentials are saved; a catalog that cannot be read leaves everything as it was.
    public static func run(
        _ change: IdentityChange, server: LabstreamConfig.Server, entry: CredentialStore.Entry,
        old: (server: LabstreamConfig.Server, entry: CredentialStore.Entry), context: Context, log: Logger
    ) throws -> Outcome {
        var outcome = Outcome()
        guard change.invalidates else { return outcome }
        let config = try context.loadConfig()
        let transport = context.transport(config), identity = context.identity()
        let index = try context.openIndex()
        let session = ServerSession(name: server.name, url: server.url, userId: entry.userId, token: entry.token, profileToken: entry.profileToken)
        let backend = BackendRegistry.client(server.kind, session: session, identity: identity, transport: transport)
        // The new identity's whole catalog, read now: it replaces the old one and its watched
        // state in one transaction (a failure leaves the old one), keeping copies orphaned.
        _ = try CatalogSync.run(backend, server: server, index: index, log: log, incremental: false)

        let entries = try index.managedEntries(server: server.name).values.compactMap(\.id)
        outcome.monitors = try index.monitors(server: server.name).count
        let stored = try index.downloads().filter { $0.key.server == server.name }
        let plan = change.keeps(stored.map(\.key), visible: try index.visibleItems(server: server.name))
        let bytes = Dictionary(stored.map { ($0.key, $0.present.byteCount) }, uniquingKeysWith: { a, _ in a })
        try index.forgetIdentity(server: server.name)
        for file in try index.dropDownloads(plan.drop) {
            unlink(context.layout.absolute(file))
            unlink(CopySidecar.path(ofPartial: context.layout.absolute(file)))
        }
        outcome.kept = plan.keep.filter { (bytes[$0] ?? 0) > 0 }.count
        outcome.dropped = plan.drop.count
        outcome.freed = plan.drop.reduce(0) { $0 + (bytes[$1] ?? 0) }

        // What the old identity left on the server is its own to clean up: Silo's entries of
        // this device under the old profile, and the old session. Other servers keep nothing
        // per device that outlives the old token; their cleanup intents (encodings to stop)
        // named the old user's sessions and go with them.
        let journal = CleanupJournal.open(path: context.layout.cleanupJournalPath) { log.warn($0) }
        let intents = journal.pending.filter { $0.server == server.name }
        if old.server.kind == .silo {
            let oldSession = ServerSession(
                name: server.name, url: old.server.url, userId: old.entry.userId, token: old.entry.token, profileToken: old.entry.profileToken)
            let client = SiloClient(session: oldSession, identity: identity, transport: transport)
            let ids = Set(entries + intents.filter { $0.kind == .deleteEntry }.map(\.session))
            for id in ids.sorted() {
                // 404: already gone. Anything else (no answer) is left for a person to remove.
                if let status = client.remove(entry: id), (200..<300).contains(status) || status == 404 {
                    outcome.entriesDeleted += 1
                } else {
                    outcome.entriesLeft += 1
                }
            }
            if old.entry.token != entry.token {
                do {
                    try client.logout()
                    outcome.signedOut = true
                } catch {
                    log.warn("\(server.name): the old Silo session could not be signed out: \(error.userMessage)")
                    outcome.signedOut = false
                }
            }
        }
        for intent in intents { try? journal.remove(intent) }
        log.info("\(server.name): signed in as \(change.rawValue): \(outcome.summary)")
        return outcome
    }
}
