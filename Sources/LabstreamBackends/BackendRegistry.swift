import LabstreamCore

/// The one place a server kind becomes a client. Exhaustive: a new `BackendKind` does not
/// compile until it has a client here.
public enum BackendRegistry {
    public static func client(
        _ kind: BackendKind, session: ServerSession, identity: ClientIdentity,
        transport: any HTTPTransport
    ) -> any MediaBackend {
        switch kind {
        case .jellyfin: MediaBrowserClient(flavor: .jellyfin, session: session, identity: identity, transport: transport)
        case .emby: MediaBrowserClient(flavor: .emby, session: session, identity: identity, transport: transport)
        case .plex: PlexClient(session: session, identity: identity, transport: transport)
        case .silo: SiloClient(session: session, identity: identity, transport: transport)
        }
    }
}
