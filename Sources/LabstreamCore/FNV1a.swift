/// FNV-1a, 64-bit: a stable hash of bytes (the same in every process and release, unlike
/// Swift's seeded `Hasher`). For names and change detection, not against tampering.
public enum FNV1a {
    public static func hash(_ bytes: some Sequence<UInt8>) -> UInt64 {
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in bytes {
            hash ^= UInt64(byte)
            hash = hash &* 0x0000_0100_0000_01b3
        }
        return hash
    }
}
