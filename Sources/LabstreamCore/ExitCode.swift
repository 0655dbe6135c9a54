import Foundation

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
        case .authenticationFailed, .permission, .accessRefused: return noPerm
        case .invalidArgument: return usage
        case .malformedResponse, .refused: return protocolErr
        case .storage, .noSpace, .overBudget: return ioErr
        case .notFound: return noInput
        case .readOnly, .notADirectory, .isADirectory, .noAttribute, .attributeBufferTooSmall,
            .unsupportedAttributeWrite, .localSideFile, .remoteChanged:
            return dataErr
        }
    }
}

/// A failure with the exit code and the full sentence the user reads.
public struct CLIError: Error, Sendable {
    public let code: Int32
    public let message: String

    public init(_ code: Int32, _ message: String) {
        self.code = code
        self.message = message
    }

    public init(_ error: LabstreamError) {
        self.init(ExitCode.of(error), error.userMessage)
    }

    /// Any error as the sentence and code a person gets.
    public init(any error: any Error) {
        switch error {
        case let e as CLIError: self = e
        case let e as LabstreamError: self.init(e)
        case let e as UsageError: self.init(ExitCode.usage, e.message)
        default: self.init(ExitCode.software, "\(error)")
        }
    }

    public static func noSuchServer(_ name: String) -> CLIError {
        CLIError(ExitCode.noInput, "there is no server named '\(name)'; `labstream server list` shows the configured ones")
    }
}

/// The sentence a user reads for any error.
public func describe(_ error: any Error) -> String { CLIError(any: error).message }
