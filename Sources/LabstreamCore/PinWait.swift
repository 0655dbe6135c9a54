/// When `pin --wait` stops following its files, and how it ends.
public enum PinWait {
    public enum Verdict: Equatable, Sendable {
        /// Some file is still on its way (queued, downloading, waiting for its server, checking).
        case following
        /// Every file is present and checked (complete or unverified).
        case done
        /// Every file is done or failed, at least one failed.
        case failed
        /// Nothing moves any more and no file failed, but some are paused for a reason only the
        /// user can clear (`labstream pause`), or until room returns on a full disk: waiting
        /// might never end.
        case held
    }

    /// Done once every byte is present and the completion check has run (or is off).
    public static func finished(state: String, reason: StatusReason?) -> Bool {
        state == DisplayState.complete.rawValue
            || (state == DisplayState.unverified.rawValue && reason != StatusReason.awaitingValidation)
    }

    /// Paused, and the daemon will not resume it by itself (a pause of unknown cause waits for
    /// the user).
    public static func held(state: String, cause: PauseCause?) -> Bool {
        state == DisplayState.paused.rawValue && !(cause?.liftsByItself ?? false)
    }

    public static func verdict(_ files: [(state: String, reason: StatusReason?, cause: PauseCause?)]) -> Verdict {
        let failed = files.filter { $0.state == DisplayState.failed.rawValue }.count
        let done = files.filter { Self.finished(state: $0.state, reason: $0.reason) }.count
        let parked = files.filter { Self.held(state: $0.state, cause: $0.cause) }.count
        if failed + done + parked < files.count { return .following }
        if failed > 0 { return .failed }
        return parked > 0 ? .held : .done
    }

    /// What to tell the user about a held file, and what to run next.
    public static func heldMessage(path: String, reason: StatusReason?, cause: PauseCause?) -> String {
        switch cause {
        case .storageFull?:
            return
                "\(path) is paused: the cache's disk cannot hold the rest of it. It resumes by itself once there is room: free space on it (or unpin or cancel other files, or lower min_free); `labstream resume \(path)` tries at once."
        case .overBudget?:
            return "\(path) is paused: \(reason?.sentence ?? StatusReason.overBudget(need: 0, server: nil).sentence). `labstream resume \(path)` tries at once."
        default:
            return "\(path) is paused (\(reason?.sentence ?? "no reason given")); `labstream resume \(path)` continues it."
        }
    }
}
