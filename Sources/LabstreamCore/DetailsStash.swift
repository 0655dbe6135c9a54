/// Where a catalog sync puts each item's details as its page arrives (the index, in a staging
/// table), so a whole library's plots, genres, ids and chapters are not all held until the last
/// page came: at 100 000 items they were about a kilobyte each of the online daemon's peak.
public protocol DetailsStash: AnyObject {
    /// Keeps `item`'s details and gives the item back without them.
    func stash(_ item: CatalogItem) -> CatalogItem
}

extension Optional where Wrapped == any DetailsStash {
    /// `item` with its details stashed, or as it is when there is no stash.
    public func stashing(_ item: CatalogItem?) -> CatalogItem? {
        guard case .some(let stash) = self, let item else { return item }
        return stash.stash(item)
    }
}
