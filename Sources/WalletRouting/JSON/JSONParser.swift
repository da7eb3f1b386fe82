/// A strict RFC 8259 parser over UTF-8 bytes.
///
/// Written for the worker's hot path: one pass over the bytes, no Foundation, strings decoded without
/// intermediate buffers when they carry no escapes. It rejects what the contract says is not JSON
/// (`NaN`, `Infinity`, invalid UTF-8, lone surrogates, trailing data) and bounds nesting depth so a
/// hostile body cannot exhaust the stack of a worker thread.
public enum JSONParser {
    /// Deeper documents are rejected; real notifications nest three or four levels.
    public static let maximumDepth = 128

    public static func parse(_ bytes: [UInt8]) throws(JSONParseError) -> JSONValue {
        try bytes.withUnsafeBufferPointer { (buffer) throws(JSONParseError) -> JSONValue in
            try parse(buffer)
        }
    }

    public static func parse(_ buffer: UnsafeBufferPointer<UInt8>) throws(JSONParseError) -> JSONValue {
        var cursor = Cursor(bytes: buffer)
        cursor.skipWhitespace()
        let value = try cursor.parseValue(depth: 0)
        cursor.skipWhitespace()
        guard cursor.index == buffer.count else {
            throw cursor.error(.trailingData)
        }
        return value
    }
}

private struct Cursor {
    let bytes: UnsafeBufferPointer<UInt8>
    var index = 0

    init(bytes: UnsafeBufferPointer<UInt8>) {
        self.bytes = bytes
    }

    func error(_ reason: JSONParseError.Reason) -> JSONParseError {
        JSONParseError(reason, at: index)
    }

    /// Error for a byte that cannot start or continue a token: invalid UTF-8 is reported as such.
    func unexpected() -> JSONParseError {
        guard index < bytes.count else { return error(.unexpectedEnd) }
        let byte = bytes[index]
        if byte >= 0x80, String(validating: bytes, as: UTF8.self) == nil {
            return error(.invalidUTF8)
        }
        return error(.unexpectedByte(byte))
    }

    mutating func skipWhitespace() {
        while index < bytes.count {
            switch bytes[index] {
            case 0x20, 0x0A, 0x0D, 0x09: index += 1
            default: return
            }
        }
    }

    mutating func parseValue(depth: Int) throws(JSONParseError) -> JSONValue {
        guard index < bytes.count else { throw error(.unexpectedEnd) }
        switch bytes[index] {
        case UInt8(ascii: "{"): return try parseObject(depth: depth + 1)
        case UInt8(ascii: "["): return try parseArray(depth: depth + 1)
        case UInt8(ascii: "\""): return .string(try parseString())
        case UInt8(ascii: "t"):
            try expectLiteral("true")
            return .bool(true)
        case UInt8(ascii: "f"):
            try expectLiteral("false")
            return .bool(false)
        case UInt8(ascii: "n"):
            try expectLiteral("null")
            return .null
        case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"): return .number(try parseNumber())
        default: throw unexpected()
        }
    }

    mutating func expectLiteral(_ literal: StaticString) throws(JSONParseError) {
        let count = literal.utf8CodeUnitCount
        let start = literal.utf8Start
        for offset in 0..<count {
            guard index < bytes.count else { throw error(.unexpectedEnd) }
            guard bytes[index] == start[offset] else { throw unexpected() }
            index += 1
        }
    }

    mutating func parseObject(depth: Int) throws(JSONParseError) -> JSONValue {
        guard depth <= JSONParser.maximumDepth else { throw error(.nestingTooDeep) }
        index += 1  // {
        var members: [JSONObject.Member] = []
        skipWhitespace()
        if index < bytes.count, bytes[index] == UInt8(ascii: "}") {
            index += 1
            return .object(JSONObject(members: members))
        }
        // Notification objects have a handful of members: one allocation instead of growing 1, 2, 4, 8.
        members.reserveCapacity(8)
        while true {
            skipWhitespace()
            guard index < bytes.count else { throw error(.unexpectedEnd) }
            guard bytes[index] == UInt8(ascii: "\"") else { throw unexpected() }
            let key = try parseString()
            skipWhitespace()
            guard index < bytes.count else { throw error(.unexpectedEnd) }
            guard bytes[index] == UInt8(ascii: ":") else { throw unexpected() }
            index += 1
            skipWhitespace()
            let value = try parseValue(depth: depth)
            members.append(JSONObject.Member(key: key, value: value))
            skipWhitespace()
            guard index < bytes.count else { throw error(.unexpectedEnd) }
            switch bytes[index] {
            case UInt8(ascii: ","): index += 1
            case UInt8(ascii: "}"):
                index += 1
                return .object(JSONObject(members: members))
            default: throw unexpected()
            }
        }
    }

