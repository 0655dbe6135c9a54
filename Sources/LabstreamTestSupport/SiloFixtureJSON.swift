// MARK: - JSON

/// A JSON value that keeps member order, for exact, deterministic documents.
enum SiloJ: Sendable {
    case null
    case bool(Bool)
    case int(Int64)
    case double(Double)
    case string(String)
    case array([SiloJ])
    case object([(String, SiloJ)])

    /// An object; nil members are omitted (Go `omitempty`), `J.null` members are written.
    static func obj(_ members: [(String, SiloJ?)]) -> SiloJ {
        .object(members.compactMap { member in member.1.map { (member.0, $0) } })
    }

    static func num(_ value: Int) -> SiloJ { .int(Int64(value)) }
    static func optNum(_ value: Int?) -> SiloJ? { value.map { SiloJ.int(Int64($0)) } }
    static func optStr(_ value: String?) -> SiloJ? { value.map { SiloJ.string($0) } }
    static func strings(_ values: [String]) -> SiloJ { SiloJ.array(values.map { SiloJ.string($0) }) }

    subscript(key: String) -> SiloJ? {
        guard case .object(let members) = self else { return nil }
        return members.last(where: { $0.0 == key })?.1
    }

    var stringValue: String? {
        if case .string(let value) = self { return value }
        return nil
    }

    var intValue: Int64? {
        if case .int(let value) = self { return value }
        return nil
    }

    var boolValue: Bool? {
        if case .bool(let value) = self { return value }
        return nil
    }

    func serialized() -> String {
        var out = ""
        write(into: &out)
        return out
    }

    func write(into out: inout String) {
        switch self {
        case .null:
            out += "null"
        case .bool(let value):
            out += value ? "true" : "false"
        case .int(let value):
            out += String(value)
        case .double(let value):
            if !value.isFinite {
                out += "null"
            } else if value == value.rounded() && abs(value) < 1e15 {
                out += String(Int64(value))
            } else {
                out += String(value)
            }
        case .string(let value):
            SiloJ.writeString(value, into: &out)
        case .array(let items):
            out += "["
            for (n, item) in items.enumerated() {
                if n > 0 { out += "," }
                item.write(into: &out)
            }
            out += "]"
        case .object(let members):
            out += "{"
            for (n, member) in members.enumerated() {
                if n > 0 { out += "," }
                SiloJ.writeString(member.0, into: &out)
                out += ":"
                member.1.write(into: &out)
            }
            out += "}"
        }
    }

    static func writeString(_ value: String, into out: inout String) {
        let digits = Array("0123456789abcdef")
        out += "\""
        for scalar in value.unicodeScalars {
            switch scalar {
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            case "\n": out += "\\n"
            case "\r": out += "\\r"
            case "\t": out += "\\t"
            default:
                if scalar.value < 0x20 {
                    out += "\\u00" + String(digits[Int(scalar.value >> 4)]) + String(digits[Int(scalar.value & 0x0F)])
                } else {
                    out.unicodeScalars.append(scalar)
                }
            }
        }
        out += "\""
    }
}

/// A strict RFC 8259 parser that keeps null distinct from absence and ints distinct from floats.
struct SiloJSONParser {
    private let bytes: [UInt8]
    private var index = 0
    private var depth = 0

    init(_ bytes: [UInt8]) { self.bytes = bytes }

    mutating func parseDocument() -> SiloJ? {
        skipWhitespace()
        guard let value = parseValue() else { return nil }
        skipWhitespace()
        return index == bytes.count ? value : nil
    }

    private mutating func skipWhitespace() {
        while index < bytes.count {
            let byte = bytes[index]
            guard byte == 0x20 || byte == 0x0A || byte == 0x0D || byte == 0x09 else { return }
            index += 1
        }
    }

    private mutating func parseValue() -> SiloJ? {
        guard index < bytes.count else { return nil }
        switch bytes[index] {
        case 0x7B: return parseObject()
        case 0x5B: return parseArray()
        case 0x22: return parseString().map { SiloJ.string($0) }
        case 0x74: return parseLiteral("true", .bool(true))
        case 0x66: return parseLiteral("false", .bool(false))
        case 0x6E: return parseLiteral("null", .null)
        default: return parseNumber()
        }
    }

    private mutating func parseLiteral(_ word: String, _ value: SiloJ) -> SiloJ? {
        let expected = Array(word.utf8)
        guard index + expected.count <= bytes.count, Array(bytes[index..<(index + expected.count)]) == expected else { return nil }
        index += expected.count
        return value
    }

