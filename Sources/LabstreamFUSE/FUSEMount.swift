import CFuse3
import Foundation
import LabstreamCore
import LabstreamFS
import Synchronization

/// The kernel may handle opendir and releasedir itself (FUSE_CAP_NO_OPENDIR_SUPPORT): then a
/// directory costs no round trip to open or close, and its listing stays in the kernel's cache.
private let kernelOpensDirectories = Atomic<Bool>(false)

/// The kernel adapter: the only module that imports libfuse. Each handler decodes a request,
/// calls the filesystem engine, and replies exactly once (low-level API, multi-threaded loop).
public final class FUSEMount: @unchecked Sendable {
    // Written once in init, read-only afterwards.
    let engine: FilesystemEngine
    public let mountpoint: String
    let session: OpaquePointer
    let context: Unmanaged<MountContext>
    /// Attribute notices go out from here, never from a request handler.
    let attributeQueue = DispatchQueue(label: "labstream.fuse.attributes")
    /// False once the session is gone: a late notice is dropped, not sent to freed memory.
    let sessionLive = Mutex<Bool>(true)

    /// Mounts `engine` at `mountpoint`, read-only. `options` are extra `-o` options for libfuse
    /// (e.g. `allow_other`, `default_permissions`, `ro`: `MountOptions.fuseOptions`).
    public init(engine: FilesystemEngine, mountpoint: String, options: [String] = []) throws(LabstreamError) {
        self.engine = engine
        self.mountpoint = mountpoint
        // The kernel's `ro` only when asked (`-o ro`, `MountOptions.readOnly`): it refuses
        // `setfattr -n user.labstream.pin` too. Every other write is refused here, with EROFS.
        let allOptions = (["fsname=labstream", "subtype=labstream"] + options).joined(separator: ",")
        let argv = ["labstream", "-o", allOptions]
        var cArgs = argv.map { strdup($0) }
        defer { cArgs.forEach { free($0) } }
        var ops = fuse_lowlevel_ops()
        Self.install(&ops)
        let context = Unmanaged.passRetained(MountContext(engine: engine))
        self.context = context
        let created: OpaquePointer? = cArgs.withUnsafeMutableBufferPointer { buf in
            var args = fuse_args(argc: Int32(buf.count), argv: buf.baseAddress, allocated: 0)
            defer { fuse_opt_free_args(&args) }
            return fuse_session_new(&args, &ops, MemoryLayout<fuse_lowlevel_ops>.size, context.toOpaque())
        }
        guard let created else {
            context.release()
            throw .invalidArgument("libfuse rejected the mount options '\(allOptions)'")
        }
        session = created
        guard fuse_session_mount(session, mountpoint) == 0 else {
            fuse_session_destroy(session)
            context.release()
            throw .permission("cannot mount at \(mountpoint): is it an existing empty directory, is /dev/fuse available, and is nothing else mounted there?")
        }
        // Requests and replies pass through Passthrough's hooks, which add what libfuse 3.14
        // cannot negotiate (see Passthrough).
        var io = fuse_custom_io()
        io.read = { fd, buffer, length, userdata in
            let n = Glibc.read(fd, buffer, length)
            if n > 0, let buffer, let userdata { Unmanaged<MountContext>.fromOpaque(userdata).takeUnretainedValue().passthrough.received(buffer, n) }
            return n
        }
        io.writev = { fd, iov, count, userdata in
            if let iov, let userdata { Unmanaged<MountContext>.fromOpaque(userdata).takeUnretainedValue().passthrough.replying(iov, Int(count)) }
            return Glibc.writev(fd, iov, count)
        }
        if fuse_session_custom_io(session, &io, fuse_session_fd(session)) != 0 {
            writeToStderr("labstream: libfuse refused the request hooks; complete files are read through the daemon")
        }
        context.takeUnretainedValue().passthrough.device.store(fuse_session_fd(session), ordering: .relaxed)
    }

