import Testing
import WalletRouting

/// The parser skips over plain string bytes eight at a time: what ends, escapes or invalidates a string must be
/// found at every position of a word and in the tail.
@Suite("JSONParser string scanning")
struct JSONParserScanTests {
    private func body(_ length: Int, with bytes: [UInt8], at position: Int) -> [UInt8] {
        var content = [UInt8](repeating: UInt8(ascii: "a"), count: length)
        content.replaceSubrange(position..<(position + 1), with: bytes)
        return [UInt8(ascii: "\"")] + content + [UInt8(ascii: "\"")]
    }

    @Test func controlCharactersAreRefusedAnywhere() {
        for length in 1...24 {
            for position in 0..<length {
                #expect(throws: JSONParseError.self) { try JSONParser.parse(body(length, with: [0x01], at: position)) }
            }
        }
    }

    @Test func invalidUTF8IsRefusedAnywhere() {
        for length in 1...24 {
            for position in 0..<length {
                #expect(throws: JSONParseError.self) { try JSONParser.parse(body(length, with: [0xFF], at: position)) }
            }
        }
    }

    @Test func escapesAndMultiByteCharactersAreReadAnywhere() throws {
        for length in 1...24 {
            for position in 0..<length {
                let escaped = try JSONParser.parse(body(length, with: Array(#"\n"#.utf8), at: position))
                #expect(escaped.stringValue?.utf8.filter { $0 == 0x0A }.count == 1)
                let accented = try JSONParser.parse(body(length, with: Array("é".utf8), at: position))
                #expect(accented.stringValue?.contains("é") == true)
                let quoted = try JSONParser.parse(body(length, with: Array(#"\""#.utf8), at: position))
                #expect(quoted.stringValue?.contains("\"") == true)
            }
        }
    }
}
