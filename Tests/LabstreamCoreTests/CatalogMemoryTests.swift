import Foundation
import LabstreamCore
import Testing

/// The compact lookups a sync of 100 000 items uses where dictionaries were (issue 42 item 4):
/// they must find exactly what the dictionaries found.
@Suite struct CatalogMemoryTests {
    static func file(_ item: String, _ source: String, server: String = "s", kind: FileKind = .original, path: String) -> TreeFile {
        TreeFile(
            path: path.split(separator: "/").map(String.init), key: FileKey(server: server, itemId: item, sourceId: source, kind: kind), size: 1,
            modified: 0, etag: nil)
    }

    @Test func aTreeFileIsFoundByItsWholeKeyAndTheFirstOfAKeyWins() {
        var files = (0..<5000).map { Self.file("item\($0)", "src\($0 % 7)", path: "s/Movies/f\($0).mkv") }
        files.append(Self.file("item42", "src0", path: "s/Movies/second of item42.mkv"))
        files.append(Self.file("item42", "src0", server: "other", path: "other/Movies/f42.mkv"))
        files.append(Self.file("item42", "src0", kind: .copy(.capped(megabitsPerSecond: 10)), path: "s/Movies/f42 - 10mbps.mp4"))
        let lookup = TreeFileLookup(files)
        for i in stride(from: 0, to: 5000, by: 97) {
            #expect(lookup[FileKey(server: "s", itemId: "item\(i)", sourceId: "src\(i % 7)")]?.path.last == "f\(i).mkv")
        }
        #expect(lookup[FileKey(server: "s", itemId: "item42", sourceId: "src0")]?.path.last == "f42.mkv")
        #expect(lookup[FileKey(server: "other", itemId: "item42", sourceId: "src0")]?.path.first == "other")
        #expect(lookup[FileKey(server: "s", itemId: "item42", sourceId: "src0", kind: .copy(.capped(megabitsPerSecond: 10)))]?.path.last == "f42 - 10mbps.mp4")
        #expect(!lookup.contains(FileKey(server: "s", itemId: "item42", sourceId: "src1")))
        #expect(!lookup.contains(FileKey(server: "s", itemId: "item5000", sourceId: "src2")))
        #expect(TreeFileLookup([])[FileKey(server: "s", itemId: "a", sourceId: "a")] == nil)
    }

    /// The transfer engine's catalog learns a size where a file was fetched to its end: that
    /// key's file changes (the first of the key, the one found), and nothing else, nor the tree
    /// the lookup was made of.
    @Test func aLearnedSizeChangesOnlyItsKeysFile() {
        let files = [
            Self.file("a", "1", path: "s/Movies/a.mkv"), Self.file("a", "1", path: "s/Movies/a again.mkv"), Self.file("b", "1", path: "s/Movies/b.mkv")
        ]
        var lookup = TreeFileLookup(files)
        lookup.setSize(99, of: FileKey(server: "s", itemId: "a", sourceId: "1"))
        lookup.setSize(77, of: FileKey(server: "s", itemId: "gone", sourceId: "1"))
        #expect(lookup[FileKey(server: "s", itemId: "a", sourceId: "1")]?.size == 99)
        #expect(lookup.files.map(\.size) == [99, 1, 1])
        #expect(files.map(\.size) == [1, 1, 1])
    }

    /// The stored catalog in no particular order, thousands of items: every change lands on its
    /// own item's place, new items join once (their places grow the table past its first size),
    /// and a new item changed again on a later page keeps its one place.
    @Test func changesFindTheirItemsAmongThousandsInAnyOrder() {
        func movie(_ id: String, _ title: String) -> CatalogItem { CatalogItem(id: id, kind: .movie, title: title, sources: [MediaSource(id: id, size: 1)]) }
        let ids = (0..<3000).map { "id\(($0 * 7919) % 3000)" }  // a permutation, not sorted
        var merge = CatalogMerge([LibraryCatalog(id: "L", name: "Movies", items: ids.map { movie($0, "old") })])
        merge.apply(LibraryCatalog(id: "L", name: "Movies", items: ids.reversed().map { movie($0, "new " + $0) }))
        #expect(merge.libraries[0].items.map(\.id) == ids)
        #expect(merge.libraries[0].items.allSatisfy { $0.title == "new " + $0.id })
        let added = (0..<100).map { movie("added\($0)", "first") }
        merge.apply(LibraryCatalog(id: "L", name: "Movies", items: Array(added[..<50])))
        merge.apply(LibraryCatalog(id: "L", name: "Movies", items: Array(added[50...]) + [movie("added7", "second"), movie("id5", "newer")]))
        #expect(merge.libraries[0].items.count == 3100)
        #expect(merge.libraries[0].items[3007].title == "second")
        #expect(merge.libraries[0].items.filter { $0.id == "added7" }.count == 1)
        #expect(merge.libraries[0].items.first { $0.id == "id5" }?.title == "newer")
        // A library no stored catalog had: its items all join, and find themselves again.
        merge.apply(LibraryCatalog(id: "N", name: "New", items: (0..<40).map { movie("n\($0)", "1") }))
        merge.apply(LibraryCatalog(id: "N", name: "New", items: (0..<40).map { movie("n\($0)", "2") }))
        #expect(merge.libraries[1].items.map(\.title) == Array(repeating: "2", count: 40))
    }

    /// Details are kept out of the item's inline bytes; an item still compares, hashes, copies
    /// and encodes by what its details say.
    @Test func anItemsDetailsBehaveAsAValue() throws {
        var a = CatalogItem(id: "a", kind: .movie, title: "A", sources: [], details: ItemDetails(plot: "one"))
        let b = a
        a.details?.plot = "two"
        #expect(b.details?.plot == "one")
        #expect(a.details?.plot == "two")
        #expect(a != b)
        var c = b
        c.details = ItemDetails(plot: "one")
        #expect(c == b)
        #expect(Set([b, c]).count == 1)
        c.details = nil
        #expect(c != b)
        let json = try JSONEncoder().encode(b)
        #expect(try JSONSerialization.jsonObject(with: json) as? [String: Any] != nil)
        #expect((try JSONSerialization.jsonObject(with: json) as? [String: Any])?["details"] != nil)
        #expect(try JSONDecoder().decode(CatalogItem.self, from: json) == b)
        #expect(MemoryLayout<CatalogItem>.stride < MemoryLayout<ItemDetails>.stride + 200)
    }
}
