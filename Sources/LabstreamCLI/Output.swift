import Foundation
import LabstreamCore
import LabstreamDaemon

/// Writes to stdout unbuffered; a line ends in a newline unless `newline` is false (progress
/// redrawn in place).
func printOut(_ text: String, newline: Bool = true) {
    let line = !newline || text.hasSuffix("\n") ? text : text + "\n"
    line.utf8CString.withUnsafeBufferPointer { p in _ = write(1, p.baseAddress, p.count - 1) }
}

extension Logger {
    /// `-v`/`--verbose` is `debug`; `--log-level LEVEL` otherwise; `info` by default.
    static func level(_ args: Arguments) throws -> LogLevel {
        if args.flag("-v") || args.flag("--verbose") { return .debug }
        guard let text = args.value("--log-level") else { return .info }
        guard let level = LogLevel(text) else { throw UsageError("--log-level takes error, warning, info or debug") }
        return level
    }
}
