import AMQPTransport
import Foundation
import Testing
import WalletMessages

@testable import WalletWorker

/// Issue 25: dead letters that went through the retry queues kept the work queue's name as routing key, so
/// `replay` did not republish what the backend sent. The first retry copy records the original exchange and
/// routing key; later copies, the dead letter and replay read them back.
@Suite struct OriginalDestinationTests {
    let topology = Topology()

    func original(exchange: String, routingKey: String, headers: AMQPTable? = nil) -> OriginalMessage {
        let first = OriginalDestination(deliveredVia: exchange, routingKey: routingKey, headers: headers)
        return OriginalMessage(
            body: Array(#"{"sender":"MG"}"#.utf8),
            properties: AMQPMessageProperties(headers: headers, deliveryMode: .persistent, messageID: "m1"),
            routingKey: first.routingKey, exchange: first.exchange)
    }

    @Test func theFirstRetryCopyRecordsWhereTheMessageWasPublished() throws {
        let plan = DeliveryPlan(
            original: original(exchange: "wallet.notifications", routingKey: "notification"),
            transientFailure: "store unavailable", retry: .attempts(3), jitter: 0.5, topology: topology,
            frameMax: 131_072)
        let copy = try #require(plan.messages.first)
        #expect(copy.routingKey == "wallet.notifications.retry")
        #expect(copy.properties.headers?["x-original-exchange"] == .string("wallet.notifications"))
        #expect(copy.properties.headers?["x-original-routing-key"] == .string("notification"))
    }

    @Test func aMessageBackFromTheRetryQueueKeepsItsOriginalThroughTheNextLevelAndIntoItsDeadLetter() throws {
        // As the retry queue's TTL delivers it: through the default exchange, the work queue's name as key.
        let back = original(
            exchange: "", routingKey: "wallet.notifications.work",
            headers: [
                "x-retry-count": .int32(1), "x-original-exchange": .string("wallet.notifications"),
                "x-original-routing-key": .string("notification"),
            ])
        #expect(back.routingKey == "notification")
        #expect(back.exchange == "wallet.notifications")
        let second = DeliveryPlan(
            original: back, transientFailure: "store unavailable", retry: .attempts(3), jitter: 0.5, topology: topology,
            frameMax: 131_072)
        let copy = try #require(second.messages.first)
        #expect(copy.routingKey == "wallet.notifications.retry.2")
        #expect(copy.properties.headers?["x-original-routing-key"] == .string("notification"))

        var last = back
        last.properties.headers?["x-retry-count"] = .int32(2)
        let dead = DeliveryPlan(
            original: last, transientFailure: "store unavailable", retry: .attempts(3), jitter: 0.5, topology: topology,
            frameMax: 131_072)
        #expect(dead.fate == .retriesExhausted(attempts: 3, error: "store unavailable"))
        let letter = try #require(dead.messages.first)
        #expect(letter.exchange == "wallet.notifications.dlx")
        #expect(letter.routingKey == "notification", "the dead letter carries the routing key the backend used")
        #expect(letter.properties.headers?["x-original-exchange"] == .string("wallet.notifications"))
    }

    @Test func headersOnAMessageFromThePublisherAreNotTrusted() throws {
        let forged = original(
            exchange: "wallet.notifications", routingKey: "notification",
            headers: [
                "x-original-exchange": .string("wallet.events"), "x-original-routing-key": .string("card.completed"),
            ])
        #expect(forged.routingKey == "notification" && forged.exchange == "wallet.notifications")
        let copy = try #require(
            DeliveryPlan(
                original: forged, transientFailure: "x", retry: .attempts(3), jitter: 0, topology: topology,
                frameMax: 131_072
            )
            .messages.first)
        #expect(copy.properties.headers?["x-original-exchange"] == .string("wallet.notifications"))
        #expect(copy.properties.headers?["x-original-routing-key"] == .string("notification"))
    }

