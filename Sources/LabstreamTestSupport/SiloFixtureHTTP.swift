import Foundation

// MARK: - HTTP helpers

/// api-contract.md § HTTP representation: missing Accept or */* accepts JSON; the most specific
/// matching media range decides (Go: gates.go acceptsJSON).
func siloAcceptsJSON(_ accept: String) -> Bool {
    var bestSpecificity = 0
    var bestQuality = 0.0
    for part in accept.split(separator: ",") {
        let fields = part.split(separator: ";")
        guard let first = fields.first else { continue }
        let mediaType = first.trimmingCharacters(in: .whitespaces).lowercased()
        var quality = 1.0
        for parameter in fields.dropFirst() {
            let trimmed = parameter.trimmingCharacters(in: .whitespaces)
            if trimmed.hasPrefix("q="), let value = Double(trimmed.dropFirst(2)) { quality = value }
        }
        let specificity: Int
        switch mediaType {
        case "application/json": specificity = 3
        case "application/*": specificity = 2
        case "*/*": specificity = 1
        default: continue
        }
        if specificity > bestSpecificity {
            bestSpecificity = specificity
            bestQuality = quality
        }
    }
    return bestSpecificity > 0 && bestQuality > 0
}

func siloIsJSONMediaType(_ value: String) -> Bool {
    let parts = value.split(separator: ";")
    guard let first = parts.first, first.trimmingCharacters(in: .whitespaces).lowercased() == "application/json" else { return false }
    for parameter in parts.dropFirst() {
        let pair = parameter.split(separator: "=", maxSplits: 1).map { $0.trimmingCharacters(in: .whitespaces).lowercased() }
        guard pair.count == 2, pair[0] == "charset",
            pair[1].trimmingCharacters(in: CharacterSet(charactersIn: "\"")) == "utf-8"
        else { return false }
    }
    return true
}

/// RFC 9110 § 13.1.1 / § 13.1.2 list matching: `*`, strong comparison for If-Match, weak for
/// If-None-Match.
func siloETagMatches(_ header: String, _ etag: String, weak: Bool) -> Bool {
    for part in header.split(separator: ",") {
        var tag = part.trimmingCharacters(in: .whitespaces)
        if tag == "*" { return true }
        if tag.hasPrefix("W/") {
            guard weak else { continue }
            tag = String(tag.dropFirst(2))
        }
        if tag == etag { return true }
    }
    return false
}

enum SiloRangeRequest {
    case whole
    case unsatisfiable
    case bytes(Int64, Int64)
}

/// One `bytes=` range. Several ranges (multipart/byteranges) are answered with the whole file.
func siloParseRange(_ header: String, size: Int64) -> SiloRangeRequest {
    let value = header.trimmingCharacters(in: .whitespaces)
    guard value.lowercased().hasPrefix("bytes=") else { return .unsatisfiable }
    let spec = value.dropFirst(6)
    if spec.firstIndex(of: ",") != nil { return .whole }
    let parts = spec.split(separator: "-", maxSplits: 1, omittingEmptySubsequences: false)
        .map { $0.trimmingCharacters(in: .whitespaces) }
    guard parts.count == 2 else { return .unsatisfiable }
    if parts[0].isEmpty {
        guard let suffix = Int64(parts[1]), suffix > 0, size > 0 else { return .unsatisfiable }
        return .bytes(max(0, size - suffix), size - 1)
    }
    guard let start = Int64(parts[0]), start >= 0, start < size else { return .unsatisfiable }
    if parts[1].isEmpty { return .bytes(start, size - 1) }
    guard let end = Int64(parts[1]), end >= start else { return .unsatisfiable }
    return .bytes(start, min(end, size - 1))
}

func siloMimeType(container: String, path: String) -> String {
    let key = (container.isEmpty ? URL(fileURLWithPath: path).pathExtension : container).lowercased()
    switch key {
    case "mp4", "m4v": return "video/mp4"
    case "mkv", "matroska": return "video/x-matroska"
    case "webm": return "video/webm"
    case "mov": return "video/quicktime"
    case "avi": return "video/x-msvideo"
    case "ts", "m2ts": return "video/mp2t"
    case "mp3": return "audio/mpeg"
    case "m4a": return "audio/mp4"
    default: return "application/octet-stream"
    }
}

/// An image's Content-Type from its first bytes (image/jpeg: FF D8 FF; image/png: the PNG
/// signature; image/gif: GIF8), else application/octet-stream. Go: download_delivery.go declares image/*.
func siloImageType(_ head: [UInt8]) -> String {
    if head.starts(with: [0xFF, 0xD8, 0xFF]) { return "image/jpeg" }
    if head.starts(with: [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A]) { return "image/png" }
    if head.starts(with: Array("GIF8".utf8)) { return "image/gif" }
    return "application/octet-stream"
}