    mutating func parseArray(depth: Int) throws(JSONParseError) -> JSONValue {
        guard depth <= JSONParser.maximumDepth else { throw error(.nestingTooDeep) }
        index += 1  // [
        var elements: [JSONValue] = []
        skipWhitespace()
        if index < bytes.count, bytes[index] == UInt8(ascii: "]") {
            index += 1
            return .array(elements)
        }
        elements.reserveCapacity(4)
        while true {
            skipWhitespace()
            elements.append(try parseValue(depth: depth))
            skipWhitespace()
            guard index < bytes.count else { throw error(.unexpectedEnd) }
            switch bytes[index] {
            case UInt8(ascii: ","): index += 1
            case UInt8(ascii: "]"):
                index += 1
                return .array(elements)
            default: throw unexpected()
            }
        }
    }

    mutating func parseNumber() throws(JSONParseError) -> JSONNumber {
        let start = index
        if bytes[index] == UInt8(ascii: "-") { index += 1 }
        guard index < bytes.count else { throw error(.unexpectedEnd) }
        if bytes[index] == UInt8(ascii: "0") {
            index += 1
        } else if isDigit(bytes[index]) {
            while index < bytes.count, isDigit(bytes[index]) { index += 1 }
        } else {
            throw error(.invalidNumber)  // "-Infinity", "-x", ...
        }
        if index < bytes.count, bytes[index] == UInt8(ascii: ".") {
            index += 1
            guard index < bytes.count, isDigit(bytes[index]) else { throw error(.invalidNumber) }
            while index < bytes.count, isDigit(bytes[index]) { index += 1 }
        }
        if index < bytes.count, bytes[index] | 0x20 == UInt8(ascii: "e") {
            index += 1
            if index < bytes.count, bytes[index] == UInt8(ascii: "+") || bytes[index] == UInt8(ascii: "-") {
                index += 1
            }
            guard index < bytes.count, isDigit(bytes[index]) else { throw error(.invalidNumber) }
            while index < bytes.count, isDigit(bytes[index]) { index += 1 }
        }
        let literal = String(decoding: UnsafeBufferPointer(rebasing: bytes[start..<index]), as: UTF8.self)
        return JSONNumber(validatedLiteral: literal)
    }

    @inline(__always)
    func isDigit(_ byte: UInt8) -> Bool {
        byte &- UInt8(ascii: "0") < 10
    }

    /// Parses a string starting at its opening quote.
    mutating func parseString() throws(JSONParseError) -> String {
        index += 1  // opening quote
        let start = index
        var nonASCII: UInt8 = 0
        // Eight bytes at a time while none of them ends the string, escapes or is a control character.
        if let base = bytes.baseAddress {
            let raw = UnsafeRawPointer(base)
            var seen: UInt64 = 0
            while index + 8 <= bytes.count {
                let word = raw.loadUnaligned(fromByteOffset: index, as: UInt64.self)
                if Self.mayEndPlainRun(word) { break }
                seen |= word
                index += 8
            }
            if seen & 0x8080_8080_8080_8080 != 0 { nonASCII = 0x80 }
        }
        // Fast path: no escapes, so the bytes between the quotes are the string.
        while index < bytes.count {
            let byte = bytes[index]
            if byte == UInt8(ascii: "\"") {
                let slice = UnsafeBufferPointer(rebasing: bytes[start..<index])
                let string: String
                if nonASCII & 0x80 == 0 {
                    // ASCII needs no validation; `String(validating:)` costs a generic metadata lookup per call.
                    // The contract's own names and values come back as literals: no allocation, no copy.
                    string = ContractVocabulary.string(slice) ?? String(decoding: slice, as: UTF8.self)
                } else if let validated = String(validating: slice, as: UTF8.self) {
                    string = validated
                } else {
                    throw JSONParseError(.invalidUTF8, at: start)
                }
                index += 1
                return string
            }
            nonASCII |= byte
            if byte == UInt8(ascii: "\\") { break }
            if byte < 0x20 { throw error(.controlCharacterInString) }
            index += 1
        }
        guard index < bytes.count else { throw error(.unexpectedEnd) }
        return try parseEscapedString(prefixStart: start)
    }

