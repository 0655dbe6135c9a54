/// The server-side job making a copy (an Emby Convert job, an item of Plex's download queue), as
/// a download row keeps it.
public enum ServerJob: Sendable, Hashable {
    /// Its create was sent and no answer has been kept: after a stop or a lost answer, the
    /// server is asked for the job it may have made before another is made.
    case creating
    /// The server's id of the job.
    case made(String)

    /// How the index keeps it: the job's id, or `creating` (no server job id is that word: Emby's
    /// are numbers, Plex's `QUEUE/ITEM`).
    public init(persisted text: String) { self = text == "creating" ? .creating : .made(text) }

    public var persisted: String {
        switch self {
        case .creating: return "creating"
        case .made(let id): return id
        }
    }

    /// The server's id, once there is one.
    public var id: String? {
        if case .made(let id) = self { return id }
        return nil
    }
}
