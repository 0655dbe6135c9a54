/// A request the segment train wants on the wire.
public enum SegmentRequest: Sendable, Hashable {
    /// `Range: bytes=a-b`.
    case closed(ByteRange)
    /// `Range: bytes=a-`, only when the total size is unknown.
    case openEnded(from: Int64)
}

/// The segment train: which closed ranges to request next for one file. Pure.
///
/// Reader-demanded ranges come first and are never held back (a player is waiting on them).
/// Background fill of a pinned file then tops the file up to `maxQueued` requests in flight,
/// in segment-aligned pieces from the first missing byte, so that after a crash exactly the
/// segments that were in flight are planned again.
public enum SegmentTrainPlanner {
    public struct Input: Sendable {
        public var durable: RangeSet
        public var total: Int64?
        public var inFlight: [ByteRange]
        public var readerWants: [ByteRange]
        public var fillInBackground: Bool
        public var segmentSize: Int64
        public var maxQueued: Int

        public init(
            durable: RangeSet, total: Int64?, inFlight: [ByteRange] = [], readerWants: [ByteRange] = [],
            fillInBackground: Bool, segmentSize: Int64, maxQueued: Int = 2
        ) {
            self.durable = durable
            self.total = total
            self.inFlight = inFlight
            self.readerWants = readerWants
            self.fillInBackground = fillInBackground
            self.segmentSize = segmentSize
            self.maxQueued = maxQueued
        }
    }

    public static func plan(_ input: Input) -> [SegmentRequest] {
        let segment = max(input.segmentSize, 1)
        guard let total = input.total else {
            // Unknown size: one open-ended request from the durable prefix, never two at once.
            guard input.inFlight.isEmpty, input.fillInBackground || !input.readerWants.isEmpty else { return [] }
            return [.openEnded(from: input.durable.contiguousLength(from: 0))]
        }
        var busy = input.durable
        for r in input.inFlight { busy.insert(r) }
        var out: [ByteRange] = []
        for want in input.readerWants {
            for piece in ReadPlanner.pieces(of: want.clamped(to: ByteRange(0, total)), present: busy, inFlight: RangeSet(), segmentSize: segment) {
                out.append(piece)
                busy.insert(piece)
            }
        }
        guard input.fillInBackground else { return out.map(SegmentRequest.closed) }
        var room = input.maxQueued - input.inFlight.count - out.count
        var cursor: Int64 = 0
        while room > 0, cursor < total {
            // The next segment-aligned slot with a gap in it.
            let slot = ByteRange(cursor, min(cursor + segment, total))
            cursor = slot.upper
            for gap in busy.missing(in: slot) where room > 0 {
                out.append(gap)
                busy.insert(gap)
                room -= 1
            }
        }
        return out.map(SegmentRequest.closed)
    }
}

/// Decides what happens to a finished transfer body that was written at its offset in the
/// sparse partial. Pure: commit it (the range map may advance), or discard it.
public enum AssemblyPolicy {
    public struct Finished: Sendable, Hashable {
        public var planned: ByteRange
        public var received: Int64
        public var attempt: AttemptID

        public init(planned: ByteRange, received: Int64, attempt: AttemptID) {
            self.planned = planned
            self.received = received
            self.attempt = attempt
        }
    }

    public enum Decision: Sendable, Hashable {
        case commit(ByteRange)
        case discard(String)
    }

    public static func decide(_ f: Finished, durable: RangeSet, currentAttempt: AttemptID, total: Int64) -> Decision {
        guard f.attempt == currentAttempt else { return .discard("\(f.attempt) is no longer current (now \(currentAttempt))") }
        guard f.planned.upper <= total else { return .discard("bytes \(f.planned) lie past the end (\(total))") }
        guard f.received == f.planned.count else {
            return .discard("wrong length: \(f.received) of \(f.planned.count) bytes")
        }
        if durable.contains(f.planned) { return .discard("bytes \(f.planned) are already behind the checkpoint") }
        if !durable.intersection(f.planned).isEmpty {
            // Planning never overlaps durable bytes; an overlap means the plan and the map disagree.
            return .discard("bytes \(f.planned) overlap committed bytes out of alignment")
        }
        return .commit(f.planned)
    }
}