    /// Whether a word holds a `"`, a `\\` or a control character (exact: a byte below n sets its high bit in
    /// `(word - n per byte) & ~word` for n <= 128, and bytes of 0x80 and above never do).
    @inline(__always)
    static func mayEndPlainRun(_ word: UInt64) -> Bool {
        let ones: UInt64 = 0x0101_0101_0101_0101
        let control = (word &- ones &* 0x20) & ~word
        let quote = word ^ (ones &* 0x22)
        let backslash = word ^ (ones &* 0x5C)
        return (control | ((quote &- ones) & ~quote) | ((backslash &- ones) & ~backslash)) & 0x8080_8080_8080_8080 != 0
    }

    mutating func parseEscapedString(prefixStart: Int) throws(JSONParseError) -> String {
        var scratch: [UInt8] = []
        scratch.reserveCapacity(index - prefixStart + 16)
        scratch.append(contentsOf: UnsafeBufferPointer(rebasing: bytes[prefixStart..<index]))
        while index < bytes.count {
            let byte = bytes[index]
            switch byte {
            case UInt8(ascii: "\""):
                index += 1
                guard let string = String(validating: scratch, as: UTF8.self) else {
                    throw JSONParseError(.invalidUTF8, at: prefixStart)
                }
                return string
            case UInt8(ascii: "\\"):
                index += 1
                guard index < bytes.count else { throw error(.unexpectedEnd) }
                let escaped = bytes[index]
                index += 1
                switch escaped {
                case UInt8(ascii: "\""): scratch.append(0x22)
                case UInt8(ascii: "\\"): scratch.append(0x5C)
                case UInt8(ascii: "/"): scratch.append(0x2F)
                case UInt8(ascii: "b"): scratch.append(0x08)
                case UInt8(ascii: "f"): scratch.append(0x0C)
                case UInt8(ascii: "n"): scratch.append(0x0A)
                case UInt8(ascii: "r"): scratch.append(0x0D)
                case UInt8(ascii: "t"): scratch.append(0x09)
                case UInt8(ascii: "u"):
                    let scalar = try parseUnicodeEscape()
                    appendUTF8(scalar, to: &scratch)
                default:
                    index -= 1
                    throw error(.invalidEscape)
                }
            default:
                if byte < 0x20 { throw error(.controlCharacterInString) }
                scratch.append(byte)
                index += 1
            }
        }
        throw error(.unexpectedEnd)
    }

    /// Reads the four hex digits after `\u` (and a low surrogate's `\uXXXX` when the first is a high one).
    mutating func parseUnicodeEscape() throws(JSONParseError) -> Unicode.Scalar {
        let first = try parseHex4()
        if (0xD800...0xDBFF).contains(first) {
            guard index + 1 < bytes.count, bytes[index] == UInt8(ascii: "\\"), bytes[index + 1] == UInt8(ascii: "u")
            else { throw error(.invalidUnicodeScalar) }
            index += 2
            let second = try parseHex4()
            guard (0xDC00...0xDFFF).contains(second) else { throw error(.invalidUnicodeScalar) }
            let value = 0x10000 + ((first - 0xD800) << 10) + (second - 0xDC00)
            guard let scalar = Unicode.Scalar(value) else { throw error(.invalidUnicodeScalar) }
            return scalar
        }
        guard let scalar = Unicode.Scalar(first) else { throw error(.invalidUnicodeScalar) }
        return scalar
    }

    mutating func parseHex4() throws(JSONParseError) -> UInt32 {
        guard index + 4 <= bytes.count else { throw error(.unexpectedEnd) }
        var value: UInt32 = 0
        for _ in 0..<4 {
            let byte = bytes[index]
            let digit: UInt8
            switch byte {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): digit = byte - UInt8(ascii: "0")
            case UInt8(ascii: "a")...UInt8(ascii: "f"): digit = byte - UInt8(ascii: "a") + 10
            case UInt8(ascii: "A")...UInt8(ascii: "F"): digit = byte - UInt8(ascii: "A") + 10
            default: throw error(.invalidEscape)
            }
            value = value << 4 | UInt32(digit)
            index += 1
        }
        return value
    }

    func appendUTF8(_ scalar: Unicode.Scalar, to buffer: inout [UInt8]) {
        UTF8.encode(scalar) { buffer.append($0) }
    }
}
