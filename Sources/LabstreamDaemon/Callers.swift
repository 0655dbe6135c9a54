import CLinux
import Foundation
import LabstreamCore
import LabstreamStore

/// Callers and groups as the system's user and group databases know them: what a socket's peer
/// is (SO_PEERCRED gives its uid and gid; its supplementary groups are that user's in the group
/// database, so a member just added counts at once), and what `[access] control_group` names.
extension Caller {
    /// The peer of a connected Unix socket; nil when the kernel does not say.
    public static func peer(of fd: Int32) -> Caller? {
        var uid: UInt32 = 0, gid: UInt32 = 0
        guard CLinux_peer_credentials(fd, &uid, &gid) == 0 else { return nil }
        return Caller(uid: uid, gid: gid, groups: groups(ofUID: uid, primary: gid))
    }

    /// Every group of the user `uid` in the group database (none when it has no passwd entry).
    static func groups(ofUID uid: UInt32, primary: UInt32) -> [UInt32] {
        var entry = passwd()
        var found: UnsafeMutablePointer<passwd>?
        var buffer = [CChar](repeating: 0, count: 16384)
        guard getpwuid_r(uid, &entry, &buffer, buffer.count, &found) == 0, found != nil, let name = entry.pw_name else { return [] }
        var count: Int32 = 64
        while true {
            var groups = [gid_t](repeating: 0, count: Int(count))
            let asked = count
            if getgrouplist(name, primary, &groups, &count) >= 0 { return Array(groups.prefix(Int(count))) }
            if count <= asked { return [] }  // failed for another reason than room
        }
    }
}

extension AccessPolicy {
    /// The policy of a daemon running as this process with `[access] control_group = group`;
    /// a group the system does not know is a configuration error, said with its fix.
    public static func forDaemon(controlGroup group: String?) throws(CLIError) -> AccessPolicy {
        guard let group else { return AccessPolicy(daemonUID: geteuid()) }
        var entry = Glibc.group()
        var found: UnsafeMutablePointer<Glibc.group>?
        var buffer = [CChar](repeating: 0, count: 65536)
        guard getgrnam_r(group, &entry, &buffer, buffer.count, &found) == 0, found != nil else {
            throw CLIError(
                ExitCode.config,
                "labstream.conf: [access] control_group = \(group) names no group on this machine; create it (groupadd \(group)) and add the house's users to it, or remove the line"
            )
        }
        return AccessPolicy(daemonUID: geteuid(), controlGroup: Group(name: group, gid: entry.gr_gid))
    }
}

extension DataDirModes {
    /// Gives the data dir, its lock and its log the modes of `access` (the first two in the
    /// control group when there is one), whatever an earlier release or a pre-created folder
    /// left: a 0755 data dir let anyone read its 0644 index. Only what this user owns is touched.
    static func apply(_ layout: DataLayout, _ access: AccessPolicy, log: Logger) {
        var modes = DataDirModes(access)
        let group = access.controlGroup
        // The HTTP API's token goes with the lock: a member who may change the mount may use the API.
        for (path, shared) in [(layout.root, true), (layout.lockPath, true), (layout.root + "/http.token", true), (layout.logPath, false)] {
            var st = stat()
            guard stat(path, &st) == 0, st.st_uid == geteuid() else { continue }
            if shared, modes.shared, let group, st.st_gid != group.gid, chown(path, uid_t.max, group.gid) != 0 {
                log.warn(
                    "\(path) stays its owner's alone: this user cannot give it to group \(group.name) (\(String(cString: strerror(errno)))); add it to the group"
                )
                modes.shared = false
            }
            let mode = !shared ? DataDirModes.privateFile : path == layout.root ? modes.directory : modes.lock
            if st.st_mode & 0o7777 != mode { chmod(path, mode_t(mode)) }
        }
    }
}
