import AMQPTransport
import Foundation
import Testing

@testable import WalletOperatorTools

/// `wallet-worker dead-letters`: what an operator is told about a dead letter, which ones a filter selects, and
/// what a replay publishes.
@Suite struct DeadLetterTests {
    let now = Date(timeIntervalSince1970: 1_800_000_000)

    struct Delivery {
        var body: [UInt8]
        var properties: AMQPMessageProperties
        var routingKey = "backend.tns"
    }

    func delivery(
        body: String = #"{"sender":"TNS","digitalCardId":"DC-1"}"#, headers: AMQPTable?, timestamp: UInt64? = nil,
        messageID: String? = "m-1"
    ) -> Delivery {
        Delivery(
            body: Array(body.utf8),
            properties: AMQPMessageProperties(
                contentType: "application/json", headers: headers, deliveryMode: .persistent, messageID: messageID,
                timestamp: timestamp, type: "push"))
    }

    func letter(_ delivery: Delivery) -> DeadLetter {
        DeadLetter(body: delivery.body, properties: delivery.properties, routingKey: delivery.routingKey)
    }

    func replay(_ delivery: Delivery, to exchange: String) -> AMQPOutboundMessage {
        DeadLetterReplay.message(
            body: delivery.body, properties: delivery.properties, routingKey: delivery.routingKey,
            inboundExchange: exchange)
    }

    @Test func aWorkerDeadLetterSaysWhyWithItsSenderAndAge() {
        let letter = self.letter(delivery(
            headers: ["x-worker-error": .string("transient failure, gave up after 5 attempts: store unavailable")],
            timestamp: 1_800_000_000 - 90))
        #expect(letter.deadLetteredBy == "worker")
        #expect(letter.reason.hasPrefix("transient failure"))
        #expect(letter.sender == "TNS")
        #expect(letter.messageID == "m-1")
        #expect(letter.age(at: now) == 90)
    }

    @Test func aBrokerDeadLetterNamesTheBrokersReasonAndQueueAndItsTime() {
        let death: AMQPTable = [
            "count": .int64(1), "reason": .string("rejected"), "queue": .string("wallet.notifications.work"),
            "time": .timestamp(1_800_000_000 - 600), "exchange": .string("wallet.notifications"),
        ]
        let letter = self.letter(delivery(body: "\u{FF}", headers: ["x-death": .array([.table(death)])]))
        #expect(letter.deadLetteredBy == "broker")
        #expect(letter.reason.hasPrefix("rejected by the broker in wallet.notifications.work"))
        #expect(letter.sender == nil, "a body that is not JSON has no sender")
        #expect(letter.age(at: now) == 600)
    }

    @Test func filtersAllApply() {
        let letter = self.letter(delivery(
            headers: ["x-worker-error": .string("transient failure: Store Unavailable")], timestamp: 1_800_000_000 - 3_600))
        var filter = DeadLetterFilter()
        #expect(filter.isEmpty && filter.matches(letter, at: now))
        filter.reason = "store unavailable"
        #expect(filter.matches(letter, at: now), "the reason is matched case-insensitively")
        filter.sender = "TNS"
        filter.olderThan = .seconds(1_800)
        filter.newerThan = .seconds(7_200)
        #expect(filter.matches(letter, at: now))
        filter.sender = "CPS"
        #expect(!filter.matches(letter, at: now))
        filter.sender = nil
        filter.olderThan = .seconds(7_200)
        #expect(!filter.matches(letter, at: now))

        var byAge = DeadLetterFilter()
        byAge.newerThan = .seconds(10_000)
        #expect(!byAge.matches(self.letter(delivery(headers: nil)), at: now), "no time: no age condition holds")
    }

    @Test func aReplayIsTheOriginalWithoutWhatWasAddedOnTheWay() {
        let original = delivery(headers: [
            "traceparent": .string("00-abc-def-01"), "x-tenant": .string("eu"),
            "x-retry-count": .int32(4), "x-worker-error": .string("gave up"), "x-worker-last-error": .string("busy"),
            "x-death": .array([]), "x-first-death-queue": .string("q"), "x-last-death-reason": .string("expired"),
            "x-original-x-death": .string("forged"), "x-original-expiration": .string("60000"),
            "x-original-user-id": .string("backend"),
        ])
        let replay = self.replay(original, to: "wallet.notifications")
        #expect(replay.exchange == "wallet.notifications")
        #expect(replay.routingKey == "backend.tns")
        #expect(replay.mandatory, "an unroutable replay comes back and its dead letter stays")
        #expect(replay.body == original.body)
        #expect(replay.properties.messageID == "m-1" && replay.properties.type == "push")
        #expect(replay.properties.headers?.entries.map(\.key) == ["traceparent", "x-tenant", "x-original-user-id"])

        let bare = self.replay(delivery(headers: ["x-worker-error": .string("x")]), to: "in")
        #expect(bare.properties.headers == nil)
    }
}
