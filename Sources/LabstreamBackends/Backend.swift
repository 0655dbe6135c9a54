import Foundation
import LabstreamCore

/// What the engine and the catalog sync need from any media server. What only some servers
/// can do is a protocol of its own (`IncrementalCatalog`, `LiveCopySource`,
/// `PreparedCopySource`), with no default implementations: a backend that means to do it and
/// spells a method differently fails to compile instead of silently doing nothing.
public protocol MediaBackend: Sendable {
    var serverName: String { get }
    var kind: BackendKind { get }
    var transport: any HTTPTransport { get }
    /// The whole catalog of the libraries Labstream can place. Throws rather than returning a
    /// partial one. Items' details go to `stash` as their pages arrive, where the backend has any.
    func fetchCatalog(progress: (String) -> Void, stash: (any DetailsStash)?) throws(LabstreamError) -> [LibraryCatalog]
    /// A closed-range request for the bytes of `file`.
    func rangeRequest(for file: TreeFile, range: ByteRange, validator: Validator?) -> HTTPRequest
    /// The cheap request anyone may make (is the server there at all?) and the cheapest one
    /// that needs the stored sign-in (does it still accept it?): `checkReachability` asks both.
    var reachabilityProbes: (public: HTTPRequest, signedIn: HTTPRequest) { get }
    /// Does the server answer, and does it still accept the stored sign-in? (A backend whose
    /// access tokens expire renews one here before it answers no.)
    func checkReachability() -> Reachability
}

extension MediaBackend {
    /// The whole catalog with every item's details in it.
    public func fetchCatalog(progress: (String) -> Void) throws(LabstreamError) -> [LibraryCatalog] {
        try fetchCatalog(progress: progress, stash: nil)
    }
}

/// A server that can list what changed since a time.
public protocol IncrementalCatalog: MediaBackend {
    /// Items changed since `since` (seconds since the epoch), handed to `apply` a page at a time
    /// as they arrive (each a part of one library: its id and name, a page of its changed items,
    /// series details), with their details going to `stash` as in a whole read; a library with
    /// nothing changed is handed over once with no items (its name may have changed). So a sync
    /// in which every item changed never holds the changed set whole. false when this server
    /// cannot tell this time: then a full fetch is needed, and what was applied is dropped.
    /// `known` is the stored catalog's outline (`OfflineIndex.catalogOutline`: item ids per
    /// library, series years): what a changed episode does not carry, and what counts are set
    /// against.
    func fetchChanges(
        since: Int64, known: CatalogOutline, progress: (String) -> Void, stash: (any DetailsStash)?,
        apply: (LibraryCatalog) throws(LabstreamError) -> Void
    ) throws(LabstreamError) -> Bool
}

/// A server whose incremental catalog does not see watched-state changes (an item's last-saved
/// date is its metadata's): series monitors ask it directly which episodes were watched.
public protocol WatchedState: MediaBackend {
    /// The episodes of `series` the signed-in user has watched, with those whose own watched
    /// flag in the same answer says otherwise (asked once per evaluation of a server's monitors;
    /// more may come back, never fewer).
    func watchedEpisodes(ofSeries series: [String]) throws(LabstreamError) -> WatchedAnswer
}

/// A server that serves artwork and subtitles beside its media.
public protocol SideAssetSource: MediaBackend {
    /// The request for `asset`'s bytes; nil when this server cannot serve it.
    func assetRequest(_ asset: PlannedAsset) -> HTTPRequest?
}

/// A server that tells some side assets only on an item's own route (Plex lists its parts'
/// subtitle streams and its chapters there, not in section listings).
public protocol ItemExtrasSource: SideAssetSource {
    /// True when that route is the item's managed download entry (Silo's offline manifest): it
    /// is asked only once the item has one, with it.
    var extrasNeedEntry: Bool { get }
    /// What the item's own route adds to its listing; nil when it says nothing more.
    func extras(of itemId: String, entry: ManagedEntry?) throws(LabstreamError) -> ItemDetails?
}

