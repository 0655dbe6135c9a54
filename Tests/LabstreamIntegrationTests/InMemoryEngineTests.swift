import Foundation
import LabstreamBackends
import LabstreamCore
import LabstreamFS
import LabstreamStore
import LabstreamTestSupport
import Synchronization
import Testing

@testable import LabstreamEngine

/// The engine over an in-memory server (`InMemoryTransport`): no sockets, no libcurl; the
/// loopback suites cover the real path.
@Suite struct InMemoryEngineTests {
    static let size = 6 << 20
    static let bytes: [UInt8] = (0..<size).map { UInt8(truncatingIfNeeded: $0 &* 2_654_435_761 >> 13) }
    static let key = FileKey(server: "mem", itemId: "item1", sourceId: "src1")
    static let file = TreeFile(path: ["mem", "Movies", "Film (2020)", "Film (2020).mkv"], key: key, size: Int64(size), modified: 1, etag: "\"v1\"")

    /// An engine whose only server is `transport`, with `file` in its tree.
    func engine(_ name: String, transport: InMemoryTransport) throws -> (FilesystemEngine, UInt64, Scratch) {
        let scratch = Scratch(name)
        let layout = DataLayout(root: scratch.sub("data"))
        let index = try OfflineIndex(path: layout.indexPath)
        let client = MediaBrowserClient(
            session: ServerSession(name: "mem", url: "http://in-memory", userId: "u", token: "t"),
            identity: ClientIdentity(device: "d", deviceId: "i"), transport: transport)
        let transfers = TransferEngine(index: index, layout: layout, settings: EngineRig.settings, log: { _ in })
        transfers.setBackend(client)
        let fs = FilesystemEngine(transfers: transfers, files: [Self.file], ownership: .init(uid: 0, gid: 0), sizes: EngineRig.sizes)
        let ino = try #require(fs.resolve(Self.file.path))
        return (fs, ino, scratch)
    }

    @Test func aReadFetchesOnlyTheRangesItNeedsAndReturnsTheServersBytes() throws {
        let transport = InMemoryTransport { InMemoryTransport.serve(Self.bytes, to: $0) }
        let (fs, ino, _) = try engine("mem-read", transport: transport)
        let h = try fs.open(ino, writeRequested: false)
        let got = try fs.read(handle: h, offset: 3 << 20, size: 65536)
        #expect(got == Array(Self.bytes[(3 << 20)..<((3 << 20) + 65536)]))
        // Only ranged downloads of the one source (Jellyfin downloads a version by its source id), none from the start.
        let downloads = transport.requests.filter { $0.url.hasPrefix("http://in-memory/Items/src1/Download") }
        let ranges = downloads.compactMap { $0.headers.first { $0.name == "Range" }?.value }
        #expect(!downloads.isEmpty && ranges.count == downloads.count, "\(transport.requests.map(\.redactedDescription))")
        #expect(ranges.allSatisfy { $0.hasPrefix("bytes=") && !$0.hasPrefix("bytes=0-") }, "\(ranges)")
        fs.release(handle: h)
        fs.transfers.stop(grace: 1)
    }

    @Test func aServerThatAnswers503OnceIsAskedAgainAndTheReadSucceeds() throws {
        let refused = Atomic<Bool>(false)
        let transport = InMemoryTransport { request in
            if !refused.exchange(true, ordering: .relaxed) { return HTTPResponse(status: 503, headers: ["retry-after": "0"], body: []) }
            return InMemoryTransport.serve(Self.bytes, to: request)
        }
        let (fs, ino, _) = try engine("mem-503", transport: transport)
        let h = try fs.open(ino, writeRequested: false)
        #expect(try fs.read(handle: h, offset: 0, size: 4096) == Array(Self.bytes[0..<4096]))
        #expect(transport.requests.count >= 2)
        fs.release(handle: h)
        fs.transfers.stop(grace: 1)
    }

    @Test func anAnswerForTheWrongRangeIsNeverStored() throws {
        // A server that answers every range with the first bytes of the file, labelled honestly.
        let transport = InMemoryTransport { request in
            var first = request
            first.headers = first.headers.map { $0.name == "Range" ? HTTPRequest.Header("Range", "bytes=0-4095") : $0 }
            return InMemoryTransport.serve(Self.bytes, to: first)
        }
        let (fs, ino, _) = try engine("mem-wrong", transport: transport)
        let h = try fs.open(ino, writeRequested: false)
        #expect(throws: LabstreamError.self) { _ = try fs.read(handle: h, offset: 2 << 20, size: 4096) }
        #expect(fs.transfers.row(for: Self.file)?.present.isEmpty ?? true)
        fs.release(handle: h)
        fs.transfers.stop(grace: 1)
    }
}
