import Foundation
import LabstreamCore
import Synchronization

/// Server-side work that must be cleaned up (a running encoding to stop), written before the
/// work starts and forgotten only once the server confirmed the cleanup. It is its own small
/// file beside the index — not inside it — so deleting a row or resetting the index can never
/// lose the only record. Credential-free: a server name and ids, never a token or URL.
public final class CleanupJournal: Sendable {
    public struct Intent: Sendable, Hashable, Codable {
        public enum Kind: String, Sendable, Codable {
            case stopEncoding = "stop-encoding"
            /// Cancel a server-side job (Emby Convert) unless a row still uses it.
            case cancelJob = "cancel-job"
            /// Delete a managed download entry (Silo) of a file no longer pinned.
            case deleteEntry = "delete-entry"
        }
        public var kind: Kind
        public var server: String
        /// The play session whose encoding is stopped, the job to cancel, or the entry to delete.
        public var session: String
        public var created: Int64

        public init(kind: Kind, server: String, session: String, created: Int64) {
            self.kind = kind
            self.server = server
            self.session = session
            self.created = created
        }
    }

    public let path: String
    let intents: Mutex<[Intent]>

    /// Loads the journal; a damaged one is moved aside (its name says so in the error) rather
    /// than trusted or silently emptied.
    public init(path: String) throws(LabstreamError) {
        self.path = path
        guard let data = FileManager.default.contents(atPath: path) else {
            intents = Mutex([])
            return
        }
        do {
            intents = Mutex(try JSONDecoder().decode([Intent].self, from: data))
        } catch {
            let aside = path + ".damaged"
            _ = rename(path, aside)
            throw .storage(
                "the cleanup journal \(path) is unreadable (\(error)); it was moved to \(aside). Server encodings it listed may need stopping by hand.")
        }
    }

    /// The journal at `path`; a damaged one is reported through `warn`, moved aside, and a new
    /// one started.
    public static func open(path: String, warn: (String) -> Void) -> CleanupJournal {
        do { return try CleanupJournal(path: path) } catch {
            warn(error.userMessage)
            return (try? CleanupJournal(path: path)) ?? CleanupJournal(empty: path)
        }
    }

    init(empty path: String) {
        self.path = path
        intents = Mutex([])
    }

    public var pending: [Intent] { intents.withLock { $0 } }

    /// Records `intent` durably before the work it cleans up starts.
    public func add(_ intent: Intent) throws(LabstreamError) {
        try update { $0.append(intent) }
    }

    /// Forgets an intent once its cleanup is confirmed.
    public func remove(_ intent: Intent) throws(LabstreamError) {
        try update { $0.removeAll { $0 == intent } }
    }

    func update(_ change: (inout [Intent]) -> Void) throws(LabstreamError) {
        let result: Result<Void, LabstreamError> = intents.withLock { list in
            var next = list
            change(&next)
            do throws(LabstreamError) {
                let data = (try? JSONEncoder().encode(next)) ?? Data("[]".utf8)
                try AtomicFile.write(String(decoding: data, as: UTF8.self), to: path, mode: 0o600)
                list = next
                return .success(())
            } catch { return .failure(error) }
        }
        try result.get()
    }
}

extension DataLayout {
    public var cleanupJournalPath: String { root + "/cleanup-journal.json" }
}
