import Testing
import WalletRouting

/// The writer scans strings eight bytes at a time for bytes to escape: every position of a word, and the tail,
/// must be caught.
@Suite("JSONWriter escaping")
struct JSONWriterEscapingTests {
    @Test(arguments: ["\"", "\\", "\n", "\u{0}", "\u{1F}", "\t"])
    func escapesAtEveryPosition(_ special: String) throws {
        for length in 1...24 {
            for position in 0..<length {
                var scalars = Array(repeating: "a", count: length)
                scalars[position] = special
                let text = scalars.joined()
                let encoded = JSONValue.string(text).encoded()
                #expect(try JSONParser.parse(encoded) == .string(text), "\(text.debugDescription)")
                #expect(encoded.count > text.utf8.count + 2, "not escaped: \(text.debugDescription)")
            }
        }
    }

    @Test func leavesMultiByteAndPrintableASCIIAlone() {
        let text = "€é😀 ~\u{7F}\u{2028}abcdefghijklmnop"
        #expect(JSONValue.string(text).encoded() == Array("\"\(text)\"".utf8))
    }
}
