import Foundation

/// Why a file is in its state, as a typed value. The index keeps its code and parameters
/// (`persisted`), `--json` its stable code (`code(state:cause:)`), and a person reads its
/// sentence (`sentence`), rendered only at the edge: rewording a sentence changes nothing stored.
public enum StatusReason: Sendable, Hashable {
    /// An `unverified` row whose completion check has not run yet.
    case awaitingValidation
    /// An `unverified` row on a daemon whose playback probe is off.
    case probeOff
    /// A pinned file parked until its server answers again (the fill resumes it by itself).
    case serverUnavailable
    /// A file parked because the cache's disk cannot hold the rest of it.
    case storageFull
    /// A file `labstream pause` stopped.
    case pausedByUser
    /// A pinned file parked because the rest of it would take the cache over `max_size`
    /// (`server` nil) or over its server's `max_size`, by `need` bytes (0: not measured).
    case overBudget(need: Int64, server: String?)
    /// A pinned file that was downloading, back in the queue: files ahead of it took the fill's
    /// slots (a higher priority, a move, a file being read).
    case yielding
    /// A file the cache limits pushed out.
    case evicted
    /// A series monitor let go of the episode (watched, with delete-watched, or over its cap).
    case monitorLetGo
    /// In a series monitor's scope, but over its storage cap: not pinned.
    case heldByCap
    /// A file its server no longer lists: whether anything of it is kept here.
    case orphaned(kept: Bool)
    case localFileVanished
    case damagedBytes
    /// A pinned file whose media is whole while its subtitles and artwork are still on their way.
    case fetchingSideAssets
    /// A file whose server was removed from the configuration while it was on its way.
    case serverRemoved
    /// A transfer the index has under way while no daemon runs on the data directory (it was
    /// never mounted since, or was killed): nothing moves until the next mount.
    case daemonNotRunning
    /// Bytes an index of schema 1 recorded without digests, dropped by its upgrade.
    case indexUpgraded
    /// The file is different on the server from the bytes held (`why`, when known).
    case fileChanged(String? = nil, refetching: Bool = true)
    /// A stored copy adopted by the item the server now lists it under (a library re-added gave
    /// it a new id; `IdentityMatch` and `AdoptionProbe` confirmed it): `was` is its old item id.
    case matched(was: String)
    /// A file whose bytes are another server's stored copy of the same file (`SharedCopy`:
    /// matched by what both servers say and confirmed by a few ranges read from this one):
    /// stored once, under both paths. `path` is the other server's path in the mount.
    case shared(with: String)
    /// The file changed on the server again and again while being fetched.
    case keepsChanging(String)
    /// A server-made copy is being prepared (Emby Convert job, Plex download queue).
    case preparing(job: String)
    /// A copy at a preset the server prepares as a download entry (Silo).
    case preparingEntry(quality: String, entry: String)
    /// The server ended the copy's download entry (Silo): it `revoked` it, or could not prepare
    /// it. What is here stays readable.
    case entryEnded(revoked: Bool)
    /// A file that is not here while its server is away (its reads fail until it is back).
    case serverAway(Reachability)
    /// A pinned file waiting out a transient failure (`queued`): what happened, in the error's
    /// words, and in how many seconds the next try is.
    case waiting(what: String, retryIn: Int)
    /// A server that no longer accepts the stored sign-in: its pinned files wait, paused.
    case signInRefused(server: String)
    /// A failed try of a file of unknown size the fill comes back to, from `fromByte`.
    case retrying(String, fromByte: Int64)
    /// A file whose size the server does not say, fetched to its end.
    case sizeUnknown
    /// A live copy's stream stopped (in the error's words) and starts again.
    case liveStreamStopped(String)
    /// A live copy's stream failed for good (in the error's words).
    case liveStreamFailed(String)
    /// A finished live copy the playback check could not play (the probe's words).
    case doesNotPlay(String)
    /// Words that are not ours to type: a server's, an error's (`LabstreamError.userMessage`),
    /// the playback probe's. Its code follows the file's state.
    case said(String)
    /// A reason known only by its code and its sentence: one an older index stored as a
    /// sentence this release cannot take apart, or one read back from JSON.
    case coded(Code, String)

