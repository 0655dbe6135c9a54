/// The small read that confirms by bytes a match `IdentityMatch` found by what the server says:
/// a few ranges of the new item, each starting at a stored segment's start, compared with what
/// is stored. Segments are up to 16 MiB, so a range is a whole segment (checked against its
/// stored digest) only where the segment is small; elsewhere it is compared with the stored
/// copy's own bytes at the same place (those were checked against their digests when written).
public enum AdoptionProbe {
    /// At most this many bytes are read from the server per file.
    public static let budget: Int64 = 256 << 10

    /// One range to read from the new item.
    public struct Check: Sendable, Hashable {
        public var range: ByteRange
        /// The stored segment's digest when `range` is exactly that segment; nil: compare with
        /// the stored bytes.
        public var digest: String?

        public init(range: ByteRange, digest: String?) {
            self.range = range
            self.digest = digest
        }
    }

    /// The ranges to read, at the start, the middle and the end of the file; nil when the stored
    /// segments do not hold the whole file (nothing partial is adopted: doubtful).
    public static func plan(size: Int64, segments: [(range: ByteRange, digest: String)], budget: Int64 = budget) -> [Check]? {
        let sorted = segments.sorted { $0.range < $1.range }
        guard size > 0, RangeSet(sorted.map(\.range)).contains(ByteRange(0, size)), sorted.last?.range.upper == size else { return nil }
        // Whole 4 KiB pages, at least one.
        let piece = max(4096, (budget / 3) / 4096 * 4096)
        func check(at segment: (range: ByteRange, digest: String), fromEnd: Bool) -> Check {
            if segment.range.count <= piece { return Check(range: segment.range, digest: segment.digest) }
            let range =
                fromEnd
                ? ByteRange(segment.range.upper - piece, segment.range.upper)
                : ByteRange(segment.range.lower, segment.range.lower + piece)
            return Check(range: range, digest: nil)
        }
        let middle = sorted.first { $0.range.contains(ByteRange(size / 2, size / 2 + 1)) } ?? sorted[0]
        var checks: [Check] = []
        for c in [check(at: sorted[0], fromEnd: false), check(at: middle, fromEnd: false), check(at: sorted.last!, fromEnd: true)]
        where !checks.contains(where: { $0.range.overlaps(c.range) }) {
            checks.append(c)
        }
        return checks
    }

    /// The stored digest whose algorithm a check's bytes are hashed in, read and stored alike
    /// (an older index's segments are SHA-256, a newer one's xxHash): its own segment's, or
    /// that of the segment holding it.
    public static func digestLike(_ check: Check, segments: [(range: ByteRange, digest: String)]) -> String? {
        check.digest ?? segments.first { $0.range.contains(check.range) }?.digest
    }

    /// Whether what was read confirms the match: every answer carried one validator (`validators`,
    /// as the server spelled them; the file did not change between two reads), every range was
    /// read whole, and each one's digest (`read`, in the algorithm of the stored digest it is
    /// compared with) equal to the stored segment's or to that of the stored bytes at the same
    /// place (`stored`). Anything missing is doubtful.
    public static func confirms(
        _ checks: [Check], read: [ByteRange: (count: Int64, digest: String)], stored: [ByteRange: String], validators: Set<String>
    ) -> Bool {
        guard !checks.isEmpty, validators.count == 1 else { return false }
        return checks.allSatisfy { c in
            guard let got = read[c.range], got.count == c.range.count else { return false }
            guard let expected = c.digest ?? stored[c.range] else { return false }
            return got.digest == expected
        }
    }
}
