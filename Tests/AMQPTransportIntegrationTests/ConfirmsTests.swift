import AMQPTransport
import Testing

/// Publisher confirms: every message accounted for, and the broker's answer reported per message.
@Suite("Publisher confirms", .timeLimit(.minutes(1)))
struct ConfirmsTests {
    @Test("10,000 confirmed publishes are consumed exactly once, and the queue ends empty")
    func tenThousandMessagesNoneLostNoneDuplicated() async throws {
        let total = 10_000
        let batchSize = 500
        try await withBrokerSession("10k confirms") { session in
            // Durable queue and persistent messages: the worker's real setting, so confirms wait for the disk.
            let queue = try await session.declareOwnedQueue("bulk", durable: true)
            let publisher = session.channel
            try await publisher.enableConfirms()

            let publishStart = ContinuousClock.now
            for first in stride(from: 0, to: total, by: batchSize) {
                let batch = (first..<first + batchSize).map { index in
                    message(
                        to: queue, "{\"n\":\(index)}",
                        properties: .init(contentType: "application/json", deliveryMode: .persistent, messageID: "bulk-\(index)")
                    )
                }
                try await publishConfirmed(batch, on: publisher)
            }
            let publishTime = ContinuousClock.now - publishStart
            #expect(try await publisher.queueStatus(queue).messageCount == UInt32(total))

            let consuming = try await session.connection.openChannel()
            try await consuming.setPrefetch(count: 500)
            let consumer = try await consuming.consume(queue: queue)
            let consumeStart = ContinuousClock.now
            let deliveries = try await within(.seconds(40), "consuming \(total) messages") {
                var deliveries: [DeliverySummary] = []
                deliveries.reserveCapacity(total)
                for try await batch in consumer {
                    deliveries += batch.map { DeliverySummary(id: $0.properties.messageID, redelivered: $0.redelivered) }
                    try await consuming.ack(deliveryTag: batch.last!.deliveryTag, multiple: true)
                    if deliveries.count >= total { break }
                }
                return deliveries
            }
            let consumeTime = ContinuousClock.now - consumeStart
            print("""
                AMQPTransportIntegrationTests: published \(total) persistent messages with confirms (\(batchSize) per call) \
                in \(publishTime): \(Int(Double(total) / publishTime.seconds)) msg/s; \
                consumed and acknowledged them in \(consumeTime): \(Int(Double(total) / consumeTime.seconds)) msg/s
                """)

            let ids = deliveries.compactMap(\.id)
            let distinct = Set(ids)
            #expect(ids.count == deliveries.count, "every delivery carries its message id")
            #expect(deliveries.count == total, "deliveries received")
            #expect(distinct.count == ids.count, "duplicates: \(ids.count - distinct.count)")
            let missing = Set((0..<total).map { "bulk-\($0)" }).subtracting(distinct)
            #expect(missing.isEmpty, "lost: \(missing.count), e.g. \(missing.sorted().prefix(5))")
            #expect(deliveries.allSatisfy { !$0.redelivered })

            // Closing the consuming channel requeues anything it left unacknowledged (before close-ok), so an
            // empty queue afterwards proves the acks reached the broker, not only that everything was delivered.
            try await consuming.cancel(consumerTag: consumer.tag)
            try await consuming.close()
            let status = try await publisher.queueStatus(queue)
            #expect(status.messageCount == 0)
            #expect(status.consumerCount == 0)
        }
    }

    @Test("a mandatory publish to an exchange with no binding comes back as returned 312 NO_ROUTE")
    func unroutableMandatoryPublishIsReturned() async throws {
        try await withBrokerSession("returned") { session in
            let channel = session.channel
            let exchange = try await session.declareOwnedExchange("unbound")
            try await channel.enableConfirms()
            let outcome = try await within(.seconds(10), "the outcome of an unroutable publish") {
                try await channel.publish(AMQPOutboundMessage(
                    exchange: exchange, routingKey: "nobody.listens", body: Array("lost?".utf8), mandatory: true
                ))
            }
            #expect(outcome == .returned(replyCode: 312, replyText: "NO_ROUTE"))
        }
    }

    @Test("a batch mixing routable and unroutable messages gets the right outcome in each position")
    func mixedBatchGetsAnOutcomePerPosition() async throws {
        try await withBrokerSession("mixed batch") { session in
            let channel = session.channel
            let exchange = try await session.declareOwnedExchange("mixed")
            let queue = try await session.declareOwnedQueue("mixed")
            try await channel.bindQueue(queue, exchange: exchange, routingKey: "routable")
            try await channel.enableConfirms()

            func publish(_ routingKey: String, _ body: String, mandatory: Bool = true) -> AMQPOutboundMessage {
                AMQPOutboundMessage(exchange: exchange, routingKey: routingKey, body: Array(body.utf8), mandatory: mandatory)
            }
            let noRoute = AMQPPublishOutcome.returned(replyCode: 312, replyText: "NO_ROUTE")
            // Same body everywhere: only the routing decides. A non-mandatory unroutable message is dropped
            // and still acknowledged by the broker (confirmed, not returned).
            let cases: [(AMQPOutboundMessage, AMQPPublishOutcome)] = [
                (publish("routable", "same"), .confirmed),
                (publish("nowhere", "same"), noRoute),
                (publish("routable", "same"), .confirmed),
                (publish("nowhere", "same", mandatory: false), .confirmed),
                (publish("nowhere", "same"), noRoute),
                (publish("elsewhere", "other"), noRoute),
                (publish("routable", "other"), .confirmed),
                (publish("nowhere", "same"), noRoute),
            ]
            let outcomes = try await within(.seconds(10), "outcomes of the mixed batch") {
                try await channel.publish(cases.map(\.0))
            }
            #expect(outcomes == cases.map(\.1))
            #expect(try await channel.queueStatus(queue).messageCount == 3)

            // The returns left no stale bookkeeping: the next batch on the channel is plainly confirmed.
            try await publishConfirmed([publish("routable", "same"), publish("routable", "again")], on: channel)
            #expect(try await channel.queueStatus(queue).messageCount == 5)
        }
    }

    @Test("an empty batch returns no outcomes")
    func emptyBatchReturnsNoOutcomes() async throws {
        try await withBrokerSession("empty batch") { session in
            let channel = session.channel
            try await channel.enableConfirms()
            let outcomes = try await within(.seconds(5), "publishing nothing") { try await channel.publish([]) }
            #expect(outcomes.isEmpty)
        }
    }
}

/// What the bulk test keeps of each delivery (not the bodies).
struct DeliverySummary: Sendable {
    var id: String?
    var redelivered: Bool
}