    /// The sentence of a file paused by `cause` of `server`.
    public static func paused(_ cause: PauseCause, server: String) -> StatusReason {
        switch cause {
        case .user: return .pausedByUser
        case .storageFull: return .storageFull
        case .serverUnavailable: return .serverUnavailable
        case .signInRefused: return .signInRefused(server: server)
        case .serverRemoved: return .serverRemoved
        case .overBudget: return .overBudget(need: 0, server: nil)
        }
    }

    /// A pinned file waiting out `error`, with the next try in `seconds`.
    public static func waitingForServer(_ error: LabstreamError, retryIn seconds: Double) -> StatusReason {
        let what: String
        switch error {
        case .serverUnavailable(let why), .fetchFailed(let why): what = why
        case .timedOut(let why): what = "timed out (\(why))"
        default: what = error.userMessage
        }
        return .waiting(what: what, retryIn: Int(seconds.rounded(.up)))
    }

    /// What `status` prints, the attribute holds and JSON's `message` carries.
    public var sentence: String {
        switch self {
        case .awaitingValidation: return "all bytes present; waiting for the playback check"
        case .probeOff: return "all bytes present; the playback probe is off"
        case .serverUnavailable: return "server unavailable"
        case .storageFull: return "the cache's disk is full; it resumes by itself once there is room (`labstream resume` tries now)"
        case .pausedByUser: return "paused by user"
        case .overBudget(let need, let server):
            let budget = server.map { "over server \($0)'s storage budget (its max_size)" } ?? "over the storage budget (max_size)"
            let needs = need > 0 ? ": it needs \(ByteCount.text(need)) more room" : ""
            return budget + needs
                + "; it resumes by itself once there is room (raise max_size in labstream.conf and send the daemon SIGHUP, or unpin or cancel other files)"
        case .yielding:
            return "waiting for its turn: files ahead of it in the queue took the download slots (`labstream queue` shows the order); "
                + "the segments already on their way still land"
        case .evicted: return "evicted to stay within the cache limits"
        case .monitorLetGo: return "removed by its series monitor (watched, or over the monitor's storage cap)"
        case .heldByCap: return "held back by its series monitor's storage cap"
        case .orphaned(let kept):
            return kept
                ? "orphaned: removed on the server; the local copy is kept until you remove it with `labstream cancel`"
                : "orphaned: removed on the server, and nothing of it is kept here; it leaves the tree at the next sync (`labstream sync`)"
        case .localFileVanished: return "the local file vanished; fetching it again"
        case .damagedBytes: return "damaged bytes found on disk were dropped and will be fetched again"
        case .fetchingSideAssets: return "the media is here; fetching its subtitles and artwork"
        case .serverRemoved:
            return "server removed; its copy stays, listed in `labstream orphans` (`labstream orphans --purge PATH` frees it; "
                + "after adding the server again, `labstream resume` continues it)"
        case .daemonNotRunning: return "the daemon is not running; this goes on when Labstream is mounted again"
        case .indexUpgraded: return "index upgraded; bytes will be fetched and verified again"
        case .fileChanged(let why, let refetching):
            return "file changed on the server" + (why.map { " (\($0))" } ?? "") + (refetching ? "; fetching it again" : "")
        case .keepsChanging(let why): return "the file keeps changing on the server (\(why)); run `labstream sync`"
        case .shared(let path):
            return "one copy with \(path): the same file on another server, confirmed by its bytes; stored once, kept while either holds it"
        case .matched(let was):
            return "matched: the server lists this file under a new id (was \(was)); its stored bytes were confirmed and kept"
        case .preparing(let job): return "the server is preparing the copy (job \(job))"
        case .preparingEntry(let quality, let entry): return "the server is preparing the \(quality) copy (download entry \(entry))"
        case .entryEnded(let revoked):
            return revoked
                ? "the server revoked this download; the bytes already here stay readable, nothing more is fetched (unpin and pin again to ask anew)"
                : "the server could not prepare this download; the bytes already here stay readable (unpin and pin again to ask anew)"
        case .serverAway(let state): return "server \(state.rawValue)"
        case .waiting(let what, let seconds): return "server unavailable: \(what), next try in \(seconds) s"
        case .signInRefused(let server):
            return "\(server) no longer accepts the stored sign-in (HTTP 401); sign in again with `labstream server add`, and this file resumes"
        case .retrying(let what, let byte): return "\(what); resuming from byte \(byte)"
        case .sizeUnknown: return "size unknown: fetching to the end"
        case .liveStreamStopped(let what): return "the live stream stopped (\(what)); it starts again from the beginning"
        case .liveStreamFailed(let what): return "the live stream failed: \(what)"
        case .doesNotPlay(let why): return "the copy does not play: \(why)"
        case .said(let words), .coded(_, let words): return words
        }
    }