/// A server that streams a copy at another quality as it transcodes.
public protocol LiveCopySource: MediaBackend {
    /// A forward-only stream of `file` on a live-copy route, tagged `playSession`; nil when this
    /// server cannot stream that route.
    func liveStreamRequest(for file: TreeFile, route: Route, playSession: String) -> HTTPRequest?
    /// Stops the server-side encoding behind `playSession` (nil: nothing to stop).
    func stopEncodingRequest(playSession: String) -> HTTPRequest?
}

/// A server that prepares a copy at another quality ahead of time (a job, a queue item).
public protocol PreparedCopySource: MediaBackend {
    /// Starts a server-side preparation of `file`; returns the job's id.
    func startPreparation(of file: TreeFile, route: Route) throws(LabstreamError) -> String
    /// The jobs this device already has on the server for `file` on `route` (one made by a
    /// create whose answer was lost to a stop or a timeout), newest first.
    func existingPreparations(of file: TreeFile, route: Route) throws(LabstreamError) -> [String]
    /// Where the job stands; `ready` names the prepared file and its size.
    func preparation(job: String) throws(LabstreamError) -> Preparation
    /// Tells the server the prepared file arrived (it may then clean up).
    func finishPreparation(job: String, file: PreparedFile) throws(LabstreamError)
    /// Cancels a job (cleanup of a failed or abandoned copy).
    func cancelPreparationRequest(job: String) -> HTTPRequest?
}

/// A server whose address for a file's bytes names the file's version (Plex: a part's `key`
/// carries its changestamp), so the address stops answering once the file changes, and the
/// item's own route says where the new bytes are.
public protocol MovableSources: MediaBackend {
    /// A ranged `request` for `file` was answered `status`: when that is because the file changed
    /// on the server and its bytes now live elsewhere, says so (later `rangeRequest`s go there
    /// until a catalog sync names the new address); nil when it is not (the file is gone, or
    /// the address is still current). May ask the server (blocking).
    func sourceMoved(_ file: TreeFile, asked request: HTTPRequest, status: Int) -> String?
}

/// A server that keeps a registry of the copies this device holds (Silo's managed downloads):
/// a pinned file is registered, its progress and completion reported, and its entry deleted
/// when it is unpinned. One entry per item (a film, an episode), for one of its files.
public protocol ManagedDownloadRegistry: MediaBackend {
    /// Creates the entry for `file` at `quality` (the original, or a copy at a preset the
    /// server offers; one it does not is refused). Not idempotent: after a throw the server may
    /// have made it (`entries` lists it); `.exists` means the server already has one for this item.
    func register(_ file: TreeFile, quality: Quality) throws(LabstreamError) -> Registration
    /// Creates the entries of every episode of one season in one batch (`batch` names it),
    /// every page; the server picks each episode's version and says which it skipped and why.
    /// Not idempotent, like `register`.
    func registerSeason(series: String, season: Int, batch: String) throws(LabstreamError) -> (
        made: [ManagedEntry], skipped: [(episode: String, reason: String)]
    )
    /// This device's entries on the server, every page.
    func entries() throws(LabstreamError) -> [ManagedEntry]
    /// Reports the copy's state (`at`: when it changed locally, milliseconds since the epoch); nil
    /// when the entry's revision moved on (re-list, never rewrite).
    func report(_ entry: ManagedEntry, _ state: ManagedEntry.Report, at: Int64) throws(LabstreamError) -> ManagedEntry?
    /// Deletes an entry (from the cleanup journal); the answer's status, nil when none came.
    func remove(entry id: String) -> Int?
    /// The entry's manifest: its integrity data and the document as sent.
    func manifest(of entry: ManagedEntry) throws(LabstreamError) -> (integrity: Integrity, document: [UInt8])
    /// From now on, fetch the bytes of `source` through `entry` (nil: the ordinary route).
    func routeBytes(of source: FileKey, through entry: String?)
    /// What a byte route's `status` means for `source` when the registry's contract gives it a
    /// meaning of its own (an entry that will not be served); nil for the ordinary reading.
    func byteRefusal(of source: FileKey, status: Int) -> String?
}

