import Foundation
import LabstreamCore
import LabstreamStore
import Testing

@testable import LabstreamEngine

/// libcurl's 16 KiB pieces reach the partial in whole units, in order, hashed as written.
@Suite struct GatheredBodyTests {
    @Test func piecesAreWrittenInWholeUnitsAndHashedInOrder() throws {
        let scratch = Scratch("gathered")
        let partial = try PartialFile.fresh(path: scratch.path + "/body.part")
        let unit = BodyCoalescing.unit
        let body = GatheredBody(at: 0)
        var sent: [UInt8] = []
        let writes = LockedBox<[ByteRange]>([])
        let write: (UnsafeRawBufferPointer, Int64) throws(LabstreamError) -> Void = { bytes, offset throws(LabstreamError) in
            writes.set(writes.get() + [ByteRange(offset: offset, length: Int64(bytes.count))])
            try partial.write(bytes, at: offset)
        }
        for i in 0..<40 {
            let piece = (0..<(16 << 10)).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ i) }
            sent += piece
            let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: piece.count, alignment: 1)
            defer { buffer.deallocate() }
            buffer.copyBytes(from: piece)
            try body.append(UnsafeRawBufferPointer(buffer), writingWith: write)
        }
        // 640 KiB: two whole units written, the rest still gathered.
        #expect(writes.get() == [ByteRange(0, unit), ByteRange(unit, 2 * unit)])
        #expect(body.pending == ByteRange(2 * unit, Int64(sent.count)) && body.writtenUpTo == 2 * unit)
        #expect(try body.flush(write) == ByteRange(2 * unit, Int64(sent.count)))
        #expect(try body.flush(write) == nil)
        #expect(try pread(path: partial.path, offset: 0, length: sent.count) == sent)
        let expected = SegmentDigest.hasher()
        sent.withUnsafeBytes { expected.update($0) }
        #expect(body.takeDigest() == expected.finish())
        #expect(body.takeDigest() == SegmentDigest.hasher().finish())  // the next checkpoint's starts afresh
    }
}
