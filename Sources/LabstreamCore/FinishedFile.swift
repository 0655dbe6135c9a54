/// When a pinned file (or a copy at another quality) has finished for good, which completion
/// hook it runs, and what that hook is told. Pure.
public enum FinishedFile {
    public enum Outcome: String, Sendable, Hashable {
        case complete, unverified, failed

        /// The hook it runs: `on_complete` for a copy that is here (checked or not), `on_failed`.
        public var succeeded: Bool { self != .failed }
    }

    /// A row's outcome: nil while it is still on its way (an `unverified` copy waiting for its
    /// completion check is not finished yet), as `pin --wait` judges it.
    public static func outcome(status: DownloadStatus, reason: StatusReason?) -> Outcome? {
        switch status {
        case .complete: return .complete
        case .failed: return .failed
        case .unverified: return PinWait.finished(state: DisplayState.unverified.rawValue, reason: reason) ? .unverified : nil
        default: return nil
        }
    }

    /// Whether saving a pinned row moved it to an outcome it did not have: each finish runs its
    /// hook once, however often the row is saved after it.
    public static func newOutcome(
        pinned: Bool, before: (status: DownloadStatus, reason: StatusReason?)?, after: (status: DownloadStatus, reason: StatusReason?)
    ) -> Outcome? {
        guard pinned, let now = outcome(status: after.status, reason: after.reason) else { return nil }
        return before.flatMap { outcome(status: $0.status, reason: $0.reason) } == now ? nil : now
    }

    /// The hook's environment: these variables only, besides `PATH`, `HOME` and `LANG` (`base`).
    /// Never a token: the reason passes `LogRedaction` (a server's error may echo a URL with one).
    public static func environment(
        path: String, server: String, title: String, outcome: Outcome, reason: StatusReason?, base: [String: String]
    ) -> [String: String] {
        var env = base.filter { ["PATH", "HOME", "LANG"].contains($0.key) }
        if env["PATH"] == nil { env["PATH"] = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin" }
        env["LABSTREAM_PATH"] = path
        env["LABSTREAM_SERVER"] = server
        env["LABSTREAM_TITLE"] = title
        env["LABSTREAM_STATE"] = outcome.rawValue
        env["LABSTREAM_REASON"] = LogRedaction.redact(reason?.sentence ?? "")
        return env
    }

    /// The title a hook is told: the file's name in the tree without its extension
    /// (`Heat (1995)`, `Severance (2022) - S01E01 - Good News About Hell`).
    public static func title(ofName name: String) -> String {
        guard let dot = name.lastIndex(of: "."), dot != name.startIndex else { return name }
        return String(name[..<dot])
    }
}
