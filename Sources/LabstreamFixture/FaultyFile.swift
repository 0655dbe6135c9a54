import Foundation
import LabstreamDemo

#if canImport(Glibc)
    import Glibc
#endif

/// A file body with the faults the emulators inject, sent by the fixture itself as a `stream`
/// body: the socket server is shipped in `labstream demo`, and carries no faults.
public enum FaultyFile {
    /// `length` bytes of `path` from `offset` (the `Content-Length` says all of them). `dropAfter`
    /// closes the connection after that many body bytes; `stall` pauses once `after` body bytes
    /// went out; `sent` hears how many body bytes went out so far.
    public static func body(
        path: String, offset: Int64, length: Int64, dropAfter: Int64? = nil, stall: (after: Int64, seconds: Double)? = nil,
        sent: (@Sendable (Int64) -> Void)? = nil
    ) -> HTTPServer.Body {
        if dropAfter == nil && stall == nil && sent == nil { return .file(path: path, offset: offset, length: length) }
        return .stream(length: length) { send in
            let file = open(path, O_RDONLY)
            guard file >= 0 else { return false }
            defer { close(file) }
            let end = min(length, dropAfter ?? .max)
            var done: Int64 = 0
            var stalled = false
            var chunk = [UInt8](repeating: 0, count: 256 * 1024)
            while done < end {
                if let stall, !stalled, done >= stall.after {
                    stalled = true
                    Thread.sleep(forTimeInterval: stall.seconds)
                }
                let want = Int(min(Int64(chunk.count), end - done, stall.map { $0.after > done ? $0.after - done : .max } ?? .max))
                let n = chunk.withUnsafeMutableBytes { pread(file, $0.baseAddress, want, off_t(offset + done)) }
                guard n > 0, send(Array(chunk[0..<n])) else { return false }
                done += Int64(n)
                sent?(done)
            }
            // A dropped body closes the connection mid-body.
            return end == length
        }
    }
}