/// A registry that keeps series monitors of its own for this device (Silo's download
/// subscriptions, downloads-api.md § 8): Labstream's monitors are mirrored there, and the
/// server's sync registers the episodes' entries, which the managed pass adopts.
public protocol SeriesSubscriptions: ManagedDownloadRegistry {
    /// Whether this server keeps monitors for this profile now (its capability says so).
    func keepsMonitors() throws(LabstreamError) -> Bool
    /// This device's subscriptions, every page.
    func subscriptions() throws(LabstreamError) -> [SeriesSubscription]
    /// Makes the monitor's subscription (the device's existing one is answered unchanged).
    func subscribe(_ monitor: SeriesMonitor) throws(LabstreamError) -> SeriesSubscription
    /// Changes it to the monitor's settings; nil when its validator moved on (read it again).
    func update(_ subscription: SeriesSubscription, to monitor: SeriesMonitor) throws(LabstreamError) -> SeriesSubscription?
    /// Deletes it (its entries stay); false when its validator moved on.
    func unsubscribe(_ subscription: SeriesSubscription) throws(LabstreamError) -> Bool
    /// Lets the server register what is due, every page; how many entries it registered, nil
    /// when the subscription changed meanwhile (read it again).
    func sync(_ subscription: SeriesSubscription) throws(LabstreamError) -> Int?
}

public enum Registration: Sendable, Hashable {
    case made(ManagedEntry)
    /// The server has an entry for this item already (made elsewhere, or by a lost answer).
    case exists
}

/// A server-side preparation job's state.
public enum Preparation: Sendable, Hashable {
    case running(String)
    case ready(PreparedFile, size: Int64)
    case failed(String)
}

extension MediaBackend {
    /// Does the server answer, and does it still accept the stored sign-in? The same two
    /// questions for every kind (`ReachabilityPolicy` judges the answers).
    public func checkReachability() -> Reachability {
        let probes = reachabilityProbes
        let info = try? transport.send(probes.public)
        guard info?.status == 200 else { return ReachabilityPolicy.state(probeStatus: info?.status, authStatus: nil) }
        var signedIn = try? transport.send(probes.signedIn)
        // A short-lived access token that has run out is renewed once before the sign-in counts as refused.
        if signedIn?.status == 401, let again = (self as? any RenewableSignIn)?.renewedSignInProbe() { signedIn = try? transport.send(again) }
        return ReachabilityPolicy.state(probeStatus: 200, authStatus: signedIn?.status)
    }
}

/// A server whose access token runs out and is renewed with a refresh token (Silo).
public protocol RenewableSignIn: MediaBackend {
    /// The signed-in probe again with a renewed token; nil when it cannot be renewed.
    func renewedSignInProbe() -> HTTPRequest?
}

/// The session values a backend needs; the token comes from the credential store only.
public struct ServerSession: Sendable {
    public var name: String
    public var url: String
    public var userId: String
    public var token: String
    /// A profile's PIN verification (Silo's `X-Profile-Token`), when the profile has a PIN.
    public var profileToken: String?
    /// Writes a rotated secret (a Silo refresh token) to the credential store; called, and
    /// done, before the new secret is used, so a crash cannot leave only a spent one on disk.
    public var persistToken: (@Sendable (String) throws(LabstreamError) -> Void)?

    public init(
        name: String, url: String, userId: String, token: String, profileToken: String? = nil,
        persistToken: (@Sendable (String) throws(LabstreamError) -> Void)? = nil
    ) {
        self.profileToken = profileToken
        self.name = name
        self.url = url
        self.userId = userId
        self.token = token
        self.persistToken = persistToken
    }
}

