import Foundation
import LabstreamBackends
import LabstreamCore
import LabstreamStore
import Synchronization

/// Runs the completion check on files whose bytes are all present, in the download queue's
/// order and `ProbeParallelism` at a time: the size, then the server's integrity data where it
/// keeps an entry for the copy (Silo's manifest: size and hash), then the libmpv probe (when it
/// is on).
enum Validation {
    /// Returns when rows it could not check yet (their server away) should be looked at again.
    static func pass(_ engine: any ValidationHost) -> Date? {
        let pending = engine.inQueueOrder((try? engine.index.downloadsAwaitingValidation()) ?? [])
        let catalog = engine.catalogFiles()
        let again = Mutex<Date?>(nil)
        let next = Mutex(0)
        // Each worker takes the next file in queue order: a file pinned first (or given a
        // higher priority) is checked first, and a few checks run side by side.
        DispatchQueue.concurrentPerform(iterations: min(engine.probeParallelism, max(pending.count, 1))) { _ in
            while let row = next.withLock({ i -> DownloadRow? in
                defer { i += 1 }
                return pending.indices.contains(i) ? pending[i] : nil
            }) {
                if let due = check(row, catalog: catalog, engine: engine) { again.withLock { $0 = min($0 ?? due, due) } }
            }
        }
        return again.withLock { $0 }
    }

    /// Checks one file; returns when to look again if it could not be checked yet.
    static func check(_ row: DownloadRow, catalog: TreeFileLookup, engine: any ValidationHost) -> Date? {
        let server = row.key.server
        let registry = engine.backend(for: server) as? any ManagedDownloadRegistry
        let entry = engine.integrityEntry(of: row.key)
        // With nothing to judge by (the probe off, no server entry) a finished copy waits with
        // `probe_off`; one a person asked to verify again (`awaiting_validation`) still gets the
        // checks there are (its size), or it would wait for a probe that never runs.
        var asked = false
        if case .awaitingValidation? = row.reason { asked = true }
        guard engine.judges(with: entry) || asked else { return nil }
        guard let file = catalog[row.key] ?? engine.treeFile(for: row), let applyVerdict = engine.verdictSink(for: file) else { return nil }
        let path = engine.layout.absolute(row.partialPath)
        var st = stat()
        var outcome: ProbeOutcome?
        if stat(path, &st) != 0 || Int64(st.st_size) != row.total {
            outcome = .failed("size check: the local file is not \(row.total) bytes")
        } else if let entry, let registry {
            guard engine.reachability(of: server) == .online else { return Date().addingTimeInterval(30) }
            do throws(LabstreamError) {
                let manifest = try registry.manifest(of: entry)
                let verdict = IntegrityCheck.judge(manifest.integrity, localBytes: Int64(st.st_size)) { hash($0, ofFile: path, size: Int64(st.st_size)) }
                var kept = entry
                kept.manifest = manifest.document
                try engine.index.saveManagedEntry(kept, server: server)
                engine.log("integrity of \(file.path.joined(separator: "/")): \(verdict)")
                if case .mismatch(let why) = verdict { outcome = .failed(why) }
            } catch {
                // A changed entry is read back before its copy is judged again.
                // (The registry pass runs on a thread of its own: woken, it reads the entry now.)
                if case .remoteChanged = error { engine.relistEntries(of: server) }
                engine.log("integrity of \(file.path.joined(separator: "/")): \(error.userMessage); trying again later")
                return Date().addingTimeInterval(30)
            }
        }
        if outcome == nil {
            if engine.playbackProbe {
                let started = Date()
                // A track is also checked against how long the server says it plays.
                let duration =
                    file.kind.media == .audio ? ((try? engine.index.itemDetails(server: server, item: file.key.itemId)) ?? nil)?.runtimeSeconds : nil
                outcome = ProbeVerdict.judge(
                    PlaybackProbe.observe(path: path, expecting: file.kind.media), expecting: file.kind.media,
                    serverDuration: duration, serverFormat: file.path.last.map { ($0 as NSString).pathExtension })
                engine.log("probe of \(file.path.joined(separator: "/")): \(outcome!) in \(Int(Date().timeIntervalSince(started) * 1000)) ms")
            } else {
                outcome = .probeOff
            }
        }
        applyVerdict(outcome!, row.attempt)
        engine.copyJudged()
        return nil
    }

    /// The file's hash of `kind` (lower-case hex); nil when it cannot be read.
    static func hash(_ kind: IntegrityCheck.HashKind, ofFile path: String, size: Int64) -> String? {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        guard kind == .sha256 else {
            func read(at offset: Int64) -> [UInt8]? {
                var piece = [UInt8](repeating: 0, count: 64 * 1024)
                let n = piece.withUnsafeMutableBytes { b in try? preadFully(fd, into: b, at: offset, context: path) }
                return n == piece.count ? piece : nil
            }
            guard size >= 128 * 1024, let head = read(at: 0), let tail = read(at: size - 64 * 1024) else { return nil }
            return IntegrityCheck.osHash(size: size, head: head, tail: tail)
        }
        let hasher = SHA256Hasher()
        var buffer = [UInt8](repeating: 0, count: 1 << 20)
        var offset: Int64 = 0
        while true {
            let read = buffer.withUnsafeMutableBytes { b in Result { () throws(SyscallError) in try preadFully(fd, into: b, at: offset, context: path) } }
            guard case .success(let n) = read else { return nil }
            if n == 0 { return hasher.finish() }
            buffer.withUnsafeBytes { hasher.update(UnsafeRawBufferPointer(rebasing: $0[0..<n])) }
            offset += Int64(n)
        }
    }
}

/// All validation may ask of the transfer engine.
protocol ValidationHost: ServerAccess, RowAccess, CatalogAccess {
    /// Whether complete files are probed with libmpv.
    var playbackProbe: Bool { get }
    /// Checks run at once (`ProbeParallelism`).
    var probeParallelism: Int { get }
    /// `rows` in the download queue's order.
    func inQueueOrder(_ rows: [DownloadRow]) -> [DownloadRow]
    /// The managed entry whose integrity data judges `key`'s finished copy, if any.
    func integrityEntry(of key: FileKey) -> ManagedEntry?
    /// Whether a finished copy is judged at all (`entry`: from `integrityEntry`).
    func judges(with entry: ManagedEntry?) -> Bool
    /// `file`'s transfer, opened now, to take the check's verdict for an attempt (nil: it
    /// cannot be opened, and the row waits).
    func verdictSink(for file: TreeFile) -> (@Sendable (ProbeOutcome, AttemptID) -> Void)?
    /// The server's download registry changed under a copy: read it back, then fill.
    func relistEntries(of server: String)
    /// A copy was judged: a server that keeps entries is told, and the fill looks again.
    func copyJudged()
}

extension TransferEngine: ValidationHost {
    var probeParallelism: Int { ProbeParallelism.count(processors: ProcessInfo.processInfo.activeProcessorCount) }

    func verdictSink(for file: TreeFile) -> (@Sendable (ProbeOutcome, AttemptID) -> Void)? {
        guard let transfer = try? transfer(for: file) else { return nil }
        return { [self] outcome, attempt in transfer.applyVerdict(outcome, attempt: attempt, engine: self) }
    }

    func copyJudged() {
        managed.poke()
        filler.wake()
    }
}
