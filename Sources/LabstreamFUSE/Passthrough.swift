import CFuse3
import Glibc
import LabstreamCore
import LabstreamFS
import Synchronization

/// FUSE passthrough for complete files: once every byte of a file is local and checked, its
/// opens name the local copy as a backing file and the kernel reads it directly, at the disk's
/// and page cache's speed, without a request to the daemon or a copy through it.
///
/// libfuse 3.14 (Debian 12) predates passthrough (kernel 6.9, protocol 7.40), so the session's
/// request hooks add what it cannot say: FUSE_PASSTHROUGH in the INIT reply when the kernel
/// offered it, and FOPEN_PASSTHROUGH with the backing id in the reply to an OPEN that passes
/// through. Everything else libfuse sends untouched. Without the offer (older kernels, or
/// CONFIG_FUSE_PASSTHROUGH off) or the right to register backing files (CAP_SYS_ADMIN), every
/// open reads through the daemon as before.
///
/// Lock order: `modes` → `hooks`. `modes` is held across an open's reply so that the kernel
/// learns of an inode's opens in the order they were decided.
final class Passthrough: Sendable {
    struct Hooks {
        /// The INIT request, when the kernel offered passthrough.
        var initUnique: UInt64?
        /// OPEN requests not answered yet (the replies that may need patching).
        var opens: Set<UInt64> = []
        /// The backing id the open reply for a handle must carry.
        var backingFor: [UInt64: Int32] = [:]
    }

    let hooks = Mutex(Hooks())
    let modes = Mutex(KernelIOModes())
    /// Set once the INIT reply said FUSE_PASSTHROUGH; cleared if registering is refused.
    let enabled = Atomic<Bool>(false)
    /// Replies are looked at only while something may need patching.
    let watching = Atomic<Bool>(false)
    let device = Atomic<Int32>(-1)
    /// The kernel's INIT offered passthrough.
    let offered = Atomic<Bool>(false)
    /// A refused registration is logged once, not on every open.
    let refusalLogged = Atomic<Bool>(false)
    let log: @Sendable (String) -> Void

    init(log: @escaping @Sendable (String) -> Void) { self.log = log }

    /// Says at mount time how complete files will be read (called while INIT is answered).
    func announce() {
        if offered.load(ordering: .relaxed) {
            log("complete, checked files are read by the kernel directly from the local copy (FUSE passthrough)")
        } else {
            log(
                "the kernel does not offer FUSE passthrough (it needs Linux 6.9 or later with CONFIG_FUSE_PASSTHROUGH): complete files are read through the daemon"
            )
        }
    }

    /// A request arrived from the kernel (called by the session's read hook).
    func received(_ buffer: UnsafeMutableRawPointer, _ length: Int) {
        let headerSize = MemoryLayout<CFuse3_in_header>.size
        guard length >= headerSize else { return }
        let header = buffer.loadUnaligned(as: CFuse3_in_header.self)
        if header.opcode == CFuse3_OPCODE_OPEN, enabled.load(ordering: .relaxed) {
            hooks.withLock { _ = $0.opens.insert(header.unique) }
        } else if header.opcode == CFuse3_OPCODE_INIT, length >= headerSize + MemoryLayout<CFuse3_init_in>.size {
            let offer = buffer.loadUnaligned(fromByteOffset: headerSize, as: CFuse3_init_in.self)
            guard offer.flags & CFuse3_INIT_EXT != 0, offer.flags2 & CFuse3_PASSTHROUGH_FLAGS2 != 0 else { return }
            hooks.withLock { $0.initUnique = header.unique }
            offered.store(true, ordering: .relaxed)
            watching.store(true, ordering: .relaxed)
        }
    }