    private mutating func parseObject() -> SiloJ? {
        depth += 1
        defer { depth -= 1 }
        guard depth <= 64 else { return nil }
        index += 1
        var members: [(String, SiloJ)] = []
        skipWhitespace()
        if index < bytes.count, bytes[index] == 0x7D {
            index += 1
            return .object(members)
        }
        while index < bytes.count {
            skipWhitespace()
            guard index < bytes.count, bytes[index] == 0x22, let key = parseString() else { return nil }
            skipWhitespace()
            guard index < bytes.count, bytes[index] == 0x3A else { return nil }
            index += 1
            skipWhitespace()
            guard let value = parseValue() else { return nil }
            members.append((key, value))
            skipWhitespace()
            guard index < bytes.count else { return nil }
            if bytes[index] == 0x2C {
                index += 1
                continue
            }
            if bytes[index] == 0x7D {
                index += 1
                return .object(members)
            }
            return nil
        }
        return nil
    }

    private mutating func parseArray() -> SiloJ? {
        depth += 1
        defer { depth -= 1 }
        guard depth <= 64 else { return nil }
        index += 1
        var items: [SiloJ] = []
        skipWhitespace()
        if index < bytes.count, bytes[index] == 0x5D {
            index += 1
            return .array(items)
        }
        while index < bytes.count {
            skipWhitespace()
            guard let value = parseValue() else { return nil }
            items.append(value)
            skipWhitespace()
            guard index < bytes.count else { return nil }
            if bytes[index] == 0x2C {
                index += 1
                continue
            }
            if bytes[index] == 0x5D {
                index += 1
                return .array(items)
            }
            return nil
        }
        return nil
    }

    private mutating func parseString() -> String? {
        index += 1
        var out: [UInt8] = []
        while index < bytes.count {
            let byte = bytes[index]
            index += 1
            switch byte {
            case 0x22:
                return String(decoding: out, as: UTF8.self)
            case 0x5C:
                guard index < bytes.count else { return nil }
                let escape = bytes[index]
                index += 1
                switch escape {
                case 0x22: out.append(0x22)
                case 0x5C: out.append(0x5C)
                case 0x2F: out.append(0x2F)
                case 0x62: out.append(0x08)
                case 0x66: out.append(0x0C)
                case 0x6E: out.append(0x0A)
                case 0x72: out.append(0x0D)
                case 0x74: out.append(0x09)
                case 0x75:
                    guard var scalar = parseHex4() else { return nil }
                    if scalar >= 0xD800 && scalar < 0xDC00 {
                        guard index + 1 < bytes.count, bytes[index] == 0x5C, bytes[index + 1] == 0x75 else { return nil }
                        index += 2
                        guard let low = parseHex4(), low >= 0xDC00, low < 0xE000 else { return nil }
                        scalar = 0x10000 + ((scalar - 0xD800) << 10) + (low - 0xDC00)
                    }
                    guard let unicode = Unicode.Scalar(scalar) else { return nil }
                    out.append(contentsOf: Array(String(Character(unicode)).utf8))
                default:
                    return nil
                }
            default:
                if byte < 0x20 { return nil }
                out.append(byte)
            }
        }
        return nil
    }

    private mutating func parseHex4() -> UInt32? {
        guard index + 4 <= bytes.count else { return nil }
        var value: UInt32 = 0
        for _ in 0..<4 {
            let c = bytes[index]
            index += 1
            let digit: UInt32
            switch c {
            case 0x30...0x39: digit = UInt32(c - 0x30)
            case 0x41...0x46: digit = UInt32(c - 0x37)
            case 0x61...0x66: digit = UInt32(c - 0x57)
            default: return nil
            }
            value = (value << 4) | digit
        }
        return value
    }

    private mutating func parseNumber() -> SiloJ? {
        let start = index
        while index < bytes.count {
            let byte = bytes[index]
            let numeric = (byte >= 0x30 && byte <= 0x39) || byte == 0x2D || byte == 0x2B || byte == 0x2E || byte == 0x65 || byte == 0x45
            guard numeric else { break }
            index += 1
        }
        guard index > start else { return nil }
        let text = String(decoding: bytes[start..<index], as: UTF8.self)
        if !text.contains(where: { $0 == "." || $0 == "e" || $0 == "E" }), let value = Int64(text) { return .int(value) }
        if let value = Double(text), value.isFinite { return .double(value) }
        return nil
    }
}