    /// Has the kernel drop its cached entry for `name` in `parent` (a catalog reload changed it).
    /// With an empty `name`, `parent` is itself the inode whose cached data and attributes go
    /// (a file replaced by a new version).
    /// A reload can come after the loop ended (a sync the server's event channel asked for while
    /// the mount went away): the session is gone then, and the kernel has nothing left to drop.
    public func invalidate(parent: UInt64, name: String) {
        sessionLive.withLock { live in
            guard live else { return }
            if !name.isEmpty { _ = fuse_lowlevel_notify_inval_entry(session, fuse_ino_t(parent), name, name.utf8.count) }
            // The directory's cached listing (cache_readdir) goes with it.
            _ = fuse_lowlevel_notify_inval_inode(session, fuse_ino_t(parent), 0, 0)
        }
    }

    /// Has the kernel drop only the cached attributes of `ino` (its stored bytes changed), never
    /// its cached pages. Sent from its own queue: never from inside a request on that inode.
    public func invalidateAttributes(_ ino: UInt64) {
        attributeQueue.async { [self] in
            sessionLive.withLock { live in if live { _ = fuse_lowlevel_notify_inval_inode(session, fuse_ino_t(ino), -1, 0) } }
        }
    }

    /// Runs the request loop on the calling thread until the filesystem is unmounted.
    public func run(maxThreads: UInt32 = 64) -> Int32 {
        let config = fuse_loop_cfg_create()
        fuse_loop_cfg_set_max_threads(config, maxThreads)
        fuse_loop_cfg_set_idle_threads(config, 8)
        let rc = fuse_session_loop_mt(session, config)
        fuse_loop_cfg_destroy(config)
        sessionLive.withLock { $0 = false }
        fuse_session_unmount(session)
        fuse_session_destroy(session)
        context.release()
        return rc
    }

    /// Asks the loop to stop and detaches the mount; safe from any thread but the loop's.
    public func requestUnmount() {
        fuse_session_exit(session)
        Self.unmount(mountpoint)
    }

    /// Unmounts whatever is at `path` (root: umount2; others: fusermount3).
    @discardableResult
    public static func unmount(_ path: String) -> Bool {
        if geteuid() == 0 { return umount2(path, Int32(MNT_DETACH)) == 0 }
        let p = Process()
        p.executableURL = URL(fileURLWithPath: "/bin/fusermount3")
        p.arguments = ["-u", "-z", path]
        p.standardError = FileHandle.nullDevice
        guard (try? p.run()) != nil else { return false }
        p.waitUntilExit()
        return p.terminationStatus == 0
    }

    // MARK: - Handlers

