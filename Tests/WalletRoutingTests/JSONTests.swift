import Testing

@testable import WalletRouting

@Suite("JSON parser and writer")
struct JSONTests {
    @Test func parsesAndKeepsMemberOrderAndNumberLiterals() throws {
        let value = try JSONParser.parse(Array(#"{"b":12.50,"a":[true,false,null],"c":"x\n\u00e9\ud83d\ude00"}"#.utf8))
        #expect(String(decoding: value.encoded(), as: UTF8.self) == #"{"b":12.50,"a":[true,false,null],"c":"x\né😀"}"#)
    }

    @Test(arguments: [
        "NaN", "Infinity", "-Infinity", "01", "1.", "[1,]", "{\"a\":1,}", "\"\\ud800\"", "{} x", "", "\"a\u{01}\"",
    ])
    func rejectsWhatIsNotJSON(_ text: String) {
        #expect(throws: JSONParseError.self) { try JSONParser.parse(Array(text.utf8)) }
    }

    @Test func reportsInvalidUTF8() {
        // The offset is where the offending string starts.
        #expect(throws: JSONParseError(.invalidUTF8, at: 1)) { try JSONParser.parse([0x22, 0x61, 0xFF, 0x22]) }
    }
}
