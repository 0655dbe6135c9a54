import Foundation
import LabstreamCore
import Synchronization

/// A playing handle's prefetch of the next episode (issue 42.2). The file system keeps it with
/// the handle, tells it of each read, and releases it with the handle; the prefetch ends at its
/// next piece once playback stopped (released, or no read for `PlaybackWatch.idleAfter`),
/// unless the next episode is open itself by then.
public final class PlaybackTicket: Sendable {
    /// The episode being played.
    let playing: TreeFile
    let released = Atomic<Bool>(false)
    /// The handle's last read, seconds since the epoch (a Double's bits).
    let lastRead: Atomic<UInt64>
    /// Bytes this prefetch fetched.
    let fetched = Atomic<Int64>(0)

    init(playing: TreeFile, now: Double) {
        self.playing = playing
        lastRead = Atomic(now.bitPattern)
    }

    public func read(at now: Double) { lastRead.store(now.bitPattern, ordering: .relaxed) }

    func stopped(now: Double) -> Bool {
        released.load(ordering: .relaxed) || now - Double(bitPattern: lastRead.load(ordering: .relaxed)) > PlaybackWatch.idleAfter
    }
}

extension TransferEngine {
    /// A prefetch asks for at most this much at once, so that it is cancelled within a piece.
    static let prefetchPiece: Int64 = 2 << 20

    /// A handle of `file` is playing (`PlaybackWatch`): the head and index region of the next
    /// episode (`NextEpisode`, `EpisodePrefetch`) are fetched in the background, one piece at a
    /// time below every read and fill (`FetchPool.submitSpare`), into room there is, and its
    /// side files are asked for. Which episode is next is an index query: it is made there too,
    /// so the read that made the handle playing never waits for the index. Nil when `file` is
    /// no episode's original; the prefetch does nothing when there is no next episode or it is
    /// pinned (the fill's).
    public func playing(_ file: TreeFile) -> PlaybackTicket? {
        guard file.kind == .episode, file.key.kind == .original else { return nil }
        let ticket = PlaybackTicket(playing: file, now: Date().timeIntervalSince1970)
        fetchPool.submitSpare { [self] lane in
            guard let next = nextEpisode(after: file) else { return }
            log("\(file.path.last ?? ""): playing; fetching the start of \(next.path.last ?? "") in the background")
            tell(.preparing(next.path))
            prefetchStep(ticket, next: next, lane: lane)
        }
        return ticket
    }

    /// The catalog's file of the episode after `file` in its series, unless it is pinned.
    func nextEpisode(after file: TreeFile) -> TreeFile? {
        guard let episodes = try? index.seriesEpisodes(server: file.key.server, of: file.key.itemId),
            let current = episodes.first(where: { $0.episode.itemId == file.key.itemId })?.episode,
            let next = NextEpisode.after(current, among: episodes.map(\.episode)),
            let sources = episodes.first(where: { $0.episode.itemId == next.itemId })?.sources,
            let nextFile = sources.lazy.compactMap({ self.catalogFile(FileKey(server: file.key.server, itemId: next.itemId, sourceId: $0)) }).first,
            nextFile.size > 0, row(for: nextFile)?.pinned != true
        else { return nil }
        return nextFile
    }

    /// The playing handle was released: its prefetch stops at its next piece (or as the piece on
    /// the wire arrives), unless the next episode is open itself.
    public func stoppedPlaying(_ ticket: PlaybackTicket) {
        guard !ticket.released.exchange(true, ordering: .relaxed) else { return }
        log("playback of \(ticket.playing.path.last ?? "") stopped (its file was closed)")
    }

    /// One piece of `ticket`'s prefetch, on a pool thread; the next piece is queued after it.
    func prefetchStep(_ ticket: PlaybackTicket, next: TreeFile, lane: Lane) {
        let name = next.path.last ?? ""
        let cancelled: @Sendable () -> Bool = { [weak self] in
            guard let self else { return true }
            return self.isStopping || (ticket.stopped(now: Date().timeIntervalSince1970) && !self.isOpen(next.key))
        }
        func stop(_ why: String) { log("stopped fetching ahead \(name) (\(ticket.fetched.load(ordering: .relaxed)) bytes): \(why)") }
        if cancelled() { return stop("playback stopped") }
        guard reachability(of: next.key.server) == .online, let transfer = try? transfer(for: next) else { return stop("its server is not answering") }
        let row = transfer.snapshot()
        if row.pinned { return }
        let first = ByteRange(0, min(next.size, EpisodePrefetch.headerLength))
        let header = row.present.contains(first) ? try? transfer.readPresent(first, attempt: row.attempt) : nil
        let wanted = EpisodePrefetch.plan(total: next.size, header: header)
        guard let missing = wanted.lazy.flatMap({ row.present.missing(in: $0) }).first else {
            let fetched = ticket.fetched.load(ordering: .relaxed)
            if fetched > 0 { log("fetched ahead \(fetched) bytes of \(name): its start and index are stored") }
            return
        }
        let piece = ByteRange(missing.lower, min(missing.upper, missing.lower + Self.prefetchPiece))
        // Nothing is evicted for a guess: the prefetch takes only room there is.
        guard budget.room(for: piece.count, server: next.key.server, usage: storageUsage()) == .fits else { return stop("no room in the cache") }
        let before = transfer.snapshot().present.byteCount
        let present = transfer.fetchHere(piece, lane: lane, engine: self, cancelled: cancelled)
        ticket.fetched.add(max(transfer.snapshot().present.byteCount - before, 0), ordering: .relaxed)
        if cancelled() { return stop("playback stopped") }
        // Failed, or a reader fetches it now: the prefetch is not needed or would only retry.
        guard present else { return stop("bytes \(piece) did not arrive") }
        fetchPool.submitSpare { [self] lane in prefetchStep(ticket, next: next, lane: lane) }
    }
}
