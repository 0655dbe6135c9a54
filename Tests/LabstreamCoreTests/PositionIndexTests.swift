import LabstreamCore
import Testing

@Suite struct PositionIndexTests {
    /// Keys found by position through hashes that clash (every key's hash is one of four), across
    /// the table's growth from its smallest size; keys not in it are not found.
    @Test func everyPositionIsFoundByItsKeyThroughClashesAndGrowth() {
        let keys = (0..<5000).map { "key \($0)" }
        let hash: (String) -> Int = { $0.utf8.reduce(0) { $0 + Int($1) } % 4 }
        var index = PositionIndex()
        for (i, key) in keys.enumerated().prefix(300) {
            #expect(index.find(hash: hash(key)) { keys[$0] == key } == nil)
            index.insert(i, hash: hash(key)) { hash(keys[$0]) }
        }
        #expect(index.count == 300)
        #expect(keys.indices.prefix(300).allSatisfy { i in index.find(hash: hash(keys[i])) { keys[$0] == keys[i] } == i })
        #expect(index.find(hash: hash("key 300")) { keys[$0] == "key 300" } == nil)

        var wide = PositionIndex(capacity: 10)
        for (i, key) in keys.enumerated() { wide.insert(i, hash: key.hashValue) { keys[$0].hashValue } }
        #expect(keys.indices.allSatisfy { i in wide.find(hash: keys[i].hashValue) { keys[$0] == keys[i] } == i })
        #expect(wide.find(hash: "absent".hashValue) { keys[$0] == "absent" } == nil)

        // The first of each key wins: a later position with the same key does not go in.
        let named = ["a", "b", "a"]
        var first = PositionIndex()
        let went = named.indices.map { i in first.insertFirst(i, hash: named[i].hashValue, sameKey: { named[$0] == named[i] }) { named[$0].hashValue } }
        #expect(went == [true, true, false] && first.count == 2)
        #expect(first.find(hash: "a".hashValue) { named[$0] == "a" } == 0)
    }

    /// Items of several libraries by id, the first library's where two list one; an empty
    /// library between them and an id no library has.
    @Test func catalogItemsAreFoundByIdAcrossLibraries() {
        func items(_ ids: [String], title: String) -> [CatalogItem] { ids.map { CatalogItem(id: $0, kind: .movie, title: title, sources: []) } }
        let films = LibraryCatalog(id: "1", name: "Films", items: items((0..<500).map { "f\($0)" }, title: "films"))
        let empty = LibraryCatalog(id: "2", name: "Empty", items: [])
        let mixed = LibraryCatalog(id: "3", name: "Mixed", items: items(["f7", "m1", "m2"], title: "mixed"))
        let lookup = ItemLookup([films, empty, mixed])
        #expect((0..<500).allSatisfy { lookup["f\($0)"]?.title == "films" && lookup["f\($0)"]?.id == "f\($0)" })
        #expect(lookup["m1"]?.title == "mixed" && lookup["m2"]?.id == "m2")
        #expect(lookup["f7"]?.title == "films")
        #expect(lookup["absent"] == nil && ItemLookup([])["f1"] == nil)
    }

    /// A tree split by server, servers in name order, each server's files in their order; one
    /// server's tree comes back whole.
    @Test func aTreeIsSplitByServer() {
        func file(_ server: String, _ name: String) -> TreeFile {
            TreeFile(path: [server, name], key: FileKey(server: server, itemId: name, sourceId: name), size: 1, modified: 0, etag: nil)
        }
        let mixed = [file("b", "1"), file("a", "2"), file("b", "3"), file("a", "4")]
        let split = TreeFile.byServer(mixed)
        #expect(split.map(\.server) == ["a", "b"])
        #expect(split.map { $0.files.map(\.key.itemId) } == [["2", "4"], ["1", "3"]])
        let one = [file("a", "1"), file("a", "2")]
        #expect(TreeFile.byServer(one).count == 1 && TreeFile.byServer(one)[0].files == one)
        #expect(TreeFile.byServer([]).isEmpty)
    }
}
