import Foundation
import LabstreamCore
import LabstreamDemo

/// One server-side job of the fixture: an Emby Sync (Convert) job or a Plex download-queue item.
struct ServerJob: Sendable {
    var itemId: String
    var targetId: String
    var bitrate: Int
    var polls = 0
    var output: String?
    var transferred = false
    var cancelled = false
    var failed = false
    /// Plex: the `keys` entry the item was added with.
    var key: String? = nil
    /// Emby: the `Name` the job was created with.
    var name: String? = nil
}

/// Emby's Sync API as its 4.8 spec describes it: `POST /Sync/Jobs`, `/Sync/Items/Ready`,
/// `/Sync/Jobs/{Id}`, `/Sync/JobItems/{Id}/File` (a static file with `Range`),
/// `…/Transferred`, and `DELETE /Sync/Jobs/{Id}`. A job converts with ffmpeg once it has been
/// polled `readyAfterPolls` times.
extension ServerFixture {
    public static let readyAfterPolls = 2

    /// Jobs created so far, and their state, for tests.
    public var syncJobCount: Int { state.withLock { $0.syncJobs.count } }
    public var transferredSyncJobs: [Int] { state.withLock { $0.syncJobs.filter { $0.value.transferred }.map(\.key).sorted() } }
    public var cancelledSyncJobs: [Int] { state.withLock { $0.syncJobs.filter { $0.value.cancelled }.map(\.key).sorted() } }
    public var syncFileRequests: [LoggedRequest] { requestLog.filter { $0.path.hasPrefix("/Sync/JobItems/") && $0.path.hasSuffix("/File") } }
    /// Every job (Emby Convert, Plex download queue) fails from now on, as a transcode error would.
    public func failSyncJobs(_ failing: Bool = true) { state.withLock { $0.failSyncJobs = failing } }
    public func expireSyncJobs(_ expiring: Bool = true) { state.withLock { $0.expireSyncJobs = expiring } }
    public func holdSyncJobs() { state.withLock { $0.holdSyncJobs = true } }
    /// The next `count` job creations (Emby Convert, Plex download queue add) make the job but
    /// answer 504, as a proxy that timed out does: the client cannot know the job exists.
    public func loseJobCreateAnswers(_ count: Int) { state.withLock { $0.lostCreateAnswers = count } }

    /// The next Emby Convert job creation makes its job, then holds its answer until
    /// `releaseJobCreateAnswer()` (at most a minute): a server slow to answer a job's create.
    public func holdNextJobCreateAnswer() { state.withLock { $0.jobCreateGate = (true, DispatchSemaphore(value: 0)) } }
    public func releaseJobCreateAnswer() { state.withLock { $0.jobCreateGate }?.gate.signal() }
    /// Whether a job creation's answer is being held now (made, not yet sent).
    public var holdsJobCreateAnswer: Bool { state.withLock { $0.holdingJobCreate } }

    func holdJobCreateAnswer() {
        let gate = state.withLock { s -> DispatchSemaphore? in
            guard let armed = s.jobCreateGate, armed.armed else { return nil }
            s.jobCreateGate = (false, armed.gate)
            s.holdingJobCreate = true
            return armed.gate
        }
        guard let gate else { return }
        _ = gate.wait(timeout: .now() + 60)
        state.withLock { $0.holdingJobCreate = false }
    }

    func createAnswerLost() -> Bool {
        state.withLock { s in
            guard s.lostCreateAnswers > 0 else { return false }
            s.lostCreateAnswers -= 1
            return true
        }
    }

