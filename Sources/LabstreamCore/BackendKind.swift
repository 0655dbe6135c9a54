/// The kinds of media server Labstream speaks to. Everything that differs by kind switches on
/// this enum (never on a string), so a new kind is a compile error wherever it matters:
/// the client factory (`BackendRegistry`), route choice (`RoutePolicy`), sign-in (`server add`).
public enum BackendKind: String, Sendable, Hashable, CaseIterable, Codable {
    case jellyfin, emby, plex, silo

    /// How a person signs in to a server of this kind.
    public enum SignIn: Sendable, Hashable {
        /// `--user USER --password-stdin`.
        case password
        /// `--token-stdin` (an API key or access token).
        case token
        /// plex.tv's PIN flow (`--pin`).
        case plexPIN
        /// A code approved on a signed-in device (`--device`).
        case device
    }

    /// The product's own name, for messages.
    public var product: String {
        switch self {
        case .jellyfin: "Jellyfin"
        case .emby: "Emby"
        case .plex: "Plex"
        case .silo: "Silo"
        }
    }

    public var signIns: [SignIn] {
        switch self {
        case .jellyfin, .emby: [.password, .token]
        case .plex: [.plexPIN, .token]
        case .silo: [.device, .password, .token]
        }
    }

    /// `emby, jellyfin, plex`: what a config file or `server add` may say.
    public static var spellings: String { allCases.map(\.rawValue).sorted().joined(separator: ", ") }

    /// The kind a config file or command line names; nil for anything else.
    public init?(named text: String) { self.init(rawValue: text) }
}
