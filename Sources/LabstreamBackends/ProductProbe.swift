import LabstreamCore

/// What product answers at a URL, asked only after it failed to answer as the one named: each
/// product's own public, unauthenticated route (`ServerProduct` reads the answers).
public enum ProductProbe {
    public static func whatAnswers(url: String, identity: ClientIdentity, transport: any HTTPTransport) -> BackendKind? {
        var base = url
        while base.hasSuffix("/") { base.removeLast() }
        // Silo first: it answers Jellyfin's routes too.
        if let answer = try? transport.call(SiloRequests(serverBase: base, identity: identity).systemInfo()), answer.status == 200,
            (try? JSONValue.parse(answer.body))?["api_major"].int != nil
        {
            return .silo
        }
        if let answer = try? transport.call(PlexRequests(baseURL: base, identity: identity).identityRequest()), answer.status == 200,
            (try? PlexDecode.machineIdentifier(answer.body)) != nil
        {
            return .plex
        }
        for candidate in [base, base + "/emby"] {
            guard let answer = try? transport.call(MediaBrowserRequests(flavor: .jellyfin, baseURL: candidate, identity: identity).publicInfo()),
                answer.status == 200, let j = try? JSONValue.parse(answer.body), j.isObject, j["Id"].string != nil
            else { continue }
            return ServerProduct.mediaBrowser(productName: j["ProductName"].string, fields: Set(j.object?.keys.map { $0 } ?? []))
        }
        return nil
    }

    /// `failure` as it is, or, when another product answers at `url`, a refusal naming it.
    public static func naming(_ failure: LabstreamError, asked: BackendKind, url: String, identity: ClientIdentity, transport: any HTTPTransport)
        -> LabstreamError
    {
        if case .serverUnavailable = failure { return failure }
        guard let refusal = ServerProduct.mismatch(asked: asked, found: whatAnswers(url: url, identity: identity, transport: transport), at: url)
        else { return failure }
        return .invalidArgument(refusal)
    }
}
