/// A server's catalog items by id, found where they are (in their libraries' arrays) instead of
/// copied into a dictionary: an item is a few hundred bytes inline, and a `[String: CatalogItem]`
/// of 100 000 of them (with its growth's copies) was 145 MiB of an offline mount's 430 MiB peak.
/// Pure.
public struct ItemLookup: Sendable {
    private let libraries: [LibraryCatalog]
    /// Where each library's items start in one count across all of them.
    private let starts: [Int]
    private let positions: PositionIndex

    /// The first library to list an id wins.
    public init(_ libraries: [LibraryCatalog]) {
        var starts: [Int] = [], total = 0
        for library in libraries {
            starts.append(total)
            total += library.items.count
        }
        var positions = PositionIndex(capacity: total)
        for (l, library) in libraries.enumerated() {
            for (i, item) in library.items.enumerated() {
                positions.insertFirst(starts[l] + i, hash: item.id.hashValue, sameKey: { Self.id(at: $0, libraries, starts) == item.id }) {
                    Self.id(at: $0, libraries, starts).hashValue
                }
            }
        }
        self.libraries = libraries
        self.starts = starts
        self.positions = positions
    }

    /// Library and item of a position in the one count.
    private static func place(_ position: Int, _ starts: [Int]) -> (library: Int, item: Int) {
        var l = starts.count - 1
        while starts[l] > position { l -= 1 }
        return (l, position - starts[l])
    }

    private static func id(at position: Int, _ libraries: [LibraryCatalog], _ starts: [Int]) -> String {
        let (l, i) = place(position, starts)
        return libraries[l].items[i].id
    }

    public subscript(id: String) -> CatalogItem? {
        guard let position = positions.find(hash: id.hashValue, matches: { Self.id(at: $0, libraries, starts) == id }) else { return nil }
        let (l, i) = Self.place(position, starts)
        return libraries[l].items[i]
    }
}
