import CCrypto

/// Incremental SHA-256 on OpenSSL's EVP interface.
public final class SHA256Hasher {
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

    /// Lower-case hex digest; the hasher cannot be used afterwards.
    public func finish() -> String {
        var digest = [UInt8](repeating: 0, count: 32)
        var length: UInt32 = 0
        EVP_DigestFinal_ex(context, &digest, &length)
        return digest.prefix(Int(length)).map { ($0 < 16 ? "0" : "") + String($0, radix: 16) }.joined()
    }

    public static func hex(_ bytes: [UInt8]) -> String {
        let h = SHA256Hasher()
        bytes.withUnsafeBytes { h.update($0) }
        return h.finish()
    }
}
