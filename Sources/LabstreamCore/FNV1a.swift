/// FNV-1a, 64-bit: a stable hash of bytes (the same in every process and release, unlike
/// Swift's seeded `Hasher`). For names and change detection, not against tampering.
public enum FNV1a {
    public static let offsetBasis: UInt64 = 0xcbf2_9ce4_8422_2325

    /// `continuing`: the hash of the bytes before these (the hash of a path's folder goes on
    /// into its names without the path being written out).
    public static func hash(_ bytes: some Sequence<UInt8>, continuing: UInt64 = offsetBasis) -> UInt64 {
        var hash = continuing
        for byte in bytes {
            hash ^= UInt64(byte)
            hash = hash &* 0x0000_0100_0000_01b3
        }
        return hash
    }
}