    @Test func replayUsesTheRecordedRoutingKeyButOnlyTheInboundOrDefaultExchange() {
        let recorded: AMQPTable = [
            "x-original-exchange": .string("wallet.notifications"), "x-original-routing-key": .string("notification"),
            "x-retry-count": .int32(2), "x-worker-error": .string("gave up"),
        ]
        // A dead letter the broker made from a retried message (a quorum delivery limit) has the work queue's key
        // (the dead-letter tool's replay, `WalletOperatorToolsTests`, strips the headers).
        let replayed = OriginalDestination.replay(
            deadLetterRoutingKey: "wallet.notifications.work", headers: recorded,
            inboundExchange: "wallet.notifications", ownQueues: Self.ownQueues)
        #expect(replayed == OriginalDestination(exchange: "wallet.notifications", routingKey: "notification"))

        // Sent straight to the work queue through the default exchange: replayed the same way.
        let direct = OriginalDestination.replay(
            deadLetterRoutingKey: "wallet.notifications.work",
            headers: [
                "x-original-exchange": .string(""), "x-original-routing-key": .string("wallet.notifications.work"),
            ],
            inboundExchange: "wallet.notifications", ownQueues: Self.ownQueues)
        #expect(direct == OriginalDestination(exchange: "", routingKey: "wallet.notifications.work"))

        // A header naming another exchange never becomes the replay's exchange.
        let elsewhere = OriginalDestination.replay(
            deadLetterRoutingKey: "k",
            headers: [
                "x-original-exchange": .string("wallet.events"), "x-original-routing-key": .string("card.completed"),
            ],
            inboundExchange: "wallet.notifications", ownQueues: Self.ownQueues)
        #expect(elsewhere?.exchange == "wallet.notifications")

        // No record: the dead letter's own routing key (the worker's dead letters keep the original one).
        let plain = OriginalDestination.replay(
            deadLetterRoutingKey: "notification", headers: nil, inboundExchange: "wallet.notifications",
            ownQueues: Self.ownQueues)
        #expect(plain == OriginalDestination(exchange: "wallet.notifications", routingKey: "notification"))
    }

    private static let ownQueues: Set<String> = ["wallet.notifications.work"]

    /// Issue 37: a publisher wrote `x-original-exchange: ""` and `x-original-routing-key: some.queue`: a replay
    /// would have published the message into any queue, with the operator's rights.
    @Test func aReplayNeverFollowsTheDefaultExchangeIntoAQueueTheWorkersDoNotConsume() {
        let forged: AMQPTable = [
            "x-original-exchange": .string(""), "x-original-routing-key": .string("billing.commands"),
        ]
        let replay = OriginalDestination.replay(
            deadLetterRoutingKey: "notification", headers: forged, inboundExchange: "wallet.notifications",
            ownQueues: Self.ownQueues)
        #expect(replay == nil)
        var ordered = Topology()
        ordered.orderedShards = 2
        #expect(
            ordered.consumedQueueNames == [
                "wallet.notifications.work", "wallet.notifications.work.shard.0", "wallet.notifications.work.shard.1",
            ])
    }

    /// The worker's dead letter records where the delivery was first published, as the worker knows it: a
    /// publisher's own `x-original-*` headers on a message from the inbound exchange are replaced.
    @Test func aDeadLetterRecordsTheTrueFirstDestinationNotThePublishers() {
        let delivery = OriginalMessage(
            body: Array("not json".utf8),
            properties: {
                var properties = AMQPMessageProperties()
                properties.headers = [
                    "x-original-exchange": .string(""), "x-original-routing-key": .string("billing.commands"),
                    "x-kept": .string("yes"),
                ]
                return properties
            }(), routingKey: "notification", exchange: "wallet.notifications")
        let letter = delivery.deadLetter(
            exchange: "wallet.notifications.dlx", reason: "body is not JSON", frameMax: 131_072)
        #expect(letter.properties.headers?["x-original-exchange"] == .string("wallet.notifications"))
        #expect(letter.properties.headers?["x-original-routing-key"] == .string("notification"))
        #expect(letter.properties.headers?["x-kept"] == .string("yes"))
        let replay = OriginalDestination.replay(
            deadLetterRoutingKey: letter.routingKey, headers: letter.properties.headers,
            inboundExchange: "wallet.notifications", ownQueues: Self.ownQueues)
        #expect(replay == OriginalDestination(exchange: "wallet.notifications", routingKey: "notification"))
    }
}
