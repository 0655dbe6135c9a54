import CLinux
import LabstreamCore

#if canImport(Glibc)
    import Glibc
#endif

/// A sparse file holding whatever bytes of a remote file are present, at their own offsets.
/// Which bytes are trustworthy is the index's range map, never the file itself.
public final class PartialFile: Sendable {
    public let path: String
    let fd: Int32

    public init(path: String, size: Int64) throws(LabstreamError) {
        self.path = path
        let fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0o600)
        guard fd >= 0 else { throw .storage("cannot open partial \(path): \(String(cString: strerror(errno)))") }
        var st = stat()
        fstat(fd, &st)
        // Grown to `size`, never cut: bytes past it may belong to a fetch still writing them.
        if Int64(st.st_size) < size && ftruncate(fd, off_t(size)) != 0 {
            close(fd)
            throw .storage("cannot size partial \(path): \(String(cString: strerror(errno)))")
        }
        self.fd = fd
    }

    deinit { close(fd) }

    /// Writers of one file take turns (`FileTransfer.writeGate`; the other writers are alone on
    /// theirs), so the copy `unshare` makes cannot race a write.
    public func write(_ bytes: UnsafeRawBufferPointer, at offset: Int64) throws(LabstreamError) {
        try unshare()
        do { try pwriteAll(fd, bytes, at: offset, context: path) } catch {
            if error.code == ENOSPC || error.code == EDQUOT { throw .noSpace("writing \(path)") }
            throw .storage(error.description)
        }
    }

    /// Whether another name in the data dir is this file too: a copy shared with another server's
    /// row (`OfflineIndex.shareCopy`), whose bytes must never change under it.
    public var isShared: Bool {
        var st = stat()
        return fstat(fd, &st) == 0 && st.st_nlink > 1
    }

    /// Copy on write: before a shared file is written (its row dropped a damaged segment and
    /// fetches it again), this name moves to a copy of its own, made durable first, so the other
    /// row's bytes never change. As in `discardAll`, the descriptor is moved to the copy.
    func unshare() throws(LabstreamError) {
        var st = stat()
        guard fstat(fd, &st) == 0, st.st_nlink > 1 else { return }
        let fresh = path + ".fresh"
        do throws(SyscallError) {
            let next = try syscall("open", fresh) { open(fresh, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600) }
            defer { close(next) }
            do throws(SyscallError) {
                try Self.copy(fd, to: next, size: Int64(st.st_size), context: path)
                try syscall("ftruncate", fresh) { ftruncate(next, st.st_size) }
                try syscall("fdatasync", fresh) { fdatasync(next) }
                try syscall("rename", fresh) { rename(fresh, path) }
            } catch {
                unlink(fresh)
                throw error
            }
            try syscall("dup3", path) { CLinux_dup3_cloexec(next, fd) }
        } catch {
            if error.code == ENOSPC || error.code == EDQUOT { throw .noSpace("copying the shared \(path) before writing it") }
            throw .storage("cannot copy the shared \(path) before writing it: \(error)")
        }
    }

    private static func copy(_ from: Int32, to: Int32, size: Int64, context: String) throws(SyscallError) {
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 1 << 20, alignment: 4096)
        defer { buffer.deallocate() }
        var offset: Int64 = 0
        while offset < size {
            let n = try preadFully(from, into: buffer, at: offset, context: context)
            if n == 0 { return }
            try pwriteAll(to, UnsafeRawBufferPointer(rebasing: buffer[0..<n]), at: offset, context: context)
            offset += Int64(n)
        }
    }

    /// Starts writing `range` back to the disk without waiting, so the checkpoint's
    /// `fdatasync` finds little left to do and the receiving thread is not held up by it.
    public func startWriteback(_ range: ByteRange) {
        _ = CLinux_start_writeback(fd, range.lower, range.count)
    }

    /// Makes written bytes durable; the range map may only advance after this returns.
    public func sync() throws(LabstreamError) {
        do { try syscall("fdatasync", path) { fdatasync(fd) } } catch {
            if error.code == ENOSPC { throw .noSpace("syncing \(path)") }
            throw .storage(error.description)
        }
    }

    /// Frees every byte (a cancelled download, a new attempt), keeping the file's size. The bytes
    /// are not cut out of this file but the name moves to a fresh one: a descriptor the kernel
    /// reads directly (FUSE passthrough) keeps reading the old version whole, never a mix.
    public func discardAll() throws(LabstreamError) {
        var st = stat()
        fstat(fd, &st)
        do {
            let next = try Self.moveName(path, toNewFileOf: Int64(st.st_size))
            defer { close(next) }
            // The same descriptor number now names the fresh file, for every holder of `fd`.
            try syscall("dup3", path) { CLinux_dup3_cloexec(next, fd) }
        } catch {
            throw .storage("cannot clear \(path): \(error)")
        }
    }

    /// An empty file at `path`, for a try that writes from byte 0 to an end nobody knows yet:
    /// nothing of an earlier, longer try stays past its end. Like `discardAll`, the name moves
    /// to a new file, so a descriptor of the old one keeps reading it whole.
    public static func fresh(path: String) throws(LabstreamError) -> PartialFile {
        do { return PartialFile(path: path, fd: try moveName(path, toNewFileOf: 0)) } catch {
            throw .storage("cannot start \(path) afresh: \(error)")
        }
    }

    private init(path: String, fd: Int32) {
        self.path = path
        self.fd = fd
    }

    /// Creates a file of `size` (sparse) beside `path` and renames it over `path`; returns its
    /// descriptor.
    private static func moveName(_ path: String, toNewFileOf size: Int64) throws(SyscallError) -> Int32 {
        let fresh = path + ".fresh"
        let next = try syscall("open", fresh) { open(fresh, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600) }
        do {
            try syscall("ftruncate", fresh) { ftruncate(next, off_t(size)) }
            try syscall("rename", fresh) { rename(fresh, path) }
        } catch {
            unlink(fresh)
            close(next)
            throw error
        }
        return next
    }

    /// Which file this is and its state: device, inode, size, and the times of its last write
    /// and last change (ns). Any write, truncation or replacement of the file changes it.
    public func identity() -> String? {
        var st = stat()
        guard fstat(fd, &st) == 0 else { return nil }
        return "\(st.st_dev):\(st.st_ino):\(st.st_size):\(st.st_mtim.tv_sec).\(st.st_mtim.tv_nsec):\(st.st_ctim.tv_sec).\(st.st_ctim.tv_nsec)"
    }

    /// A new read-only descriptor of this file (not of whatever the path names later).
    public func openReadOnly() -> Int32? {
        let copy = open("/proc/self/fd/\(fd)", O_RDONLY | O_CLOEXEC)
        return copy >= 0 ? copy : nil
    }

    public func read(into buffer: UnsafeMutableRawBufferPointer, at offset: Int64) throws(LabstreamError) -> Int {
        do { return try preadFully(fd, into: buffer, at: offset, context: path) } catch {
            throw .storage(error.description)
        }
    }
}

