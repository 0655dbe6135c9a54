import Dispatch
import Foundation
import LabstreamBackends
import LabstreamCore
import LabstreamStore
import LabstreamTestSupport
import Synchronization
import Testing

@testable import LabstreamEngine

/// The engine's subsystems driven through small doubles of their protocols, without a
/// `TransferEngine`: what each one does with what it is given, and what it asks of its host.
@Suite struct SubsystemHostTests {
    static let file = TreeFile(
        path: ["mem", "Movies", "Film (2020)", "Film (2020).mkv"], key: FileKey(server: "mem", itemId: "item1", sourceId: "src1"), size: 1000,
        modified: 1, etag: "\"v1\"")
    static let other = TreeFile(
        path: ["mem", "Movies", "Other (2021)", "Other (2021).mkv"], key: FileKey(server: "mem", itemId: "item2", sourceId: "src2"), size: 500,
        modified: 1, etag: "\"v1\"")

    /// A validation host over a real index; it records the verdicts and notices validation gives.
    final class ValidationDouble: ValidationHost, @unchecked Sendable {
        let index: OfflineIndex
        let layout: DataLayout
        let files: [TreeFile]
        let judgesCopies: Bool
        let lines = Mutex<[String]>([])
        let verdicts = Mutex<[(FileKey, ProbeOutcome, AttemptID)]>([])
        let judged = Mutex(0)
        var log: @Sendable (String) -> Void { { [self] line in lines.withLock { $0.append(line) } } }
        var playbackProbe: Bool { false }
        var probeParallelism: Int { 1 }

        init(index: OfflineIndex, layout: DataLayout, files: [TreeFile], judgesCopies: Bool) {
            (self.index, self.layout, self.files, self.judgesCopies) = (index, layout, files, judgesCopies)
        }

        func backend(for server: String) -> (any MediaBackend)? { nil }
        func reachability(of server: String) -> Reachability { .online }
        func now() -> Int64 { 1 }
        func noteChange() {}
        func treeChanged() {}
        func catalogFile(_ key: FileKey) -> TreeFile? { files.first { $0.key == key } }
        func catalogFiles() -> TreeFileLookup { TreeFileLookup(files) }
        func treeFile(for row: DownloadRow) -> TreeFile? { catalogFile(row.key) }
        func derivedTreeFile(_ row: DownloadRow) -> TreeFile? { nil }
        func integrityEntry(of key: FileKey) -> ManagedEntry? { nil }
        func judges(with entry: ManagedEntry?) -> Bool { judgesCopies }
        func verdictSink(for file: TreeFile) -> (@Sendable (ProbeOutcome, AttemptID) -> Void)? {
            { [self] outcome, attempt in verdicts.withLock { $0.append((file.key, outcome, attempt)) } }
        }
        func relistEntries(of server: String) {}
        func copyJudged() { judged.withLock { $0 += 1 } }
        /// As the engine orders them: by their stored queue places (no file is open here).
        func inQueueOrder(_ rows: [DownloadRow]) -> [DownloadRow] {
            let places = (try? index.queuePlaces()) ?? [:]
            return QueueOrder.sorted(rows.map { QueueOrder.Entry(key: $0, place: places[$0.key]) }).map(\.key)
        }
    }

    /// `files` pinned, all their bytes present and awaiting their check; each partial on disk
    /// holds `onDisk[i]` bytes.
    func awaitingCheck(_ files: [TreeFile], onDisk: [Int], in scratch: Scratch) throws -> (OfflineIndex, DataLayout, [DownloadRow]) {
        let layout = DataLayout(root: scratch.sub("data"))
        let index = try OfflineIndex(path: layout.indexPath)
        _ = scratch.sub("data/partials")
        var rows: [DownloadRow] = []
        for (file, bytes) in zip(files, onDisk) {
            var row = try #require(try index.setPinned(true, files: [file], layout: layout, now: 1).first)
            row.present = RangeSet([ByteRange(0, file.size)])
            row.apply(.allBytesPresent)
            row.awaitingValidation = true
            #expect(try index.saveDownload(row, now: 1))
            #expect(FileManager.default.createFile(atPath: layout.absolute(row.partialPath), contents: Data(count: bytes)))
            rows.append(row)
        }
        return (index, layout, rows)
    }

