/// A parsed JSON document that keeps what the contract echoes "as received":
/// the order of object members and the exact text of numbers.
public enum JSONValue: Sendable, Hashable {
    case null
    case bool(Bool)
    case number(JSONNumber)
    case string(String)
    case array([JSONValue])
    case object(JSONObject)
}

/// A JSON number kept as its literal text, so `12.50` is echoed as `12.50`, never re-rounded.
public struct JSONNumber: Sendable, Hashable, CustomStringConvertible {
    /// The number exactly as written in the document (already validated against the JSON grammar).
    public let literal: String

    /// Creates a number from a literal the caller guarantees is a valid JSON number.
    public init(validatedLiteral: String) {
        self.literal = validatedLiteral
    }

    public init(_ value: Int) {
        self.literal = String(value)
    }

    public var doubleValue: Double {
        Double(literal) ?? .nan
    }

    /// The value when the literal is an integer with no fraction or exponent and fits in `Int`.
    public var intValue: Int? {
        Int(literal)
    }

    public var description: String { literal }
}

/// A JSON object: its members in document order, duplicates kept.
public struct JSONObject: Sendable, Hashable {
    public struct Member: Sendable, Hashable {
        public var key: String
        public var value: JSONValue

        public init(key: String, value: JSONValue) {
            self.key = key
            self.value = value
        }
    }

    public var members: [Member]

    public init(members: [Member] = []) {
        self.members = members
    }

    /// The value of the first member whose key is exactly `key`.
    public subscript(key: String) -> JSONValue? {
        for member in members where member.key == key {
            return member.value
        }
        return nil
    }
}

extension JSONValue {
    public var stringValue: String? {
        if case .string(let value) = self { return value }
        return nil
    }

    public var objectValue: JSONObject? {
        if case .object(let value) = self { return value }
        return nil
    }

    public var arrayValue: [JSONValue]? {
        if case .array(let value) = self { return value }
        return nil
    }

    public var boolValue: Bool? {
        if case .bool(let value) = self { return value }
        return nil
    }

    public var numberValue: JSONNumber? {
        if case .number(let value) = self { return value }
        return nil
    }

    public var isNull: Bool {
        if case .null = self { return true }
        return false
    }
}
