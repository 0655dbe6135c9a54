import Foundation
import LabstreamDemo

/// Problem documents, request parsing, cursors and JSON answers.
extension SiloFixture {
    // MARK: - Problem documents

    /// api-contract.md § Problem Details; Go: problem.go. Members: type (under
    /// https://siloserver.org/docs/api/v2/problems/, last segment the problem identifier),
    /// title, status, detail, instance (`urn:silo:request:<id>`), and `errors[]` of
    /// {location, code, detail} on validation problems. There is no top-level `code` member.
    func problem(
        _ c: SiloCtx, _ kind: SiloProblem, _ detail: String, errors: [(String, String, String)] = [],
        headers: [(String, String)] = []
    ) -> SiloRefusal {
        SiloRefusal(response: problemResponse(requestId: c.requestId, kind, detail, errors: errors, headers: headers))
    }

    func validation(_ c: SiloCtx, _ errors: [(String, String, String)]) -> SiloRefusal {
        problem(c, .validationFailed, "The request did not pass validation; see errors.", errors: errors)
    }

    func problemResponse(
        requestId: String, _ kind: SiloProblem, _ detail: String,
        errors: [(String, String, String)] = [], headers: [(String, String)] = [],
        status: Int? = nil
    ) -> HTTPServer.Response {
        let code = status ?? kind.status
        var members: [(String, SiloJ?)] = [
            ("type", SiloJ.string("https://siloserver.org/docs/api/v2/problems/" + kind.id)),
            ("title", SiloJ.string(kind.title)),
            ("status", SiloJ.num(code)),
            ("detail", SiloJ.string(detail)),
            ("instance", SiloJ.string("urn:silo:request:" + requestId))
        ]
        if !errors.isEmpty {
            members.append(
                (
                    "errors",
                    SiloJ.array(
                        errors.map {
                            SiloJ.obj([("location", SiloJ.string($0.0)), ("code", SiloJ.string($0.1)), ("detail", SiloJ.string($0.2))])
                        })
                ))
        }
        var all: [(String, String)] = [("Content-Type", "application/problem+json"), ("Cache-Control", "no-store")]
        all.append(contentsOf: headers)
        return HTTPServer.Response(status: code, headers: all, body: .bytes(Array(SiloJ.obj(members).serialized().utf8)))
    }

    func plainNotFound() -> HTTPServer.Response {
        HTTPServer.Response(
            status: 404, headers: [("Content-Type", "text/plain; charset=utf-8")],
            body: .bytes(Array("404 page not found\n".utf8)))
    }

    // MARK: - Request helpers

    /// api-contract.md § Contract foundation: undeclared query parameters fail with the
    /// validation problem (RejectUnknownQueryParameters).
    func rejectUnknownQuery(_ c: SiloCtx, _ allowed: Set<String>) throws {
        let unknown = c.query.keys.filter { !allowed.contains($0) }.sorted()
        guard unknown.isEmpty else {
            throw validation(c, unknown.map { ("query." + $0, "unknown_parameter", "This operation does not accept this query parameter.") })
        }
    }

    /// api-contract.md § Query and pagination conventions: limit default per operation, 422 out of range.
    func parseLimit(_ c: SiloCtx, defaultValue: Int, maximum: Int) throws -> Int {
        guard let raw = c.query["limit"] else { return defaultValue }
        guard let value = Int(raw), value >= 1, value <= maximum else {
            throw validation(c, [("query.limit", "invalid", "limit must be an integer from 1 to \(maximum).")])
        }
        return value
    }

    func requirePositiveID(_ c: SiloCtx, _ value: String, location: String) throws {
        guard siloIsCanonicalPositive(value) else {
            throw validation(c, [(location, "invalid", "expected a positive integer identifier")])
        }
    }

    func requireOneOf(_ c: SiloCtx, _ value: String, _ options: [String], _ location: String) throws {
        guard options.contains(value) else {
            throw validation(c, [(location, "invalid", "expected one of " + options.joined(separator: ", "))])
        }
    }

    /// api-contract.md § Query and pagination conventions: booleans accept only lowercase true or false.
    func requireBool(_ c: SiloCtx, _ value: String, _ location: String) throws {
        guard value == "true" || value == "false" else {
            throw validation(c, [(location, "invalid", "expected true or false")])
        }
    }

