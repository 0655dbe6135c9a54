/// Finds an element of an array kept elsewhere by its key's hash: an open-addressed table of
/// 4-byte slots holding positions in that array. A `[Key: Int32]` beside an array of 100 000
/// tree files cost 13.7 MiB (each bucket a whole key); this costs 1 MiB, and the keys live once,
/// in the array. The caller says how to hash and compare, so the keys are never copied here.
/// Pure.
public struct PositionIndex: Sendable, Hashable {
    /// Position + 1 per slot; 0 is an empty slot. Never more than half full.
    private var slots: [Int32]
    public private(set) var count = 0

    public init(capacity: Int = 0) {
        var size = 8
        while size < capacity * 2 { size <<= 1 }
        slots = Array(repeating: 0, count: size)
    }

    /// The first position (in probe order from `hash`) for which `matches` holds.
    public func find(hash: Int, matches: (Int) -> Bool) -> Int? {
        let mask = slots.count - 1
        var slot = hash & mask
        while true {
            let stored = slots[slot]
            if stored == 0 { return nil }
            if matches(Int(stored) - 1) { return Int(stored) - 1 }
            slot = (slot + 1) & mask
        }
    }

    /// Adds `position` under `hash`; `hashOf` gives the hash of a position already in (the
    /// table grows by rehashing them). The caller keeps keys unique (`find` first).
    public mutating func insert(_ position: Int, hash: Int, hashOf: (Int) -> Int) {
        precondition(position >= 0 && position < Int(Int32.max), "PositionIndex holds positions below 2^31")
        if (count + 1) * 2 > slots.count {
            var grown = PositionIndex(capacity: slots.count)
            for stored in slots where stored != 0 { grown.place(Int(stored) - 1, hash: hashOf(Int(stored) - 1)) }
            self = grown
        }
        place(position, hash: hash)
    }

    /// Adds `position` unless one whose key is the same (`sameKey`) is in already: the first of
    /// each key wins. Whether it went in.
    @discardableResult
    public mutating func insertFirst(_ position: Int, hash: Int, sameKey: (Int) -> Bool, hashOf: (Int) -> Int) -> Bool {
        guard find(hash: hash, matches: sameKey) == nil else { return false }
        insert(position, hash: hash, hashOf: hashOf)
        return true
    }

    private mutating func place(_ position: Int, hash: Int) {
        let mask = slots.count - 1
        var slot = hash & mask
        while slots[slot] != 0 { slot = (slot + 1) & mask }
        slots[slot] = Int32(position + 1)
        count += 1
    }
}
