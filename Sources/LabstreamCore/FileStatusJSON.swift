import Foundation

/// FileStatus's one JSON form: what `status --json` prints, what the control socket carries
/// and what the HTTP API will serve. A reason is its stable code (`reason`) with the sentence a
/// person reads (`message`); decoding gives back the same FileStatus.
extension FileStatus: Codable {
    enum Keys: String, CodingKey {
        case path, state, pinned, reason, message, quality, name, copies
        case present = "bytes_present", total = "bytes_total", newVersion = "new_version", sideAssets = "side_assets"
    }

    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: Keys.self)
        let (state, present, total, reason) = try Self.decodeFields(c)
        let code = try c.decodeIfPresent(StatusReason.Code.self, forKey: .reason)
        self.init(
            path: try c.decode(String.self, forKey: .path), state: state, present: present, total: total, reason: reason,
            pauseCause: state == .paused ? code.flatMap { PauseCause(rawValue: $0.rawValue) } : nil,
            pinned: try c.decodeIfPresent(Bool.self, forKey: .pinned) ?? false,
            copies: try c.decodeIfPresent([Part].self, forKey: .copies) ?? [],
            newVersion: try c.decodeIfPresent(Part.self, forKey: .newVersion),
            sideAssets: try c.decodeIfPresent([SideAssetStatus].self, forKey: .sideAssets) ?? [])
    }

    public func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: Keys.self)
        try c.encode(path, forKey: .path)
        try c.encode(pinned, forKey: .pinned)
        try Self.encodeFields(&c, state, present, total, reason, pauseCause)
        if !copies.isEmpty { try c.encode(copies, forKey: .copies) }
        try c.encodeIfPresent(newVersion, forKey: .newVersion)
        if !sideAssets.isEmpty { try c.encode(sideAssets, forKey: .sideAssets) }
    }

    static func encodeFields(
        _ c: inout KeyedEncodingContainer<Keys>, _ state: DisplayState, _ present: Int64, _ total: Int64, _ reason: StatusReason?, _ cause: PauseCause?
    ) throws {
        try c.encode(state, forKey: .state)
        try c.encode(present, forKey: .present)
        try c.encode(total, forKey: .total)
        try c.encodeIfPresent(StatusReason.code(reason, state: state, cause: cause), forKey: .reason)
        try c.encodeIfPresent(reason?.sentence, forKey: .message)
    }

    /// The reason comes back as the case its code and sentence are of, parameters and all; one
    /// it cannot take apart keeps its code and words (`StatusReason.coded`).
    static func decodeFields(_ c: KeyedDecodingContainer<Keys>) throws -> (DisplayState, Int64, Int64, StatusReason?) {
        let state = try c.decode(DisplayState.self, forKey: .state)
        let code = try c.decodeIfPresent(StatusReason.Code.self, forKey: .reason)
        let message = try c.decodeIfPresent(String.self, forKey: .message)
        return (
            state, try c.decode(Int64.self, forKey: .present), try c.decode(Int64.self, forKey: .total),
            message.map { StatusReason(sentence: $0, code: code, state: state) }
        )
    }
}

extension FileStatus.Part: Codable {
    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: FileStatus.Keys.self)
        let (state, present, total, reason) = try FileStatus.decodeFields(c)
        self.init(quality: try c.decodeIfPresent(String.self, forKey: .quality), state: state, present: present, total: total, reason: reason)
    }

    public func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: FileStatus.Keys.self)
        try c.encodeIfPresent(quality, forKey: .quality)
        try FileStatus.encodeFields(&c, state, present, total, reason, nil)
    }
}

extension SideAssetStatus.State: Codable {}

extension SideAssetStatus: Codable {
    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: FileStatus.Keys.self)
        self.init(
            name: try c.decode(String.self, forKey: .name), state: try c.decode(State.self, forKey: .state),
            reason: try c.decodeIfPresent(String.self, forKey: .message), code: try c.decodeIfPresent(String.self, forKey: .reason))
    }

    public func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: FileStatus.Keys.self)
        try c.encode(name, forKey: .name)
        try c.encode(state, forKey: .state)
        // Always a failure's code and sentence.
        try c.encodeIfPresent(code, forKey: .reason)
        try c.encodeIfPresent(reason, forKey: .message)
    }
}
