import Foundation

/// A decoded JSON document with case-insensitive object keys: real Jellyfin answers PascalCase,
/// and its `profile="CamelCase"` variant (and some re-implementations) answer camelCase.
public struct JSONValue: @unchecked Sendable {
    let raw: Any?

    public init(raw: Any?) { self.raw = raw }

    public static func parse(_ bytes: [UInt8]) throws -> JSONValue {
        JSONValue(raw: try JSONSerialization.jsonObject(with: Data(bytes), options: [.fragmentsAllowed]))
    }

    public subscript(key: String) -> JSONValue {
        guard let object = raw as? [String: Any] else { return JSONValue(raw: nil) }
        if let v = object[key] { return JSONValue(raw: v) }
        let lower = key.lowercased()
        for (k, v) in object where k.lowercased() == lower { return JSONValue(raw: v) }
        return JSONValue(raw: nil)
    }

    public var isObject: Bool { raw is [String: Any] }
    public var isNull: Bool { raw == nil || raw is NSNull }

    public var string: String? {
        if let s = raw as? String { return s }
        return nil
    }

    public var int64: Int64? {
        guard let n = raw as? NSNumber, !isBoolean(n) else { return nil }
        let d = n.doubleValue
        guard d.rounded() == d, abs(d) < 9.0e18 else { return nil }
        return n.int64Value
    }

    public var int: Int? { int64.flatMap { Int(exactly: $0) } ?? string.flatMap { Int($0) } }

    /// A string, or an integer written as one: Plex ids are strings in one spec version and
    /// integers in another.
    public var text: String? { string ?? int64.map { String($0) } }

    public var double: Double? {
        guard let n = raw as? NSNumber, !isBoolean(n) else { return nil }
        return n.doubleValue
    }

    public var array: [JSONValue]? { (raw as? [Any]).map { $0.map(JSONValue.init(raw:)) } }

    public var bool: Bool? { raw as? Bool }

    /// An object's members (keys as sent).
    public var object: [String: JSONValue]? { (raw as? [String: Any]).map { $0.mapValues(JSONValue.init(raw:)) } }
}

/// JSON true/false decode to NSNumber too; their objCType is "c".
private func isBoolean(_ n: NSNumber) -> Bool { String(cString: n.objCType) == "c" }