    func validateItemQuery(_ c: SiloCtx) throws {
        if let library = c.query["library_id"] { try requirePositiveID(c, library, location: "query.library_id") }
        if let file = c.query["file_id"] { try requirePositiveID(c, file, location: "query.file_id") }
        if let size = c.query["image_size"] { try requireOneOf(c, size, ["small", "medium", "large", "original"], "query.image_size") }
    }

    func seasonNumber(_ c: SiloCtx, _ raw: String) throws -> Int {
        guard let number = Int(raw), number >= 0 else {
            throw validation(c, [("path.num", "invalid", "expected a season number of 0 or more")])
        }
        return number
    }

    func validateDeviceHeader(_ c: SiloCtx, _ raw: String) throws {
        let value = raw.trimmingCharacters(in: .whitespaces)
        if value.isEmpty { return }
        let valid =
            value.count <= 128
            && value.unicodeScalars.allSatisfy { s in
                (s.value >= 48 && s.value <= 57) || (s.value >= 65 && s.value <= 90) || (s.value >= 97 && s.value <= 122)
                    || s == "." || s == "_" || s == ":" || s == "-"
            }
        guard valid else {
            throw validation(
                c,
                [
                    (
                        "header.x-silo-device-id", "invalid",
                        "X-Silo-Device-Id must be one device identifier: letters, digits, '.', '_', ':' or '-', at most 128 characters."
                    )
                ])
        }
    }

    func deviceHeader(_ c: SiloCtx) -> String? {
        guard let value = c.header("x-silo-device-id")?.trimmingCharacters(in: .whitespaces), !value.isEmpty else { return nil }
        return value
    }

    /// Strict JSON body handling (api-contract.md § Contract foundation and § HTTP representation):
    /// non-identity Content-Encoding and any media type but application/json (charset=utf-8 the
    /// only parameter) are 415; over the byte limit 413; unparseable JSON 400 malformed_request;
    /// unknown members, explicit null, wrong types, missing required members and out-of-range
    /// values 422 validation_failed naming each `body.<member>`.
    func parseBody(_ c: SiloCtx, _ members: [SiloMember], maxBytes: Int = 1 << 20, bodyOptional: Bool = false) throws -> [String: SiloJ] {
        if let encoding = c.header("content-encoding"),
            !encoding.split(separator: ",").allSatisfy({ $0.trimmingCharacters(in: .whitespaces).lowercased() == "identity" })
        {
            throw problem(c, .unsupportedMediaType, "Compressed request bodies are not supported; send an unencoded application/json body.")
        }
        let declaredType = c.header("content-type")
        if bodyOptional && c.request.body.isEmpty && declaredType == nil { return [:] }
        guard let contentType = declaredType, siloIsJSONMediaType(contentType) else {
            throw problem(c, .unsupportedMediaType, "The request media type is not supported; send application/json.")
        }
        guard c.request.body.count <= maxBytes else {
            throw problem(c, .payloadTooLarge, "The request body exceeds the operation's limit.")
        }
        var parser = SiloJSONParser(c.request.body)
        guard let document = parser.parseDocument() else {
            throw problem(
                c, .malformedRequest, "The request body could not be parsed.",
                errors: [("body", "malformed_json", "The request body is not valid JSON.")])
        }
        guard case .object(let pairs) = document else {
            throw validation(c, [("body", "invalid_type", "expected a JSON object")])
        }
        var values: [String: SiloJ] = [:]
        for (key, value) in pairs { values[key] = value }
        var errors: [(String, String, String)] = []
        let known = Set(members.map(\.name))
        for key in values.keys.sorted() where !known.contains(key) {
            errors.append(("body." + key, "unknown_property", "This member is not part of the request."))
        }
        for member in members {
            let location = "body." + member.name
            guard let value = values[member.name] else {
                if member.required { errors.append((location, "required", "expected required property \(member.name) to be present")) }
                continue
            }
            if case .null = value {
                errors.append((location, "invalid_type", "null is not a value for this member; omit it instead"))
                continue
            }
            switch member.kind {
            case .string:
                guard case .string(let text) = value else {
                    errors.append((location, "invalid_type", "expected a string"))
                    continue
                }
                if text.count < member.minLength {
                    errors.append((location, "invalid", "expected at least \(member.minLength) characters"))
                } else if text.count > member.maxLength {
                    errors.append((location, "invalid", "expected at most \(member.maxLength) characters"))
                } else if let options = member.oneOf, !options.contains(text) {
                    errors.append((location, "invalid", "expected one of " + options.joined(separator: ", ")))
                }
            case .int:
                guard case .int(let number) = value else {
                    errors.append((location, "invalid_type", "expected an integer"))
                    continue
                }
                if let minimum = member.minimum, number < minimum {
                    errors.append((location, "invalid", "expected a value of at least \(minimum)"))
                } else if let maximum = member.maximum, number > maximum {
                    errors.append((location, "invalid", "expected a value of at most \(maximum)"))
                }
            case .bool:
                guard case .bool = value else {
                    errors.append((location, "invalid_type", "expected a boolean"))
                    continue
                }
            case .object:
                guard case .object = value else {
                    errors.append((location, "invalid_type", "expected an object"))
                    continue
                }
            case .array:
                guard case .array = value else {
                    errors.append((location, "invalid_type", "expected an array"))
                    continue
                }
            }
        }
        if !errors.isEmpty { throw validation(c, errors.sorted { $0.0 < $1.0 }) }
        return values
    }

