/// Which product a server's public, unauthenticated answer says it is, from the fields each
/// product's spec gives that answer. `server add` refuses a URL that answers as another product
/// and names what it found.
///
/// Jellyfin's and Emby's `GET /System/Info/Public` share `Id`, `ServerName` and `Version`.
/// Jellyfin's `PublicSystemInfo` adds `ProductName` ("Jellyfin Server"), `OperatingSystem` and
/// `StartupWizardCompleted`, and allows nothing else (`additionalProperties: false`); Emby 4.8's
/// has no `ProductName` but `LocalAddresses`, `WanAddress` and `RemoteAddresses`, which
/// Jellyfin's has not. Plex names itself by `GET /identity`'s `MediaContainer.machineIdentifier`,
/// Silo by `GET /api/v2/system/info`'s `api_major`.
public enum ServerProduct {
    /// What a MediaBrowser public-info answer's fields say: its `ProductName` (nil when absent)
    /// and which of its field names it carries.
    public static func mediaBrowser(productName: String?, fields: Set<String>) -> BackendKind? {
        if let name = productName?.lowercased(), !name.isEmpty {
            if name.contains("emby") { return .emby }
            if name.contains("jellyfin") { return .jellyfin }
            return nil
        }
        if !fields.isDisjoint(with: embyOnly) { return .emby }
        if !fields.isDisjoint(with: jellyfinOnly) { return .jellyfin }
        return nil
    }

    static let embyOnly: Set<String> = ["LocalAddresses", "WanAddress", "RemoteAddresses"]
    static let jellyfinOnly: Set<String> = ["OperatingSystem", "StartupWizardCompleted"]

    /// The refusal when `asked` was given but `found` answered; nil when they agree or the
    /// answer said nothing either way. Silo also answers Jellyfin's API (`server add jellyfin`
    /// against it is a documented fallback), so a Silo found behind a Jellyfin add is no refusal.
    public static func mismatch(asked: BackendKind, found: BackendKind?, at url: String) -> String? {
        guard let found, found != asked, !(asked == .jellyfin && found == .silo) else { return nil }
        let article = found == .emby ? "an" : "a"
        return "\(url) answers as \(article) \(found.product) server, not \(asked.product); add it with `labstream server add \(found.rawValue)`"
    }
}
