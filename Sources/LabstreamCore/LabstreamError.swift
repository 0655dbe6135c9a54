/// Every failure the filesystem engine can report. The text a user reads is produced in one
/// place (`userMessage`); the errno the kernel sees comes from `ErrnoMap`.
public enum LabstreamError: Error, Sendable, Equatable {
    case notFound(String)
    case notADirectory(String)
    case isADirectory(String)
    case readOnly
    case noAttribute
    case attributeBufferTooSmall
    case unsupportedAttributeWrite(String)
    /// A file Labstream makes or keeps itself (an `.nfo`, stored artwork or subtitles), by its
    /// path: always local, it has nothing to pin, fetch or monitor.
    case localSideFile(String, stored: Bool)
    case fetchFailed(String)
    case serverUnavailable(String)
    case remoteChanged(String)
    case authenticationFailed(String)
    case malformedResponse(String)
    /// The server refused the request for good (a 4xx other than 401, 403, 404, 408, 429):
    /// asking again cannot change the answer.
    case refused(String)
    case noSpace(String)
    /// A read the storage budget (`max_size`, all together or a server's) refused while the disk
    /// had room: ENOSPC too, but the advice is the budget's, not to free the disk.
    case overBudget(String)
    case storage(String)
    case invalidArgument(String)
    case timedOut(String)
    case permission(String)
    /// A change asked by a caller the access policy refuses (EACCES on every way in).
    case accessRefused(AccessPolicy.Refusal)

    public var userMessage: String {
        switch self {
        case .notFound(let p): return "\(p): no such file or directory"
        case .notADirectory(let p): return "\(p): not a directory"
        case .isADirectory(let p): return "\(p): is a directory"
        case .readOnly: return "the Labstream mount is read-only"
        case .noAttribute: return "no such attribute"
        case .attributeBufferTooSmall: return "attribute buffer too small"
        case .unsupportedAttributeWrite(let n): return "attribute \(n) cannot be written"
        case .localSideFile(let p, let stored):
            return "\(p) is \(stored ? "artwork or subtitles stored with its media" : "generated from the catalog"); always local, "
                + "so there is nothing to pin or fetch: pin the film or episode it belongs to"
        case .fetchFailed(let why): return "fetching from the server failed: \(why)"
        case .serverUnavailable(let why): return "the server is unavailable: \(why). Check that it is running and the URL is right."
        case .remoteChanged(let why): return "the file changed on the server: \(why). Run `labstream sync` to refresh the catalog."
        case .authenticationFailed(let why):
            // A reason that already says how to sign in again (Silo's names the very command) is
            // not followed by the same advice in general words.
            let advice = why.contains("labstream server add") ? "" : " Add the server again with `labstream server add`."
            return "the server refused the credentials: \(why)." + advice
        case .malformedResponse(let why): return "the server sent a response Labstream cannot read: \(why)"
        case .refused(let why): return "the server refused the request: \(why)"
        case .noSpace(let why): return "the disk is full: \(why). Free space in the data directory."
        case .overBudget(let why):
            return "the storage budget is full, not the disk: \(why). Raise that max_size in labstream.conf "
                + "(then send the daemon SIGHUP) or unpin files."
        case .storage(let why): return "local storage error: \(why)"
        case .invalidArgument(let why): return why
        case .timedOut(let why): return "timed out: \(why)"
        case .permission(let why): return why
        case .accessRefused(let why): return why.sentence
        }
    }
}

extension LabstreamError {
    /// A non-2xx answer to `what`, said as the error it is: a permanent refusal (with the
    /// server's own words) for a 4xx that asking again cannot change, else the server being
    /// unavailable. 401/403/404 are each backend's to say.
    public static func answered(_ status: Int, to what: String, body: [UInt8]) -> LabstreamError {
        guard (400..<500).contains(status), ![401, 403, 404, 408, 429].contains(status) else {
            return .serverUnavailable("\(what) answered HTTP \(status)")
        }
        let text = String(decoding: body.prefix(300), as: UTF8.self).unicodeScalars
            .map { $0.properties.generalCategory == .control ? " " : String($0) }.joined().trimmingSpaces
        return .refused("\(what) answered HTTP \(status)" + (text.isEmpty ? "" : ": " + text))
    }
}
