/// `-o` options of `labstream mount`, parsed and checked before anything is mounted.
public struct MountOptions: Sendable, Hashable {
    public var allowOther = false
    public var defaultPermissions = false
    /// `ro`: the kernel mount itself is read-only. The kernel then keeps a folder's attributes
    /// after listing it (on a writable FUSE mount it marks the folder's atime stale at every
    /// listing it fetches, so the next walk asks the daemon once per folder), but it also refuses
    /// every attribute write: pins go through `labstream pin` (the daemon's control socket) only.
    public var readOnly = false
    public var uid: UInt32?
    public var gid: UInt32?
    public var umask: UInt32 = 0o022
    /// While a server is unreachable: show its whole tree (`all`) or only files with local bytes (`local`).
    public var offlineView: OfflineView = .all

    public enum OfflineView: String, Sendable, Hashable {
        case all, local
    }

    /// mount(8)-style overrides: where the config and data live, and cache settings.
    public var configDir: String?
    public var dataDir: String?
    public var segmentSize: Int64?
    public var cacheMax: Int64?
    public var rateLimit: Int64?

    public init() {}

    public struct Invalid: Error, Sendable, Equatable {
        public let message: String
        public init(message: String) { self.message = message }
    }

    /// Options a mount(8) line carries that mean nothing to Labstream.
    /// mount(8) and mount.fuse3 add some of these themselves.
    static let ignored: Set<String> = [
        "defaults", "_netdev", "nofail", "noauto", "auto", "user", "users",
        "nosuid", "nodev", "noexec", "suid", "dev", "exec", "async",
        "atime", "noatime", "relatime", "strictatime", "nodiratime", "lazytime"
    ]

    public static func parse(_ lists: [String]) throws(Invalid) -> MountOptions {
        var o = MountOptions()
        for list in lists {
            for raw in list.split(separator: ",") {
                let option = String(raw)
                let (name, value): (String, String?) = {
                    guard let eq = option.firstIndex(of: "=") else { return (option, nil) }
                    return (String(option[..<eq]), String(option[option.index(after: eq)...]))
                }()
                switch name {
                case "allow_other": o.allowOther = true
                case "default_permissions": o.defaultPermissions = true
                case "ro": o.readOnly = true
                case "uid":
                    guard let v = value.flatMap({ UInt32($0) }) else { throw Invalid(message: "uid= needs a numeric user id") }
                    o.uid = v
                case "gid":
                    guard let v = value.flatMap({ UInt32($0) }) else { throw Invalid(message: "gid= needs a numeric group id") }
                    o.gid = v
                case "umask":
                    guard let v = value.flatMap({ UInt32($0, radix: 8) }), v <= 0o777 else { throw Invalid(message: "umask= needs an octal mask such as 022") }
                    o.umask = v
                case "offline_view":
                    guard let v = value.flatMap(OfflineView.init(rawValue:)) else { throw Invalid(message: "offline_view= takes all or local") }
                    o.offlineView = v
                case "config", "data":
                    guard let v = value, v.hasPrefix("/") else { throw Invalid(message: "\(name)= needs an absolute path") }
                    if name == "config" { o.configDir = v } else { o.dataDir = v }
                case "segment_size", "cache_max":
                    guard let v = value.flatMap(LabstreamConfig.parseSize) else { throw Invalid(message: "\(name)= needs a size such as 16M") }
                    if name == "segment_size" {
                        guard v >= TransferSizes.mebibyte, v <= 512 * TransferSizes.mebibyte else {
                            throw Invalid(message: "segment_size= must be between 1M and 512M")
                        }
                        o.segmentSize = v
                    } else {
                        o.cacheMax = v
                    }
                case "rate_limit":
                    guard let v = value.flatMap(LabstreamConfig.parseSize) else {
                        throw Invalid(message: "rate_limit= needs bytes per second such as 10M (0: unlimited)")
                    }
                    o.rateLimit = v
                case "rw":
                    throw Invalid(message: "the Labstream mount is read-only; remove 'rw'")
                default:
                    if ignored.contains(name) || name.hasPrefix("x-systemd.") { continue }
                    throw Invalid(message: "unknown mount option '\(name)'")
                }
            }
        }
        return o
    }

    /// Options handed to libfuse.
    public var fuseOptions: [String] {
        var out: [String] = []
        if allowOther { out.append("allow_other") }
        if defaultPermissions { out.append("default_permissions") }
        if readOnly { out.append("ro") }
        return out
    }
}
