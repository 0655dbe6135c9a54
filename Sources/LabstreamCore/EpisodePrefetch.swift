/// What of the next episode is fetched ahead while one plays (issue 42.2), within `cap` bytes:
/// first its header (what locates the index), then its index region (an MP4's `moov` after
/// its `mdat`, a Matroska file's Cues, as its SeekHead places them; none for anything else),
/// then the rest of its head, so that a player opening it finds the start and the index stored.
/// Pure: the caller fetches, in order, what of these is missing.
public enum EpisodePrefetch {
    /// Bytes of one next episode fetched ahead at most (its side files are apart: small, and
    /// fetched as a listing of its folder would).
    public static let cap: Int64 = 16 << 20
    /// The first bytes, read before the rest: enough for an MP4's top-level box headers up to
    /// `mdat` and a Matroska SeekHead.
    public static let headerLength: Int64 = 1 << 20
    /// The index region gets at most this share of the cap; the head the rest.
    public static let indexShare: Int64 = 4

    /// The ranges wanted of a file of `total` bytes, in the order they are fetched. `header`:
    /// its first bytes once stored (nil before: then only the header is wanted).
    public static func plan(total: Int64, header: [UInt8]?, cap: Int64 = Self.cap) -> [ByteRange] {
        guard total > 0, cap > 0 else { return [] }
        let first = ByteRange(0, min(total, headerLength, cap))
        guard let header else { return [first] }
        var out = [first]
        var left = cap - first.count
        if let index = ContainerIndex.locate(header: header, total: total), !index.isEmpty {
            let clipped = ByteRange(index.lower, min(index.upper, index.lower + min(left, cap / indexShare)))
            if !clipped.isEmpty && !first.contains(clipped) {
                out.append(clipped)
                left -= clipped.count
            }
        }
        let head = ByteRange(first.upper, min(total, first.upper + max(left, 0)))
        if !head.isEmpty { out.append(head) }
        return out
    }
}
