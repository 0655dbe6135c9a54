import LabstreamCore
import LabstreamDaemon

/// Hand-written command-line parsing (no outside packages): positionals and options in any
/// order, `--name value`, `--name=value`, `-o value`, and `--` to end options.
public struct Arguments: Sendable {
    public var positionals: [String] = []
    var values: [String: [String]] = [:]
    var flags: Set<String> = []

    public struct Spec: Sendable {
        /// Options that take a value, by every spelling (`--url`, `-o`).
        public var valued: Set<String>
        /// Options that are on/off.
        public var flags: Set<String>

        public init(valued: Set<String> = [], flags: Set<String> = []) {
            self.valued = valued
            self.flags = flags
        }
    }

    public static func parse(_ argv: [String], spec: Spec) throws(UsageError) -> Arguments {
        var out = Arguments()
        var i = 0
        var optionsEnded = false
        while i < argv.count {
            let arg = argv[i]
            i += 1
            if optionsEnded || arg == "-" || !arg.hasPrefix("-") {
                out.positionals.append(arg)
                continue
            }
            if arg == "--" { optionsEnded = true; continue }
            var name = arg
            var inline: String?
            if arg.hasPrefix("--"), let eq = arg.firstIndex(of: "=") {
                name = String(arg[..<eq])
                inline = String(arg[arg.index(after: eq)...])
            }
            if spec.flags.contains(name) {
                guard inline == nil else { throw UsageError("\(name) takes no value") }
                out.flags.insert(name)
            } else if spec.valued.contains(name) {
                let value: String
                if let inline {
                    value = inline
                } else {
                    guard i < argv.count else { throw UsageError("\(name) needs a value") }
                    value = argv[i]
                    i += 1
                }
                // One rule for every command: a log level is checked wherever it is given.
                if name == "--log-level" && LogLevel(value) == nil { throw UsageError("--log-level takes error, warning, info or debug") }
                out.values[name, default: []].append(value)
            } else {
                throw UsageError("unknown option \(name)")
            }
        }
        return out
    }

    public func flag(_ name: String) -> Bool { flags.contains(name) }
    public func value(_ name: String) -> String? { values[name]?.last }
    public func all(_ name: String) -> [String] { values[name] ?? [] }
}
