import Foundation
import Testing

@testable import WalletRouting

@Suite("Bad input (CONTRACT.md §2, §8)")
struct RejectionTests {
    /// A JSON object of exactly `size` bytes.
    static func object(ofSize size: Int) -> [UInt8] {
        let prefix = #"{"action":"a","padding":""#
        let suffix = #""}"#
        return Array(
            (prefix + String(repeating: "x", count: size - prefix.utf8.count - suffix.utf8.count) + suffix).utf8)
    }

    @Test func bodySizeLimitIs64KiBInclusive() throws {
        var wallet = Wallet()
        let accepted = try wallet.send(bytes: Self.object(ofSize: 65_536))
        #expect(accepted.outcome == .processed)

        let rejected = try wallet.send(bytes: Self.object(ofSize: 65_537))
        let reason = try #require(rejected.rejectionReason)
        #expect(reason.contains("65537"))
        #expect(rejected.disposition == .deadLetter(reason: reason))
        #expect(rejected.outcome == .rejected)
        #expect(try rejected.bodies[0].isNull("sender"))  // the body is not read
    }

    @Test func bodySizeLimitIsConfigurable() throws {
        var settings = RoutingSettings()
        settings.maximumBodyBytes = 100
        var wallet = Wallet(settings: settings)
        #expect(try wallet.send(bytes: Self.object(ofSize: 100)).outcome == .processed)
        #expect(try wallet.send(bytes: Self.object(ofSize: 101)).outcome == .rejected)
    }

    static let notJSONObjects: [([UInt8], String)] = [
        ([0x7B, 0x22, 0x61, 0x22, 0x3A, 0x22, 0xFF, 0x22, 0x7D], "UTF-8"),  // {"a":"\xFF"}
        ([0xFF], "UTF-8"),
        ([0x7B, 0x7D, 0x20, 0xC3], "UTF-8"),  // {} then a truncated sequence
        ([0x7B, 0x22, 0x61, 0x22, 0x3A, 0xED, 0xA0, 0x80, 0x7D], "UTF-8"),  // encoded surrogate
        (Array(#"{"a":NaN}"#.utf8), "JSON"),
        (Array(#"{"a":Infinity}"#.utf8), "JSON"),
        (Array(#"{"a":-Infinity}"#.utf8), "JSON"),
        (Array(#"{"a":1"#.utf8), "JSON"),
        (Array(#"{"a":1} {}"#.utf8), "JSON"),
        (Array("".utf8), "JSON"),
        (Array("   ".utf8), "JSON"),
        (Array(#"{'a':1}"#.utf8), "JSON"),
        ([0xEF, 0xBB, 0xBF] + Array("{}".utf8), "JSON"),  // a byte-order mark is not JSON
        (Array(#"["action"]"#.utf8), "object"),
        (Array(#""action""#.utf8), "object"),
        (Array("42".utf8), "object"),
        (Array("null".utf8), "object"),
        (Array("true".utf8), "object"),
    ]

    @Test(arguments: notJSONObjects)
    func bodyThatIsNotAJSONObjectIsDeadLettered(_ bytes: [UInt8], _ mentions: String) throws {
        var wallet = Wallet()
        let decision = try wallet.send(bytes: bytes, messageID: "m-7", replyTo: "replies")
        let reason = try #require(decision.rejectionReason)
        #expect(reason.contains(mentions))
        #expect(decision.disposition == .deadLetter(reason: reason))
        #expect(decision.outcome == .rejected)
        #expect(decision.effects.isEmpty)
        #expect(decision.sender == nil)
        #expect(decision.results.map(\.exchange) == ["wallet.events", ""])
        #expect(decision.results.map(\.routingKey) == ["notification.rejected", "replies"])
        #expect(decision.results.map(\.properties.messageID) == ["m-7/0", "m-7/0"])
        let body = try decision.results[0].json
        #expect(body.keys == ["kind", "messageId", "correlationId", "sender", "processedAt", "reason"])
        #expect(body.string("kind") == "rejected")
        #expect(body.isNull("sender"))
        #expect(decision.results[0].properties.type == "rejected")
    }

    @Test func rejectedResultCarriesTheSenderWhenTheBodyParsed() throws {
        var wallet = Wallet()
        let decision = try wallet.send(#"{"sender":"tns","action":"x","digitalCardId":"DC-1"}"#)
        #expect(try decision.results[0].json.string("sender") == "TNS")
        #expect(decision.sender == "TNS")
        #expect(decision.digitalCardId == "DC-1")
    }

    @Test func reasonNeverEchoesAHugeValue() throws {
        var wallet = Wallet()
        let long = String(repeating: "z", count: 5_000)
        let decision = try wallet.send(#"{"sender":"TNS","action":"\#(long)","digitalCardId":"DC-1"}"#)
        #expect((decision.rejectionReason?.utf8.count ?? .max) < 200)
    }

    @Test func storeFailuresAreRethrown() throws {
        struct Unavailable: Error {}
        struct FailingState: WalletStateReading {
            func card(_ digitalCardId: String) throws -> CardRecord? { throw Unavailable() }
            func hasTransaction(digitalCardId: String, recordId: String) throws -> Bool { throw Unavailable() }
            func newestTransactions(digitalCardId: String, auxiliary: Bool?, limit: Int) throws -> [TransactionRecord] {
                throw Unavailable()
            }
        }
        let router = NotificationRouter()
        for json in [
            #"{"sender":"CPS","digitalCardId":"DC-1","serverMessage":{"code":"X"}}"#,
            #"{"sender":"TNS","action":"TNS:PaymentTransactionNotification","digitalCardId":"DC-1"}"#,
            #"{"sender":"MG","action":"MG:ReplenishmentNeededNotification","digitalCardId":"DC-1"}"#,
        ] {
            #expect(throws: Unavailable.self) {
                try router.route(InboundMessage(body: Array(json.utf8)), state: FailingState(), now: testNow)
            }
        }
        // Bad input needs no state: it is still rejected.
        let rejected = try router.route(
            InboundMessage(body: Array(#"{"sender":"TNS"}"#.utf8)), state: FailingState(), now: testNow)
        #expect(rejected.outcome == .rejected)
    }
}
