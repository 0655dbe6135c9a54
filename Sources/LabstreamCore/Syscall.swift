#if canImport(Glibc)
    import Glibc
#endif

/// A failed system call, naming the call and what it was doing.
public struct SyscallError: Error, Sendable, CustomStringConvertible {
    public let function: String
    public let context: String
    public let code: Int32
    public init(function: String, context: String, code: Int32) {
        self.function = function
        self.context = context
        self.code = code
    }

    public var description: String { "\(function)(\(context)): \(String(cString: strerror(code)))" }
}

/// The one syscall wrapper: retries EINTR, names the failing call, and traps on programmer
/// errors (EBADF, EFAULT) instead of turning them into I/O errors.
@discardableResult
public func syscall<T: BinaryInteger>(_ function: String, _ context: @autoclosure () -> String, _ body: () -> T) throws(SyscallError) -> T {
    while true {
        let result = body()
        if result >= 0 { return result }
        let code = errno
        if code == EINTR { continue }
        precondition(code != EBADF && code != EFAULT, "\(function)(\(context())): \(String(cString: strerror(code)))")
        throw SyscallError(function: function, context: context(), code: code)
    }
}

/// Writes all of `buffer` at `offset`, looping over short writes.
public func pwriteAll(_ fd: Int32, _ buffer: UnsafeRawBufferPointer, at offset: Int64, context: @autoclosure () -> String) throws(SyscallError) {
    var done = 0
    while done < buffer.count {
        let n = try syscall("pwrite", context()) {
            pwrite(fd, buffer.baseAddress! + done, buffer.count - done, off_t(offset) + off_t(done))
        }
        done += n
    }
}

/// Sends all of `buffer` on a connected socket, looping over short sends. MSG_NOSIGNAL: a peer
/// that went away is an error (EPIPE, ECONNRESET), never SIGPIPE, which would kill the daemon
/// whenever a client is interrupted.
public func sendAll(_ fd: Int32, _ buffer: UnsafeRawBufferPointer, context: @autoclosure () -> String) throws(SyscallError) {
    var done = 0
    while done < buffer.count {
        done += try syscall("send", context()) { send(fd, buffer.baseAddress! + done, buffer.count - done, Int32(MSG_NOSIGNAL)) }
    }
}

/// Reads up to `count` bytes at `offset`, looping over short reads; stops at end of file.
public func preadFully(_ fd: Int32, into buffer: UnsafeMutableRawBufferPointer, at offset: Int64, context: @autoclosure () -> String) throws(SyscallError)
    -> Int
{
    var done = 0
    while done < buffer.count {
        let n = try syscall("pread", context()) {
            pread(fd, buffer.baseAddress! + done, buffer.count - done, off_t(offset) + off_t(done))
        }
        if n == 0 { break }
        done += n
    }
    return done
}

public func writeToStderr(_ text: String) {
    var line = text
    if !line.hasSuffix("\n") { line += "\n" }
    line.utf8CString.withUnsafeBufferPointer { p in
        _ = write(2, p.baseAddress, p.count - 1)
    }
}
