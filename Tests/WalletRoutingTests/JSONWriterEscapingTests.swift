import Foundation
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

/// TNS records are written into space reserved for their strings unescaped; strings that need escaping must come
/// out right whether they fit the slack or force the record to be written again.
@Suite("TNS record echo with escapes")
struct RecordEchoEscapingTests {
    @Test(arguments: [0, 1, 5, 40, 200])
    func recordStringsNeedingEscapesRoundTrip(quotes: Int) throws {
        let router = NotificationRouter()
        let now = Date(timeIntervalSince1970: 1_795_248_000)
        var state = InMemoryWalletState()
        let install = #"{"sender":"CPS","digitalCardId":"DC-1","serverMessage":{"code":"CBP.info.tokenProvisioned"}}"#
        state.apply(try router.route(InboundMessage(body: Array(install.utf8)), state: state, now: now).effects)

        let merchant = String(repeating: "\"", count: quotes) + "Caf\u{E9}\n\\"
        var record = JSONObject(members: [
            .init(key: "id", value: .string("T-\(quotes)")), .init(key: "date", value: .string("2026-11-20T10:15:00Z")),
            .init(key: "status", value: .string("approved")), .init(key: "type", value: .string("purchase")),
            .init(key: "currencyCode", value: .string("EUR")),
            .init(key: "amount", value: .number(JSONNumber(validatedLiteral: "1.50"))),
            .init(key: "merchantName", value: .string(merchant)), .init(key: "terminalID", value: .string("\u{1}\t")),
        ])
        let body = JSONValue.object(
            JSONObject(members: [
                .init(key: "sender", value: .string("TNS")),
                .init(key: "action", value: .string("TNS:PaymentTransactionNotification")),
                .init(key: "digitalCardId", value: .string("DC-1")), .init(key: "transaction", value: .object(record)),
            ]))
        let decision = try router.route(InboundMessage(body: body.encoded()), state: state, now: now)
        let first = try #require(decision.results.first)
        let result = try #require(try JSONParser.parse(first.body).objectValue)
        let echoed = try #require(result["records"]?.arrayValue?.first?.objectValue)
        #expect(echoed["merchantName"] == .string(merchant))
        #expect(echoed["terminalID"] == .string("\u{1}\t"))
        #expect(echoed["amount"] == .number(JSONNumber(validatedLiteral: "1.50")))
        record.members.append(.init(key: "isAuxiliaryTransaction", value: .bool(false)))
        #expect(echoed.members.map(\.key) == record.members.map(\.key))
    }
}