/// Collects paged listings, each entry decoded as its page arrives: a library's 90 000 films
/// are kept as what they decode to, never as the JSON of every page at once (that held a
/// gigabyte). A server that ignores the page offset answers the same page again: entries
/// already seen are not added twice, and a page that brings nothing new ends the walk instead
/// of looping.
struct PageCollector<Entry> {
    var all: [Entry] = []
    /// Entries taken, decodable or not: the next page starts here.
    var count = 0
    var seen = Set<String>()
    let key: (JSONValue) -> String?

    /// Room for the whole listing once its first page said how long it is: a 90 000-film
    /// array grown by doubling held both copies at its last growth. A total past `reserveLimit`
    /// (a server's count is not trusted with memory) reserves that much; the rest grows.
    mutating func expect(_ total: Int) {
        if all.isEmpty { all.reserveCapacity(min(max(total, 0), Self.reserveLimit)) }
    }
    static var reserveLimit: Int { 1 << 17 }

    /// Adds the new entries of `page`, as `decode` makes them; false when there were none.
    mutating func add(_ page: [JSONValue], decode: (JSONValue) -> Entry?) -> Bool {
        var added = false
        for entry in page {
            if let k = key(entry) {
                guard seen.insert(k).inserted else { continue }
            }
            count += 1
            if let decoded = decode(entry) { all.append(decoded) }
            added = true
        }
        return added
    }
}

/// A later page of a listing, asked on a thread of its own while the caller decodes the page
/// before it: the server renders pages while Labstream decodes, instead of each waiting for the
/// other (a 100 000-item first sync took the server's time plus ours), and a server with more
/// than one core renders two at once. At most `limit` pages ahead, so a few pages' bodies are
/// held at a time.
final class PageAhead<Answer: Sendable>: @unchecked Sendable {
    static var limit: Int { 2 }

    /// The offset the page was asked from: used only if the walk really continues there.
    let start: Int
    private let finished = DispatchSemaphore(value: 0)
    // Written once by the thread before `finished` is signalled, read after waiting for it.
    private var outcome: Result<Answer, LabstreamError>?

    init(start: Int, _ fetch: @escaping @Sendable () throws(LabstreamError) -> Answer) {
        self.start = start
        let thread = Thread { [self] in
            do throws(LabstreamError) { outcome = .success(try fetch()) } catch { outcome = .failure(error) }
            finished.signal()
        }
        thread.name = "page-ahead"
        thread.start()
    }

    /// `ahead` topped up to `limit` pages after a full page of `pageCount` entries that started
    /// at `start`, each asked by `fetch(offset)`, none past `total`.
    static func topUp(
        _ ahead: inout [PageAhead], after start: Int, pageCount: Int, total: Int,
        _ fetch: (Int) -> @Sendable () throws(LabstreamError) -> Answer
    ) {
        guard pageCount > 0 else { return }
        var next = (ahead.last?.start ?? start) + pageCount
        while ahead.count < limit, next < total {
            ahead.append(PageAhead(start: next, fetch(next)))
            next += pageCount
        }
    }

    /// The page at `start`: the one asked ahead for it, or (when the walk is not where the pages
    /// ahead expected it, or none was asked) `fetch()` now, after the unused ones are settled.
    static func page(
        at start: Int, from ahead: inout [PageAhead], else fetch: () throws(LabstreamError) -> Answer
    ) throws(LabstreamError) -> Answer {
        if ahead.first?.start == start { return try ahead.removeFirst().answer() }
        settle(ahead)
        ahead = []
        return try fetch()
    }

    /// Waits for pages asked ahead that the walk will not use (it ended, or the server's pages
    /// were not where they were expected): no request outlives the walk that made it.
    static func settle(_ unused: [PageAhead]) {
        for page in unused { _ = try? page.answer() }
    }

    /// The page's answer (or the error asking for it ended in), once it arrived.
    func answer() throws(LabstreamError) -> Answer {
        finished.wait()
        finished.signal()  // a second call does not wait forever
        guard let outcome else { throw .malformedResponse("a page asked ahead brought nothing") }
        return try outcome.get()
    }
}

