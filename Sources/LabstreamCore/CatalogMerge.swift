/// The stored catalog with a refresh's changes applied as they arrive, a page at a time: a
/// changed item replaces its old self in place (by id, within its library), a new one joins,
/// libraries no page names stay as they were. Removals need a full refresh (the backend's
/// counts tell when). A sync in which every one of 100 000 items changed held the whole changed
/// set beside the stored catalog (and, before it, every page's raw answer): 1 158 MiB at the
/// peak, where a page at a time holds no more than a first sync does.
public struct CatalogMerge: Sendable {
    public private(set) var libraries: [LibraryCatalog]
    /// Library id → its place in `libraries`; per library, each item's place in `items` by its
    /// id's hash (4-byte slots: a `[String: Int]` of 100 000 ids was a 262 144-slot table held
    /// through every page).
    private var libraryPlace: [String: Int] = [:]
    private var itemPlace: [PositionIndex] = []

    public init(_ stored: [LibraryCatalog]) {
        libraries = stored
        for (l, library) in stored.enumerated() {
            libraryPlace[library.id] = l
            let items = library.items
            var places = PositionIndex(capacity: items.count)
            for (i, item) in items.enumerated() {
                places.insertFirst(i, hash: item.id.hashValue, sameKey: { items[$0].id == item.id }) { items[$0].id.hashValue }
            }
            itemPlace.append(places)
        }
    }

    /// Applies one page of `change.id`'s changes: its name, series details and items.
    public mutating func apply(_ change: LibraryCatalog) {
        let l: Int
        if let known = libraryPlace[change.id] {
            l = known
            libraries[l].name = change.name
            libraries[l].seriesDetails.merge(change.seriesDetails) { _, new in new }
        } else {
            l = libraries.count
            libraryPlace[change.id] = l
            libraries.append(LibraryCatalog(id: change.id, name: change.name, items: [], leftOut: change.leftOut, seriesDetails: change.seriesDetails))
            itemPlace.append(PositionIndex())
        }
        for item in change.items {
            let id = item.id
            if let i = itemPlace[l].find(hash: id.hashValue, matches: { libraries[l].items[$0].id == id }) {
                libraries[l].items[i] = item
            } else {
                libraries[l].items.append(item)
                // Taken out while it grows: its rehash reads the items' ids.
                var places = itemPlace[l]
                itemPlace[l] = PositionIndex()
                places.insert(libraries[l].items.count - 1, hash: id.hashValue) { libraries[l].items[$0].id.hashValue }
                itemPlace[l] = places
            }
        }
    }
}
