import Foundation

// MARK: - Identifiers and encodings

func siloIsCanonicalPositive(_ text: String) -> Bool {
    guard let value = Int(text), value > 0 else { return false }
    return String(value) == text
}

func siloNormalizeUserCode(_ code: String) -> String {
    code.filter { $0 != " " && $0 != "-" }
}

func siloFormatUserCode(_ code: String) -> String {
    code.count == 8 ? String(code.prefix(4)) + "-" + String(code.suffix(4)) : code
}

func siloMatchWords() -> String {
    let words = ["amber", "birch", "cobalt", "delta", "ember", "fable", "garnet", "harbor", "indigo", "juniper"]
    return (words.randomElement() ?? "amber") + " " + (words.randomElement() ?? "birch")
}

func siloSlug(_ text: String) -> String {
    var out = ""
    var lastDash = false
    for scalar in text.lowercased().unicodeScalars {
        if (scalar.value >= 48 && scalar.value <= 57) || (scalar.value >= 97 && scalar.value <= 122) {
            out.unicodeScalars.append(scalar)
            lastDash = false
        } else if !lastDash && !out.isEmpty {
            out += "-"
            lastDash = true
        }
    }
    while out.hasSuffix("-") { out.removeLast() }
    return out.isEmpty ? "item" : out
}

func siloPad2(_ value: Int) -> String { value >= 0 && value < 10 ? "0\(value)" : "\(value)" }

func siloRandomBytes(_ count: Int) -> [UInt8] {
    (0..<count).map { _ in UInt8.random(in: UInt8.min...UInt8.max) }
}

func siloRandomHex(_ byteCount: Int) -> String { siloHexString(siloRandomBytes(byteCount)) }

func siloRandomDigits(_ count: Int) -> String {
    (0..<count).map { _ in String(Int.random(in: 0...9)) }.joined()
}

func siloHexString(_ bytes: [UInt8]) -> String {
    let digits = Array("0123456789abcdef".utf8)
    var out: [UInt8] = []
    out.reserveCapacity(bytes.count * 2)
    for byte in bytes {
        out.append(digits[Int(byte >> 4)])
        out.append(digits[Int(byte & 0x0F)])
    }
    return String(decoding: out, as: UTF8.self)
}

func siloBase64URL(_ bytes: [UInt8]) -> String {
    Data(bytes).base64EncodedString()
        .replacingOccurrences(of: "+", with: "-")
        .replacingOccurrences(of: "/", with: "_")
        .replacingOccurrences(of: "=", with: "")
}

func siloFromBase64URL(_ text: String) -> [UInt8]? {
    var standard = text.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
    while standard.count % 4 != 0 { standard += "=" }
    guard let data = Data(base64Encoded: standard) else { return nil }
    return [UInt8](data)
}

func siloConstantTimeEqual(_ a: [UInt8], _ b: [UInt8]) -> Bool {
    guard a.count == b.count else { return false }
    var difference: UInt8 = 0
    for i in a.indices { difference |= a[i] ^ b[i] }
    return difference == 0
}

// MARK: - SHA-256 and HMAC (FIPS 180-4, RFC 2104; CryptoKit is not on Linux)