    /// The stable name of a reason, for `--json` and scripts.
    public enum Code: String, Sendable, Hashable, CaseIterable, Codable {
        case storageFull = "storage_full"
        case pausedByUser = "paused_by_user"
        case overBudget = "over_budget"
        case serverUnavailable = "server_unavailable"
        case serverAway = "server_away"
        case signInRefused = "sign_in_refused"
        case awaitingValidation = "awaiting_validation"
        case probeOff = "probe_off"
        /// Back in the queue behind files that took its slot.
        case yielding
        case evicted
        case monitorLetGo = "monitor_removed"
        case heldByCap = "held_by_cap"
        case orphaned
        case fileChanged = "file_changed"
        case matched
        case sharedCopy = "shared_copy"
        case localFileVanished = "local_file_vanished"
        case damagedBytes = "damaged_bytes"
        case fetchingSideAssets = "fetching_side_assets"
        case preparingCopy = "preparing_copy"
        case liveStream = "live_stream"
        case sizeUnknown = "size_unknown"
        case serverRemoved = "server_removed"
        case indexUpgraded = "index_upgraded"
        case daemonNotRunning = "daemon_not_running"
        /// A failed try the fill comes back to by itself.
        case retrying
        /// The completion check could not prove the file plays (the file is kept).
        case checkInconclusive = "check_inconclusive"
        /// Anything else on a failed file: the sentence says what.
        case failed
        /// Anything else.
        case other

        /// The code of words that name no reason of their own, on a file in `state`.
        static func plain(_ state: DisplayState) -> Code {
            switch state {
            case .failed: return .failed
            case .unverified: return .checkInconclusive
            default: return .other
            }
        }
    }

    /// The code `--json` gives this reason on a file in `state` (a paused file's `cause` says
    /// it, when known).
    public func code(state: DisplayState, cause: PauseCause? = nil) -> Code {
        if state == .paused, let cause { return cause.code }
        switch self {
        case .awaitingValidation: return .awaitingValidation
        case .probeOff: return .probeOff
        case .serverUnavailable, .waiting: return .serverUnavailable
        case .storageFull: return .storageFull
        case .pausedByUser: return .pausedByUser
        case .overBudget: return .overBudget
        case .yielding: return .yielding
        case .evicted: return .evicted
        case .monitorLetGo: return .monitorLetGo
        case .heldByCap: return .heldByCap
        case .orphaned: return .orphaned
        case .localFileVanished: return .localFileVanished
        case .damagedBytes: return .damagedBytes
        case .fetchingSideAssets: return .fetchingSideAssets
        case .serverRemoved: return .serverRemoved
        case .daemonNotRunning: return .daemonNotRunning
        case .indexUpgraded: return .indexUpgraded
        case .fileChanged, .keepsChanging: return .fileChanged
        case .matched: return .matched
        case .shared: return .sharedCopy
        case .preparing: return .preparingCopy
        case .serverAway(let away): return away == .online ? .plain(state) : .serverAway
        case .signInRefused: return .signInRefused
        case .retrying: return .retrying
        case .sizeUnknown: return .sizeUnknown
        case .liveStreamStopped, .liveStreamFailed: return .liveStream
        // Sentences that never had a code of their own: they keep the one their state gives.
        case .preparingEntry, .entryEnded, .doesNotPlay, .said: return .plain(state)
        case .coded(let code, _): return code
        }
    }

