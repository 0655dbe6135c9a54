import LabstreamDemo
import LabstreamFixture
import Synchronization

/// Injected faults and the request log.
extension SiloFixture {
    // MARK: Controls: faults and log

    /// Injects `fault` into the next `times` requests (nil: every request) whose path starts with
    /// `pathPrefix`. The prefix is matched against the full path, the path without the base path,
    /// and the path relative to `/api/v2` (so "/downloads" and "/api/v2/downloads" both work).
    /// Status faults answer a problem document before the operation runs; `stall` delays the
    /// answer; `dropAfter`, `stallAfter`, `ignoreRange` and `wrongContentRange` act on byte routes;
    /// `malformedJSON` and `truncatedJSON` corrupt a JSON answer.
    public func inject(_ fault: FixtureFault, pathPrefix: String, times: Int? = 1) {
        if let times, times <= 0 { return }
        state.withLock { $0.faults.append(SiloFaultRule(fault: fault, prefix: pathPrefix, remaining: times)) }
    }

    /// Removes every injected fault, and any `failArtwork(times:status:)` still pending.
    public func clearFaults() {
        state.withLock { s in
            s.faults.removeAll()
            s.artworkFailure = nil
        }
    }

    /// The artwork store behind `GET /downloads/{id}/artwork/{kind}` answers `status` to the next
    /// `times` artwork reads (only reads that pass authorization and name a kind the item has reach
    /// the store). As downloads-api.md § 4.8 says: a 429 or 5xx from the store makes the route answer
    /// `503 dependency_unavailable` with `Retry-After: 5` (retry the same request later); any other
    /// store answer (e.g. 404) is `404 not_found`, which won't succeed on a retry. A later call
    /// replaces a pending one; `clearFaults()` clears it.
    public func failArtwork(times: Int = 1, status: Int = 503) {
        state.withLock { $0.artworkFailure = times > 0 ? (remaining: times, status: status) : nil }
    }

    /// Every request answered so far, oldest first.
    public var requestLog: [SiloLoggedRequest] {
        state.withLock { $0.log }
    }

    public func clearRequestLog() {
        state.withLock { $0.log.removeAll() }
    }

    // MARK: - Log and faults

    func beginLog(_ request: HTTPServer.Request) -> (Int, String) {
        var query = request.query
        if query["token"] != nil { query["token"] = "redacted" }
        let credential: String?
        if let authorization = request.headers["authorization"] {
            let value = authorization.split(separator: " ", maxSplits: 1).last.map { String($0) } ?? ""
            credential = value.hasPrefix("sa_") ? "api-key" : "bearer"
        } else if request.query["token"] != nil {
            credential = "query-token"
        } else {
            credential = nil
        }
        let entryQuery = query
        return state.withLock { s in
            s.nextLogId += 1
            let id = s.nextLogId
            s.log.append(
                SiloLoggedRequest(
                    id: id, method: request.method, path: request.path, query: entryQuery,
                    range: request.headers["range"], ifRange: request.headers["if-range"],
                    credential: credential, authorized: credential != nil,
                    deviceId: request.headers["x-silo-device-id"],
                    deviceName: request.headers["x-silo-device-name"],
                    devicePlatform: request.headers["x-silo-device-platform"],
                    profileId: request.headers["x-profile-id"],
                    sentProfileToken: request.headers["x-profile-token"] != nil,
                    status: 0, bytesSent: 0))
            let digits = String(id)
            return (id, String(repeating: "0", count: max(0, 24 - digits.count)) + digits)
        }
    }

    func takeFault(_ candidates: [String]) -> FixtureFault? {
        state.withLock { s in
            guard let i = s.faults.firstIndex(where: { rule in candidates.contains { $0.hasPrefix(rule.prefix) } }) else { return nil }
            let fault = s.faults[i].fault
            if let remaining = s.faults[i].remaining {
                if remaining <= 1 { s.faults.remove(at: i) } else { s.faults[i].remaining = remaining - 1 }
            }
            return fault
        }
    }
}

struct SiloFaultRule: Sendable {
    let fault: FixtureFault
    let prefix: String
    var remaining: Int?
}
