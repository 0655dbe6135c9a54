/// What must hold before Labstream mounts, and the one line that says what to do when it does
/// not. Pure: the caller gathers the facts.
public enum MountPreflight {
    public enum DeviceAccess: Sendable, Hashable { case usable, missing, denied }

    public struct Facts: Sendable, Hashable {
        public var mountpoint: String
        public var isDirectory: Bool
        /// Names in the directory (a mountpoint must be empty).
        public var entries: [String]
        /// The filesystem type already mounted there, if any.
        public var mountedType: String?
        public var device: DeviceAccess
        public var allowOther: Bool
        public var euid: UInt32
        /// `/etc/fuse.conf`, when readable.
        public var fuseConf: String?

        public init(
            mountpoint: String, isDirectory: Bool = true, entries: [String] = [], mountedType: String? = nil,
            device: DeviceAccess = .usable, allowOther: Bool = false, euid: UInt32 = 0, fuseConf: String? = nil
        ) {
            self.mountpoint = mountpoint
            self.isDirectory = isDirectory
            self.entries = entries
            self.mountedType = mountedType
            self.device = device
            self.allowOther = allowOther
            self.euid = euid
            self.fuseConf = fuseConf
        }
    }

    public enum Problem: Sendable, Hashable {
        case notADirectory, notEmpty, alreadyMounted, noDevice, deviceDenied, allowOtherNotPermitted
    }

    public static func check(_ f: Facts) -> (Problem, String)? {
        let mp = f.mountpoint
        if let type = f.mountedType {
            if type == "fuse.labstream" { return (.alreadyMounted, "\(mp) is already a Labstream mount; unmount it first with: labstream unmount \(mp)") }
            return (.alreadyMounted, "\(mp) is already a mount point (\(type)); unmount it first or give another empty directory")
        }
        if !f.isDirectory { return (.notADirectory, "the mountpoint \(mp) is not a directory; give an empty directory") }
        if !f.entries.isEmpty {
            return (
                .notEmpty,
                "the mountpoint \(mp) is not empty (\(f.entries.count) \(f.entries.count == 1 ? "entry" : "entries")); mounting would hide them: give an empty directory"
            )
        }
        switch f.device {
        case .missing:
            return (.noDevice, "/dev/fuse does not exist: load the fuse module (modprobe fuse), or give the container --device /dev/fuse")
        case .denied:
            return (.deviceDenied, "no permission to open /dev/fuse: run as root, or add your user to the group that owns /dev/fuse")
        case .usable: break
        }
        if f.allowOther && f.euid != 0 && !permitsAllowOther(f.fuseConf ?? "") {
            return (.allowOtherNotPermitted, "allow_other needs a 'user_allow_other' line in /etc/fuse.conf when not run as root; add it, or drop allow_other")
        }
        return nil
    }

    /// An uncommented `user_allow_other` line.
    static func permitsAllowOther(_ conf: String) -> Bool {
        conf.split(separator: "\n").contains {
            $0.split(separator: "#", maxSplits: 1, omittingEmptySubsequences: false).first?
                .trimming(" \t\r") == "user_allow_other"
        }
    }
}

extension Substring {
    func trimming(_ set: String) -> String { String(self).trimming(set) }
}
