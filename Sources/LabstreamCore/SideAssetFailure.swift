/// Why the last try of an artwork or subtitle file failed, as a typed value: the index keeps its
/// code and parameters (`persisted`), and a person reads its sentence (`sentence`: `status`, the
/// log), rendered only at the edge, so rewording one changes nothing stored.
public enum SideAssetFailure: Sendable, Hashable {
    /// The server answered with an empty body.
    case noBytes
    /// A subtitle whose codec names no text format Labstream stores.
    case notTextSubtitle
    /// A subtitle's bytes are text in no encoding Labstream reads.
    case subtitleNotText
    /// A subtitle's text does not parse as its `format` (`srt`, `vtt`, `ass`…).
    case subtitleUnparsed(format: String)
    /// An image's first bytes are no JPEG, PNG, WebP or GIF.
    case notAnImage
    /// An image that looks right but does not decode (the playback probe's words).
    case doesNotDecode(String)
    /// The server offers no route for this asset.
    case noRoute
    /// The server refused the sign-in (HTTP `status`, 401 or 403).
    case signInRefused(status: Int)
    /// The server has no such file (HTTP 404).
    case notOnServer
    /// Any other HTTP status.
    case httpStatus(Int)
    /// The request failed before the server answered (in the error's words); also the code of
    /// words an older index stored that name none of the above.
    case requestFailed(String)

    /// The stable name of the failure.
    public var code: String {
        switch self {
        case .noBytes: return "no_bytes"
        case .notTextSubtitle: return "not_text_subtitle"
        case .subtitleNotText: return "subtitle_not_text"
        case .subtitleUnparsed: return "subtitle_unparsed"
        case .notAnImage: return "not_an_image"
        case .doesNotDecode: return "does_not_decode"
        case .noRoute: return "no_route"
        case .signInRefused: return "sign_in_refused"
        case .notOnServer: return "not_on_server"
        case .httpStatus: return "http_status"
        case .requestFailed: return "request_failed"
        }
    }

    public var sentence: String {
        switch self {
        case .noBytes: return "the server sent no bytes"
        case .notTextSubtitle: return "not a text subtitle"
        case .subtitleNotText: return "the subtitle is not text in any encoding Labstream reads"
        case .subtitleUnparsed(let format): return "the bytes do not parse as \(format.uppercased()) subtitles"
        case .notAnImage: return "the bytes are not a JPEG, PNG, WebP or GIF image"
        case .doesNotDecode(let why): return "the image does not decode (\(why))"
        case .noRoute: return "this server offers no route for it"
        case .signInRefused(let status): return "the server refused the sign-in (HTTP \(status))"
        case .notOnServer: return "the server has no such file (HTTP 404)"
        case .httpStatus(let status): return "the server answered HTTP \(status)"
        case .requestFailed(let words): return words
        }
    }

    /// How the index keeps it: its code, and its parameter (nil when it has none).
    public var persisted: (code: String, parameter: String?) {
        switch self {
        case .subtitleUnparsed(let format): return (code, format)
        case .doesNotDecode(let words), .requestFailed(let words): return (code, words)
        case .signInRefused(let status), .httpStatus(let status): return (code, String(status))
        default: return (code, nil)
        }
    }

    /// A failure read back from the index. A code this build does not know keeps its words
    /// (its parameter, else the code itself) as a failed request.
    public init(persisted code: String, parameter: String?) {
        switch code {
        case "no_bytes": self = .noBytes
        case "not_text_subtitle": self = .notTextSubtitle
        case "subtitle_not_text": self = .subtitleNotText
        case "subtitle_unparsed": self = .subtitleUnparsed(format: parameter ?? "")
        case "not_an_image": self = .notAnImage
        case "does_not_decode": self = .doesNotDecode(parameter ?? "")
        case "no_route": self = .noRoute
        case "sign_in_refused": self = .signInRefused(status: parameter.flatMap { Int($0) } ?? 401)
        case "not_on_server": self = .notOnServer
        case "http_status":
            if let status = parameter.flatMap({ Int($0) }) { self = .httpStatus(status) } else { self = .requestFailed(code) }
        default: self = .requestFailed(parameter ?? code)
        }
    }

    /// The failure an index before reason codes stored as its sentence: each sentence this
    /// release ever wrote becomes its case, parameters and all; any other words (an error's)
    /// are a failed request's.
    public init(sentence words: String) {
        func between(_ prefix: String, _ suffix: String) -> String? {
            guard words.hasPrefix(prefix), words.hasSuffix(suffix), words.count >= prefix.count + suffix.count else { return nil }
            return String(words.dropFirst(prefix.count).dropLast(suffix.count))
        }
        for plain in [Self.noBytes, .notTextSubtitle, .subtitleNotText, .notAnImage, .noRoute, .notOnServer] where plain.sentence == words {
            self = plain
            return
        }
        if let format = between("the bytes do not parse as ", " subtitles"), !format.isEmpty {
            self = .subtitleUnparsed(format: format.lowercased())
        } else if let why = between("the image does not decode (", ")") {
            self = .doesNotDecode(why)
        } else if let status = between("the server refused the sign-in (HTTP ", ")").flatMap({ Int($0) }) {
            self = .signInRefused(status: status)
        } else if let status = between("the server answered HTTP ", "").flatMap({ Int($0) }) {
            self = .httpStatus(status)
        } else {
            self = .requestFailed(words)
        }
    }
}
