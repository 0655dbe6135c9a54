import Foundation
import LabstreamCore
import LabstreamDaemon
import LabstreamDemo
import LabstreamStore

/// `labstream demo [MOUNTPOINT]`: an embedded Jellyfin-compatible server with generated media on
/// loopback, added as server "demo" in a separate demo profile, mounted in the foreground.
enum DemoCommand {
    static let spec = Arguments.Spec(valued: Context.globalValued, flags: Context.globalFlags)

    /// The demo's profile holds nothing that cannot be made again: an index it cannot use (one
    /// from an older development build, a damaged one) is moved aside, not deleted, and the demo
    /// starts a fresh one. A user's own index is never treated so.
    static func setAsideUnusableIndex(_ path: String, log: Logger) {
        guard FileManager.default.fileExists(atPath: path) else { return }
        do { _ = try OfflineIndex(path: path) } catch {
            let aside = path + ".unusable-\(Int(Date().timeIntervalSince1970))"
            for suffix in ["", "-wal", "-shm"] where FileManager.default.fileExists(atPath: path + suffix) {
                rename(path + suffix, aside + suffix)
            }
            log.warn("the demo's index could not be used (\(error.userMessage)); it was moved to \(aside) and a fresh one is made")
        }
    }

    static func run(_ argv: [String]) throws -> Int32 {
        let args = try Arguments.parse(argv, spec: spec)
        if args.flag("-h") || args.flag("--help") { printOut(Help.demo); return ExitCode.ok }
        guard args.positionals.count <= 1 else { throw UsageError("usage: labstream demo [MOUNTPOINT]") }
        let mountpointArg = args.positionals.first ?? "mountpoints/demo"
        try? FileManager.default.createDirectory(atPath: mountpointArg, withIntermediateDirectories: true)
        let mountpoint = try MountCommand.checkedMountpoint(mountpointArg)
        let base = Context(args: args)
        // The demo never touches the user's own servers: it has a profile of its own.
        let demo = Context(configDir: base.dataDir + "/demo/config", dataDir: base.dataDir + "/demo/data")
        let log = Logger(level: try Logger.level(args))
        setAsideUnusableIndex(demo.layout.indexPath, log: log)

        let library: DemoLibrary
        do { library = try DemoMedia.ensure(in: base.dataDir + "/demo/media") { log.info($0) } } catch { throw CLIError(error) }
        let server = DemoServer(library: library, user: "demo", password: "demo")
        let url = try server.start()
        defer { server.stop() }
        let described = try ServerCommands.addMediaBrowser(.jellyfin, demo, name: "demo", url: url, user: "demo", secret: "demo", isPassword: true)
        log.info("demo server \(described) listening on \(url)")

        let shown = mountpointArg
        let env = "LABSTREAM_CONFIG_DIR=\(demo.configDir) LABSTREAM_DATA_DIR=\(demo.dataDir)"
        return MountedDaemon(
            context: demo, mountpoint: mountpoint, options: MountOptions(), logLevel: log.level,
            report: { line in
                guard line == "ready" || line.hasPrefix("ready\t") else { return }
                printOut(
                    """

                    Labstream demo is mounted at \(shown). In another terminal, try:
                      ls -R \(shown)
                      mpv --vo=null --ao=null "\(shown)/demo/Movies/Test Pattern (2021)/Test Pattern (2021).mp4"
                      ffprobe "\(shown)/demo/Shows/Signal Tests (2020)/Season 01/Signal Tests (2020) - S01E01 - Pilot Tone.mkv"
                      mpv --vo=null "\(shown)/demo/Music/Oscillator/Test Tones (2022)/1-01 - A 440.flac"
                      \(env) labstream status
                      labstream status --json "\(shown)/demo/Movies"
                    Press Ctrl-C here to unmount and stop the demo server.

                    """)
            }
        ).run()
    }
}