    // MARK: - Cursors

    /// Opaque, tamper-resistant cursors bound to operation, viewer and filters (api-contract.md
    /// § Query and pagination conventions; Go: cursor.go shape `<base64url body>.<base64url mac>`).
    /// A malformed, tampered or foreign cursor is 400 invalid_cursor.
    func encodeCursor(scope: String, offset: Int) -> String {
        let body = Array("{\"v\":1,\"p\":{\"o\":\(offset)}}".utf8)
        let mac = siloHMACSHA256(key: cursorKey, message: Array(scope.utf8) + [0] + body)
        return siloBase64URL(body) + "." + siloBase64URL(mac)
    }

    func decodeCursor(_ c: SiloCtx, scope: String) throws -> Int {
        guard let cursor = c.query["cursor"], !cursor.isEmpty else { return 0 }
        let invalid = problem(c, .invalidCursor, "The cursor is malformed, tampered with, or belongs to a different query.")
        let parts = cursor.split(separator: ".", omittingEmptySubsequences: false).map(String.init)
        guard parts.count == 2, let body = siloFromBase64URL(parts[0]), let mac = siloFromBase64URL(parts[1]) else { throw invalid }
        guard siloConstantTimeEqual(mac, siloHMACSHA256(key: cursorKey, message: Array(scope.utf8) + [0] + body)) else { throw invalid }
        var parser = SiloJSONParser(body)
        guard let document = parser.parseDocument(), document["v"]?.intValue == 1,
            let offset = document["p"]?["o"]?.intValue, offset >= 0
        else { throw invalid }
        return Int(offset)
    }

    // MARK: - JSON documents

    func json(_ value: SiloJ, status: Int = 200, cache: String = "no-store") -> HTTPServer.Response {
        // api-contract.md § HTTP representation: application/json without a charset parameter;
        // § Response caching: structured responses default to Cache-Control: no-store.
        HTTPServer.Response(
            status: status, headers: [("Content-Type", "application/json"), ("Cache-Control", cache)],
            body: .bytes(Array(value.serialized().utf8)))
    }

    func noContent() -> HTTPServer.Response {
        HTTPServer.Response(status: 204, headers: [("Cache-Control", "no-store")])
    }

    func pageJSON(_ next: String?) -> SiloJ {
        SiloJ.obj([("has_more", SiloJ.bool(next != nil)), ("next_cursor", SiloJ.optStr(next))])
    }
}

/// A refusal carries its finished problem response through `throws`.
struct SiloRefusal: Error {
    let response: HTTPServer.Response
}

struct SiloMember {
    /// `array` checks only that the member is a JSON array; the handler checks its items.
    enum Kind { case string, int, bool, object, array }

    let name: String
    let kind: Kind
    let required: Bool
    let minLength: Int
    let maxLength: Int
    let oneOf: [String]?
    let minimum: Int64?
    let maximum: Int64?