fileprivate struct SiloSHA256 {
    private static let k: [UInt32] = [
        0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
        0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
        0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
        0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
        0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
        0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
        0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
        0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2
    ]

    private var h: [UInt32] = [0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a, 0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19]
    private var pending: [UInt8] = []
    private var total: UInt64 = 0

    mutating func update(_ bytes: [UInt8]) {
        total &+= UInt64(bytes.count)
        var i = 0
        if !pending.isEmpty {
            let take = min(64 - pending.count, bytes.count)
            pending.append(contentsOf: bytes[0..<take])
            i = take
            if pending.count == 64 {
                compress(pending, at: 0)
                pending.removeAll(keepingCapacity: true)
            }
        }
        while bytes.count - i >= 64 {
            compress(bytes, at: i)
            i += 64
        }
        if i < bytes.count { pending.append(contentsOf: bytes[i...]) }
    }

    mutating func finalize() -> [UInt8] {
        let bitLength = total &* 8
        var tail = pending
        tail.append(0x80)
        while tail.count % 64 != 56 { tail.append(0) }
        for shift in stride(from: 56, through: 0, by: -8) {
            tail.append(UInt8(truncatingIfNeeded: bitLength >> UInt64(shift)))
        }
        var offset = 0
        while offset < tail.count {
            compress(tail, at: offset)
            offset += 64
        }
        var out: [UInt8] = []
        out.reserveCapacity(32)
        for word in h {
            out.append(UInt8(truncatingIfNeeded: word >> 24))
            out.append(UInt8(truncatingIfNeeded: word >> 16))
            out.append(UInt8(truncatingIfNeeded: word >> 8))
            out.append(UInt8(truncatingIfNeeded: word))
        }
        return out
    }

    private static func rotr(_ x: UInt32, _ n: UInt32) -> UInt32 { (x >> n) | (x << (32 - n)) }

    private mutating func compress(_ block: [UInt8], at offset: Int) {
        var w = [UInt32](repeating: 0, count: 64)
        for t in 0..<16 {
            let i = offset + t * 4
            let b0 = UInt32(block[i]) << 24
            let b1 = UInt32(block[i + 1]) << 16
            let b2 = UInt32(block[i + 2]) << 8
            let b3 = UInt32(block[i + 3])
            w[t] = b0 | b1 | b2 | b3
        }
        for t in 16..<64 {
            let s0 = SiloSHA256.rotr(w[t - 15], 7) ^ SiloSHA256.rotr(w[t - 15], 18) ^ (w[t - 15] >> 3)
            let s1 = SiloSHA256.rotr(w[t - 2], 17) ^ SiloSHA256.rotr(w[t - 2], 19) ^ (w[t - 2] >> 10)
            w[t] = w[t - 16] &+ s0 &+ w[t - 7] &+ s1
        }
        var a = h[0]
        var b = h[1]
        var c = h[2]
        var d = h[3]
        var e = h[4]
        var f = h[5]
        var g = h[6]
        var hh = h[7]
        for t in 0..<64 {
            let bigS1 = SiloSHA256.rotr(e, 6) ^ SiloSHA256.rotr(e, 11) ^ SiloSHA256.rotr(e, 25)
            let choose = (e & f) ^ (~e & g)
            let t1 = hh &+ bigS1 &+ choose &+ SiloSHA256.k[t] &+ w[t]
            let bigS0 = SiloSHA256.rotr(a, 2) ^ SiloSHA256.rotr(a, 13) ^ SiloSHA256.rotr(a, 22)
            let majority = (a & b) ^ (a & c) ^ (b & c)
            let t2 = bigS0 &+ majority
            hh = g
            g = f
            f = e
            e = d &+ t1
            d = c
            c = b
            b = a
            a = t1 &+ t2
        }
        h[0] = h[0] &+ a
        h[1] = h[1] &+ b
        h[2] = h[2] &+ c
        h[3] = h[3] &+ d
        h[4] = h[4] &+ e
        h[5] = h[5] &+ f
        h[6] = h[6] &+ g
        h[7] = h[7] &+ hh
    }
}

func siloSHA256Digest(_ bytes: [UInt8]) -> [UInt8] {
    var hasher = SiloSHA256()
    hasher.update(bytes)
    return hasher.finalize()
}

/// Lowercase hex SHA-256 of a file, read in 1 MiB chunks.
func siloSHA256File(_ path: String) -> String? {
    guard let handle = FileHandle(forReadingAtPath: path) else { return nil }
    defer { try? handle.close() }
    var hasher = SiloSHA256()
    while true {
        let chunk = handle.readData(ofLength: 1 << 20)
        if chunk.isEmpty { break }
        hasher.update([UInt8](chunk))
    }
    return siloHexString(hasher.finalize())
}

func siloHMACSHA256(key: [UInt8], message: [UInt8]) -> [UInt8] {
    var block = key.count > 64 ? siloSHA256Digest(key) : key
    block += [UInt8](repeating: 0, count: 64 - block.count)
    var inner = SiloSHA256()
    inner.update(block.map { $0 ^ 0x36 })
    inner.update(message)
    let innerDigest = inner.finalize()
    var outer = SiloSHA256()
    outer.update(block.map { $0 ^ 0x5c })
    outer.update(innerDigest)
    return outer.finalize()
}
