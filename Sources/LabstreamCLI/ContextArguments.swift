import Foundation
import LabstreamCore
import LabstreamDaemon

extension Context {
    static let globalValued: Set<String> = ["--config-dir", "--data-dir", "--log-level"]
    static let globalFlags: Set<String> = ["-v", "--verbose", "-h", "--help"]

    /// `--config-dir`, else `LABSTREAM_CONFIG_DIR`, else `$XDG_CONFIG_HOME/labstream`
    /// (`/etc/labstream` for root); the data dir likewise.
    init(args: Arguments, environment: [String: String] = ProcessInfo.processInfo.environment) {
        let root = geteuid() == 0
        let home = environment["HOME"] ?? "/root"
        let configDir =
            args.value("--config-dir") ?? environment["LABSTREAM_CONFIG_DIR"]
            ?? (root ? "/etc/labstream" : (environment["XDG_CONFIG_HOME"] ?? home + "/.config") + "/labstream")
        let dataDir =
            args.value("--data-dir") ?? environment["LABSTREAM_DATA_DIR"]
            ?? (root ? "/var/lib/labstream" : (environment["XDG_DATA_HOME"] ?? home + "/.local/share") + "/labstream")
        self.init(configDir: configDir, dataDir: dataDir)
    }
}
