/// One file of the download queue as `labstream queue` lists it (and the HTTP API will serve
/// it): one JSON form, what the control socket carries and what `queue --json` prints.
public struct QueueEntry: Sendable, Hashable, Codable {
    /// Where the file is: relative to the mount's root on the daemon's side, the path inside the
    /// mount once the CLI has it (what `priority`, `queue move`, `pause` … take).
    public var path: String
    /// A copy at this quality of the file at `path` (nil: the file itself).
    public var quality: String?
    /// 1-based, in the order the queue works in.
    public var position: Int
    public var priority: QueuePriority
    public var state: DisplayState
    /// A player has the file open: it goes first.
    public var reading: Bool
    public var present: Int64
    public var total: Int64
    /// Bytes per second over the last seconds; nil until it is known.
    public var rate: Int64?
    /// Seconds until done at that rate; nil when nothing moves.
    public var eta: Int?
    /// Why it waits, as a code and the sentence a person reads.
    public var reason: StatusReason.Code?
    public var message: String?

    enum CodingKeys: String, CodingKey {
        case path, quality, position, priority, state, reading, rate, eta, reason, message
        case present = "bytes_present", total = "bytes_total"
    }

    public init(
        path: String, quality: String? = nil, position: Int, priority: QueuePriority, state: DisplayState, reading: Bool = false,
        present: Int64, total: Int64, rate: Int64? = nil, eta: Int? = nil, reason: StatusReason? = nil, pauseCause: PauseCause? = nil
    ) {
        self.path = path
        self.quality = quality
        self.position = position
        self.priority = priority
        self.state = state
        self.reading = reading
        self.present = present
        self.total = total
        self.rate = rate
        self.eta = eta
        self.reason = StatusReason.code(reason, state: state, cause: pauseCause)
        self.message = reason?.sentence
    }

    /// The line `labstream queue` prints for it.
    public var line: String {
        let percent = total > 0 ? Int(present * 100 / total) : 0
        var parts = ["\(position).", "[\(priority.rawValue)]", state.rawValue, "\(percent)%", "\(ByteCount.text(present)) of \(ByteCount.text(total))"]
        if state == .downloading { parts += [RateText.text(rate.map(Double.init)), RateText.eta(eta)].filter { !$0.isEmpty } }
        if reading { parts.append("(being read)") }
        parts.append(path + (quality.map { " (\($0) copy)" } ?? ""))
        if let message { parts.append("— " + message) }
        return parts.joined(separator: "  ")
    }
}
