/// Sizes the read path works in. All values are bytes.
public struct TransferSizes: Sendable, Hashable {
    /// Reader-demanded ranges are widened to this alignment so tiny kernel reads do not each
    /// become a request, while a tail seek still fetches only the tail.
    public var readChunk: Int64
    /// The largest single closed-range request (a "segment").
    public var segmentSize: Int64
    /// First read-ahead window: absorbs the kernel's 128 KiB readahead and grows from there.
    public var readAheadInitial: Int64
    /// The read-ahead window stops doubling here.
    public var readAheadMax: Int64

    public static let mebibyte: Int64 = 1 << 20
    public static let `default` = TransferSizes(
        readChunk: 1 << 20, segmentSize: 16 << 20, readAheadInitial: 1 << 20, readAheadMax: 64 << 20)

    public init(readChunk: Int64, segmentSize: Int64, readAheadInitial: Int64, readAheadMax: Int64) {
        self.readChunk = readChunk
        self.segmentSize = segmentSize
        self.readAheadInitial = readAheadInitial
        self.readAheadMax = readAheadMax
    }
}

/// Decides which closed ranges to request so that a reader's bytes become present.
/// Pure: the caller supplies what is durable and what is already on the wire.
public enum ReadPlanner {
    /// The ranges to request for `demand`, widened to `sizes.readChunk`, minus what is present or
    /// in flight, split into pieces of at most `sizes.segmentSize`.
    public static func plan(
        demand: ByteRange, total: Int64, present: RangeSet, inFlight: RangeSet, sizes: TransferSizes
    ) -> [ByteRange] {
        let file = ByteRange(0, total)
        let clipped = demand.clamped(to: file)
        guard !clipped.isEmpty else { return [] }
        let chunk = max(sizes.readChunk, 1)
        let lower = (clipped.lower / chunk) * chunk
        let upper = min(((clipped.upper + chunk - 1) / chunk) * chunk, total)
        return pieces(of: ByteRange(lower, upper), present: present, inFlight: inFlight, segmentSize: sizes.segmentSize)
    }

    /// What to fetch ahead of a sequential reader in `window`: its gaps, except a piece at the
    /// window's end that is still smaller than `minimumPiece` (and not the file's end). The
    /// window slides forward by one kernel read at a time; topping it up by each slide would
    /// turn a stream into thousands of 128 KiB requests. Waiting until the gap is worth a
    /// request keeps requests large while the runway never drops below `window - minimumPiece`.
    public static func readAhead(
        window: ByteRange, total: Int64, present: RangeSet, inFlight: RangeSet,
        segmentSize: Int64, minimumPiece: Int64
    ) -> [ByteRange] {
        var out = pieces(of: window, present: present, inFlight: inFlight, segmentSize: segmentSize)
        if let tail = out.last, tail.upper == window.upper, window.upper < total, tail.count < minimumPiece {
            out.removeLast()
        }
        return out
    }

    static func split(_ gap: ByteRange, segmentSize: Int64) -> [ByteRange] {
        var out: [ByteRange] = []
        let step = max(segmentSize, 1)
        var start = gap.lower
        while start < gap.upper {
            let end = min(start + step, gap.upper)
            out.append(ByteRange(start, end))
            start = end
        }
        return out
    }

    /// `window` minus present and in-flight bytes, split into segment-sized requests.
    public static func pieces(of window: ByteRange, present: RangeSet, inFlight: RangeSet, segmentSize: Int64) -> [ByteRange] {
        var busy = present
        busy.formUnion(inFlight)
        return busy.missing(in: window).flatMap { split($0, segmentSize: segmentSize) }
    }
}

/// Per-open-file read-ahead: a window that grows with what the reader has read sequentially
/// (half of its run so far, from `readAheadInitial` up to `readAheadMax`), and resets on a seek.
/// Grown per bytes read, not per read: doubling at every 128 KiB kernel read reached the
/// 64 MiB cap within the first megabyte, so a player that reads a few MiB to start (mpv's first
/// frames) had 64 MiB fetched for it. Growing by the run keeps what is fetched ahead at half of
/// what was read, while a long stream still reaches the cap.
public struct ReadAheadPolicy: Sendable, Hashable {
    public private(set) var window: Int64
    public private(set) var nextExpected: Int64 = -1
    /// Where the current sequential run began (-1: no read yet).
    public private(set) var runStart: Int64 = -1
    private let sizes: TransferSizes

    public init(sizes: TransferSizes) {
        self.sizes = sizes
        self.window = sizes.readAheadInitial
    }

    /// Records a read and returns the range worth fetching ahead of it, if any.
    public mutating func observe(read: ByteRange, total: Int64) -> ByteRange? {
        // The kernel may split and reorder nearby reads a little; treat a small forward gap as sequential.
        let sequential =
            nextExpected >= 0 && read.lower >= nextExpected - sizes.readChunk
            && read.lower <= nextExpected + sizes.readChunk
        if !sequential { runStart = read.lower }
        let run = max(read.upper - runStart, 0)
        window = sequential ? min(max(run / 2, sizes.readAheadInitial), sizes.readAheadMax) : sizes.readAheadInitial
        nextExpected = read.upper
        guard sequential, read.upper < total else { return nil }
        return ByteRange(read.upper, min(read.upper + window, total))
    }
}
