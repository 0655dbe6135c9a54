/// What a server says of one file that outlives its ids: enough to know the file again after a
/// library re-add or reinstall gave its item new ids (issue 41 item 3; seed 001 `stable_identity`).
public struct FileIdentity: Sendable, Hashable {
    public var key: FileKey
    public var kind: ItemKind
    /// Provider ids (BaseItemDto.ProviderIds; keys lowercased: "imdb", "tmdb", "tvdb"…).
    public var providerIds: [String: String]
    /// MediaSourceInfo.Size: an unknown size matches nothing.
    public var size: Int64?
    /// MediaSourceInfo.Container.
    public var container: String?
    /// MediaSourceInfo.Path, the file on the server's disk, where the server gives one.
    public var path: String?
    public var season: Int?
    public var episode: Int?

    public init(
        key: FileKey, kind: ItemKind, providerIds: [String: String], size: Int64?, container: String?, path: String? = nil,
        season: Int? = nil, episode: Int? = nil
    ) {
        self.key = key
        self.kind = kind
        self.providerIds = providerIds.filter { !$0.value.isEmpty }
        self.size = size
        self.container = container
        self.path = path?.isEmpty == true ? nil : path
        self.season = season
        self.episode = episode
    }
}

/// Which vanished stored files are the same as files that appeared, by what the server says.
/// Only a candidate: bytes confirm it (`AdoptionProbe`) before anything is adopted.
public enum IdentityMatch {
    /// Pairs each vanished file with the one appeared file it is, where that is beyond doubt:
    /// the same kind, size and container, at least one provider id in common and none that
    /// differs, the same season and episode, and the same server path where both have one.
    /// Where the server names no provider id for either (Silo's films: their cards name none), the
    /// same server path stands in for one. A vanished file with two candidates, or a candidate
    /// two vanished files could be, is doubtful and pairs with nothing.
    public static func pairs(vanished: [FileIdentity], appeared: [FileIdentity]) -> [(from: FileKey, to: FileKey)] {
        var candidates: [FileKey: [FileKey]] = [:]
        var claimedBy: [FileKey: Int] = [:]
        for old in vanished {
            let found = appeared.filter { same(old, $0) }.map(\.key)
            candidates[old.key] = found
            for key in found { claimedBy[key, default: 0] += 1 }
        }
        return vanished.compactMap { old in
            guard let found = candidates[old.key], found.count == 1, claimedBy[found[0]] == 1 else { return nil }
            return (old.key, found[0])
        }
    }

    static func same(_ a: FileIdentity, _ b: FileIdentity) -> Bool {
        guard a.key.server == b.key.server, a.key.kind == .original, b.key.kind == .original, a.kind == b.kind else { return false }
        guard let size = a.size, size > 0, b.size == size else { return false }
        guard let ca = a.container, let cb = b.container, ca.lowercased() == cb.lowercased() else { return false }
        guard a.season == b.season, a.episode == b.episode else { return false }
        if let pa = a.path, let pb = b.path, pa != pb { return false }
        if a.providerIds.isEmpty && b.providerIds.isEmpty { return a.path != nil && a.path == b.path }
        var shared = false
        for (provider, id) in a.providerIds {
            guard let other = b.providerIds[provider] else { continue }
            if other != id { return false }
            shared = true
        }
        return shared
    }
}
