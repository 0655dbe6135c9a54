/// The stored catalog with a refresh's changes applied as they arrive, a page at a time: a
/// changed item replaces its old self in place (by id, within its library), a new one joins,
/// libraries no page names stay as they were. Removals need a full refresh (the backend's
/// counts tell when). A sync in which every one of 100 000 items changed held the whole changed
/// set beside the stored catalog (and, before it, every page's raw answer): 1 158 MiB at the
/// peak, where a page at a time holds no more than a first sync does.
public struct CatalogMerge: Sendable {
    public private(set) var libraries: [LibraryCatalog]
    /// Library id → its place in `libraries`; per library, item id → its place in `items`.
    private var libraryPlace: [String: Int] = [:]
    private var itemPlace: [[String: Int]] = []

    public init(_ stored: [LibraryCatalog]) {
        libraries = stored
        for (l, library) in stored.enumerated() {
            libraryPlace[library.id] = l
            var places: [String: Int] = [:]
            places.reserveCapacity(library.items.count)
            for (i, item) in library.items.enumerated() { places[item.id] = i }
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
            itemPlace.append([:])
        }
        for item in change.items {
            if let i = itemPlace[l][item.id] {
                libraries[l].items[i] = item
            } else {
                itemPlace[l][item.id] = libraries[l].items.count
                libraries[l].items.append(item)
            }
        }
    }
}