extension HTTPTransport {
    /// `send`, with a transport failure said as a Labstream error (server unavailable, timed out…).
    public func call(_ request: HTTPRequest) throws(LabstreamError) -> HTTPResponse {
        do { return try send(request) } catch { throw error.asLabstreamError }
    }
}

/// How a catalog request rides out a server that is restarting or busy: transient failures
/// (5xx, 408, 429 with its `Retry-After`, reset connections, timeouts) are retried a
/// few times with backoff and jitter (a refused connection is not: nothing listens); a `401` is retried once if the sign-in still holds
/// (`signInHolds`), else returned for the caller to report. What `RetryPolicy` gives up on is
/// returned (or thrown) as it came.
public struct CatalogRequestRetry: Sendable {
    public var policy: RetryPolicy
    public var sleep: @Sendable (Double) -> Void

    public init(
        policy: RetryPolicy = RetryPolicy(maxAttempts: 4, baseDelay: 0.5, maxDelay: 8, maxRetryAfter: 30),
        sleep: @escaping @Sendable (Double) -> Void = { Thread.sleep(forTimeInterval: $0) }
    ) {
        self.policy = policy
        self.sleep = sleep
    }

    public func call(_ request: HTTPRequest, on transport: any HTTPTransport, signInHolds: () -> Bool) throws(LabstreamError) -> HTTPResponse {
        // A POST that timed out may have done its work (made a job): sending it again could do
        // it twice, so only reads are retried here; creators look before they create again.
        let idempotent = ["GET", "HEAD"].contains(request.method)
        var failures = 0
        var signInChecked = false
        while true {
            let failure: RetryPolicy.Failure
            let response: HTTPResponse
            do { response = try transport.send(request) } catch {
                failures += 1
                // Nothing listening is a server that is down, not busy: said at once (the
                // daemon probes it with backoff and syncs it when it answers).
                if case .unreachable = error { throw error.asLabstreamError }
                guard idempotent, case .retry(let delay) = decide(.transientTransport, failures) else { throw error.asLabstreamError }
                sleep(delay)
                continue
            }
            if response.status == 401 && !signInChecked {
                signInChecked = true
                if signInHolds() { continue }
                return response
            }
            guard RetryPolicy.retriedStatuses.contains(response.status) else { return response }
            failure = .status(response.status, retryAfter: response.header("Retry-After"))
            failures += 1
            guard idempotent, case .retry(let delay) = decide(failure, failures) else { return response }
            sleep(delay)
        }
    }

    func decide(_ failure: RetryPolicy.Failure, _ failures: Int) -> RetryPolicy.Decision {
        policy.decide(failure, failures: failures, now: Date().timeIntervalSince1970, random: Double.random(in: 0...1))
    }
}

extension HTTPTransport {
    /// The file's whole size as a one-byte ranged GET (`request`) tells it: `Content-Range:
    /// bytes 0-0/SIZE` from a 206, or the `Content-Length` of a server that ignored the range
    /// and answered the whole file (200), read no further than a few kilobytes. nil: not said.
    public func sizeOf(_ request: HTTPRequest) throws(LabstreamError) -> (status: Int, size: Int64?) {
        var probe = request
        probe.bodyLimit = 16 * 1024
        let answer = try call(probe)
        switch answer.status {
        case 206: return (206, answer.header("Content-Range").flatMap { ContentRange(header: $0) }?.total)
        case 200 where (answer.header("Content-Encoding") ?? "identity") == "identity":
            return (200, answer.header("Content-Length").flatMap { Int64($0) })
        default: return (answer.status, nil)
        }
    }
}

extension TransportError {
    public var asLabstreamError: LabstreamError {
        switch self {
        case .unreachable(let why): return .serverUnavailable(why)
        case .timedOut(let why), .stalled(let why): return .timedOut(why)
        case .aborted(let why): return .fetchFailed(why)
        case .protocolError(let why): return .serverUnavailable(why)
        }
    }
}
