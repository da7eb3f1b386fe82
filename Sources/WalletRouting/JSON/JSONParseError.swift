/// Why a body is not a JSON document, with the byte offset where parsing stopped.
public struct JSONParseError: Error, Sendable, Hashable, CustomStringConvertible {
    public enum Reason: Sendable, Hashable {
        case invalidUTF8
        case unexpectedEnd
        case unexpectedByte(UInt8)
        case invalidNumber
        case invalidEscape
        case invalidUnicodeScalar
        case controlCharacterInString
        case trailingData
        case nestingTooDeep
    }

    public var reason: Reason
    public var offset: Int

    public init(_ reason: Reason, at offset: Int) {
        self.reason = reason
        self.offset = offset
    }

    public var description: String {
        switch reason {
        case .invalidUTF8: "body is not valid UTF-8 (byte \(offset))"
        case .unexpectedEnd: "body is not JSON: unexpected end of input"
        case .unexpectedByte(let byte):
            if byte >= 0x20 && byte < 0x7F {
                "body is not JSON: unexpected character '\(Character(Unicode.Scalar(byte)))' at byte \(offset)"
            } else {
                "body is not JSON: unexpected byte 0x\(String(byte, radix: 16, uppercase: true)) at byte \(offset)"
            }
        case .invalidNumber: "body is not JSON: invalid number at byte \(offset) (NaN and Infinity are not JSON)"
        case .invalidEscape: "body is not JSON: invalid escape sequence at byte \(offset)"
        case .invalidUnicodeScalar:
            "body is not JSON: \\u escape is not a Unicode scalar (lone surrogate) at byte \(offset)"
        case .controlCharacterInString: "body is not JSON: unescaped control character in a string at byte \(offset)"
        case .trailingData: "body is not JSON: data after the document at byte \(offset)"
        case .nestingTooDeep:
            "body is not JSON we accept: nested deeper than \(JSONParser.maximumDepth) levels at byte \(offset)"
        }
    }
}
