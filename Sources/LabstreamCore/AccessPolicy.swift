/// Who asks the daemon for something, as the way in saw them: a FUSE request's process, a
/// control socket's peer (SO_PEERCRED and the group database), an HTTP client's credentials.
/// A plain value, so every door hands the same thing to `AccessPolicy`.
public struct Caller: Sendable, Hashable, Codable {
    public var uid: UInt32
    /// The primary group.
    public var gid: UInt32
    /// Supplementary groups.
    public var groups: [UInt32]

    public init(uid: UInt32, gid: UInt32, groups: [UInt32] = []) {
        self.uid = uid
        self.gid = gid
        self.groups = groups
    }

    public func isMember(of gid: UInt32) -> Bool { self.gid == gid || groups.contains(gid) }
}

/// Who may change what a mount holds: reading follows the mount's own options (`allow_other`,
/// `default_permissions`, `uid=`/`gid=`/`umask=`) and the door's (the socket's mode); a change —
/// a pin, unpin, cancel, pause, resume, retry, priority, monitor, sync — is for the daemon's
/// user, root and the members of `[access] control_group`, whichever way it comes in.
public struct AccessPolicy: Sendable, Hashable {
    /// `[access] control_group`, resolved by the daemon from the group database.
    public struct Group: Sendable, Hashable, Codable {
        public var name: String
        public var gid: UInt32

        public init(name: String, gid: UInt32) {
            self.name = name
            self.gid = gid
        }
    }

    public enum Kind: Sendable, Hashable { case read, change }

    public enum Allowance: Sendable, Hashable { case reading, daemonUser, root, controlGroup }

    public enum Decision: Sendable, Hashable {
        case allowed(Allowance)
        case refused(Refusal)
    }

    /// A refused change: a code and what the sentence names; words are made only by `sentence`.
    public struct Refusal: Sendable, Hashable, Codable {
        public enum Code: String, Sendable, Hashable, Codable {
            /// A control group is configured and the caller is not in it.
            case notInControlGroup = "not_in_control_group"
            /// No control group is configured: only the daemon's user and root may.
            case noControlGroup = "no_control_group"
        }

        public var code: Code
        public var daemonUID: UInt32
        public var group: String?

        public init(code: Code, daemonUID: UInt32, group: String?) {
            self.code = code
            self.daemonUID = daemonUID
            self.group = group
        }

        /// What happened and what to do about it.
        public var sentence: String {
            // A daemon run as root has no other user to name.
            let owners = daemonUID == 0 ? "root" : "its daemon's user (uid \(daemonUID)) and root"
            switch code {
            case .notInControlGroup:
                let name = group ?? "?"
                return "changing what this Labstream mount holds is for \(owners) and the members of group '\(name)', "
                    + "and you are not in '\(name)'; ask the mount's owner to add you (usermod -aG \(name) YOUR-USER), then log in again"
            case .noControlGroup:
                return "changing what this Labstream mount holds is for \(owners) only; ask the mount's owner to "
                    + "set `control_group = GROUP` in the [access] section of labstream.conf, add you to that group and mount again"
            }
        }
    }

    public var daemonUID: UInt32
    public var controlGroup: Group?

    public init(daemonUID: UInt32, controlGroup: Group? = nil) {
        self.daemonUID = daemonUID
        self.controlGroup = controlGroup
    }

    public func decide(_ caller: Caller, _ kind: Kind) -> Decision {
        if kind == .read { return .allowed(.reading) }
        if caller.uid == daemonUID { return .allowed(.daemonUser) }
        if caller.uid == 0 { return .allowed(.root) }
        guard let group = controlGroup else { return .refused(Refusal(code: .noControlGroup, daemonUID: daemonUID, group: nil)) }
        if caller.isMember(of: group.gid) { return .allowed(.controlGroup) }
        return .refused(Refusal(code: .notInControlGroup, daemonUID: daemonUID, group: group.name))
    }

    /// The refusal `decide` gives for a change, if any.
    public func refusal(_ caller: Caller) -> Refusal? {
        guard case .refused(let why) = decide(caller, .change) else { return nil }
        return why
    }

    /// The mount root's `user.labstream.access` (`uid=1000 group=media`): anyone who may read
    /// the mount learns from it whom to ask, and the CLI words a refused attribute write with it.
    public var attribute: String { "uid=\(daemonUID)" + (controlGroup.map { " group=\($0.name)" } ?? "") }

    /// The refusal a caller outside the policy got, from the root's `user.labstream.access`;
    /// nil when the attribute is not one.
    public static func refusal(attribute: String) -> Refusal? {
        var uid: UInt32?, group: String?
        for field in attribute.split(separator: " ") {
            let parts = field.split(separator: "=", maxSplits: 1).map(String.init)
            guard parts.count == 2 else { return nil }
            switch parts[0] {
            case "uid": uid = UInt32(parts[1])
            case "group": group = parts[1]
            default: continue  // a later release's field
            }
        }
        guard let uid else { return nil }
        return Refusal(code: group == nil ? .noControlGroup : .notInControlGroup, daemonUID: uid, group: group)
    }
}