/// Where things live under the data directory.
public struct DataLayout: Sendable {
    public let root: String

    public init(root: String) { self.root = root }

    public var indexPath: String { root + "/index.sqlite" }
    public var lockPath: String { root + "/labstream.lock" }
    public var partialsDir: String { root + "/partials" }
    public var logPath: String { root + "/labstream.log" }
    /// Files found in `partials/` that no index row owns: set aside, never deleted unasked.
    public var orphansDir: String { root + "/orphans" }
    /// The last verified copy of the index (`OfflineIndex.backUp`).
    public var indexBackupPath: String { OfflineIndex.backupPath(of: indexPath) }

    /// The partial file for `key`, relative to the data dir. The name is a digest of the key
    /// so hostile ids cannot escape the directory.
    /// Where `key`'s bytes go, relative to the data dir: a digest of its ids and its kind (an
    /// original's is a digest of its ids alone, as it always was).
    public func partialRelativePath(for key: FileKey) -> String {
        let ids = "\(key.server)/\(key.itemId)/\(key.sourceId)"
        let kind = key.kind.persisted
        return "partials/" + digestName(key.kind == .original ? ids : [ids, kind.kind, kind.quality ?? ""].joined(separator: "\u{1F}")) + ".part"
    }

    public func absolute(_ relative: String) -> String { root + "/" + relative }

    /// A stored partial path must be one of ours: relative, inside `partials/`, no `..`.
    public static func isValidPartialPath(_ p: String) -> Bool {
        let parts = p.split(separator: "/", omittingEmptySubsequences: false)
        return parts.count == 2 && parts[0] == "partials" && parts[1].hasSuffix(".part") && !parts[1].hasPrefix(".")
    }

    func digestName(_ s: String) -> String {
        var h1: UInt64 = 0xcbf29ce484222325, h2: UInt64 = 0x6c62272e07bb0142
        for b in s.utf8 {
            h1 = (h1 ^ UInt64(b)) &* 0x100000001b3
            h2 = (h2 &+ UInt64(b)) &* 0x9e3779b97f4a7c15 ^ (h2 >> 29)
        }
        func hex(_ v: UInt64) -> String { let x = String(v, radix: 16); return String(repeating: "0", count: 16 - x.count) + x }
        return hex(h1) + hex(h2)
    }
}

/// Creates `path` and its parents with `mode` (like `mkdir -p`).
public func makeDirectories(_ path: String, mode: mode_t = 0o700) throws(LabstreamError) {
    var current = path.hasPrefix("/") ? "" : "."
    for part in path.split(separator: "/") {
        current += "/" + part
        if mkdir(current, mode) != 0 && errno != EEXIST {
            throw .storage("cannot create \(current): \(String(cString: strerror(errno)))")
        }
    }
}