    /// A reply is about to be written to the kernel (called by the session's writev hook).
    func replying(_ iov: UnsafeMutablePointer<iovec>, _ count: Int) {
        guard watching.load(ordering: .relaxed), count >= 1, iov[0].iov_len >= MemoryLayout<CFuse3_out_header>.size,
            let base = iov[0].iov_base
        else { return }
        let header = base.loadUnaligned(as: CFuse3_out_header.self)
        let payload = count >= 2 && header.error == 0 ? iov[1] : nil
        hooks.withLock { h in
            if header.unique == h.initUnique {
                h.initUnique = nil
                guard let payload, payload.iov_len >= MemoryLayout<CFuse3_init_out>.size, let p = payload.iov_base else { return }
                var answer = p.loadUnaligned(as: CFuse3_init_out.self)
                answer.flags |= CFuse3_INIT_EXT
                answer.flags2 |= CFuse3_PASSTHROUGH_FLAGS2
                // Backing files on a plain filesystem (ext4, xfs, tmpfs): this mount stacks on them.
                answer.max_stack_depth = 1
                p.storeBytes(of: answer, as: CFuse3_init_out.self)
                enabled.store(true, ordering: .relaxed)
            } else if h.opens.remove(header.unique) != nil {
                guard let payload, payload.iov_len >= MemoryLayout<CFuse3_open_out>.size, let p = payload.iov_base else { return }
                var answer = p.loadUnaligned(as: CFuse3_open_out.self)
                guard let backing = h.backingFor[answer.fh] else { return }
                // The kernel refuses KEEP_CACHE with passthrough: the FUSE inode has no page cache then.
                answer.open_flags = answer.open_flags & ~CFuse3_FOPEN_KEEP_CACHE | CFuse3_FOPEN_PASSTHROUGH
                answer.backing_id = backing
                p.storeBytes(of: answer, as: CFuse3_open_out.self)
            }
        }
    }

    /// Replies to the open of `handle` on `ino` through `send` (true when the kernel took it),
    /// passing through to the local copy when the kernel's rules and the file allow it.
    /// `refuse` answers an open that must wait (`KernelIOModes.Decision.busy`).
    func replyOpen(ino: UInt64, handle: UInt64, engine: FilesystemEngine, send: () -> Bool, refuse: () -> Void) -> Bool {
        guard enabled.load(ordering: .relaxed) else { return send() }
        let version = engine.version(handle: handle) ?? ""
        return modes.withLock { modes in
            var mode = KernelIOModes.Mode.cached
            var registered: Int32?
            // Eligibility is checked only when registering: it opens the local copy.
            switch modes.decide(ino: ino, version: version, eligible: true) {
            case .cached: break
            case .reuse(let backing): mode = .passthrough(backing: backing, version: version)
            case .register:
                if let backing = register(engine.checkedLocalCopy(handle: handle)) {
                    mode = .passthrough(backing: backing, version: version)
                    registered = backing
                }
            case .busy:
                log("an open of a file whose older version is still open (read directly by the kernel) waits for that one to close (EBUSY)")
                refuse()
                return false
            }
            if case .passthrough(let backing, _) = mode { hooks.withLock { $0.backingFor[handle] = backing } }
            let delivered = send()
            hooks.withLock { _ = $0.backingFor.removeValue(forKey: handle) }
            if delivered {
                modes.opened(handle: handle, ino: ino, mode: mode)
            } else if let registered {
                _ = CFuse3_backing_close(device.load(ordering: .relaxed), registered)
            }
            return delivered
        }
    }

    /// The kernel released `handle`: the last passthrough open of an inode unregisters its backing file.
    func released(handle: UInt64) {
        guard let backing = modes.withLock({ $0.released(handle: handle) }) else { return }
        _ = CFuse3_backing_close(device.load(ordering: .relaxed), backing)
    }

    /// Registers `copy` (closed here) as a backing file; nil if there is none or the kernel refuses.
    func register(_ copy: Int32?) -> Int32? {
        guard let copy else { return nil }
        defer { close(copy) }
        let backing = CFuse3_backing_open(device.load(ordering: .relaxed), copy)
        if backing > 0 { return backing }
        let code = errno
        // Registering backing files takes CAP_SYS_ADMIN: without it, nothing will ever pass through.
        if code == EPERM { enabled.store(false, ordering: .relaxed) }
        if !refusalLogged.exchange(true, ordering: .relaxed) {
            log(
                code == EPERM
                    ? "complete files are read through the daemon: registering them with the kernel needs CAP_SYS_ADMIN (mount as root for direct reads)"
                    : "complete files are read through the daemon: the kernel refused a local copy as a backing file (\(String(cString: strerror(code))))")
        }
        return nil
    }
}
