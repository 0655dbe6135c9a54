/// A half-open byte range `[lower, upper)`.
public struct ByteRange: Hashable, Sendable, Comparable, CustomStringConvertible {
    public let lower: Int64
    public let upper: Int64

    public init(_ lower: Int64, _ upper: Int64) {
        precondition(lower <= upper, "ByteRange lower \(lower) > upper \(upper)")
        self.lower = lower
        self.upper = upper
    }

    public init(offset: Int64, length: Int64) { self.init(offset, offset + length) }

    /// From `lower` to the end of a file whose size is unknown (`Range: bytes=lower-`).
    public static func openEnded(from lower: Int64) -> ByteRange { ByteRange(lower, .max) }
    public var isOpenEnded: Bool { upper == .max }

    /// The `Range` header's value for these bytes.
    public var httpRange: String { isOpenEnded ? "bytes=\(lower)-" : "bytes=\(lower)-\(lastByte)" }

    public var count: Int64 { upper - lower }
    public var isEmpty: Bool { lower == upper }
    /// The last byte, as an HTTP `Range` closed interval end.
    public var lastByte: Int64 { upper - 1 }

    public func contains(_ other: ByteRange) -> Bool { other.lower >= lower && other.upper <= upper }
    public func overlaps(_ other: ByteRange) -> Bool { lower < other.upper && other.lower < upper }

    public func clamped(to other: ByteRange) -> ByteRange {
        let l = min(max(lower, other.lower), other.upper)
        let u = max(min(upper, other.upper), l)
        return ByteRange(l, u)
    }

    public static func < (a: ByteRange, b: ByteRange) -> Bool { (a.lower, a.upper) < (b.lower, b.upper) }
    public var description: String { "\(lower)-\(upper)" }
}

/// A set of byte ranges kept sorted, disjoint and coalesced (rclone's `lib/ranges` idea).
public struct RangeSet: Hashable, Sendable, CustomStringConvertible {
    public private(set) var ranges: [ByteRange] = []

    public init() {}
    public init(_ ranges: [ByteRange]) { for r in ranges { insert(r) } }

    public var isEmpty: Bool { ranges.isEmpty }
    public var byteCount: Int64 { ranges.reduce(0) { $0 + $1.count } }

    public mutating func insert(_ r: ByteRange) {
        guard !r.isEmpty else { return }
        var lower = r.lower, upper = r.upper
        var kept: [ByteRange] = []
        kept.reserveCapacity(ranges.count + 1)
        var placed = false
        for existing in ranges {
            if existing.upper < lower {
                kept.append(existing)
            } else if existing.lower > upper {
                if !placed { kept.append(ByteRange(lower, upper)); placed = true }
                kept.append(existing)
            } else {
                lower = min(lower, existing.lower)
                upper = max(upper, existing.upper)
            }
        }
        if !placed { kept.append(ByteRange(lower, upper)) }
        ranges = kept
    }

    public mutating func formUnion(_ other: RangeSet) { for r in other.ranges { insert(r) } }

    public mutating func remove(_ r: ByteRange) {
        guard !r.isEmpty else { return }
        var kept: [ByteRange] = []
        for existing in ranges {
            if !existing.overlaps(r) { kept.append(existing); continue }
            if existing.lower < r.lower { kept.append(ByteRange(existing.lower, r.lower)) }
            if existing.upper > r.upper { kept.append(ByteRange(r.upper, existing.upper)) }
        }
        ranges = kept
    }

    public func contains(_ r: ByteRange) -> Bool {
        if r.isEmpty { return true }
        return ranges.contains { $0.contains(r) }
    }

    /// The parts of `r` this set does not cover, in order.
    public func missing(in r: ByteRange) -> [ByteRange] {
        var gaps: [ByteRange] = []
        var cursor = r.lower
        for existing in ranges where existing.upper > r.lower && existing.lower < r.upper {
            if existing.lower > cursor { gaps.append(ByteRange(cursor, existing.lower)) }
            cursor = max(cursor, existing.upper)
        }
        if cursor < r.upper { gaps.append(ByteRange(cursor, r.upper)) }
        return gaps
    }

    public func intersection(_ r: ByteRange) -> RangeSet {
        RangeSet(ranges.filter { $0.overlaps(r) }.map { $0.clamped(to: r) })
    }

    /// How many bytes are present contiguously from `offset`.
    public func contiguousLength(from offset: Int64) -> Int64 {
        guard let r = ranges.first(where: { $0.lower <= offset && offset < $0.upper }) else { return 0 }
        return r.upper - offset
    }

    /// Persisted form: `a-b,c-d` with half-open bounds.
    public var serialized: String { ranges.map { "\($0.lower)-\($0.upper)" }.joined(separator: ",") }

    public init?(serialized: String) {
        self.init()
        if serialized.isEmpty { return }
        for part in serialized.split(separator: ",") {
            let bounds = part.split(separator: "-", omittingEmptySubsequences: false)
            guard bounds.count == 2, let l = Int64(bounds[0]), let u = Int64(bounds[1]), l >= 0, l <= u else {
                return nil
            }
            insert(ByteRange(l, u))
        }
    }

    public var description: String { "[\(serialized)]" }
}
