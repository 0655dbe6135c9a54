import LabstreamCore
import Testing

@Suite struct QueueOrderTests {
    typealias E = QueueOrder.Entry<String>

    func order(_ entries: [E]) -> [String] { QueueOrder.sorted(entries).map(\.key) }

    @Test func pinOrderIsTheDefaultWhateverTheKeys() {
        // Keys sort z, m, a; pinned a first, then z, then m.
        let entries = [E(key: "z", place: .init(position: 2)), E(key: "m", place: .init(position: 3)), E(key: "a", place: .init(position: 1))]
        #expect(order(entries) == ["a", "z", "m"])
    }

    @Test func priorityGoesBeforePositionAndAReaderBeforeAll() {
        let entries = [
            E(key: "a", place: .init(position: 1)), E(key: "b", place: .init(position: 2, priority: .low)),
            E(key: "c", place: .init(position: 3, priority: .high)), E(key: "d", place: .init(position: 4))
        ]
        #expect(order(entries) == ["c", "a", "d", "b"])
        var read = entries
        read[1].reading = true  // the low one is being played
        #expect(order(read) == ["b", "c", "a", "d"])
    }

    @Test func filesWithoutAPlaceComeLastInTheOrderGiven() {
        let entries = [E(key: "x", place: nil), E(key: "b", place: .init(position: 9)), E(key: "w", place: nil)]
        #expect(order(entries) == ["b", "x", "w"])
    }

    @Test func movingFirstOrBeforeAnotherRenumbersAndTakesThePrioritythere() throws {
        let entries = [
            E(key: "a", place: .init(position: 1, priority: .high)), E(key: "b", place: .init(position: 5)),
            E(key: "c", place: .init(position: 7)), E(key: "d", place: .init(position: 8, priority: .low))
        ]
        let first = try #require(QueueOrder.moved(["d"], to: .first, in: entries))
        #expect(first["d"] == QueuePlace(position: 1, priority: .high))
        #expect(order(entries.map { E(key: $0.key, place: first[$0.key]) }) == ["d", "a", "b", "c"])

        let before = try #require(QueueOrder.moved(["a"], to: .before("c"), in: entries))
        #expect(before["a"]?.priority == .normal)
        #expect(order(entries.map { E(key: $0.key, place: before[$0.key]) }) == ["b", "a", "c", "d"])
        #expect(before.values.map(\.position).sorted() == [1, 2, 3, 4])

        // Before itself changes nothing but the numbering; an unknown file or target is refused.
        let same = try #require(QueueOrder.moved(["b"], to: .before("b"), in: entries))
        #expect(order(entries.map { E(key: $0.key, place: same[$0.key]) }) == ["a", "b", "c", "d"])
        #expect(QueueOrder.moved(["q"], to: .first, in: entries) == nil)
        #expect(QueueOrder.moved(["a"], to: .before("q"), in: entries) == nil)
    }

    @Test func aFolderMovesAsABlockKeepingItsOrder() throws {
        let entries = (1...5).map { E(key: "e\($0)", place: .init(position: Int64($0))) }
        let moved = try #require(QueueOrder.moved(["e5", "e3"], to: .before("e2"), in: entries))
        #expect(order(entries.map { E(key: $0.key, place: moved[$0.key]) }) == ["e1", "e3", "e5", "e2", "e4"])
        // Everything moving first: nothing to take a priority from, each keeps its own.
        let all = try #require(QueueOrder.moved(Set(entries.map(\.key)), to: .first, in: entries))
        #expect(order(entries.map { E(key: $0.key, place: all[$0.key]) }) == ["e1", "e2", "e3", "e4", "e5"])
    }

    @Test func aMoveIgnoresWhoIsReading() throws {
        let entries = [E(key: "a", place: .init(position: 1)), E(key: "b", place: .init(position: 2), reading: true)]
        let moved = try #require(QueueOrder.moved(["a"], to: .before("b"), in: entries))
        #expect(moved["a"]?.position == 1 && moved["b"]?.position == 2)
    }
}
