import Foundation
import LabstreamCore
import LabstreamDemo

/// Plex's download queue as its spec describes it (Download Queue, "Available: 0.2.0"):
/// `POST /downloadQueue` (one queue per client), `POST /downloadQueue/{id}/add?keys=…`,
/// `GET /downloadQueue/{id}/items/{itemId}` (deciding → processing → available, or error),
/// `GET /downloadQueue/{id}/item/{itemId}/media` (503 with `Retry-After` until available, then
/// the file with `Range`), and `DELETE /downloadQueue/{id}/items/{itemId}`. An item is
/// transcoded with ffmpeg once it has been polled `readyAfterPolls` times.
extension ServerFixture {
    static let plexQueueId = 1

    public var queueItemCount: Int { state.withLock { $0.queueItems.count } }
    /// Items a client deleted (after fetching their file, or to cancel them).
    public var removedQueueItems: [Int] { state.withLock { $0.queueItems.filter { $0.value.cancelled }.map(\.key).sorted() } }
    public var queueMediaRequests: [LoggedRequest] { requestLog.filter { $0.path.hasPrefix("/downloadQueue/") && $0.path.hasSuffix("/media") } }
    /// The query of each `…/add` request, in order.
    public var queueAddRequests: [LoggedRequest] { requestLog.filter { $0.method == "POST" && $0.path.hasSuffix("/add") } }

    func downloadQueueRoute(_ request: HTTPServer.Request, parts: [String], fault: FixtureFault?, logIndex: Int) -> HTTPServer.Response? {
        guard parts.first == "downloadQueue" else { return nil }
        guard let client = request.headers["x-plex-client-identifier"], !client.isEmpty else {
            return .json("{\"errors\":[{\"code\":1000,\"message\":\"X-Plex-Client-Identifier is required\",\"status\":400}]}", status: 400)
        }
        let m = request.method
        let notFound = HTTPServer.Response.json("{\"errors\":[{\"code\":1002,\"message\":\"Not Found\"}]}", status: 404)
        if m == "POST" && parts == ["downloadQueue"] {
            return json(["MediaContainer": ["size": 1, "DownloadQueue": [queueDto(client)]] as [String: Any]])
        }
        guard parts.count >= 3, Int(parts[1]) == Self.plexQueueId else { return notFound }
        if m == "POST" && parts.count == 3 && parts[2] == "add" {
            // keys=/library/metadata/{ratingKey}; mediaIndex/partIndex pick the part.
            guard let key = request.query["keys"], key.hasPrefix("/library/metadata/"),
                let item = idsByPlexNumber[String(key.dropFirst("/library/metadata/".count))],
                let versions = itemsById[item]?["_versions"] as? [[String: Any]]
            else {
                return .json("{\"errors\":[{\"code\":1002,\"message\":\"keys names no item\"}]}", status: 400)
            }
            let mediaIndex = Int(request.query["mediaIndex"] ?? "0") ?? 0
            guard request.query["partIndex"].map({ $0 == "0" }) ?? true, versions.indices.contains(mediaIndex),
                let source = versions[mediaIndex]["Id"] as? String
            else {
                return .json("{\"errors\":[{\"code\":1002,\"message\":\"no such media or part\"}]}", status: 400)
            }
            let kbps = Int(request.query["videoBitrate"] ?? "") ?? 2000
            let id = state.withLock { s -> Int in
                let id = 500 + s.queueItems.count
                s.queueItems[id] = ServerJob(itemId: source, targetId: client, bitrate: kbps * 1000, key: key)
                return id
            }
            if createAnswerLost() { return .json("{\"errors\":[{\"message\":\"Gateway Timeout\"}]}", status: 504) }
            return json(["MediaContainer": ["size": 1, "AddedQueueItems": [["id": id, "key": key]]] as [String: Any]])
        }
        if m == "GET" && parts.count == 3 && parts[2] == "items" {
            let ids = state.withLock { s in s.queueItems.filter { !$0.value.cancelled && $0.value.targetId == client }.map(\.key).sorted() }
            return json(["MediaContainer": ["size": ids.count, "DownloadQueueItem": ids.map { queueItemDto($0) }] as [String: Any]])
        }
        guard parts.count >= 4, let itemId = Int(parts[3]), let job = state.withLock({ $0.queueItems[itemId] }), !job.cancelled,
            job.targetId == client
        else { return notFound }
        if parts.count == 4 && parts[2] == "items" && m == "DELETE" {
            state.withLock { $0.queueItems[itemId]?.cancelled = true }
            return HTTPServer.Response(status: 200)
        }
        if parts.count == 4 && parts[2] == "items" && m == "GET" {
            let failing = state.withLock { s -> Bool in
                s.queueItems[itemId]?.polls += 1
                if s.failSyncJobs { s.queueItems[itemId]?.failed = true }
                return s.failSyncJobs
            }
            let held = state.withLock { $0.holdSyncJobs }
            if !failing && !held && job.polls + 1 >= Self.readyAfterPolls && job.output == nil, let out = transcode(job, name: "queue-\(itemId)") {
                state.withLock { $0.queueItems[itemId]?.output = out }
            }
            return json(["MediaContainer": ["size": 1, "DownloadQueueItem": [queueItemDto(itemId)]] as [String: Any]])
        }
        if parts.count == 5 && parts[2] == "item" && parts[4] == "media" && (m == "GET" || m == "HEAD") {
            guard let output = job.output else {
                var busy = HTTPServer.Response.json("{\"errors\":[{\"message\":\"still transcoding\"}]}", status: 503)
                busy.headers.append(("Retry-After", "-1"))
                return busy
            }
            let report: @Sendable (Int64) -> Void = { [self] sent in
                state.withLock { s in if let i = s.log.lastIndex(where: { $0.id == logIndex }) { s.log[i].bytesSent = sent } }
            }
            return serveFile(output, tagId: "queue:\(itemId)", request, fault, report: report)
        }
        return notFound
    }

    func queueDto(_ client: String) -> [String: Any] {
        let items = state.withLock { $0.queueItems.values.filter { $0.targetId == client && !$0.cancelled } }
        let status = items.contains { $0.failed } ? "error" : items.allSatisfy { $0.output != nil } ? "done" : "processing"
        return ["id": Self.plexQueueId, "itemCount": items.count, "status": status]
    }

    func queueItemDto(_ id: Int) -> [String: Any] {
        let job = state.withLock { $0.queueItems[id]! }
        let expired = state.withLock { $0.expireSyncJobs }
        let status = expired ? "expired" : job.failed ? "error" : job.output != nil ? "available" : job.polls > 1 ? "processing" : "deciding"
        var dto: [String: Any] = [
            "id": id, "queueId": Self.plexQueueId, "key": job.key ?? "", "status": status,
            "DecisionResult": [
                "availableBandwidth": job.bitrate / 1000, "generalDecisionCode": 1000,
                "generalDecisionText": "Direct play not available; transcoding",
                "transcodeDecisionCode": 1001, "transcodeDecisionText": "Transcoding"
            ]
        ]
        if job.failed { dto["error"] = "the transcoder exited with an error" }
        if status == "processing" {
            dto["TranscodeSession"] = [
                "key": "/transcode/sessions/queue-\(id)", "progress": 50.0, "speed": 2.0, "throttled": false,
                "complete": false, "protocol": "http", "sourceVideoCodec": "h264", "sourceAudioCodec": "aac"
            ]
        }
        return dto
    }
}
