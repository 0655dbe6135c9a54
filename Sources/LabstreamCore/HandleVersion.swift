/// The version of a file that bytes were served from: the attempt that fetched them and the
/// server's validator pinned for that attempt (nil when the server sends none).
public struct ServedVersion: Sendable, Hashable {
    public var attempt: AttemptID
    public var validator: Validator?

    public init(attempt: AttemptID, validator: Validator?) {
        self.attempt = attempt
        self.validator = validator
    }

    /// Two attempts with the same validator fetched the same version (a new attempt after the
    /// server ignored `Range`, say). Without validators only the same attempt is known to be.
    public func isSameVersion(as other: ServedVersion) -> Bool {
        if let mine = validator, let theirs = other.validator { return mine == theirs }
        return attempt == other.attempt
    }
}

/// An open file belongs to the version its first read was served from: once the server's file
/// changes, a read through an older handle fails rather than return bytes of the new version
/// after bytes of the old one. New opens see the new version.
public struct HandleVersion: Sendable, Hashable {
    public private(set) var pinned: ServedVersion?

    public init() {}

    /// Whether bytes served from `served` may be returned through this handle; the first
    /// admitted version becomes the handle's.
    public mutating func admit(_ served: ServedVersion) -> Bool {
        guard let pinned else {
            self.pinned = served
            return true
        }
        return pinned.isSameVersion(as: served)
    }
}
