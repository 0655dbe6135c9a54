import Foundation
import LabstreamCore
import LabstreamStore

/// A body's bytes on their way into the partial: libcurl's 16 KiB pieces gathered into writes of
/// up to `BodyCoalescing.unit` (each write costs a syscall and ext4's per-write bookkeeping), and
/// hashed in the order they are written, for the digest of the checkpoint they end up in. When
/// to write is the owner's decision (a reader may be waiting); `append` only writes first when
/// the pieces would not fit.
final class GatheredBody {
    private let buffer = GatherBuffer(capacity: Int(BodyCoalescing.unit) + (16 << 10))
    private var hasher = SegmentDigest.hasher()
    private var gatheredAt: Int64
    /// Where the bytes written so far end.
    private(set) var writtenUpTo: Int64

    /// A body whose first byte lands at `offset`.
    init(at offset: Int64) {
        gatheredAt = offset
        writtenUpTo = offset
    }

    /// Received and not written yet.
    var pending: ByteRange { ByteRange(offset: gatheredAt, length: Int64(buffer.count)) }
    var isFull: Bool { Int64(buffer.count) >= BodyCoalescing.unit }

    /// Whether `count` more bytes can be gathered before a write.
    func fits(_ count: Int) -> Bool { buffer.count + count <= buffer.capacity }

    /// Gathers `bytes`, which follow the bytes before them; they must fit.
    func append(_ bytes: UnsafeRawBufferPointer) { buffer.append(bytes) }

    /// Gathers `bytes`, writing what was gathered first if they would not fit, and once a whole
    /// unit is gathered: for bodies no reader waits on.
    func append(_ bytes: UnsafeRawBufferPointer, writingWith write: (UnsafeRawBufferPointer, Int64) throws(LabstreamError) -> Void) throws(LabstreamError) {
        if !fits(bytes.count) { try flush(write) }
        buffer.append(bytes)
        if isFull { try flush(write) }
    }

    /// Writes what was gathered with `write` and hashes it; the piece written, if any.
    @discardableResult
    func flush(_ write: (UnsafeRawBufferPointer, Int64) throws(LabstreamError) -> Void) throws(LabstreamError) -> ByteRange? {
        guard !buffer.isEmpty else { return nil }
        let piece = pending
        try write(buffer.bytes, piece.lower)
        hasher.update(buffer.bytes)
        buffer.removeAll()
        gatheredAt = piece.upper
        writtenUpTo = piece.upper
        return piece
    }

    /// The digest of the bytes written since the last call (a checkpoint's), and a fresh start.
    func takeDigest() -> String {
        defer { hasher = SegmentDigest.hasher() }
        return hasher.finish()
    }
}

/// A body's gathered bytes, in memory of its own (mapped, not from malloc): a transfer thread's
/// malloc arena would otherwise keep every freed buffer, and the daemon's memory would grow with
/// the number of transfers it ever ran at once.
final class GatherBuffer {
    let base: UnsafeMutableRawPointer
    let capacity: Int
    private(set) var count = 0

    init(capacity: Int) {
        self.capacity = capacity
        let mapped = mmap(nil, capacity, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0)
        precondition(mapped != MAP_FAILED, "cannot map \(capacity) bytes for a transfer: \(String(cString: strerror(errno)))")
        base = mapped!
    }

    deinit { munmap(base, capacity) }

    var isEmpty: Bool { count == 0 }
    var bytes: UnsafeRawBufferPointer { UnsafeRawBufferPointer(start: base, count: count) }

    /// Appends `more`; the caller writes the buffer out before it would overflow.
    func append(_ more: UnsafeRawBufferPointer) {
        precondition(count + more.count <= capacity, "gathered past the buffer")
        guard let source = more.baseAddress else { return }
        (base + count).copyMemory(from: source, byteCount: more.count)
        count += more.count
    }

    func removeAll() { count = 0 }
}
