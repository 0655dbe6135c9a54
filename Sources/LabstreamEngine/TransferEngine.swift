import Foundation
import LabstreamBackends
import LabstreamCore
import LabstreamStore
import Synchronization

/// Fetches the byte ranges readers need into durable sparse partials and records them in the
/// index, data first, then the range map. Blocking API for FUSE worker threads; transfers run
/// on their own threads, never on Swift's cooperative pool.
///
/// Lock order: `TransferEngine.files` → `FileTransfer.condition` → the index's connection lock.
/// Never take `files` while holding a file's condition.
public final class TransferEngine: Sendable {
    public struct Settings: Sendable {
        public var sizes: TransferSizes
        /// How long a reader waits for its bytes before failing with EIO.
        public var readTimeout: Double

        public init(sizes: TransferSizes = .default, readTimeout: Double = 35) {
            self.sizes = sizes
            self.readTimeout = readTimeout
        }
    }

    let index: OfflineIndex
    let layout: DataLayout
    let settings: Settings
    let backends = Mutex<[String: any MediaBackend]>([:])
    let files = Mutex<[FileKey: FileTransfer]>([:])
    let log: @Sendable (String) -> Void

    public init(index: OfflineIndex, layout: DataLayout, settings: Settings, log: @escaping @Sendable (String) -> Void) {
        self.index = index
        self.layout = layout
        self.settings = settings
        self.log = log
    }

    public func setBackend(_ backend: any MediaBackend) {
        backends.withLock { $0[backend.serverName] = backend }
    }

    public func backend(for server: String) -> (any MediaBackend)? { backends.withLock { $0[server] } }

    /// The current download row for `file`: live state if the file is open, else the index.
    public func row(for file: TreeFile) -> DownloadRow? {
        if let live = files.withLock({ $0[file.key] }) { return live.snapshot() }
        return try? index.download(file.key)
    }

    /// Reads `range` of `file`, fetching whatever is missing first. `readAhead`, when given,
    /// is fetched in the background without delaying this read.
    public func read(_ file: TreeFile, range: ByteRange, readAhead: ByteRange? = nil) throws(LabstreamError) -> [UInt8] {
        let demand = range.clamped(to: ByteRange(0, file.size))
        if demand.isEmpty { return [] }
        let transfer = try self.transfer(for: file)
        try transfer.waitUntilPresent(demand, engine: self)
        if let readAhead { transfer.prefetch(readAhead, engine: self) }
        return try transfer.readPresent(demand)
    }

    /// Starts fetching `range` without waiting for it.
    public func prefetch(_ file: TreeFile, range: ByteRange) throws(LabstreamError) {
        try transfer(for: file).prefetch(range.clamped(to: ByteRange(0, file.size)), engine: self)
    }

    func transfer(for file: TreeFile) throws(LabstreamError) -> FileTransfer {
        if let existing = files.withLock({ $0[file.key] }) { return existing }
        // Open outside the map lock: it touches the disk and the index.
        let created = try FileTransfer.open(file: file, index: index, layout: layout)
        return files.withLock { map in
            if let raced = map[file.key] { return raced }
            if map.count >= Self.maxOpenTransfers {
                // Each transfer holds a descriptor: a scanner touching every file must not run
                // the daemon out of them. Idle ones reopen from the index when needed again.
                for (key, transfer) in map where transfer.isIdle { map.removeValue(forKey: key) }
            }
            map[file.key] = created
            return created
        }
    }

    static let maxOpenTransfers = 256

    func now() -> Int64 { Int64(Date().timeIntervalSince1970) }
}

/// One file's transfers. `condition` guards every `var`.
final class FileTransfer: @unchecked Sendable {
    let file: TreeFile
    let partial: PartialFile
    let condition = NSCondition()
    let index: OfflineIndex

    // Guarded by `condition`.
    var row: DownloadRow
    var inFlight = RangeSet()
    var failures: [(sequence: Int, range: ByteRange, error: LabstreamError)] = []
    var sequence = 0
    var waiters = 0

    init(file: TreeFile, partial: PartialFile, row: DownloadRow, index: OfflineIndex) {
        self.file = file
        self.partial = partial
        self.row = row
        self.index = index
    }

    static func open(file: TreeFile, index: OfflineIndex, layout: DataLayout) throws(LabstreamError) -> FileTransfer {
        var row = try index.download(file.key) ?? DownloadRow(
            key: file.key, status: .partial, attempt: AttemptID(1), validator: nil, total: file.size,
            present: RangeSet(), partialPath: layout.partialRelativePath(for: file.key))
        if row.total != file.size {
            // The catalog says the file changed size: the old bytes belong to another version.
            row = DownloadRow(key: file.key, status: .partial, attempt: row.attempt.next, validator: nil, total: file.size,
                              present: RangeSet(), partialPath: row.partialPath, reason: "file changed on the server; refetching")
        }
        try makeDirectories(layout.partialsDir)
        let partial = try PartialFile(path: layout.absolute(row.partialPath), size: file.size)
        return FileTransfer(file: file, partial: partial, row: row, index: index)
    }

    /// Nothing in flight and nobody waiting: safe to drop from the engine's map.
    var isIdle: Bool {
        condition.lock()
        defer { condition.unlock() }
        return inFlight.isEmpty && waiters == 0
    }

    func snapshot() -> DownloadRow {
        condition.lock()
        defer { condition.unlock() }
        return row
    }

