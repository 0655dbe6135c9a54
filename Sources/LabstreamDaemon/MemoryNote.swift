import Foundation

/// The daemon's resident memory now and at its peak (`VmRSS`, `VmHWM` of /proc/self/status), as
/// a debug line's tail: a sync of 100 000 items is measured phase by phase from its log (the
/// peak only grows, so the phase after which it grew is the one that set it). Empty when /proc
/// cannot be read.
enum MemoryNote {
    static func now() -> String {
        guard let status = try? String(contentsOfFile: "/proc/self/status", encoding: .utf8) else { return "" }
        func mib(_ key: String) -> String? {
            guard let line = status.split(separator: "\n").first(where: { $0.hasPrefix(key + ":") }),
                let kib = line.split(whereSeparator: { $0 == " " || $0 == "\t" }).dropFirst().first.flatMap({ Int($0) })
            else { return nil }
            return String(kib / 1024)
        }
        guard let rss = mib("VmRSS"), let peak = mib("VmHWM") else { return "" }
        return " (resident \(rss) MiB, peak \(peak) MiB)"
    }
}