    @Test func validationFailsACopyOfTheWrongSizeAndLeavesARightOneUnverifiedWithoutTheProbe() throws {
        let scratch = Scratch("validation-host")
        let (index, layout, rows) = try awaitingCheck([Self.file, Self.other], onDisk: [999, 500], in: scratch)
        let host = ValidationDouble(index: index, layout: layout, files: [Self.file, Self.other], judgesCopies: true)

        #expect(Validation.pass(host) == nil)

        let verdicts = host.verdicts.withLock { $0 }
        #expect(verdicts.map(\.0) == [Self.file.key, Self.other.key])
        #expect(verdicts.first?.1 == .failed("size check: the local file is not 1000 bytes"))
        #expect(verdicts.last?.1 == .probeOff)
        #expect(verdicts.map(\.2) == rows.map(\.attempt))
        // Each verdict is told on, so a registry reports it and the fill looks again.
        #expect(host.judged.withLock { $0 } == 2)
    }

    /// Checks go in the queue's order: a file given a high priority is checked before one pinned
    /// earlier (the index lists them by key).
    @Test func validationChecksInQueueOrder() throws {
        let scratch = Scratch("validation-order")
        let (index, layout, _) = try awaitingCheck([Self.file, Self.other], onDisk: [1000, 500], in: scratch)
        try index.setQueuePlaces([Self.other.key: QueuePlace(position: 2, priority: .high)])
        let host = ValidationDouble(index: index, layout: layout, files: [Self.file, Self.other], judgesCopies: true)

        #expect(Validation.pass(host) == nil)

        #expect(host.verdicts.withLock { $0 }.map(\.0) == [Self.other.key, Self.file.key])
    }

    @Test func validationLeavesAloneACopyNothingJudges() throws {
        let scratch = Scratch("validation-host-off")
        // The wrong size on disk: had the row been looked at, it would have failed.
        let (index, layout, _) = try awaitingCheck([Self.file], onDisk: [10], in: scratch)
        let host = ValidationDouble(index: index, layout: layout, files: [Self.file], judgesCopies: false)

        #expect(Validation.pass(host) == nil)

        #expect(host.verdicts.withLock { $0 }.isEmpty)
        #expect(host.judged.withLock { $0 } == 0)
    }

    /// A health host that records what server health tells it.
    final class HealthDouble: HealthHost, @unchecked Sendable {
        let client: any MediaBackend
        let lines = Mutex<[String]>([])
        let answered = Mutex<[String]>([])
        let changes = Mutex(0)
        /// Signalled by `noteChange`, the last thing a probe that changed a state does.
        let changed = DispatchSemaphore(value: 0)
        var log: @Sendable (String) -> Void { { [self] line in lines.withLock { $0.append(line) } } }

        init(client: any MediaBackend) { self.client = client }

        func backend(for server: String) -> (any MediaBackend)? { server == client.serverName ? client : nil }
        func noteChange() {
            changes.withLock { $0 += 1 }
            changed.signal()
        }
        func answersAgain(_ server: String) { answered.withLock { $0.append(server) } }
    }

