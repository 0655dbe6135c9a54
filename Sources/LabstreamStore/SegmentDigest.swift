import CCrypto
import CXXHash

/// The digest a committed segment is stored with, so that bytes read back after a restart are
/// known to be the bytes that were committed. It guards against a damaged disk or a torn write,
/// not an adversary (who could rewrite the index as easily): XXH3-128, ten times cheaper than
/// SHA-256 on the receiving path. Written as `xxh3-128:<hex>`; bare hex is SHA-256, what schema 4
/// and earlier stored, and is still checked as such.
public enum SegmentDigest {
    static let xxh3Prefix = "xxh3-128:"

    /// An incremental digest in the algorithm `stored` names (new segments: XXH3-128).
    public static func hasher(like stored: String? = nil) -> any SegmentHasher {
        if let stored, !stored.hasPrefix(xxh3Prefix) { return SHA256Hasher() }
        return XXH3Hasher()
    }
}

public protocol SegmentHasher: AnyObject {
    func update(_ bytes: UnsafeRawBufferPointer)
    /// The digest as stored; the hasher cannot be used afterwards.
    func finish() -> String
}

/// Incremental XXH3-128 (libxxhash).
public final class XXH3Hasher: SegmentHasher {
    let state: OpaquePointer

    public init() {
        state = XXH3_createState()
        XXH3_128bits_reset(state)
    }

    deinit { XXH3_freeState(state) }

    public func update(_ bytes: UnsafeRawBufferPointer) {
        guard let base = bytes.baseAddress, bytes.count > 0 else { return }
        XXH3_128bits_update(state, base, bytes.count)
    }

    public func finish() -> String {
        var canonical = XXH128_canonical_t()
        XXH128_canonicalFromHash(&canonical, XXH3_128bits_digest(state))
        let bytes = withUnsafeBytes(of: canonical.digest) { Array($0) }
        return SegmentDigest.xxh3Prefix + hex(bytes)
    }
}

/// Incremental SHA-256 on OpenSSL's EVP interface.
public final class SHA256Hasher: SegmentHasher {
    let context: OpaquePointer

    public init() {
        context = EVP_MD_CTX_new()
        EVP_DigestInit_ex(context, EVP_sha256(), nil)
    }

    deinit { EVP_MD_CTX_free(context) }

    public func update(_ bytes: UnsafeRawBufferPointer) {
        guard let base = bytes.baseAddress, bytes.count > 0 else { return }
        EVP_DigestUpdate(context, base, bytes.count)
    }

    /// Lower-case hex digest.
    public func finish() -> String {
        var digest = [UInt8](repeating: 0, count: 32)
        var length: UInt32 = 0
        EVP_DigestFinal_ex(context, &digest, &length)
        return hex(Array(digest.prefix(Int(length))))
    }
}

func hex(_ bytes: [UInt8]) -> String {
    bytes.map { ($0 < 16 ? "0" : "") + String($0, radix: 16) }.joined()
}
