/// Who may use the local HTTP API: the one place that decides it, joined to the policy every
/// other way in follows (`AccessPolicy`).
///
/// On TCP anyone on the machine (or, with `allow_remote`, the network) can connect, so every
/// call needs the token (`DATA_DIR/http.token`, sent as `Authorization: Bearer TOKEN`; readable
/// by the daemon's user and, with `[access] control_group`, by that group). On a unix socket the
/// kernel names the caller: whoever the access policy lets change the mount (the daemon's user,
/// root, the control group's members) needs no token, anyone else does.
public enum APIAccess {
    public enum Peer: Sendable, Hashable {
        case tcp
        case unix(Caller)
    }

    public enum Decision: Sendable, Hashable {
        case allowed
        /// 401: no token, or not this one (the answer never says which).
        case refused(String)
    }

    public static func decide(peer: Peer, policy: AccessPolicy, authorization: String?, token: String) -> Decision {
        if case .unix(let caller) = peer, case .allowed = policy.decide(caller, .change) { return .allowed }
        guard let presented = bearer(authorization) else {
            return .refused("this API needs the token from the daemon's data directory (http.token), sent as Authorization: Bearer TOKEN")
        }
        return sameBytes(presented, token) ? .allowed : .refused("the token was refused; read it again from the daemon's data directory (http.token)")
    }

    /// The token of an `Authorization: Bearer TOKEN` header.
    static func bearer(_ header: String?) -> String? {
        guard let header, header.count > 7, header.prefix(7).lowercased() == "bearer " else { return nil }
        let token = header.dropFirst(7).trimming(" \t")
        return token.isEmpty ? nil : token
    }

    /// Compares in time that depends only on the lengths, so a guess learns nothing from how
    /// long its refusal took.
    static func sameBytes(_ a: String, _ b: String) -> Bool {
        let x = Array(a.utf8), y = Array(b.utf8)
        var diff = UInt8(x.count == y.count ? 0 : 1)
        for i in 0..<max(x.count, y.count) { diff |= (i < x.count ? x[i] : 0) ^ (i < y.count ? y[i] : 0) }
        return diff == 0
    }
}
