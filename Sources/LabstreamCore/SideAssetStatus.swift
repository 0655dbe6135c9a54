/// One artwork or subtitle file beside a media file, as `status` and the xattrs report it.
public struct SideAssetStatus: Sendable, Hashable {
    public enum State: String, Sendable, Hashable {
        /// Checked and stored: it shows in the folder and reads offline.
        case stored
        /// Not fetched yet (or not wanted: nothing pinned, the folder not listed).
        case missing
        /// The last try failed (`reason`); it is tried again later, and never shown until it passes.
        case failed
    }

    /// Its name in the folder (`poster.jpg`, `Film (2001).eng.srt`; `poster.…` before the
    /// bytes have named an image's extension).
    public var name: String
    public var state: State
    /// A failed one's reason, as a person reads it (`SideAssetFailure.sentence`).
    public var reason: String?
    /// A failed one's reason as its stable code (`SideAssetFailure.code`), for scripts.
    public var code: String?

    public init(name: String, state: State, reason: String? = nil, code: String? = nil) {
        self.name = name
        self.state = state
        self.reason = reason
        self.code = code
    }

    /// `poster.jpg=stored;Film.eng.srt=failed`: the `user.labstream.side_assets` attribute.
    public static func attribute(_ all: [SideAssetStatus]) -> String {
        all.map { "\($0.name)=\($0.state.rawValue)" }.joined(separator: ";")
    }

    /// The attribute read back; pairs that do not parse are left out.
    public static func parse(attribute text: String) -> [SideAssetStatus] {
        text.split(separator: ";").compactMap { (pair: Substring) -> SideAssetStatus? in
            guard let cut = pair.lastIndex(of: "="), let state = State(rawValue: String(pair[cut...].dropFirst())) else { return nil }
            return SideAssetStatus(name: String(pair[..<cut]), state: state)
        }
    }
}

extension FileStatus {
    /// A pinned file is complete only once what belongs beside it is stored, or has been tried
    /// and failed (its reason is reported, and it is tried again later: a broken poster must
    /// not hold a pin forever). Until then a file whose media is whole shows as downloading.
    public static func shown(
        state: DisplayState, reason: StatusReason?, pinned: Bool,
        sideAssets: [SideAssetStatus]
    ) -> (state: DisplayState, reason: StatusReason?) {
        guard pinned, state == .complete || (state == .unverified && reason != StatusReason.awaitingValidation),
            sideAssets.contains(where: { $0.state == .missing })
        else { return (state, reason) }
        return (.downloading, StatusReason.fetchingSideAssets)
    }
}
