import AMQPTransport
import BrokerTestSupport
import Testing

/// Broker refusals arrive as `AMQPError`s with the broker's reply code: no crash, no hang, and only the
/// offending channel is lost.
@Suite("Broker errors", .timeLimit(.minutes(1)))
struct ErrorTests {
    @Test("a confirmed publish to a missing exchange fails with channel closed 404; the connection stays usable")
    func publishToMissingExchangeClosesOnlyTheChannel() async throws {
        try await withBrokerSession("missing exchange") { session in
            let channel = session.channel
            try await channel.enableConfirms()
            let missing = uniqueName("missing-exchange")
            let error = try await expectAMQPError("a publish to the missing exchange '\(missing)'") {
                try await channel.publish(
                    AMQPOutboundMessage(exchange: missing, routingKey: "any", body: Array("x".utf8)))
            }
            #expect(error.code == .channelClosedByBroker)
            #expect(error.replyCode == 404)
            #expect(error.replyText?.hasPrefix("NOT_FOUND") == true, "reply text: \(error.replyText ?? "nil")")
            #expect(error.replyText?.contains(missing) == true)
            #expect(!error.isRetriable)

            // The channel stays closed and says why.
            let later = try await expectAMQPError("declaring on the closed channel") {
                try await channel.declareQueue(uniqueName("never"), durable: false)
            }
            #expect(later.code == .channelClosedByBroker)
            #expect(later.replyCode == 404)

            // The connection is fine: a new channel declares, publishes and counts.
            let fresh = try await session.connection.openChannel()
            let queue = uniqueName("after-404")
            session.own(queue: queue)
            try await fresh.declareQueue(queue, durable: false)
            try await fresh.enableConfirms()
            try await publishConfirmed([message(to: queue, "still alive")], on: fresh)
            #expect(try await fresh.queueStatus(queue).messageCount == 1)
        }
    }

    @Test("an unconfirmed publish to a missing exchange surfaces as 404 on the channel's next call")
    func unconfirmedPublishToMissingExchangeFailsTheNextCall() async throws {
        try await withBrokerSession("missing exchange, unconfirmed") { session in
            let channel = session.channel
            let queue = try await session.declareOwnedQueue("present")
            let missing = uniqueName("missing-exchange")
            // The frames are written; the broker's channel.close comes back asynchronously, and whichever
            // way the race goes (read by the pump first, or as the reply to the next method) the next call reports it.
            try await channel.publishUnconfirmed(AMQPOutboundMessage(exchange: missing, routingKey: "any", body: [1]))
            let error = try await expectAMQPError("the call after the unconfirmed publish") {
                try await channel.queueStatus(queue)
            }
            #expect(error.code == .channelClosedByBroker)
            #expect(error.replyCode == 404)
            #expect(
                error.replyText?.contains("exchange '\(missing)'") == true, "reply text: \(error.replyText ?? "nil")")

            let fresh = try await session.connection.openChannel()
            #expect(try await fresh.queueStatus(queue).messageCount == 0)
        }
    }

    @Test("re-declaring a queue with a different x-message-ttl fails with 406 PRECONDITION_FAILED")
    func conflictingRedeclareFailsWith406() async throws {
        try await withBrokerSession("conflicting declare") { session in
            let queue = try await session.declareOwnedQueue("ttl", arguments: ["x-message-ttl": .int32(60_000)])
            // The same arguments again are fine.
            try await session.channel.declareQueue(queue, durable: false, arguments: ["x-message-ttl": .int32(60_000)])

            let channel = session.channel
            let error = try await expectAMQPError("re-declaring '\(queue)' with x-message-ttl 30000") {
                try await channel.declareQueue(queue, durable: false, arguments: ["x-message-ttl": .int32(30_000)])
            }
            #expect(error.code == .channelClosedByBroker)
            #expect(error.replyCode == 406)
            #expect(
                error.replyText?.hasPrefix("PRECONDITION_FAILED") == true, "reply text: \(error.replyText ?? "nil")")
            #expect(error.replyText?.contains("x-message-ttl") == true)
            #expect(!error.isRetriable)

            // The connection works, and the queue kept its original arguments: declaring them again is accepted.
            let fresh = try await session.connection.openChannel()
            try await fresh.declareQueue(queue, durable: false, arguments: ["x-message-ttl": .int32(60_000)])
        }
    }

    @Test("a passive declare of a missing queue fails with 404 NOT_FOUND")
    func passiveDeclareOfMissingQueueFailsWith404() async throws {
        try await withBrokerSession("passive declare") { session in
            let channel = session.channel
            let missing = uniqueName("missing-queue")
            let error = try await expectAMQPError("the status of the missing queue '\(missing)'") {
                try await channel.queueStatus(missing)
            }
            #expect(error.code == .channelClosedByBroker)
            #expect(error.replyCode == 404)
            #expect(error.replyText?.hasPrefix("NOT_FOUND") == true, "reply text: \(error.replyText ?? "nil")")

            // An existing queue reports its counts on a new channel.
            let fresh = try await session.connection.openChannel()
            let queue = uniqueName("present")
            session.own(queue: queue)
            try await fresh.declareQueue(queue, durable: false)
            let status = try await fresh.queueStatus(queue)
            #expect(status.name == queue)
            #expect(status.messageCount == 0)
            #expect(status.consumerCount == 0)
        }
    }

    @Test("publishing with confirms on a channel not in confirm mode is refused by the transport")
    func confirmedPublishNeedsConfirmMode() async throws {
        try await withBrokerSession("no confirm mode") { session in
            let channel = session.channel
            let error = try await expectAMQPError("a confirmed publish without enableConfirms()") {
                try await channel.publish(AMQPOutboundMessage(exchange: "", routingKey: "any", body: [1]))
            }
            #expect(error.code == .invalidArgument)
            // Refused before anything reached the broker: the channel is still open.
            try await channel.setPrefetch(count: 1)
        }
    }
}