    init(
        _ name: String, _ kind: Kind, required: Bool = false, minLength: Int = 0, maxLength: Int = .max,
        oneOf: [String]? = nil, minimum: Int64? = nil, maximum: Int64? = nil
    ) {
        self.name = name
        self.kind = kind
        self.required = required
        self.minLength = minLength
        self.maxLength = maxLength
        self.oneOf = oneOf
        self.minimum = minimum
        self.maximum = maximum
    }
}

/// The shared problem catalog (Go: problem.go; token_refresh_required from auth-api.md).
struct SiloProblem: Sendable {
    let id: String
    let status: Int
    let title: String

    static let malformedRequest = SiloProblem(id: "malformed_request", status: 400, title: "Malformed request")
    static let invalidCursor = SiloProblem(id: "invalid_cursor", status: 400, title: "Invalid cursor")
    static let authenticationRequired = SiloProblem(id: "authentication_required", status: 401, title: "Authentication required")
    static let invalidToken = SiloProblem(id: "invalid_token", status: 401, title: "Invalid token")
    static let sessionExpired = SiloProblem(id: "session_expired", status: 401, title: "Session expired")
    static let tokenRefreshRequired = SiloProblem(id: "token_refresh_required", status: 401, title: "Token refresh required")
    static let permissionDenied = SiloProblem(id: "permission_denied", status: 403, title: "Permission denied")
    static let profileVerificationRequired = SiloProblem(id: "profile_verification_required", status: 403, title: "Profile verification required")
    static let notFound = SiloProblem(id: "not_found", status: 404, title: "Not found")
    static let methodNotAllowed = SiloProblem(id: "method_not_allowed", status: 405, title: "Method not allowed")
    static let notAcceptable = SiloProblem(id: "not_acceptable", status: 406, title: "Not acceptable")
    static let requestTimeout = SiloProblem(id: "request_timeout", status: 408, title: "Request timeout")
    static let conflict = SiloProblem(id: "conflict", status: 409, title: "Conflict")
    static let deviceLoginExpired = SiloProblem(id: "device_login_expired", status: 410, title: "Device login expired")
    static let clientUpgradeRequired = SiloProblem(id: "client_upgrade_required", status: 410, title: "Client upgrade required")
    static let preconditionFailed = SiloProblem(id: "precondition_failed", status: 412, title: "Precondition failed")
    static let payloadTooLarge = SiloProblem(id: "payload_too_large", status: 413, title: "Payload too large")
    static let unsupportedMediaType = SiloProblem(id: "unsupported_media_type", status: 415, title: "Unsupported media type")
    static let rangeNotSatisfiable = SiloProblem(id: "range_not_satisfiable", status: 416, title: "Range not satisfiable")
    static let validationFailed = SiloProblem(id: "validation_failed", status: 422, title: "Validation failed")
    static let preconditionRequired = SiloProblem(id: "precondition_required", status: 428, title: "Precondition required")
    static let rateLimited = SiloProblem(id: "rate_limited", status: 429, title: "Rate limited")
    static let internalError = SiloProblem(id: "internal_error", status: 500, title: "Internal error")
    static let capabilityUnsupported = SiloProblem(id: "capability_unsupported", status: 501, title: "Capability unsupported")
    static let dependencyUnavailable = SiloProblem(id: "dependency_unavailable", status: 503, title: "Dependency unavailable")

    /// The catalog type a bare status maps to (Go: problem.go TypeForStatus), for injected faults.
    static func forStatus(_ status: Int) -> SiloProblem {
        switch status {
        case 400: return .malformedRequest
        case 401: return .authenticationRequired
        case 403: return .permissionDenied
        case 404: return .notFound
        case 405: return .methodNotAllowed
        case 406: return .notAcceptable
        case 408: return .requestTimeout
        case 409: return .conflict
        case 410: return .clientUpgradeRequired
        case 412: return .preconditionFailed
        case 413: return .payloadTooLarge
        case 415: return .unsupportedMediaType
        case 416: return .rangeNotSatisfiable
        case 422: return .validationFailed
        case 428: return .preconditionRequired
        case 429: return .rateLimited
        case 501: return .capabilityUnsupported
        case 503: return .dependencyUnavailable
        default: return .internalError
        }
    }
}
