/// Who a server's stored catalog and copies belong to: the server's own id (Jellyfin/Emby
/// public info `Id`, Plex `machineIdentifier`; Silo gives a signed-in device none, so nil) and
/// the signed-in user (Jellyfin/Emby user `Id`, Silo profile `id`; nil for Plex, whose server
/// token names no user).
public struct ServerIdentity: Sendable, Hashable, Codable {
    public var serverId: String?
    public var userId: String?

    public init(serverId: String?, userId: String?) {
        self.serverId = serverId?.isEmpty == true ? nil : serverId
        self.userId = userId?.isEmpty == true ? nil : userId
    }
}

/// What a new sign-in under a known server name means for what is stored under it (seed 002:
/// a server, user or session change mints a new identity; nothing tied to the old one is served
/// for the new).
public enum IdentityChange: String, Sendable, Hashable {
    /// Nothing was stored under the name.
    case new
    /// The same server and user: everything stays.
    case same
    /// Another user or profile on the same server: copies of items the new one sees stay.
    case otherUser = "other-user"
    /// Another server behind the name: nothing stored stays.
    case otherServer = "other-server"

    /// A side whose id is unknown (an older sign-in, Silo's server, Plex's user) cannot tell a
    /// change, so it is the same on that side.
    public static func between(stored: ServerIdentity?, found: ServerIdentity) -> IdentityChange {
        guard let stored else { return .new }
        if let a = stored.serverId, let b = found.serverId, a != b { return .otherServer }
        if let a = stored.userId, let b = found.userId, a != b { return .otherUser }
        return .same
    }

    /// Whether what was read for the old identity (catalog, watched state, monitors, the
    /// server's download entries and cleanup intents) must be dropped and read anew.
    public var invalidates: Bool { self == .otherUser || self == .otherServer }

    /// Which stored copies stay: under another user, those whose item the new user's catalog
    /// lists (the same server's ids name the same items); under another server, none.
    public func keeps(_ stored: [FileKey], visible: Set<String>) -> (keep: [FileKey], drop: [FileKey]) {
        switch self {
        case .new, .same: return (stored, [])
        case .otherServer: return ([], stored)
        case .otherUser:
            let keep = stored.filter { visible.contains($0.itemId) }
            return (keep, stored.filter { !visible.contains($0.itemId) })
        }
    }
}
