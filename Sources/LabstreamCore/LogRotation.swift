/// When the daemon's log file is rotated, and how: `labstream.log` is renamed to
/// `labstream.log.1`, which becomes `.2`, up to `files` rotated files; the oldest is dropped.
/// Rotation happens only between lines, so no line is ever split across two files. Pure.
public struct LogRotation: Sendable, Hashable {
    /// The size (bytes) a log file may reach; a line that would pass it starts a new file.
    public var maxSize: Int64
    /// How many rotated files (`.1` … `.N`) are kept beside the current one.
    public var files: Int

    public static let `default` = LogRotation(maxSize: 10 << 20, files: 3)

    public init(maxSize: Int64, files: Int) {
        self.maxSize = maxSize
        self.files = files
    }

    /// Whether a line of `lineBytes` is written to a fresh file rather than after `currentSize`
    /// bytes. An empty file always takes the line, however long: a line is never cut.
    public func rotatesBefore(lineBytes: Int, currentSize: Int64) -> Bool {
        currentSize > 0 && currentSize + Int64(lineBytes) > maxSize
    }

    /// The renames that rotate `path`, in the order to perform them (oldest first, so none
    /// overwrites a file still to be moved). A rename onto `.N` replaces the oldest kept file;
    /// with `files` 0 the current file is only removed (`unlink`).
    public func renames(of path: String) -> (unlink: String?, moves: [(from: String, to: String)]) {
        guard files > 0 else { return (path, []) }
        var moves: [(String, String)] = []
        for n in stride(from: files - 1, through: 1, by: -1) { moves.append(("\(path).\(n)", "\(path).\(n + 1)")) }
        moves.append((path, "\(path).1"))
        return (nil, moves)
    }
}