    /// The code of `reason` on a file in `state`; nil when there is no reason.
    public static func code(_ reason: StatusReason?, state: DisplayState, cause: PauseCause? = nil) -> Code? {
        if state == .paused, let cause { return cause.code }
        return reason?.code(state: state, cause: cause)
    }
}

// MARK: - Stored form

extension StatusReason {
    /// How the index keeps it: a code naming the case, and its parameters as a JSON object of
    /// strings (nil when it has none).
    public var persisted: (code: String, parameters: String?) {
        let (code, parameters) = parts
        guard !parameters.isEmpty else { return (code, nil) }
        let encoder = JSONEncoder()
        encoder.outputFormatting = .sortedKeys
        return (code, (try? encoder.encode(parameters)).map { String(decoding: $0, as: UTF8.self) })
    }

    /// A reason read back from the index. A code this build does not know (never written by
    /// it) keeps its words, whatever they are.
    public init(persisted code: String, parameters: String?) {
        let p = parameters.flatMap { try? JSONDecoder().decode([String: String].self, from: Data($0.utf8)) } ?? [:]
        let text = p["text"] ?? ""
        switch code {
        case "awaiting_validation": self = .awaitingValidation
        case "probe_off": self = .probeOff
        case "server_unavailable": self = .serverUnavailable
        case "storage_full": self = .storageFull
        case "paused_by_user": self = .pausedByUser
        case "over_budget": self = .overBudget(need: p["need"].flatMap { Int64($0) } ?? 0, server: p["server"])
        case "yielding": self = .yielding
        case "evicted": self = .evicted
        case "monitor_removed": self = .monitorLetGo
        case "held_by_cap": self = .heldByCap
        case "orphaned": self = .orphaned(kept: p["kept"] == "1")
        case "local_file_vanished": self = .localFileVanished
        case "damaged_bytes": self = .damagedBytes
        case "fetching_side_assets": self = .fetchingSideAssets
        case "server_removed": self = .serverRemoved
        case "daemon_not_running": self = .daemonNotRunning
        case "index_upgraded": self = .indexUpgraded
        case "file_changed": self = .fileChanged(p["text"], refetching: p["refetching"] != "0")
        case "keeps_changing": self = .keepsChanging(text)
        case "matched": self = .matched(was: p["was"] ?? "")
        case "shared_copy": self = .shared(with: p["with"] ?? "")
        case "preparing_copy": self = .preparing(job: p["job"] ?? "")
        case "preparing_entry": self = .preparingEntry(quality: p["quality"] ?? "", entry: p["entry"] ?? "")
        case "entry_ended": self = .entryEnded(revoked: p["revoked"] == "1")
        case "server_away": self = .serverAway(p["state"].flatMap(Reachability.init(rawValue:)) ?? .offline)
        case "waiting_for_server": self = .waiting(what: text, retryIn: p["retry_in"].flatMap { Int($0) } ?? 0)
        case "sign_in_refused": self = .signInRefused(server: p["server"] ?? "")
        case "retrying": self = .retrying(text, fromByte: p["from_byte"].flatMap { Int64($0) } ?? 0)
        case "size_unknown": self = .sizeUnknown
        case "live_stream_stopped": self = .liveStreamStopped(text)
        case "live_stream_failed": self = .liveStreamFailed(text)
        case "does_not_play": self = .doesNotPlay(text)
        case "coded": self = .coded(p["code"].flatMap(Code.init(rawValue:)) ?? .other, text)
        default: self = .said(p["text"] ?? code)
        }
    }

