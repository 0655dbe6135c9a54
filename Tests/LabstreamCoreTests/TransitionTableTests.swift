import LabstreamCore
import Testing

/// Every status change goes through `DownloadStatus.after`: this walks every (status, event)
/// pair and checks the table against the moves it is meant to allow, and what they mean.
@Suite struct TransitionTableTests {
    static let events: [(String, DownloadStatus.Event)] = [
        ("bytesCommitted", .bytesCommitted), ("enqueued", .enqueued), ("transferStarted", .transferStarted),
        ("interrupted", .interrupted), ("parked", .parked(.storageFull)), ("failedPermanently", .failedPermanently), ("willRetry", .willRetry),
        ("preparationStarted(queued)", .preparationStarted(queued: true)), ("preparationStarted", .preparationStarted(queued: false)),
        ("allBytesPresent", .allBytesPresent), ("validated(true)", .validated(playable: true)), ("validated(false)", .validated(playable: false)),
        ("validated(nil)", .validated(playable: nil)), ("retry", .retry), ("recheck", .recheck),
        ("bytesDropped(pinned)", .bytesDropped(pinned: true)), ("bytesDropped", .bytesDropped(pinned: false)),
        ("unpinned", .unpinned), ("restarted(pinned)", .restarted(pinned: true)), ("restarted", .restarted(pinned: false)),
        ("yielded", .yielded)
    ]

    /// The allowed moves, from each status: event → status (and from every status, a restart).
    static let allowed: [DownloadStatus: [String: DownloadStatus]] = movesWithin.mapValues {
        $0.merging(["restarted(pinned)": .queued, "restarted": .partial]) { own, _ in own }
    }
    static let movesWithin: [DownloadStatus: [String: DownloadStatus]] = [
        .partial: [
            "bytesCommitted": .partial, "enqueued": .queued, "transferStarted": .downloading, "parked": .paused,
            "failedPermanently": .failed, "willRetry": .queued, "allBytesPresent": .unverified
        ],
        .queued: [
            "bytesCommitted": .queued, "unpinned": .partial, "transferStarted": .downloading, "interrupted": .paused, "parked": .paused,
            "failedPermanently": .failed, "willRetry": .queued, "preparationStarted(queued)": .queued,
            "preparationStarted": .preparing, "allBytesPresent": .unverified
        ],
        .preparing: [
            "unpinned": .partial, "transferStarted": .downloading, "interrupted": .paused, "parked": .paused, "failedPermanently": .failed,
            "willRetry": .queued, "preparationStarted(queued)": .queued, "preparationStarted": .preparing
        ],
        .downloading: [
            "bytesCommitted": .downloading, "unpinned": .partial, "transferStarted": .downloading, "yielded": .queued, "interrupted": .paused,
            "parked": .paused,
            "failedPermanently": .failed, "willRetry": .queued, "preparationStarted(queued)": .queued,
            "preparationStarted": .preparing, "allBytesPresent": .unverified, "validated(true)": .complete,
            "validated(false)": .failed, "validated(nil)": .unverified
        ],
        .paused: [
            "bytesCommitted": .paused, "enqueued": .queued, "unpinned": .partial, "transferStarted": .downloading, "parked": .paused,
            "failedPermanently": .failed,
            "willRetry": .queued, "allBytesPresent": .unverified, "retry": .queued
        ],
        .failed: [
            "bytesCommitted": .failed, "enqueued": .queued, "unpinned": .partial, "allBytesPresent": .unverified, "retry": .queued, "recheck": .unverified
        ],
        .complete: ["bytesCommitted": .complete, "recheck": .unverified, "bytesDropped(pinned)": .queued, "bytesDropped": .partial],
        .unverified: [
            "bytesCommitted": .unverified, "validated(true)": .complete, "validated(false)": .failed, "validated(nil)": .unverified,
            "recheck": .unverified, "bytesDropped(pinned)": .queued, "bytesDropped": .partial
        ]
    ]

