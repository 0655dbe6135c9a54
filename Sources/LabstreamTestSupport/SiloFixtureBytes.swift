import Foundation
import LabstreamDemo
import LabstreamFixture
import Synchronization

/// Original bytes: direct download and the byte serving every file route shares.
extension SiloFixture {
    // MARK: - Original bytes

    // GET/HEAD /direct-download?file_id= — downloads-api.md § 4.10 Direct download and § 15
    // Direct original delivery (canonical positive decimal `file_id`; `format` absent, empty or
    // `original`; unknown query parameters 422; `?token=` carries the session access token for
    // browser links, without profile; Content-Disposition, MIME type, Last-Modified, HEAD,
    // ranges/206, conditional/304; invalid range 416 retains Content-Range); Go:
    // direct_download_test.go (416 is the range_not_satisfiable problem with `bytes */size`).
    func directDownload(_ c: SiloCtx) throws -> HTTPServer.Response {
        let who = try authenticate(c, allowQueryToken: true)
        try rejectUnknownQuery(c, ["file_id", "format", "token"])
        if who.credential != .queryToken { _ = try resolveProfile(c, who, required: false) }
        guard let fileId = c.query["file_id"] else {
            throw validation(c, [("query.file_id", "required", "file_id is required.")])
        }
        try requirePositiveID(c, fileId, location: "query.file_id")
        let format = c.query["format"] ?? ""
        guard format.isEmpty || format == "original" else {
            throw validation(c, [("query.format", "invalid", "format may only be original.")])
        }
        guard state.withLock({ $0.downloadAllowed }) else { throw problem(c, .permissionDenied, "Downloads are not allowed.") }
        guard let file = catalog.files[fileId], !isHeldFile(fileId) else { throw problem(c, .notFound, "The file does not exist.") }
        return try serveFile(c, path: file.path, container: file.container)
    }

    // MARK: - Byte serving

    /// Serves a file the way Go's ServeContent does for Silo's byte routes (downloads-api.md
    /// § 4.5, § 15): Accept-Ranges, Last-Modified (whole seconds), Content-Disposition,
    /// If-Unmodified-Since (412), If-Modified-Since (304), If-Range by date, a single
    /// `bytes=` range as 206 with `Content-Range: bytes a-b/size`, and 416 with
    /// `Content-Range: bytes */size`. HEAD gets the same status and headers without a body.
    func serveFile(_ c: SiloCtx, path: String, container: String) throws -> HTTPServer.Response {
        guard let info = fileInfo(path) else { throw problem(c, .notFound, "The file does not exist.") }
        let size = info.size
        let modified = info.modified
        let lastModified = siloHTTPDate(modified)
        var headers: [(String, String)] = [
            ("Content-Type", siloMimeType(container: container, path: path)),
            ("Accept-Ranges", "bytes"),
            ("Last-Modified", lastModified),
            ("Content-Disposition", "attachment; filename=\"\(siloFileName(path).replacingOccurrences(of: "\"", with: "_"))\"")
        ]
        if let unmodifiedSince = c.header("if-unmodified-since"), let date = siloParseHTTPDate(unmodifiedSince), modified > date {
            throw problem(c, .preconditionFailed, "The file changed after If-Unmodified-Since.")
        }
        if c.header("if-none-match") == nil, let modifiedSince = c.header("if-modified-since"),
            let date = siloParseHTTPDate(modifiedSince), modified <= date
        {
            return HTTPServer.Response(status: 304, headers: [("Last-Modified", lastModified)])
        }
        var rangeHeader = c.header("range")
        if case .ignoreRange? = c.fault { rangeHeader = nil }
        if rangeHeader != nil, let ifRange = c.header("if-range") {
            // RFC 9110 § 13.1.5: an entity tag never matches (these routes send none); a date
            // matches only the exact Last-Modified. A mismatch serves the whole representation.
            if ifRange.hasPrefix("\"") || ifRange.hasPrefix("W/") || siloParseHTTPDate(ifRange) != modified {
                rangeHeader = nil
            }
        }
        let logId = c.logId
        let sent: @Sendable (Int64) -> Void = { [weak self] count in self?.recordSent(logId, count) }
        var dropAfter: Int64? = nil
        var stall: (after: Int64, seconds: Double)? = nil
        switch c.fault {
        case .dropAfter(let bytes)?: dropAfter = bytes
        case .stallAfter(let after, let seconds)?: stall = (after: after, seconds: seconds)
        default: break
        }
        guard let range = rangeHeader else {
            return HTTPServer.Response(
                status: 200, headers: headers,
                body: FaultyFile.body(path: path, offset: 0, length: size, dropAfter: dropAfter, stall: stall, sent: sent))
        }
        switch siloParseRange(range, size: size) {
        case .whole:
            return HTTPServer.Response(
                status: 200, headers: headers,
                body: FaultyFile.body(path: path, offset: 0, length: size, dropAfter: dropAfter, stall: stall, sent: sent))
        case .unsatisfiable:
            throw problem(
                c, .rangeNotSatisfiable, "The requested range is not satisfiable.",
                headers: [("Content-Range", "bytes */\(size)")])
        case .bytes(let start, let end):
            var shownStart = start
            var shownEnd = end
            if case .wrongContentRange? = c.fault {
                shownStart += 1
                shownEnd += 1
            }
            headers.append(("Content-Range", "bytes \(shownStart)-\(shownEnd)/\(size)"))
            return HTTPServer.Response(
                status: 206, headers: headers,
                body: FaultyFile.body(
                    path: path, offset: start, length: end - start + 1,
                    dropAfter: dropAfter, stall: stall, sent: sent))
        }
    }

    private func recordSent(_ logId: Int, _ count: Int64) {
        state.withLock { s in
            if let i = s.log.lastIndex(where: { $0.id == logId }) { s.log[i].bytesSent = count }
        }
    }

    /// Size and Last-Modified (whole seconds, `changeFile` overrides applied). Never call while
    /// holding the state lock.
    func fileInfo(_ path: String) -> (size: Int64, modified: Date)? {
        guard let disk = diskInfo(path) else { return nil }
        let overridden: Date? = state.withLock { $0.modifiedOverride[path] }
        let modified = overridden ?? disk.modified
        return (disk.size, Date(timeIntervalSince1970: floor(modified.timeIntervalSince1970)))
    }

    func diskInfo(_ path: String) -> (size: Int64, modified: Date)? {
        guard let attributes = try? FileManager.default.attributesOfItem(atPath: path) else { return nil }
        let size: Int64
        if let number = attributes[.size] as? NSNumber {
            size = number.int64Value
        } else if let value = attributes[.size] as? Int {
            size = Int64(value)
        } else if let value = attributes[.size] as? UInt64 {
            size = Int64(value)
        } else {
            size = 0
        }
        let modified = (attributes[.modificationDate] as? Date) ?? Date(timeIntervalSince1970: 0)
        return (size, modified)
    }

    /// SHA-256 (lowercase hex) of the bytes the byte routes serve, cached per size and mtime.
    func mediaHash(_ path: String) -> String? {
        guard let info = fileInfo(path) else { return nil }
        let key = "\(info.size)/\(info.modified.timeIntervalSince1970)"
        let cached: SiloHashEntry? = state.withLock { $0.hashCache[path] }
        if let cached, cached.key == key { return cached.hex }
        guard let digest = siloSHA256File(path) else { return nil }
        state.withLock { $0.hashCache[path] = SiloHashEntry(key: key, hex: digest) }
        return digest
    }
}

struct SiloHashEntry: Sendable {
    let key: String
    let hex: String
}
