import Foundation
import Testing

@testable import WalletRouting

@Suite("Every result: envelope and properties (CONTRACT.md §1, §9)")
struct EnvelopeTests {
    static let stack = #"""
        {"sender":"CPS","digitalCardId":"DC-1","serverMessages":[{"code":"CBP.info.tokenProvisioned"},{"code":"CBP.info.tokenSuspended"}]}
        """#

    @Test func envelopeComesFirst() throws {
        var wallet = Wallet()
        let decision = try wallet.send(Self.stack, messageID: "m-1", correlationID: "c-1")
        for result in decision.results {
            #expect(
                result.text.hasPrefix(
                    #"{"kind":"cardEvent","messageId":"m-1","correlationId":"c-1","sender":"CPS","processedAt":"2026-11-20T10:15:00.000Z","#
                ))
        }
    }

    @Test(
        arguments: [
            ("m-1", "c-1", "c-1"),
            ("m-1", nil, "m-1"),
            (nil, "c-1", "c-1"),
            (nil, nil, nil),
            ("m-1", "", "m-1"),
            ("", nil, nil),
        ] as [(String?, String?, String?)])
    func correlationIdFallsBackToMessageId(_ messageID: String?, _ correlationID: String?, _ expected: String?) throws {
        var wallet = Wallet()
        let decision = try wallet.send(#"{"action":"a"}"#, messageID: messageID, correlationID: correlationID)
        let body = try decision.results[0].json
        #expect(body["correlationId"] == expected.map(JSONValue.string) ?? .null)
        #expect(decision.results[0].properties.correlationID == expected)
    }

    @Test func messageIdsAreNumberedInPublicationOrder() throws {
        var wallet = Wallet()
        let decision = try wallet.send(
            Self.stack, messageID: "abc", traceparent: "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01")
        #expect(decision.results.map(\.properties.messageID) == ["abc/0", "abc/1", "abc/2"])
        #expect(decision.results.map(\.properties.type) == ["cardEvent", "cardEvent", "cardEvent"])
        #expect(
            decision.results.allSatisfy {
                $0.properties.traceparent == "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
            })
        #expect(try decision.bodies.allSatisfy { $0.string("messageId") == "abc" })
    }

    @Test func replyToCopiesFollowTheirPrimaryAndTakeNoIndex() throws {
        var wallet = Wallet()
        let decision = try wallet.send(
            Self.stack, messageID: "abc", correlationID: "corr", replyTo: "amq.rabbitmq.reply-to.g1",
            traceparent: "tp")
        #expect(decision.results.count == 6)
        #expect(decision.results.map(\.exchange) == ["wallet.events", "", "wallet.events", "", "wallet.events", ""])
        #expect(
            decision.results.map(\.routingKey) == [
                "card.serverMessage.requestInstallCard", "amq.rabbitmq.reply-to.g1",
                "card.serverMessage.requestSuspendCard", "amq.rabbitmq.reply-to.g1",
                "card.completed", "amq.rabbitmq.reply-to.g1",
            ])
        #expect(decision.results.map(\.properties.messageID) == ["abc/0", "abc/0", "abc/1", "abc/1", "abc/2", "abc/2"])
        for pair in stride(from: 0, to: 6, by: 2) {
            #expect(decision.results[pair].body == decision.results[pair + 1].body)
            #expect(decision.results[pair].properties == decision.results[pair + 1].properties)
        }
        #expect(
            decision.results[1].properties
                == OutboundProperties(
                    messageID: "abc/0", correlationID: "corr", type: "cardEvent", traceparent: "tp"))
    }

    @Test func withoutAMessageIdResultsCarryNone() throws {
        var wallet = Wallet()
        let decision = try wallet.send(Self.stack, messageID: nil, replyTo: "r")
        #expect(decision.results.allSatisfy { $0.properties.messageID == nil && $0.properties.correlationID == nil })
        #expect(try decision.bodies.allSatisfy { $0.isNull("messageId") && $0.isNull("correlationId") })
    }

    @Test func sameMessageGivesTheSameResults() throws {
        var first = Wallet()
        var second = Wallet()
        let a = try first.send(Self.stack, messageID: "m", replyTo: "r")
        let b = try second.send(Self.stack, messageID: "m", replyTo: "r")
        #expect(a == b)
    }

    @Test func resultKindsAndExchanges() throws {
        var settings = RoutingSettings()
        settings.exchanges.events = "ev"
        settings.exchanges.transactions = "tx"
        settings.exchanges.replenishment = "rp"
        settings.exchanges.actions = "ac"
        settings.exchanges.installations = "in"
        var wallet = Wallet(settings: settings)
        wallet.seed("DC-1", .active)
        let cases: [(String, String?, String, String)] = [
            (#"{"sender":"CPS","digitalCardId":"DC-1","serverMessage":{"code":"X"}}"#, nil, "ev", "cardEvent"),
            (
                #"{"sender":"TNS","action":"TNS:PaymentTransactionNotification","digitalCardId":"DC-1"}"#, nil, "tx",
                "transactionRecords"
            ),
            (
                #"{"sender":"MG","action":"MG:ReplenishmentNeededNotification","digitalCardId":"DC-1"}"#, nil, "rp",
                "replenishmentOutcome"
            ),
            (#"{"action":"go"}"#, nil, "ac", "actionTriggered"),
            (
                #"{"installationId":"i","platform":"fcm","pushChannel":"t"}"#, "DeviceInstallation", "in",
                "installationOutcome"
            ),
            ("[]", nil, "ev", "rejected"),
        ]
        for (json, type, exchange, kind) in cases {
            let decision = try wallet.send(json, type: type)
            #expect(decision.results[0].exchange == exchange)
            #expect(decision.results[0].properties.type == kind)
            #expect(try decision.results[0].json.string("kind") == kind)
        }
    }

    @Test(arguments: [
        (1_795_169_700.0, "2026-11-20T10:15:00.000Z"),
        (1_795_169_700.123, "2026-11-20T10:15:00.123Z"),
        (1_795_169_700.9996, "2026-11-20T10:15:01.000Z"),
        (0.0, "1970-01-01T00:00:00.000Z"),
        (-0.001, "1969-12-31T23:59:59.999Z"),
        (951_782_400.0, "2000-02-29T00:00:00.000Z"),
        (253_402_300_799.999, "9999-12-31T23:59:59.999Z"),
    ])
    func timestampsAreISO8601UTCWithMilliseconds(_ seconds: Double, _ expected: String) {
        #expect(UTCTimestamp.string(epochSeconds: seconds) == expected)
        // Written into a result's JSON without a String: the same text, quoted, after its key.
        var writer = JSONWriter()
        writer.beginObject()
        writer.key("at")
        writer.utcTimestamp(epochSeconds: seconds)
        writer.key("next")
        writer.int(1)
        writer.endObject()
        #expect(String(decoding: writer.takeBytes(), as: UTF8.self) == "{\"at\":\"\(expected)\",\"next\":1}")
    }

    @Test func aYearBeforeZeroKeepsItsSignInJSON() {
        var writer = JSONWriter()
        writer.utcTimestamp(epochSeconds: -62_198_755_200)  // 0000-01-01 less 365 days
        let text = String(decoding: writer.takeBytes(), as: UTF8.self)
        #expect(text == "\"-0001-01-01T00:00:00.000Z\"")
        #expect(text == "\"\(UTCTimestamp.string(epochSeconds: -62_198_755_200))\"")
    }

    @Test func timestampsAgreeWithFoundation() {
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        formatter.timeZone = TimeZone(identifier: "UTC")
        for _ in 0..<2_000 {
            let milliseconds = Int64.random(in: -2_000_000_000_000...8_000_000_000_000)
            let date = Date(timeIntervalSince1970: Double(milliseconds) / 1000)
            #expect(UTCTimestamp.string(epochSeconds: date.timeIntervalSince1970) == formatter.string(from: date))
        }
    }

    @Test func processedAtIsTheGivenTime() throws {
        var wallet = Wallet()
        wallet.now = Date(timeIntervalSince1970: 1_795_169_700.5)
        let decision = try wallet.send(#"{"action":"a"}"#)
        #expect(try decision.results[0].json.string("processedAt") == "2026-11-20T10:15:00.500Z")
    }
}