/// A subtitle's `format` (downloads-api.md § 6 shows "srt") from the catalog codec: srt (also
/// subrip), ass, ssa, vtt (webvtt), sup (pgssub, PGS: § 1 names a PGS sidecar `sup`), else the codec
/// lowercased.
func siloSubtitleFormat(_ codec: String) -> String {
    switch codec.lowercased() {
    case "srt", "subrip": return "srt"
    case "webvtt", "vtt": return "vtt"
    case "pgssub", "pgs", "hdmv_pgs_subtitle", "sup": return "sup"
    case let other: return other
    }
}

/// The sidecar an embedded track is extracted as (downloads-api.md § 1 and § 4.9): ASS/SSA → `ass`,
/// PGS → `sup`; nil for every other codec (SRT and WebVTT travel inside the file; DVD and DVB
/// bitmaps are not carried).
func siloSidecarFormat(_ codec: String) -> String? {
    switch codec.lowercased() {
    case "ass", "ssa": return "ass"
    case "pgssub", "pgs", "hdmv_pgs_subtitle": return "sup"
    default: return nil
    }
}

/// A subtitle answer's Content-Type, from the media types Go declares for the route
/// (download_delivery.go: application/x-subrip, text/vtt, text/x-ssa, application/octet-stream).
func siloSubtitleType(_ format: String) -> String {
    switch format {
    case "srt": return "application/x-subrip; charset=utf-8"
    case "vtt": return "text/vtt; charset=utf-8"
    case "ass", "ssa": return "text/x-ssa; charset=utf-8"
    default: return "application/octet-stream"
    }
}

/// ISO 639-2 (bibliographic or terminology) → ISO 639-1, for `subtitles[].language` (downloads-api.md
/// § 6 shows "en"). A two-letter code is kept; a code this table does not know is passed as it is.
func siloISO6391(_ code: String) -> String {
    let lower = code.lowercased()
    if lower.count == 2 { return lower }
    let table: [String: String] = [
        "eng": "en", "fre": "fr", "fra": "fr", "ger": "de", "deu": "de", "spa": "es", "ita": "it", "por": "pt",
        "dut": "nl", "nld": "nl", "swe": "sv", "nor": "no", "nob": "nb", "nno": "nn", "dan": "da", "fin": "fi",
        "ice": "is", "isl": "is", "pol": "pl", "cze": "cs", "ces": "cs", "slo": "sk", "slk": "sk", "slv": "sl",
        "hun": "hu", "rum": "ro", "ron": "ro", "bul": "bg", "hrv": "hr", "srp": "sr", "bos": "bs", "mac": "mk",
        "mkd": "mk", "alb": "sq", "sqi": "sq", "gre": "el", "ell": "el", "tur": "tr", "rus": "ru", "ukr": "uk",
        "bel": "be", "est": "et", "lav": "lv", "lit": "lt", "cat": "ca", "baq": "eu", "eus": "eu", "glg": "gl",
        "wel": "cy", "cym": "cy", "gle": "ga", "ara": "ar", "heb": "he", "per": "fa", "fas": "fa", "hin": "hi",
        "ben": "bn", "tam": "ta", "tel": "te", "urd": "ur", "tha": "th", "vie": "vi", "ind": "id", "may": "ms",
        "msa": "ms", "tgl": "tl", "chi": "zh", "zho": "zh", "jpn": "ja", "kor": "ko", "lat": "la"
    ]
    return table[lower] ?? code
}

func siloFileName(_ path: String) -> String { URL(fileURLWithPath: path).lastPathComponent }

/// api-contract.md § Wire data representation: RFC 3339 UTC with `Z` and millisecond precision.
func siloInstant(_ date: Date) -> String {
    let formatter = ISO8601DateFormatter()
    formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
    formatter.timeZone = TimeZone(secondsFromGMT: 0)
    return formatter.string(from: date)
}

func siloParseInstant(_ text: String) -> Date? {
    let formatter = ISO8601DateFormatter()
    formatter.timeZone = TimeZone(secondsFromGMT: 0)
    formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
    if let date = formatter.date(from: text) { return date }
    formatter.formatOptions = [.withInternetDateTime]
    return formatter.date(from: text)
}

fileprivate func siloHTTPDateFormatter() -> DateFormatter {
    let formatter = DateFormatter()
    formatter.locale = Locale(identifier: "en_US_POSIX")
    formatter.timeZone = TimeZone(secondsFromGMT: 0)
    formatter.dateFormat = "EEE, dd MMM yyyy HH:mm:ss 'GMT'"
    return formatter
}

func siloHTTPDate(_ date: Date) -> String { siloHTTPDateFormatter().string(from: date) }

func siloParseHTTPDate(_ text: String) -> Date? {
    siloHTTPDateFormatter().date(from: text.trimmingCharacters(in: .whitespaces))
}
