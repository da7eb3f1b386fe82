import Testing

@testable import AMQPTransport

/// The strings a connection reuses for repeated consumer tags, exchanges and content types: always exactly the bytes
/// received, shared only when equal.
@Suite("Recent strings")
struct RecentStringsTests {
    private func string(_ text: String, in strings: inout RecentStrings) -> String? {
        let bytes = Array(text.utf8)
        return bytes.withUnsafeBufferPointer { strings.string($0) }
    }

    /// The address of a native string's UTF-8 storage: equal for strings that share it.
    private func storage(_ text: String) -> UnsafeRawPointer? {
        text.utf8.withContiguousStorageIfAvailable { UnsafeRawPointer($0.baseAddress) } ?? nil
    }

    @Test func aRepeatedLongStringIsTheSameStorage() throws {
        var strings = RecentStrings()
        let first = try #require(string("amq.ctag-6fYf2hQk1d0TcPqXW8m2xw", in: &strings))
        let second = try #require(string("amq.ctag-6fYf2hQk1d0TcPqXW8m2xw", in: &strings))
        #expect(first == second)
        #expect(storage(first) == storage(second), "made once, handed out again")
    }

    @Test func differentBytesOfTheSameLengthAreNotConfused() {
        var strings = RecentStrings()
        #expect(string("application/json", in: &strings) == "application/json")
        #expect(string("application/jsoN", in: &strings) == "application/jsoN")
        #expect(string("application/json", in: &strings) == "application/json")
    }

    @Test func shortAndEmptyStringsAreMadeAsGiven() {
        var strings = RecentStrings()
        #expect(string("", in: &strings) == "")
        #expect(string("notification", in: &strings) == "notification")
        #expect(string("123456789012345", in: &strings) == "123456789012345")
    }

    @Test func invalidUTF8IsNilAndNotRemembered() {
        var strings = RecentStrings()
        let invalid: [UInt8] = Array("wallet.notifications.".utf8) + [0xFF, 0xFE]
        #expect(invalid.withUnsafeBufferPointer { strings.string($0) } == nil)
        #expect(invalid.withUnsafeBufferPointer { strings.string($0) } == nil)
    }

    @Test func pastItsCapacityTheOldestIsReplacedAndAllStayCorrect() {
        var strings = RecentStrings()
        let texts = (0..<(RecentStrings.capacity * 3)).map { "wallet.notifications.exchange-\($0)" }
        for text in texts + texts.reversed() {
            #expect(string(text, in: &strings) == text)
        }
    }
}