    @Test func everyPairIsAllowedExactlyAsDocumented() {
        for status in DownloadStatus.allCases {
            for (name, event) in Self.events {
                #expect(status.after(event) == Self.allowed[status]?[name], "\(status) + \(name)")
            }
        }
    }

    @Test func eachEventMeansOneThingWhereverItApplies() {
        for status in DownloadStatus.allCases {
            for (name, event) in Self.events {
                guard let next = status.after(event) else { continue }
                switch event {
                case .failedPermanently: #expect(next == .failed, "\(status) + \(name)")
                case .interrupted, .parked: #expect(next == .paused, "\(status) + \(name)")
                case .willRetry, .retry, .enqueued, .yielded: #expect(next == .queued, "\(status) + \(name)")
                case .allBytesPresent, .recheck: #expect(next == .unverified, "\(status) + \(name)")
                case .transferStarted: #expect(next == .downloading, "\(status) + \(name)")
                case .unpinned: #expect(next == .partial, "\(status) + \(name)")
                case .bytesCommitted: #expect(next == status, "\(status) + \(name)")
                default: break
                }
            }
        }
        // The user's pause never pauses what is not moving, and nothing leaves `complete` but a
        // re-check or damaged bytes.
        #expect(DownloadStatus.partial.after(.interrupted) == nil && DownloadStatus.paused.after(.interrupted) == nil)
        #expect(
            Self.events.filter { DownloadStatus.complete.after($0.1).map { $0 != .complete } ?? false }.map(\.0).sorted()
                == ["bytesDropped", "bytesDropped(pinned)", "recheck", "restarted", "restarted(pinned)"])
    }

    @Test func everyStatusIsReachableFromAFileNeverRead() {
        var reached: Set<DownloadStatus> = [.partial]
        var frontier: [DownloadStatus] = [.partial]
        while let s = frontier.popLast() {
            for (_, event) in Self.events {
                if let n = s.after(event), reached.insert(n).inserted { frontier.append(n) }
            }
        }
        #expect(reached == Set(DownloadStatus.allCases))
    }

    @Test func aPauseRecordsItsCauseAndLeavingPausedForgetsIt() {
        var row = DownloadRow(
            key: FileKey(server: "home", itemId: "i", sourceId: "m"), status: .downloading, attempt: AttemptID(1), validator: nil,
            total: 10, present: RangeSet(), partialPath: "p", pinned: true)
        #expect(row.park(.signInRefused) && row.status == .paused && row.pauseCause == .signInRefused)
        #expect(row.reason == StatusReason.signInRefused(server: "home"))
        #expect(row.apply(.parked(.storageFull)) && row.pauseCause == .storageFull)
        #expect(row.apply(.bytesCommitted) && row.pauseCause == .storageFull)  // still paused, still why
        #expect(row.apply(.retry) && row.status == .queued && row.pauseCause == nil)
        #expect(row.apply(.interrupted) && row.pauseCause == .user)
        #expect(row.nextAttempt(reason: nil).pauseCause == nil)
        row.setPinned(false)
        #expect(row.status == .partial && row.pauseCause == nil)
        #expect(row.park(.user) && row.status == .paused && row.reason == StatusReason.pausedByUser)
        // A row made paused without a cause has none; one made in another status keeps none.
        #expect(
            DownloadRow(
                key: row.key, status: .queued, attempt: AttemptID(1), validator: nil, total: 1, present: RangeSet(), partialPath: "p",
                pauseCause: .user
            ).pauseCause == nil)
    }

    @Test func applyMovesOnlyWhereTheTableAllows() {
        var row = DownloadRow(
            key: FileKey(server: "s", itemId: "i", sourceId: "m"), status: .complete, attempt: AttemptID(1), validator: nil,
            total: 1, present: RangeSet(), partialPath: "p")
        #expect(!row.apply(.interrupted) && row.status == .complete)
        #expect(row.apply(.recheck) && row.status == .unverified)
    }
}