    static func install(_ ops: inout fuse_lowlevel_ops) {
        ops.`init` = { userdata, conn in
            guard let conn else { return }
            if let userdata { Unmanaged<MountContext>.fromOpaque(userdata).takeUnretainedValue().passthrough.announce() }
            // Let the kernel keep many reads in flight.
            conn.pointee.max_background = 64
            conn.pointee.congestion_threshold = 48
            // readdirplus for every chunk of a listing, not only the first: a folder listed in a
            // later chunk would otherwise cost a LOOKUP when `find` enters it.
            conn.pointee.want &= ~UInt32(FUSE_CAP_READDIRPLUS_AUTO)
            // An NFS export of the mount: the kernel may look nodes up by number ("." and "..").
            conn.pointee.want |= conn.pointee.capable & UInt32(FUSE_CAP_EXPORT_SUPPORT)
            kernelOpensDirectories.store(conn.pointee.capable & UInt32(FUSE_CAP_NO_OPENDIR_SUPPORT) != 0, ordering: .relaxed)
        }
        ops.lookup = { req, parent, name in
            let n = String(cString: name!)
            do {
                replyEntry(req, try fs(req).lookup(parent: UInt64(parent), name: n))
            } catch LabstreamError.notFound {
                // A negative entry lets the kernel cache the miss.
                var e = fuse_entry_param()
                e.entry_timeout = cacheSeconds(req)
                fuse_reply_entry(req, &e)
            } catch {
                replyError(req, error)
            }
        }
        ops.getattr = { req, ino, _ in
            do {
                var st = makeStat(try fs(req).getattr(UInt64(ino)))
                fuse_reply_attr(req, &st, cacheSeconds(req))
            } catch { replyError(req, error) }
        }
        ops.opendir = { req, ino, fi in
            guard let fi else { fuse_reply_err(req, EINVAL); return }
            do {
                let engine = fs(req)
                // Listings change only when the catalog does (and the kernel is then told), so the
                // kernel may open, list and cache directories on its own — unless what is shown
                // depends on which servers answer.
                if engine.offlineView == .all && kernelOpensDirectories.load(ordering: .relaxed) {
                    fuse_reply_err(req, ENOSYS)
                    return
                }
                fi.pointee.fh = try engine.openDirectory(UInt64(ino))
                // A kernel that opens no directories itself may still cache this listing.
                if engine.offlineView == .all {
                    fi.pointee.cache_readdir = 1
                    fi.pointee.keep_cache = 1
                }
                if fuse_reply_open(req, fi) != 0 { engine.releaseDirectory(fi.pointee.fh) }
            } catch { replyError(req, error) }
        }
        ops.readdir = { req, ino, size, off, fi in
            replyDirectory(req, ino, size, off, fi) { engine, entry, buffer, room, next in
                var st = Glibc.stat()
                st.st_ino = UInt(entry.ino)
                st.st_mode = entry.isDirectory ? 0o040000 : 0o100000
                return fuse_add_direntry(req, buffer, room, entry.name, &st, next)
            }
        }
        // readdirplus answers each name with its attributes, sparing the kernel a lookup per entry
        // (`find` and `ls -l` over a large library).
        ops.readdirplus = { req, ino, size, off, fi in
            replyDirectory(req, ino, size, off, fi) { engine, entry, buffer, room, next in
                var e = fuse_entry_param()
                if entry.name == "." || entry.name == ".." {
                    e.attr.st_ino = UInt(entry.ino)  // no lookup count for these
                    e.attr.st_mode = entry.isDirectory ? 0o040000 : 0o100000
                } else if let attributes = try? engine.getattr(entry.ino) {
                    e.ino = fuse_ino_t(attributes.ino)
                    e.generation = 1
                    e.attr = makeStat(attributes)
                    e.attr_timeout = cacheSeconds(req)
                    e.entry_timeout = cacheSeconds(req)
                } else {
                    return nil  // gone since the listing was taken
                }
                return fuse_add_direntry_plus(req, buffer, room, entry.name, &e, next)
            }
        }
        ops.releasedir = { req, _, fi in
            if let fi { fs(req).releaseDirectory(fi.pointee.fh) }
            fuse_reply_err(req, 0)
        }
        ops.open = { req, ino, fi in
            guard let fi else { fuse_reply_err(req, EINVAL); return }
            let flags = fi.pointee.flags & O_ACCMODE
            do {
                let engine = fs(req)
                let handle = try engine.open(UInt64(ino), writeRequested: flags != O_RDONLY)
                fi.pointee.fh = handle
                // Complete files never change under an attempt: let the page cache keep them.
                if engine.isFullyLocal(handle: handle) { fi.pointee.keep_cache = 1 }
                let delivered = mountContext(req).passthrough.replyOpen(
                    ino: UInt64(ino), handle: handle, engine: engine,
                    send: { fuse_reply_open(req, fi) == 0 },
                    refuse: { fuse_reply_err(req, EBUSY) })
                if !delivered { engine.release(handle: handle) }
            } catch { replyError(req, error) }
        }
        ops.read = { req, _, size, off, fi in
            guard let fi else { fuse_reply_err(req, EBADF); return }
            do {
                let bytes = try fs(req).read(handle: fi.pointee.fh, offset: Int64(off), size: size)
                bytes.withUnsafeBufferPointer { b in
                    _ = fuse_reply_buf(req, b.baseAddress.map { UnsafeRawPointer($0).assumingMemoryBound(to: CChar.self) }, b.count)
                }
            } catch { replyError(req, error) }
        }
        ops.release = { req, _, fi in
            if let fi {
                mountContext(req).passthrough.released(handle: fi.pointee.fh)
                fs(req).release(handle: fi.pointee.fh)
            }
            fuse_reply_err(req, 0)
        }
        ops.getxattr = { req, ino, name, size in
            do {
                let value = Array(try fs(req).getxattr(UInt64(ino), name: String(cString: name!)).utf8)
                replyXattr(req, value, size)
            } catch { replyError(req, error) }
        }
        ops.listxattr = { req, ino, size in
            do {
                var names: [UInt8] = []
                for (name, _) in try fs(req).xattrs(UInt64(ino)) { names += Array(name.utf8) + [0] }
                replyXattr(req, names, size)
            } catch { replyError(req, error) }
        }
        ops.setxattr = { req, ino, name, value, size, _ in
            let bytes = value.map { Array(UnsafeRawBufferPointer(start: $0, count: size)) } ?? []
            do {
                try fs(req).setxattr(UInt64(ino), name: String(cString: name!), value: bytes, caller: caller(req))
                fuse_reply_err(req, 0)
            } catch { replyError(req, error) }
        }
        ops.removexattr = { req, _, _ in fuse_reply_err(req, EPERM) }
        // The tree is read-only: every operation that would change it answers EROFS.
        ops.setattr = { req, _, _, _, _ in fuse_reply_err(req, EROFS) }
        ops.mknod = { req, _, _, _, _ in fuse_reply_err(req, EROFS) }
        ops.mkdir = { req, _, _, _ in fuse_reply_err(req, EROFS) }
        ops.unlink = { req, _, _ in fuse_reply_err(req, EROFS) }
        ops.rmdir = { req, _, _ in fuse_reply_err(req, EROFS) }
        ops.symlink = { req, _, _, _ in fuse_reply_err(req, EROFS) }
        ops.rename = { req, _, _, _, _, _ in fuse_reply_err(req, EROFS) }
        ops.link = { req, _, _, _ in fuse_reply_err(req, EROFS) }
        ops.create = { req, _, _, _, _ in fuse_reply_err(req, EROFS) }
        ops.write = { req, _, _, _, _, _ in fuse_reply_err(req, EROFS) }
        ops.fallocate = { req, _, _, _, _, _ in fuse_reply_err(req, EROFS) }
        ops.statfs = { req, _ in
            var s = statvfs()
            s.f_bsize = 4096
            s.f_frsize = 4096
            s.f_namemax = 255
            s.f_files = UInt(fs(req).fileCount)
            fuse_reply_statfs(req, &s)
        }
    }

}

