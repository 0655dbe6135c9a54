import Foundation

/// JSON text of the fixture's answers (dictionaries, arrays, strings, numbers, booleans, null).
/// Foundation's JSONSerialization cast every value through `Any` and was four fifths of the
/// fixture's CPU while it served a 100 000-item library, more than the client it was serving
/// on the same two cores. A value of any other kind gives nil (the caller then asks Foundation).
enum FixtureJSON {
    static func encode(_ value: Any) -> [UInt8]? {
        var out: [UInt8] = []
        out.reserveCapacity(4096)
        return write(value, into: &out) ? out : nil
    }

    private static func write(_ value: Any, into out: inout [UInt8]) -> Bool {
        // Scalars by their exact type: through `as?`, a number bridged from Foundation would
        // pass for a Bool (or a Bool for a number).
        let type = Swift.type(of: value)
        if type == String.self {
            writeString(value as! String, into: &out)
        } else if type == Bool.self {
            out += Array((value as! Bool ? "true" : "false").utf8)
        } else if type == Int.self {
            out += Array(String(value as! Int).utf8)
        } else if type == Int64.self {
            out += Array(String(value as! Int64).utf8)
        } else if type == Int32.self {
            out += Array(String(value as! Int32).utf8)
        } else if type == Double.self {
            let d = value as! Double
            guard d.isFinite else { return false }
            out += Array((d == d.rounded() && abs(d) < 1e15 ? String(Int64(d)) : String(d)).utf8)
        } else if type == NSNull.self {
            out += Array("null".utf8)
        } else if let dictionary = value as? [String: Any] {
            out.append(UInt8(ascii: "{"))
            var first = true
            for (key, member) in dictionary {
                if !first { out.append(UInt8(ascii: ",")) }
                first = false
                writeString(key, into: &out)
                out.append(UInt8(ascii: ":"))
                guard write(member, into: &out) else { return false }
            }
            out.append(UInt8(ascii: "}"))
        } else if let array = value as? [Any] {
            out.append(UInt8(ascii: "["))
            for (i, element) in array.enumerated() {
                if i > 0 { out.append(UInt8(ascii: ",")) }
                guard write(element, into: &out) else { return false }
            }
            out.append(UInt8(ascii: "]"))
        } else {
            // An Optional inside `Any` (a dictionary value set from one): null when empty.
            let mirror = Mirror(reflecting: value)
            guard mirror.displayStyle == .optional else { return false }
            guard let wrapped = mirror.children.first?.value else {
                out += Array("null".utf8)
                return true
            }
            return write(wrapped, into: &out)
        }
        return true
    }

    private static func writeString(_ s: String, into out: inout [UInt8]) {
        out.append(UInt8(ascii: "\""))
        for byte in s.utf8 {
            switch byte {
            case UInt8(ascii: "\""): out += [UInt8(ascii: "\\"), UInt8(ascii: "\"")]
            case UInt8(ascii: "\\"): out += [UInt8(ascii: "\\"), UInt8(ascii: "\\")]
            case 0x0A: out += [UInt8(ascii: "\\"), UInt8(ascii: "n")]
            case 0x0D: out += [UInt8(ascii: "\\"), UInt8(ascii: "r")]
            case 0x09: out += [UInt8(ascii: "\\"), UInt8(ascii: "t")]
            case 0..<0x20: out += Array(String(format: "\\u%04x", byte).utf8)
            default: out.append(byte)
            }
        }
        out.append(UInt8(ascii: "\""))
    }
}