    func readPresent(_ range: ByteRange) throws(LabstreamError) -> [UInt8] {
        var out = [UInt8](repeating: 0, count: Int(range.count))
        let read = out.withUnsafeMutableBytes { b in Result { () throws(LabstreamError) in try partial.read(into: b, at: range.lower) } }
        let n = try read.get()
        if n < out.count { out.removeLast(out.count - n) }
        return out
    }

    /// Blocks until `demand` is durable, fetching what is missing. Throws the failure of a
    /// fetch this reader depended on, or a timeout.
    func waitUntilPresent(_ demand: ByteRange, engine: TransferEngine) throws(LabstreamError) {
        let deadline = Date().addingTimeInterval(engine.settings.readTimeout)
        condition.lock()
        defer { condition.unlock() }
        let startSequence = sequence
        waiters += 1
        defer { waiters -= 1 }
        while !row.present.contains(demand) {
            if let failure = failures.first(where: { $0.sequence > startSequence && $0.range.overlaps(demand) }) {
                throw failure.error
            }
            startFetches(ReadPlanner.plan(demand: demand, total: row.total, present: row.present, inFlight: inFlight,
                                          sizes: engine.settings.sizes), engine: engine)
            if !condition.wait(until: deadline) {
                engine.log("read of \(file.path.joined(separator: "/")) bytes \(demand) timed out")
                throw .timedOut("waiting for bytes \(demand.lower)-\(demand.lastByte) of \(file.path.last ?? "")")
            }
        }
    }

    func prefetch(_ range: ByteRange, engine: TransferEngine) {
        condition.lock()
        defer { condition.unlock() }
        startFetches(ReadPlanner.pieces(of: range, present: row.present, inFlight: inFlight, segmentSize: engine.settings.sizes.segmentSize),
                     engine: engine)
    }

    /// Call with `condition` held.
    func startFetches(_ plan: [ByteRange], engine: TransferEngine) {
        guard !plan.isEmpty else { return }
        guard let backend = engine.backend(for: file.key.server) else {
            sequence += 1
            for r in plan {
                failures.append((sequence, r, .serverUnavailable("server \(file.key.server) is not connected")))
            }
            condition.broadcast()
            return
        }
        for r in plan { inFlight.insert(r) }
        let attempt = row.attempt
        let validator = row.validator
        for r in plan {
            let thread = Thread { [self] in
                fetch(r, attempt: attempt, validator: validator, backend: backend, engine: engine)
            }
            thread.name = "fetch"
            thread.start()
        }
    }

    func fetch(_ range: ByteRange, attempt: AttemptID, validator: Validator?, backend: any MediaBackend, engine: TransferEngine) {
        let request = backend.rangeRequest(for: file.key, range: range, validator: validator)
        let expectation = RangeExpectation(range: range, total: file.size, validator: validator)
        var outcome: Result<Validator?, LabstreamError>
        do {
            let result = try backend.transport.fetchRange(request, expectation: expectation) { bytes, offset in
                try partial.write(bytes, at: offset)
            }
            switch result.verdict {
            case .accept(let seen, _) where result.bytesWritten == range.count:
                do {
                    try partial.sync()
                    outcome = .success(seen)
                } catch {
                    outcome = .failure(error)
                }
            case .accept:
                outcome = .failure(.fetchFailed("connection ended after \(result.bytesWritten) of \(range.count) bytes"))
            case .remoteChanged(let why):
                outcome = .failure(.remoteChanged(why))
            case .reject(let why):
                outcome = .failure(.fetchFailed(why))
            }
        } catch {
            outcome = .failure(error.asLabstreamError)
        }
        finish(range, attempt: attempt, outcome: outcome, engine: engine)
    }

    func finish(_ range: ByteRange, attempt: AttemptID, outcome: Result<Validator?, LabstreamError>, engine: TransferEngine) {
        condition.lock()
        defer {
            condition.broadcast()
            condition.unlock()
        }
        inFlight.remove(range)
        sequence += 1
        guard attempt == row.attempt else {
            engine.log("discarded bytes \(range) of \(file.key): \(attempt) is no longer current")
            return
        }
        switch outcome {
        case .success(let validator):
            var next = row
            next.present.insert(range)
            // Another transfer object for this file (one evicted while a reader still held it)
            // may have committed ranges of the same attempt meanwhile: keep them.
            if let stored = try? index.download(row.key), stored.attempt == row.attempt {
                next.present.formUnion(stored.present)
            }
            if next.validator == nil { next.validator = validator }
            if next.present.contains(ByteRange(0, next.total)) {
                next.status = next.status.after(.allBytesPresent) ?? next.status
                next.awaitingValidation = true
                next.reason = "all bytes present; awaiting validation"
            } else {
                next.status = next.status.after(.bytesCommitted) ?? next.status
            }
            do {
                try index.saveDownload(next, now: engine.now())
                row = next
            } catch {
                // The bytes are on disk but not recorded: they will be fetched again, never trusted.
                failures.append((sequence, range, error))
                engine.log("\(file.key): \(error.userMessage)")
            }
        case .failure(let error):
            failures.append((sequence, range, error))
            if failures.count > 64 { failures.removeFirst(failures.count - 64) }
            engine.log("fetch of bytes \(range) of \(file.path.joined(separator: "/")) failed: \(error.userMessage)")
            if case .remoteChanged(let why) = error {
                // Old bytes belong to the old version: a new attempt starts from nothing.
                row = DownloadRow(key: row.key, status: .partial, attempt: row.attempt.next, validator: nil, total: row.total,
                                  present: RangeSet(), partialPath: row.partialPath, reason: "file changed on the server (\(why))")
                _ = try? index.saveDownload(row, now: engine.now())
            }
        }
    }
}
