import AMQPTransport
import BrokerTestSupport
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
                        properties: .init(
                            contentType: "application/json", deliveryMode: .persistent, messageID: "bulk-\(index)")
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
                    deliveries += batch.map {
                        DeliverySummary(id: $0.properties.messageID, redelivered: $0.redelivered)
                    }
                    try await consuming.ack(deliveryTag: batch.last!.deliveryTag, multiple: true)
                    if deliveries.count >= total { break }
                }
                return deliveries
            }
            let consumeTime = ContinuousClock.now - consumeStart
            print(
                """
                AMQPTransportIntegrationTests: published \(total) persistent messages with confirms (\(batchSize) per call) \
                in \(publishTime): \(Int(Double(total) / publishTime.inSeconds)) msg/s; \
                consumed and acknowledged them in \(consumeTime): \(Int(Double(total) / consumeTime.inSeconds)) msg/s
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
                try await channel.publish(
                    AMQPOutboundMessage(
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
                AMQPOutboundMessage(
                    exchange: exchange, routingKey: routingKey, body: Array(body.utf8), mandatory: mandatory)
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

    @Test("batches started without waiting go out in call order and each gets its own outcomes")
    func startedBatchesKeepTheirOrderAndOutcomes() async throws {
        try await withBrokerSession("started batches") { session in
            let channel = session.channel
            let queue = try await session.declareOwnedQueue("started", durable: true)
            try await channel.enableConfirms()
            let persistent = AMQPMessageProperties(deliveryMode: .persistent)
            // Eight batches in flight at once; the fourth has an unroutable mandatory message in position 1.
            let batches = (0..<8).map { batch in
                (0..<50).map { index in
                    batch == 3 && index == 1
                        ? AMQPOutboundMessage(
                            exchange: "", routingKey: "nobody-\(queue)", body: Array("lost".utf8), mandatory: true)
                        : message(to: queue, "\(batch)-\(index)", properties: persistent)
                }
            }
            let pending = batches.map { channel.startPublishing($0, confirmTimeout: .seconds(10)) }
            // Awaited newest first: each handle reports its own batch, whatever order the confirms arrive in.
            for (batch, confirms) in pending.enumerated().reversed() {
                let outcomes = try await within(.seconds(10), "the outcomes of batch \(batch)") {
                    try await confirms.outcomes()
                }
                #expect(outcomes.count == 50)
                for (index, outcome) in outcomes.enumerated() {
                    if batch == 3 && index == 1 {
                        #expect(outcome == .returned(replyCode: 312, replyText: "NO_ROUTE"))
                    } else {
                        #expect(outcome == .confirmed, "batch \(batch) position \(index)")
                    }
                }
            }
            // A handle can be awaited again.
            #expect(try await pending[0].outcomes().count == 50)

            let consuming = try await session.connection.openChannel()
            try await consuming.setPrefetch(count: 500)
            let consumer = try await consuming.consume(queue: queue)
            let bodies = try await receive(399, from: consumer).map { String(decoding: $0.body, as: UTF8.self) }
            let expected = batches.joined().filter { $0.routingKey == queue }.map {
                String(decoding: $0.body, as: UTF8.self)
            }
            #expect(bodies == expected, "the queue holds the messages in the order the batches were started")
        }
    }

    @Test("a batch started on a channel the broker closes reports the channel's error")
    func startedBatchReportsTheChannelError() async throws {
        try await withBrokerSession("started on a closing channel") { session in
            let channel = try await session.connection.openChannel()
            try await channel.enableConfirms()
            let confirms = channel.startPublishing(
                [
                    AMQPOutboundMessage(
                        exchange: "no-such-exchange-\(UInt32.random(in: 0...UInt32.max))", routingKey: "x", body: [1])
                ],
                confirmTimeout: .seconds(10))
            await #expect(throws: AMQPError.self) {
                _ = try await within(.seconds(10), "the error of a publish to a missing exchange") {
                    try await confirms.outcomes()
                }
            }
            // Published after the close: reported through the handle, not trapped or lost.
            let late = channel.startPublishing([AMQPOutboundMessage(exchange: "", routingKey: "x", body: [2])])
            await #expect(throws: AMQPError.self) {
                _ = try await within(.seconds(10), "the error of a publish on a closed channel") {
                    try await late.outcomes()
                }
            }
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
