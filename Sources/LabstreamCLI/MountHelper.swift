import Foundation
import LabstreamCore
import LabstreamDaemon

/// `mount.labstream SOURCE MOUNTPOINT [-o OPTIONS] [-f] [-n] [-s] [-v]`: the mount(8) helper.
/// Also reached as `labstream SOURCE MOUNTPOINT -o …` when fuse3's mount.fuse3 runs it for
/// `mount -t fuse.labstream`. SOURCE is `labstream` (the default config dir) or a config path.
enum MountHelper {
    static func run(_ argv: [String]) throws -> Int32 {
        var positionals: [String] = []
        var options: [String] = []
        var foreground = false, sloppy = false, verbose = false
        var i = 0
        while i < argv.count {
            let a = argv[i]
            i += 1
            switch a {
            case "-o":
                guard i < argv.count else { throw UsageError("-o needs a value") }
                options.append(argv[i])
                i += 1
            case "-f": foreground = true
            case "-n": continue  // no /etc/mtab to write on a modern system
            case "-s": sloppy = true
            case "-v": verbose = true
            case "-h", "--help":
                printOut(Help.mountHelper)
                return ExitCode.ok
            default:
                if a.hasPrefix("-o") && a.count > 2 { options.append(String(a.dropFirst(2))); continue }
                if a.hasPrefix("-") { throw UsageError("unknown option \(a)") }
                positionals.append(a)
            }
        }
        guard positionals.count == 2 else { throw UsageError("usage: mount.labstream SOURCE MOUNTPOINT [-o OPTIONS] [-f] [-n] [-s] [-v]") }
        let (source, mountpoint) = (positionals[0], positionals[1])
        var list = options.flatMap { $0.split(separator: ",").map(String.init) }
        // mount(8) puts `rw` first unless `ro` was written: that default is not a request to
        // write (the tree is read-only either way). A `rw` written anywhere else is refused.
        if list.first == "rw" { list.removeFirst() }
        if sloppy {
            // -s: drop options Labstream does not know instead of failing.
            list = list.filter { (try? MountOptions.parse([$0])) != nil }
        }
        do { _ = try MountOptions.parse(list) } catch { throw UsageError(error.message) }
        var args = ["mount", mountpoint]
        if !list.isEmpty { args += ["-o", list.joined(separator: ",")] }
        if source != "labstream" {
            var dir = source
            if dir.hasSuffix("/labstream.conf") { dir = String(dir.dropLast("/labstream.conf".count)) }
            guard dir.hasPrefix("/") else {
                throw UsageError("SOURCE must be 'labstream' (the default config) or an absolute path to a config directory, not '\(source)'")
            }
            if !list.contains(where: { $0.hasPrefix("config=") }) { args += ["--config-dir", dir] }
        }
        if foreground { args.append("--foreground") }
        if verbose { args.append("-v") }
        return try MountCommand.run(Array(args.dropFirst()))
    }
}