/// Seconds the kernel may cache names and attributes. Every catalog change is told to the
/// kernel (entries and inodes invalidated on reload), so with `offline_view=all` they may stay
/// long; with `offline_view=local` what is shown also follows which servers answer, which the
/// kernel is not told, so they go stale soon.
private func cacheSeconds(_ req: fuse_req_t?) -> Double { fs(req).offlineView == .all ? 600 : 10 }

/// What every request handler reaches through libfuse's userdata.
final class MountContext: Sendable {
    let engine: FilesystemEngine
    let passthrough: Passthrough
    init(engine: FilesystemEngine) {
        self.engine = engine
        passthrough = Passthrough(log: engine.transfers.log)
    }
}

private func mountContext(_ req: fuse_req_t?) -> MountContext {
    Unmanaged<MountContext>.fromOpaque(fuse_req_userdata(req)!).takeUnretainedValue()
}

private func fs(_ req: fuse_req_t?) -> FilesystemEngine { mountContext(req).engine }

/// Who sent `req`: its process's uid and gid, and its supplementary groups as libfuse reads them
/// from /proc (none when it cannot: a process already gone, another pid namespace — the policy
/// then judges by uid and primary group alone, which can only refuse more).
private func caller(_ req: fuse_req_t?) -> Caller {
    let ctx = fuse_req_ctx(req)!.pointee
    var groups = [gid_t](repeating: 0, count: 64)
    var count = fuse_req_getgroups(req, Int32(groups.count), &groups)
    if count > Int32(groups.count) {
        groups = [gid_t](repeating: 0, count: Int(count))
        count = fuse_req_getgroups(req, Int32(groups.count), &groups)
    }
    return Caller(uid: ctx.uid, gid: ctx.gid, groups: Array(groups.prefix(Int(max(0, min(count, Int32(groups.count)))))))
}

