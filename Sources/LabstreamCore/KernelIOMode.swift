/// How the kernel reads each open file: through the daemon (`cached`: READ requests, the FUSE
/// inode's page cache) or straight from the local copy (`passthrough`: the kernel reads a backing
/// file the daemon registered, and the daemon never sees the reads).
///
/// The kernel enforces two rules per inode, and breaking either makes the open fail with EIO:
/// an inode open in one mode cannot be opened in the other, and every passthrough open of an
/// inode must name the same backing file. The daemon learns of a close only when RELEASE arrives,
/// after the kernel has already let go, so counting opens here errs on the side of "still open"
/// in both directions, which is the safe side.
public struct KernelIOModes: Sendable {
    public enum Mode: Sendable, Hashable {
        case cached
        /// `version`: the version of the file the backing copy holds.
        case passthrough(backing: Int32, version: String)
    }

    public enum Decision: Sendable, Hashable {
        /// Read through the daemon.
        case cached
        /// Pass through to the backing file the inode's open handles already use.
        case reuse(backing: Int32)
        /// Register the local copy as a new backing file, then pass through to it.
        case register
        /// The inode's open handles pass through to another version of the file: the kernel
        /// allows neither a second backing file nor a read through the daemon, and the old
        /// version would be served under the new one's size. The open must wait for them to close.
        case busy
    }

    struct Inode: Sendable {
        var cached = 0
        var passthrough = 0
        var backing: (id: Int32, version: String)?
    }

    var inodes: [UInt64: Inode] = [:]
    var handles: [UInt64: (ino: UInt64, mode: Mode)] = [:]

    public init() {}

    /// The mode for a new open of `ino` at `version`. `eligible`: the whole file is local and
    /// checked, so the kernel may read it without the daemon.
    public func decide(ino: UInt64, version: String, eligible: Bool) -> Decision {
        let inode = inodes[ino] ?? Inode()
        if inode.passthrough > 0, let backing = inode.backing {
            return backing.version == version ? .reuse(backing: backing.id) : .busy
        }
        if inode.cached > 0 || !eligible { return .cached }
        return .register
    }

    /// Records an open the kernel was told about.
    public mutating func opened(handle: UInt64, ino: UInt64, mode: Mode) {
        handles[handle] = (ino, mode)
        var inode = inodes[ino] ?? Inode()
        switch mode {
        case .cached: inode.cached += 1
        case .passthrough(let backing, let version):
            inode.passthrough += 1
            inode.backing = (backing, version)
        }
        inodes[ino] = inode
    }

    /// Forgets a released (or never delivered) open. Returns the backing file to unregister when
    /// this was the inode's last passthrough open.
    public mutating func released(handle: UInt64) -> Int32? {
        guard let (ino, mode) = handles.removeValue(forKey: handle), var inode = inodes[ino] else { return nil }
        var unregister: Int32?
        switch mode {
        case .cached: inode.cached -= 1
        case .passthrough:
            inode.passthrough -= 1
            if inode.passthrough == 0 {
                unregister = inode.backing?.id
                inode.backing = nil
            }
        }
        inodes[ino] = inode.cached == 0 && inode.passthrough == 0 ? nil : inode
        return unregister
    }

    /// The mode a handle was opened in.
    public func mode(of handle: UInt64) -> Mode? { handles[handle]?.mode }
}