    var parts: (String, [String: String]) {
        switch self {
        case .awaitingValidation: return ("awaiting_validation", [:])
        case .probeOff: return ("probe_off", [:])
        case .serverUnavailable: return ("server_unavailable", [:])
        case .storageFull: return ("storage_full", [:])
        case .pausedByUser: return ("paused_by_user", [:])
        case .overBudget(let need, let server): return ("over_budget", ["need": String(need)].merging(server.map { ["server": $0] } ?? [:]) { a, _ in a })
        case .yielding: return ("yielding", [:])
        case .evicted: return ("evicted", [:])
        case .monitorLetGo: return ("monitor_removed", [:])
        case .heldByCap: return ("held_by_cap", [:])
        case .orphaned(let kept): return ("orphaned", ["kept": kept ? "1" : "0"])
        case .localFileVanished: return ("local_file_vanished", [:])
        case .damagedBytes: return ("damaged_bytes", [:])
        case .fetchingSideAssets: return ("fetching_side_assets", [:])
        case .serverRemoved: return ("server_removed", [:])
        case .daemonNotRunning: return ("daemon_not_running", [:])
        case .indexUpgraded: return ("index_upgraded", [:])
        case .fileChanged(let why, let refetching):
            return ("file_changed", (why.map { ["text": $0] } ?? [:]).merging(["refetching": refetching ? "1" : "0"]) { a, _ in a })
        case .keepsChanging(let why): return ("keeps_changing", ["text": why])
        case .matched(let was): return ("matched", ["was": was])
        case .shared(let path): return ("shared_copy", ["with": path])
        case .preparing(let job): return ("preparing_copy", ["job": job])
        case .preparingEntry(let quality, let entry): return ("preparing_entry", ["quality": quality, "entry": entry])
        case .entryEnded(let revoked): return ("entry_ended", ["revoked": revoked ? "1" : "0"])
        case .serverAway(let state): return ("server_away", ["state": state.rawValue])
        case .waiting(let what, let seconds): return ("waiting_for_server", ["text": what, "retry_in": String(seconds)])
        case .signInRefused(let server): return ("sign_in_refused", ["server": server])
        case .retrying(let what, let byte): return ("retrying", ["text": what, "from_byte": String(byte)])
        case .sizeUnknown: return ("size_unknown", [:])
        case .liveStreamStopped(let what): return ("live_stream_stopped", ["text": what])
        case .liveStreamFailed(let what): return ("live_stream_failed", ["text": what])
        case .doesNotPlay(let why): return ("does_not_play", ["text": why])
        case .said(let words): return ("said", ["text": words])
        case .coded(let code, let words): return ("coded", ["code": code.rawValue, "text": words])
        }
    }
}

// MARK: - Sentences of older releases

extension StatusReason {
    /// The reasons that carry nothing but their case.
    static let plainCases: [StatusReason] = [
        .awaitingValidation, .probeOff, .serverUnavailable, .storageFull, .pausedByUser, .yielding, .evicted, .monitorLetGo, .heldByCap,
        .orphaned(kept: true), .orphaned(kept: false), .localFileVanished, .damagedBytes, .fetchingSideAssets, .serverRemoved,
        .daemonNotRunning, .indexUpgraded, .sizeUnknown, .serverAway(.offline), .serverAway(.authFailed), .entryEnded(revoked: true),
        .entryEnded(revoked: false)
    ]

    /// How indexes before schema 18 spelled the reasons they kept other than as their sentence.
    static let olderSpellings: [String: StatusReason] = [
        "storage_full": .storageFull, "all bytes present; awaiting validation": .awaitingValidation,
        "server removed; after adding it again, resume with labstream resume": .serverRemoved
    ]

    /// Sentences of indexes before schema 18 by their opening words, most specific first: the
    /// only place a reason's code is read from its words (`init(sentence:)`).
    static let openings: [(String, Code)] = [
        ("storage_full", .storageFull), ("paused by user", .pausedByUser), ("server unavailable", .serverUnavailable),
        ("all bytes present; awaiting validation", .awaitingValidation), ("all bytes present; the playback probe is off", .probeOff),
        ("evicted to stay within the cache limits", .evicted), ("removed by its series monitor", .monitorLetGo),
        ("held back by its series monitor's storage cap", .heldByCap), ("orphaned:", .orphaned),
        ("file changed on the server", .fileChanged), ("the file keeps changing", .fileChanged),
        ("the local file vanished", .localFileVanished), ("damaged bytes found on disk", .damagedBytes),
        ("the media is here; fetching its subtitles and artwork", .fetchingSideAssets),
        ("the server is preparing the copy", .preparingCopy), ("the live stream", .liveStream), ("size unknown", .sizeUnknown),
        ("server removed", .serverRemoved), ("index upgraded", .indexUpgraded), ("the daemon is not running", .daemonNotRunning),
        ("server offline", .serverAway), ("server auth-failed", .serverAway), ("over the storage budget", .overBudget),
        ("over server ", .overBudget)
    ]