private func replyError(_ req: fuse_req_t?, _ error: any Error) {
    fuse_reply_err(req, ErrnoMap.errno(for: error))
}

private func makeStat(_ a: FilesystemEngine.Attributes) -> stat {
    var st = Glibc.stat()
    st.st_ino = UInt(a.ino)
    st.st_mode = a.mode
    st.st_nlink = UInt(a.nlink)
    st.st_size = Int(a.size)
    st.st_blksize = 4096
    st.st_blocks = Int((a.storedBytes + 511) / 512)
    st.st_uid = a.uid
    st.st_gid = a.gid
    st.st_mtim = timespec(tv_sec: Int(a.mtime), tv_nsec: 0)
    st.st_ctim = st.st_mtim
    st.st_atim = st.st_mtim
    return st
}

/// Fills one readdir(plus) reply from the handle's listing, from offset `off`, as many entries
/// as fit. `add` encodes one entry (nil skips it) and returns the bytes it needs.
private func replyDirectory(
    _ req: fuse_req_t?, _ ino: fuse_ino_t, _ size: Int, _ off: off_t, _ fi: UnsafeMutablePointer<fuse_file_info>?,
    _ add: (FilesystemEngine, FilesystemEngine.DirectoryEntry, UnsafeMutablePointer<CChar>, Int, off_t) -> Int?
) {
    do {
        let engine = fs(req)
        let entries = try fi.flatMap { engine.listing($0.pointee.fh) } ?? engine.listing(ofDirectory: UInt64(ino))
        var buffer = [CChar](repeating: 0, count: size)
        var used = 0
        var index = Int(off)
        while index < entries.count {
            let needed = buffer.withUnsafeMutableBufferPointer { b in add(engine, entries[index], b.baseAddress! + used, size - used, off_t(index + 1)) }
            guard let needed else { index += 1; continue }
            if used + needed > size { break }
            used += needed
            index += 1
        }
        fuse_reply_buf(req, buffer, used)
    } catch { replyError(req, error) }
}

private func replyEntry(_ req: fuse_req_t?, _ a: FilesystemEngine.Attributes) {
    var e = fuse_entry_param()
    e.ino = fuse_ino_t(a.ino)
    e.generation = 1
    e.attr = makeStat(a)
    e.attr_timeout = cacheSeconds(req)
    e.entry_timeout = cacheSeconds(req)
    fuse_reply_entry(req, &e)
}

private func replyXattr(_ req: fuse_req_t?, _ value: [UInt8], _ size: Int) {
    if size == 0 {
        fuse_reply_xattr(req, value.count)
    } else if size < value.count {
        fuse_reply_err(req, ERANGE)
    } else {
        value.withUnsafeBufferPointer { b in _ = fuse_reply_buf(req, b.baseAddress.map { UnsafeRawPointer($0).assumingMemoryBound(to: CChar.self) }, b.count) }
    }
}
