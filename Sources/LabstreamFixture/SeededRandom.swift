/// SplitMix64: a tiny deterministic generator for test media and property tests, so every run
/// (and every machine) sees the same bytes.
public struct SeededRandom: Sendable {
    var state: UInt64

    public init(seed: UInt64) { state = seed }

    public mutating func next() -> UInt64 {
        state &+= 0x9e3779b97f4a7c15
        var z = state
        z = (z ^ (z >> 30)) &* 0xbf58476d1ce4e5b9
        z = (z ^ (z >> 27)) &* 0x94d049bb133111eb
        return z ^ (z >> 31)
    }

    /// `count` deterministic bytes.
    public mutating func bytes(_ count: Int) -> [UInt8] {
        var out = [UInt8](repeating: 0, count: count)
        out.withUnsafeMutableBytes { raw in
            var i = 0
            while i < count {
                let word = next()
                withUnsafeBytes(of: word) { w in for j in 0..<min(8, count - i) { raw[i + j] = w[j] } }
                i += 8
            }
        }
        return out
    }
}
