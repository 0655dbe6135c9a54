import LabstreamCore

/// What the transfer engine tells the daemon that runs it (`TransferEngine.onEvent`).
public enum TransferEvent: Sendable, Hashable {
    /// Files appeared in the tree without a catalog sync (a finished copy at another quality):
    /// the tree is rebuilt from the index.
    case treeChanged
    /// Files were pinned: what belongs beside them is fetched with them.
    case pinned
    /// Files are to be checked again (`labstream verify`): what is stored beside them too.
    case verify([FileKey])
    /// A file's local bytes were freed (cancelled or evicted): what was stored beside it goes too.
    case mediaDropped(FileKey)
    /// The next episode of one playing is fetched ahead (its path in the tree): what is stored
    /// beside it is wanted too.
    case preparing([String])
    /// A server that was not answering answers again (told on a thread of its own).
    case serverOnline(String)
    /// A pinned file or copy finished for good: here (`complete`, `unverified` once its check has
    /// run or is off) or `failed`, with its reason. Told once per finish, on the thread that
    /// recorded it (which may hold the file's lock): the handler must only take note.
    case finished(FileKey, FinishedFile.Outcome, reason: StatusReason?)
}
