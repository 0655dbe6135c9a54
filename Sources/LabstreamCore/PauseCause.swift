/// Why a file is `paused`, kept beside its reason (`DownloadRow.pauseCause`): whether the
/// daemon lifts the pause by itself is decided from this.
public enum PauseCause: Sendable, Hashable, CaseIterable, RawRepresentable {
    /// `labstream pause`.
    case user
    /// The cache's disk cannot hold the rest of the file.
    case storageFull
    /// Its server does not answer; the fill resumes it once it does.
    case serverUnavailable
    /// Its server refused the stored sign-in; the fill resumes it once a sign-in is accepted.
    case signInRefused
    /// Its server was removed from the configuration (`labstream server remove`).
    case serverRemoved
    /// The rest of it would take the cache over `max_size` (or its server's `max_size`).
    case overBudget

    /// The stable reason code (`--json`) of a file paused for this cause; its spelling is how the
    /// index, the attribute and the control wire keep the cause.
    public var code: StatusReason.Code {
        switch self {
        case .user: return .pausedByUser
        case .storageFull: return .storageFull
        case .serverUnavailable: return .serverUnavailable
        case .signInRefused: return .signInRefused
        case .serverRemoved: return .serverRemoved
        case .overBudget: return .overBudget
        }
    }

    public var rawValue: String { code.rawValue }

    public init?(rawValue: String) {
        guard let cause = Self.allCases.first(where: { $0.code.rawValue == rawValue }) else { return nil }
        self = cause
    }

    /// The background fill resumes such a file once its server answers and accepts the sign-in
    /// again. A full disk's or an over-budget pause lifts by itself too, but only when room
    /// returns (`FreeSpaceWatch`, `StorageBudget`), which may be never: `pin --wait` does not wait for it. Every other
    /// pause waits for the user (`labstream resume`).
    public var liftsByItself: Bool { self == .serverUnavailable || self == .signInRefused }

    /// Whether the free-space watch lifts it once the room it waits for returns.
    public var waitsForRoom: Bool { self == .storageFull || self == .overBudget }

    /// Why `status` says a file of `server` paused for this cause is paused (an over-budget
    /// pause parked by the fill says how much room it needs: `StatusReason.overBudget`).
    public func reason(server: String) -> StatusReason { .paused(self, server: server) }

    /// The cause of a pause recorded before causes were (schema 14 and older), read from its
    /// sentence; nil when the sentence names none (such a pause waits for the user).
    public static func recorded(before reason: String?) -> PauseCause? {
        guard let reason, !reason.isEmpty, let code = StatusReason.olderCode(reason) else { return nil }
        return allCases.first { $0.code == code }
    }
}
