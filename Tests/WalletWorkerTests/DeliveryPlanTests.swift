import AMQPTransport
import Foundation
import Testing
import WalletRouting
import WalletStore

@testable import WalletWorker

@Suite struct DeliveryPlanTests {
    let topology = Topology()

    func original(
        headers: AMQPTable? = ["traceparent": .string("00-abc-def-01"), "x-tenant": .string("eu")],
        replyTo: String? = nil
    ) -> OriginalMessage {
        OriginalMessage(
            body: Array(#"{"sender":"MG"}"#.utf8),
            properties: AMQPMessageProperties(
                contentType: "application/json", headers: headers, deliveryMode: .persistent, replyTo: replyTo,
                messageID: "m1", type: "push"),
            routingKey: "backend.mg")
    }

    func decision(disposition: Disposition, replyTo: String? = nil) -> StoredDecision {
        var results = [
            OutboundResult(
                exchange: "wallet.replenishment", routingKey: "replenishment.failed", body: Array("{}".utf8),
                properties: OutboundProperties(
                    messageID: "m1/0", correlationID: "c1", type: "replenishmentOutcome",
                    traceparent: "00-abc-def-01"))
        ]
        if let replyTo {
            results.append(
                OutboundResult(
                    exchange: "", routingKey: replyTo, body: results[0].body,
                    properties: results[0].properties))
        }
        return StoredDecision(
            decision: Decision(
                effects: [], results: results, disposition: disposition, outcome: .domainError,
                sender: "MG", digitalCardId: "DC-1"),
            isReplay: false)
    }

    @Test func resultsArePublishedAsTheContractSays() throws {
        let plan = DeliveryPlan(
            original: original(), stored: decision(disposition: .acknowledge), topology: topology, frameMax: 131_072)
        #expect(plan.fate == .processed)
        let message = try #require(plan.messages.first)
        #expect(plan.messages.count == 1)
        #expect(message.exchange == "wallet.replenishment")
        #expect(message.routingKey == "replenishment.failed")
        #expect(message.mandatory)
        #expect(message.properties.deliveryMode == .persistent)
        #expect(message.properties.contentType == "application/json")
        #expect(message.properties.messageID == "m1/0")
        #expect(message.properties.correlationID == "c1")
        #expect(message.properties.type == "replenishmentOutcome")
        #expect(message.properties.headers?["traceparent"] == .string("00-abc-def-01"))
    }

    @Test func badInputPublishesTheRejectionThenTheOriginalToTheDeadLetterExchange() throws {
        let plan = DeliveryPlan(
            original: original(), stored: decision(disposition: .deadLetter(reason: "action is wrong")),
            topology: topology, frameMax: 131_072)
        #expect(plan.fate == .rejected(reason: "action is wrong"))
        #expect(plan.messages.count == 2)
        let deadLetter = plan.messages[1]
        #expect(deadLetter.exchange == topology.deadLetterExchange)
        #expect(deadLetter.routingKey == "backend.mg")
        #expect(deadLetter.body == original().body)
        #expect(deadLetter.properties.messageID == "m1")
        #expect(deadLetter.properties.type == "push")
        // Original headers kept, the reason added.
        #expect(deadLetter.properties.headers?["x-tenant"] == .string("eu"))
        #expect(deadLetter.properties.headers?["x-worker-error"] == .string("action is wrong"))
    }

    @Test func aTransientFailureGoesToTheRetryQueueWithItsAttemptCount() throws {
        let plan = DeliveryPlan(
            original: original(), transientFailure: "store unavailable: busy", retry: .attempts(5), jitter: 0.5,
            topology: topology, frameMax: 131_072)
        #expect(plan.fate == .retried(attempt: 1, error: "store unavailable: busy"))
        let retry = try #require(plan.messages.first)
        #expect(retry.exchange == "")
        #expect(retry.routingKey == topology.retryQueue)
        #expect(retry.body == original().body)
        #expect(retry.properties.headers?["x-retry-count"] == .int32(1))
        #expect(retry.properties.headers?["x-worker-last-error"] == .string("store unavailable: busy"))
        #expect(retry.properties.headers?["x-tenant"] == .string("eu"))
    }

    @Test(arguments: [AMQPFieldValue.int32(4), .int64(4), .uint8(4), .int16(4), .uint32(4)])
    func theLastAttemptDeadLettersWithTheError(count: AMQPFieldValue) throws {
        let plan = DeliveryPlan(
            original: original(headers: ["x-retry-count": count]), transientFailure: "confirm timeout",
            retry: .attempts(5), jitter: 0.5, topology: topology, frameMax: 131_072)
        #expect(plan.fate == .retriesExhausted(attempts: 5, error: "confirm timeout"))
        let deadLetter = try #require(plan.messages.first)
        #expect(deadLetter.exchange == topology.deadLetterExchange)
        let reason = try #require(deadLetter.properties.headers?["x-worker-error"]?.textValue)
        #expect(reason.contains("5 attempts") && reason.contains("confirm timeout"))
    }

    /// Found in review: a message whose data PostgreSQL refuses (a NUL in `digitalCardId`) stopped every replica
    /// that received it. Now it is dead-lettered alone, with the store's words and without a `rejected` result.
    @Test func aMessageTheStoreRefusesIsDeadLetteredUntouchedWithTheStoresError() throws {
        let error = "PostgreSQL data exception (SQLSTATE 22021): invalid byte sequence for encoding \"UTF8\": 0x00"
        let plan = DeliveryPlan(
            original: original(headers: ["x-tenant": .string("eu"), "x-retry-count": .int32(2)]),
            storeRefusal: error, topology: topology, frameMax: 131_072)
        #expect(plan.fate == .storeRefused(reason: "the store refused this message: \(error)"))
        #expect(plan.stored == nil)
        let deadLetter = try #require(plan.messages.first)
        #expect(plan.messages.count == 1, "no rejected result: the router accepted the message")
        #expect(deadLetter.exchange == topology.deadLetterExchange)
        #expect(deadLetter.routingKey == "backend.mg")
        #expect(deadLetter.mandatory)
        #expect(deadLetter.body == original().body)
        #expect(deadLetter.properties.messageID == "m1")
        #expect(deadLetter.properties.type == "push")
        #expect(deadLetter.properties.deliveryMode == .persistent)
        #expect(deadLetter.properties.headers?["x-tenant"] == .string("eu"))
        #expect(deadLetter.properties.headers?["x-retry-count"] == .int32(2), "headers are kept as received")
        #expect(deadLetter.properties.headers?["x-worker-error"] == .string("the store refused this message: \(error)"))
        // Its fate depends on the dead letter alone.
        #expect(plan.failure(in: [.confirmed]) == nil)
        #expect(plan.failure(in: [.nacked])?.contains("nacked") == true)
    }

    @Test func anUnencodableResultDeadLettersAtOnce() throws {
        let plan = DeliveryPlan(
            original: original(replyTo: "amq.gen-1"), stored: decision(disposition: .acknowledge, replyTo: "amq.gen-1"),
            topology: topology, frameMax: 131_072)
        let unencodable = AMQPPublishOutcome.unencodable(reason: "correlation_id is 750 bytes")
        let failure = try #require(plan.failure(in: [unencodable, .confirmed]))
        #expect(failure.contains("correlation_id is 750 bytes"))
        #expect(plan.isUnpublishable(in: [unencodable, .confirmed]))
        #expect(!plan.isUnpublishable(in: [.nacked, .confirmed]), "a nack is worth a retry")

        let deadLettered = DeliveryPlan(
            original: original(headers: nil), unpublishable: failure, topology: topology, frameMax: 131_072)
        #expect(deadLettered.fate == .unpublishable(reason: "a result of this message cannot be published: \(failure)"))
        #expect(deadLettered.messages.map(\.exchange) == [topology.deadLetterExchange])
    }

    @Test func aSingleAttemptNeverRetries() {
        let plan = DeliveryPlan(
            original: original(headers: nil), transientFailure: "x", retry: .attempts(1), jitter: 0.5,
            topology: topology, frameMax: 131_072)
        #expect(plan.fate == .retriesExhausted(attempts: 1, error: "x"))
    }

    @Test func confirmationsDecideSuccess() throws {
        let plan = DeliveryPlan(
            original: original(replyTo: "amq.gen-1"), stored: decision(disposition: .acknowledge, replyTo: "amq.gen-1"),
            topology: topology, frameMax: 131_072)
        #expect(plan.failure(in: [.confirmed, .confirmed]) == nil)
        // The requester's reply queue is gone: not a failure, but counted.
        let returned = AMQPPublishOutcome.returned(replyCode: 312, replyText: "NO_ROUTE")
        #expect(plan.failure(in: [.confirmed, returned]) == nil)
        #expect(plan.returnedReplyCopies(in: [.confirmed, returned]) == 1)
        // A primary result nobody receives is a failure.
        let failure = try #require(plan.failure(in: [returned, .confirmed]))
        #expect(failure.contains("wallet.replenishment") && failure.contains("replenishment.failed"))
        #expect(plan.failure(in: [.nacked, .confirmed])?.contains("nacked") == true)
        #expect(plan.undeliveredResult(in: [returned, .confirmed]) == nil, "every message decides this delivery")
    }

    /// Found against the broker: RabbitMQ 3.10 returns a mandatory publish to a direct reply-to name as
    /// unroutable even when it delivers it, so those copies are not mandatory; copies to ordinary queues are.
    @Test func directReplyToCopiesAreNotMandatory() throws {
        // As RabbitMQ 3.10 issued it to a requester.
        let direct = "amq.rabbitmq.reply-to.g1h2AA5yZXBseUA2NjYyMzIyMAAAAtMAAAAAawUmxA==.mD+9en6VaDpb2ckwe0UOrg=="
        let plan = DeliveryPlan(
            original: original(replyTo: direct), stored: decision(disposition: .acknowledge, replyTo: direct),
            topology: topology, frameMax: 131_072)
        try #require(plan.messages.count == 1 && plan.directReplies.count == 1)
        #expect(plan.messages[0].mandatory, "the primary result")
        #expect(!plan.directReplies[0].mandatory, "the direct reply-to copy, sent apart (DirectReplyPublisher)")
        #expect(plan.directReplies[0].routingKey == direct)

        let queue = DeliveryPlan(
            original: original(replyTo: "rpc.replies"),
            stored: decision(disposition: .acknowledge, replyTo: "rpc.replies"),
            topology: topology, frameMax: 131_072)
        #expect(queue.messages.map(\.mandatory) == [true, true])
        // Only the default exchange's reply-to names: a result exchange's routing key is never special.
        #expect(
            AMQPOutboundMessage(
                OutboundResult(
                    exchange: "wallet.actions", routingKey: "amq.rabbitmq.reply-to.x", body: [],
                    properties: OutboundProperties(messageID: nil, correlationID: nil, type: "t", traceparent: nil))
            ).mandatory)
    }

    /// Found in review: when nothing was bound to `notification.rejected`, every attempt published another dead
    /// letter before the retries ran out (CONTRACT.md §8: exactly one dead letter per rejected delivery).
    @Test func aRejectedDeliveryDependsOnlyOnItsDeadLetter() throws {
        let plan = DeliveryPlan(
            original: original(), stored: decision(disposition: .deadLetter(reason: "action is wrong")),
            topology: topology, frameMax: 131_072)
        let returned = AMQPPublishOutcome.returned(replyCode: 312, replyText: "NO_ROUTE")
        #expect(plan.failure(in: [.confirmed, .confirmed]) == nil)
        #expect(plan.undeliveredResult(in: [.confirmed, .confirmed]) == nil)
        // The rejected result was not taken, the dead letter was: the delivery is done, and the loss is reported.
        #expect(plan.failure(in: [returned, .confirmed]) == nil)
        let lost = try #require(plan.undeliveredResult(in: [returned, .confirmed]))
        #expect(lost.contains("wallet.replenishment"), "\(lost)")
        // The dead letter was not taken: retried.
        #expect(plan.failure(in: [.confirmed, .nacked])?.contains("nacked") == true)
        #expect(plan.failure(in: [.confirmed, returned]) != nil)
    }
}
