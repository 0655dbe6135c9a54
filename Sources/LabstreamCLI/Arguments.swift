import LabstreamCore

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

/// Bad usage: exit 64 with the message and a pointer to --help.
public struct UsageError: Error, Sendable, Equatable {
    public let message: String
    public init(_ message: String) { self.message = message }
}

/// sysexits(3) codes.
public enum ExitCode {
    public static let ok: Int32 = 0
    public static let usage: Int32 = 64
    public static let dataErr: Int32 = 65
    public static let noInput: Int32 = 66
    public static let unavailable: Int32 = 69
    public static let software: Int32 = 70
    public static let osErr: Int32 = 71
    public static let cantCreate: Int32 = 73
    public static let ioErr: Int32 = 74
    public static let tempFail: Int32 = 75
    public static let protocolErr: Int32 = 76
    public static let noPerm: Int32 = 77
    public static let config: Int32 = 78

    public static func of(_ error: LabstreamError) -> Int32 {
        switch error {
        case .serverUnavailable, .timedOut, .fetchFailed: return unavailable
        case .authenticationFailed, .permission: return noPerm
        case .invalidArgument: return usage
        case .malformedResponse, .refused: return protocolErr
        case .storage, .noSpace: return ioErr
        case .notFound: return noInput
        case .readOnly, .notADirectory, .isADirectory, .noAttribute, .attributeBufferTooSmall,
            .unsupportedAttributeWrite, .localSideFile, .remoteChanged:
            return dataErr
        }
    }
}