    func syncRoute(_ request: HTTPServer.Request, parts: [String], fault: FixtureFault?, logIndex: Int) -> HTTPServer.Response? {
        guard parts.first == "Sync" else { return nil }
        let m = request.method
        if m == "POST" && parts == ["Sync", "Jobs"] {
            guard let body = try? JSONSerialization.jsonObject(with: Data(request.body)) as? [String: Any],
                let target = body["TargetId"] as? String, let items = body["ItemIds"] as? [String], let item = items.first
            else {
                return .json("{\"title\":\"Bad Request\"}", status: 400)
            }
            // `ItemIds` are item ids (a version of a multi-version item is an item of its own).
            guard filesById[item] != nil else { return .json("Item \(item) not found", status: 400) }
            let bitrate = body["Bitrate"] as? Int ?? 2_000_000
            let id = state.withLock { s -> Int in
                let id = 100 + s.syncJobs.count
                s.syncJobs[id] = ServerJob(itemId: item, targetId: target, bitrate: bitrate, name: body["Name"] as? String)
                return id
            }
            if createAnswerLost() { return .json("{\"title\":\"Gateway Timeout\"}", status: 504) }
            holdJobCreateAnswer()
            return json(["Job": syncJobDto(id), "JobItems": [syncJobItemDto(id)]])
        }
        if m == "GET" && parts == ["Sync", "Jobs"] {
            let ids = state.withLock { $0.syncJobs.filter { !$0.value.cancelled }.map(\.key).sorted() }
            return json(["Items": ids.map { syncJobDto($0) }, "TotalRecordCount": ids.count])
        }
        if m == "GET" && parts == ["Sync", "Items", "Ready"] {
            guard let target = request.query["TargetId"] else { return .json("{\"title\":\"TargetId is required\"}", status: 400) }
            let failing = state.withLock { $0.failSyncJobs }
            let due = state.withLock { s -> [Int] in
                var out: [Int] = []
                for (id, var job) in s.syncJobs where job.targetId == target && !job.cancelled && !job.transferred && !s.expireSyncJobs {
                    job.polls += 1
                    if failing { job.failed = true }
                    s.syncJobs[id] = job
                    if !job.failed && !s.holdSyncJobs && job.polls >= Self.readyAfterPolls { out.append(id) }
                }
                return out.sorted()
            }
            var ready: [[String: Any]] = []
            for id in due {
                guard let output = convert(id) else { continue }
                let job = state.withLock { $0.syncJobs[id]! }
                ready.append([
                    "ServerId": serverId, "SyncJobId": id, "SyncJobName": "Labstream", "SyncJobDateCreated": "2026-12-01T00:00:00.0000000Z",
                    "SyncJobItemId": id * 10, "OriginalFileName": (output as NSString).lastPathComponent, "UserId": userId,
                    "Item": dto(itemsById[job.itemId] ?? ["Id": job.itemId, "Type": "Movie"], fields: []), "AdditionalFiles": [] as [Any]
                ])
            }
            return json(ready)
        }
        if parts.count == 3 && parts[1] == "Jobs", let id = Int(parts[2]) {
            if m == "GET" && state.withLock({ $0.expireSyncJobs }) { return .json("{\"title\":\"Not Found\"}", status: 404) }
            guard state.withLock({ $0.syncJobs[id].map { !$0.cancelled } ?? false }) else { return .json("{\"title\":\"Not Found\"}", status: 404) }
            if m == "DELETE" {
                state.withLock { $0.syncJobs[id]?.cancelled = true }
                return HTTPServer.Response(status: 204)
            }
            if m == "GET" { return json(syncJobDto(id)) }
        }
        if parts.count == 4 && parts[1] == "JobItems", let itemId = Int(parts[2]), itemId % 10 == 0 {
            let id = itemId / 10
            guard let job = state.withLock({ $0.syncJobs[id] }), !job.cancelled, let output = job.output else {
                return .json("{\"title\":\"Not Found\"}", status: 404)
            }
            if (m == "GET" || m == "HEAD") && parts[3] == "File" {
                let report: @Sendable (Int64) -> Void = { [self] sent in
                    state.withLock { s in if let i = s.log.lastIndex(where: { $0.id == logIndex }) { s.log[i].bytesSent = sent } }
                }
                return serveFile(output, tagId: "sync:\(id)", request, fault, report: report)
            }
            if m == "POST" && parts[3] == "Transferred" {
                state.withLock { $0.syncJobs[id]?.transferred = true }
                return HTTPServer.Response(status: 204)
            }
        }
        return nil
    }

    func syncStatus(_ job: ServerJob) -> String {
        if job.failed { return "Failed" }
        if job.transferred { return "Completed" }
        if job.output != nil { return "ReadyToTransfer" }
        return job.polls > 0 ? "Converting" : "Queued"
    }

    func syncJobDto(_ id: Int) -> [String: Any] {
        let job = state.withLock { $0.syncJobs[id]! }
        return [
            "Id": id, "TargetId": job.targetId, "TargetName": "Labstream", "Quality": "custom", "Bitrate": job.bitrate,
            "Container": "mkv", "VideoCodec": "h264", "AudioCodec": "aac", "Name": job.name ?? "", "Status": syncStatus(job),
            "Progress": job.output == nil ? 50.0 : 100.0, "ItemCount": 1, "RequestedItemIds": [UInt64(plexNumber(job.itemId)) ?? 0],
            "DateCreated": "2026-12-01T00:00:00.0000000Z"
        ]
    }

    func syncJobItemDto(_ id: Int) -> [String: Any] {
        let job = state.withLock { $0.syncJobs[id]! }
        return [
            "Id": id * 10, "JobId": id, "ItemName": itemsById[job.itemId]?["Name"] as? String ?? "", "MediaSourceId": mediaSourceId(ofItem: job.itemId),
            "TargetId": job.targetId, "Status": job.output == nil ? "Queued" : "ReadyToTransfer", "Progress": 0.0,
            "DateCreated": "2026-12-01T00:00:00.0000000Z"
        ]
    }

    /// The job's output, made once with ffmpeg at the job's bitrate.
    func convert(_ id: Int) -> String? {
        guard let job = state.withLock({ $0.syncJobs[id] }) else { return nil }
        if let done = job.output { return done }
        guard let out = transcode(job, name: "sync-\(id)") else { return nil }
        state.withLock { $0.syncJobs[id]?.output = out }
        return out
    }

    /// A server-side transcode of `job`'s source at its bitrate, into a temporary file: Matroska
    /// for an Emby Convert job (the container the job asks for), MP4 for Plex's download queue
    /// (what Plex makes of it, `ftyp isom`, whatever the client asked).
    func transcode(_ job: ServerJob, name: String) -> String? {
        guard let file = filesById[job.itemId] else { return nil }
        let format = kind == .plex ? "mp4" : "matroska"
        let out = NSTemporaryDirectory() + "labstream-\(name)-\(getpid())." + (kind == .plex ? "mp4" : "mkv")
        let ffmpeg = Process()
        ffmpeg.executableURL = URL(fileURLWithPath: "/usr/bin/ffmpeg")
        ffmpeg.arguments = [
            "-v", "error", "-nostdin", "-y", "-i", file, "-c:v", "libx264", "-preset", "ultrafast", "-b:v", String(job.bitrate),
            "-c:a", "aac", "-b:a", "128k", "-f", format, out
        ]
        ffmpeg.standardInput = FileHandle.nullDevice
        ffmpeg.standardOutput = FileHandle.nullDevice
        ffmpeg.standardError = FileHandle.nullDevice
        guard (try? ffmpeg.run()) != nil else { return nil }
        ffmpeg.waitUntilExit()
        return ffmpeg.terminationStatus == 0 ? out : nil
    }
}
