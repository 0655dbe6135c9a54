/// The modes of the data dir and what it holds. Everything is its owner's alone (the index and
/// its log, backups and write-ahead files list every film stored; partial copies; the log; the
/// device id), except what lets the members of `[access] control_group` reach the daemon: they
/// may enter the data dir without listing it, read the lock (which names the daemon and its
/// mount) and connect to the control socket. Nothing is ever open to others.
public struct DataDirModes: Sendable, Hashable {
    /// A control group shares the daemon.
    public var shared: Bool

    public init(shared: Bool) { self.shared = shared }

    public init(_ policy: AccessPolicy) { shared = policy.controlGroup != nil }

    public var directory: UInt32 { shared ? 0o710 : 0o700 }
    public var socket: UInt32 { shared ? 0o660 : 0o600 }
    public var lock: UInt32 { shared ? 0o640 : 0o600 }
    /// The index, its `-wal`, `-shm` and backups, the log: never shared.
    public static let privateFile: UInt32 = 0o600
}