    /// The code an older index's sentence was shown with (nil: words that name none, whose code
    /// follows the file's state).
    public static func olderCode(_ sentence: String) -> Code? {
        if let hit = openings.first(where: { sentence.hasPrefix($0.0) }) { return hit.1 }
        if sentence.contains("no longer accepts the stored sign-in") { return .signInRefused }
        if sentence.contains("; resuming from byte ") { return .retrying }
        return nil
    }

    /// A reason from its sentence, as an index before schema 18 stored it or JSON carries it:
    /// the case whose sentence it is, parameters and all; else its words under the code they
    /// were shown with (`code`, when told; else as their opening words name it), so nothing is
    /// lost and it reads and codes as before.
    public init(sentence text: String, code told: Code? = nil, state: DisplayState = .partial) {
        let code = told ?? Self.olderCode(text) ?? Code.plain(state)
        let candidates =
            (Self.olderSpellings[text].map { [$0] } ?? []) + Self.plainCases.filter { $0.sentence == text }
            + Self.parsed(text).filter { $0.sentence == text }
        if let hit = candidates.first(where: { $0.code(state: state) == code }) {
            self = hit
        } else {
            self = code == Code.plain(state) ? .said(text) : .coded(code, text)
        }
    }

    /// The reasons with parameters `text` could be the sentence of, its parameters read from it
    /// (the caller keeps the one whose sentence is `text` exactly).
    static func parsed(_ text: String) -> [StatusReason] {
        func between(_ head: String, _ tail: String) -> String? {
            guard text.hasPrefix(head), text.hasSuffix(tail), text.count >= head.count + tail.count else { return nil }
            return String(text.dropFirst(head.count).dropLast(tail.count))
        }
        var out: [StatusReason] = []
        for (tail, refetching) in [("; fetching it again", true), ("", false)] {
            if between("file changed on the server", tail) == "" { out.append(.fileChanged(nil, refetching: refetching)) }
            if let why = between("file changed on the server (", ")" + tail) { out.append(.fileChanged(why, refetching: refetching)) }
        }
        if let why = between("the file keeps changing on the server (", "); run `labstream sync`") { out.append(.keepsChanging(why)) }
        if let job = between("the server is preparing the copy (job ", ")") { out.append(.preparing(job: job)) }
        if let rest = between("the server is preparing the ", ")"), let cut = rest.range(of: " copy (download entry ") {
            out.append(.preparingEntry(quality: String(rest[..<cut.lowerBound]), entry: String(rest[cut.upperBound...])))
        }
        if let rest = between("server unavailable: ", " s"), let cut = rest.range(of: ", next try in ", options: .backwards),
            let seconds = Int(rest[cut.upperBound...])
        {
            out.append(.waiting(what: String(rest[..<cut.lowerBound]), retryIn: seconds))
        }
        if let cut = text.range(of: " no longer accepts the stored sign-in") { out.append(.signInRefused(server: String(text[..<cut.lowerBound]))) }
        if let cut = text.range(of: "; resuming from byte ", options: .backwards), let byte = Int64(text[cut.upperBound...]) {
            out.append(.retrying(String(text[..<cut.lowerBound]), fromByte: byte))
        }
        if let what = between("the live stream stopped (", "); it starts again from the beginning") { out.append(.liveStreamStopped(what)) }
        if let what = between("the live stream failed: ", "") { out.append(.liveStreamFailed(what)) }
        if let why = between("the copy does not play: ", "") { out.append(.doesNotPlay(why)) }
        return out
    }
}
