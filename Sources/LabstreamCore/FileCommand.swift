/// What a person asks of files, by whichever door it comes in (`labstream pin`, the control
/// socket, `setfattr -n user.labstream.*`): one typed value, decoded at the door and acted on in
/// one place (`TransferEngine.perform`).
public enum FileCommand: Sendable, Hashable, Codable, CustomStringConvertible {
    /// Keep the files local: the original, or a server-made copy at `quality`; at `priority`
    /// in the download queue (nil: normal for a new pin, unchanged for one already pinned).
    /// The attribute door has no spelling for a priority: only the daemon's API takes one.
    case pin(quality: Quality?, priority: QueuePriority? = nil)
    case unpin
    /// Pause, resume, retry, cancel or verify their downloads.
    case queue(QueueAction)
    /// Keep a series folder's episodes (`MonitorSettings` text), or stop (nil).
    case monitor(String?)

    /// The attribute that carries it through the mount, without its `user.labstream.` prefix.
    public var attribute: String {
        switch self {
        case .pin, .unpin: return "pin"
        case .queue: return "action"
        case .monitor: return "monitor"
        }
    }

    /// The attribute's value.
    public var value: String {
        switch self {
        case .pin(let quality, _): return quality?.description ?? "1"
        case .unpin: return "0"
        case .queue(let action): return action.rawValue
        case .monitor(let settings): return settings ?? "off"
        }
    }

    /// `pin=1`, `action=pause`: how logs name it.
    public var description: String { "\(attribute)=\(value)" }

    /// The command an attribute write asks for (`name` without the `user.labstream.` prefix);
    /// the attribute's mini-format is read here and nowhere else.
    public init(attribute name: String, value raw: String) throws(LabstreamError) {
        let text = raw.trimming(" \t\r\n")
        switch name {
        case "action":
            guard let action = QueueAction(rawValue: text) else {
                throw .invalidArgument("user.labstream.action takes " + QueueAction.allCases.map(\.rawValue).joined(separator: ", "))
            }
            self = .queue(action)
        case "monitor":
            self = .monitor(["", "off", "none"].contains(text) ? nil : text)
        case "pin":
            switch text {
            case "1": self = .pin(quality: nil)
            case "0": self = .unpin
            default:
                guard let quality = Quality(text) else {
                    throw .invalidArgument("user.labstream.pin takes 1 (pin), 0 (unpin) or a quality: \(Quality.spellings)")
                }
                self = .pin(quality: quality)
            }
        default:
            throw .unsupportedAttributeWrite("user.labstream." + name)
        }
    }
}

extension Quality: Codable {
    public init(from decoder: any Decoder) throws {
        let text = try decoder.singleValueContainer().decode(String.self)
        guard let quality = Quality(text) else {
            throw DecodingError.dataCorrupted(.init(codingPath: decoder.codingPath, debugDescription: "not a quality: \(text)"))
        }
        self = quality
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(description)
    }
}

extension QueueAction: Codable {}