    @Test func serverHealthTellsItsHostOnceWhenAnOfflineServerAnswersAgain() {
        let up = Atomic<Bool>(false)
        let probed = DispatchSemaphore(value: 0)
        let transport = InMemoryTransport { _ in
            let answering = up.load(ordering: .relaxed)
            probed.signal()
            return HTTPResponse(status: answering ? 200 : 503, headers: [:], body: Array("{}".utf8))
        }
        let client = MediaBrowserClient(
            session: ServerSession(name: "mem", url: "http://in-memory", userId: "u", token: "t"),
            identity: ClientIdentity(device: "d", deviceId: "i"), transport: transport)
        let host = HealthDouble(client: client)
        let health = ServerHealth()
        defer { health.stop() }
        #expect(health.mark("mem", .offline))

        health.start(host)
        // The first probe finds the server still away: nothing is told.
        #expect(probed.wait(timeout: .now() + 30) == .success)
        up.store(true, ordering: .relaxed)
        health.probeSoon("mem")
        #expect(host.changed.wait(timeout: .now() + 30) == .success)

        #expect(host.answered.withLock { $0 } == ["mem"])
        #expect(health.state(of: "mem") == .online)
        #expect(host.changes.withLock { $0 } == 1)
        #expect(host.lines.withLock { $0 } == ["server mem is online"])
    }

    /// The cleanup journal and a log: all `settle` asks.
    final class CleanupDouble: CleanupAccess, @unchecked Sendable {
        let journal: CleanupJournal
        let lines = Mutex<[String]>([])
        var log: @Sendable (String) -> Void { { [self] line in lines.withLock { $0.append(line) } } }
        init(journal: CleanupJournal) { self.journal = journal }
    }

    @Test func aCleanupIsKeptWhileTheServerFailsAndForgottenOnceItAnswers() throws {
        let scratch = Scratch("cleanup-host")
        let host = CleanupDouble(journal: try CleanupJournal(path: scratch.sub("data") + "/cleanup.json"))
        let stop = CleanupJournal.Intent(kind: .stopEncoding, server: "mem", session: "s1", created: 1)
        let cancel = CleanupJournal.Intent(kind: .cancelJob, server: "mem", session: "j1", created: 1)
        try host.journal.add(stop)
        try host.journal.add(cancel)

        host.settle(stop, status: 503, doing: "stopping s1")
        host.settle(cancel, status: nil, doing: "cancelling j1")
        #expect(host.journal.pending.map(\.session).sorted() == ["j1", "s1"])

        host.settle(stop, status: 204, doing: "stopping s1")
        host.settle(cancel, status: 403, doing: "cancelling j1")
        #expect(host.journal.pending.isEmpty)
        #expect(host.lines.withLock { $0 }.filter { $0.contains("refused") } == ["cancelling j1 on mem was refused (HTTP 403) and will not be asked again"])
    }

    /// Two servers, one keeping a download-entry registry (Silo), one not.
    final class ServersDouble: ServerAccess, @unchecked Sendable {
        let clients: [any MediaBackend]
        var log: @Sendable (String) -> Void { { _ in } }
        init(_ clients: [any MediaBackend]) { self.clients = clients }
        func backend(for server: String) -> (any MediaBackend)? { clients.first { $0.serverName == server } }
        func reachability(of server: String) -> Reachability { .online }
    }

    @Test func aPinHoldsTheFillOfARegistrysFilesAndNoOtherServers() {
        let transport = InMemoryTransport { _ in HTTPResponse(status: 500, headers: [:], body: []) }
        let identity = ClientIdentity(device: "d", deviceId: "i")
        let host = ServersDouble([
            SiloClient(session: ServerSession(name: "silo", url: "http://in-memory", userId: "u", token: "t"), identity: identity, transport: transport),
            MediaBrowserClient(session: ServerSession(name: "jf", url: "http://in-memory", userId: "u", token: "t"), identity: identity, transport: transport)
        ])
        let managed = ManagedEntries()
        #expect(!managed.holdsFill("silo", engine: host) && !managed.holdsFill("jf", engine: host))

        managed.pinned(["silo", "jf"])
        #expect(managed.holdsFill("silo", engine: host))
        #expect(!managed.holdsFill("jf", engine: host))
        #expect(!managed.holdsFill("gone", engine: host))
    }
}
