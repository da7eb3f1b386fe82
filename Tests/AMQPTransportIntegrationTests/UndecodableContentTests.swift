import AMQPTransport
import BrokerTestSupport
import Foundation
import TestSupport
import Testing

/// Issue 24, item 1: a content header RabbitMQ grew past the frame size when it dead-lettered the message (it
/// adds `x-death`, and sends the header whole, unsplit) cannot be decoded by librabbitmq at the negotiated
/// frame size. On main the transport rejected such a delivery without requeue for every manual-ack consumer:
/// from a queue without a dead-letter exchange (the dead-letter queue) the broker then dropped it.
@Suite("Undecodable content headers", .timeLimit(.minutes(2)))
struct UndecodableContentTests {
    /// A header table that fits a 128 KiB frame when published, and no longer once the broker adds `x-death`.
    static let nearlyFrameSizedHeaders: AMQPTable = ["filler": .bytes([UInt8](repeating: 0x61, count: 130_800))]

    /// A queue holding one message whose content header is over the frame size: published to `source`, rejected
    /// there, dead-lettered by the broker into the returned queue.
    private func queueWithAnOversizedHeader(_ session: BrokerSession) async throws -> String {
        let channel = session.channel
        let exchange = try await session.declareOwnedExchange("undecodable-dlx", type: "fanout")
        let dead = try await session.declareOwnedQueue("undecodable-dead")
        try await channel.bindQueue(dead, exchange: exchange, routingKey: "")
        let source = try await session.declareOwnedQueue(
            "undecodable-source", arguments: ["x-dead-letter-exchange": .string(exchange)])
        try await channel.enableConfirms()
        try await publishConfirmed(
            [
                message(
                    to: source, "grows past the frame",
                    properties: AMQPMessageProperties(headers: Self.nearlyFrameSizedHeaders)),
                message(to: source, "an ordinary one"),
            ],
            on: channel)
        let consumer = try await channel.consume(queue: source)
        let deliveries = try await receive(2, from: consumer)
        try await channel.nack(deliveries[1], multiple: true, requeue: false)
        try await channel.cancel(consumerTag: consumer.tag)
        try await waitUntil("both messages in the dead-letter queue") {
            try await channel.queueStatus(dead).messageCount == 2
        }
        return dead
    }

    @Test("a consumer that asks for it gets an undecodable delivery requeued, never dropped, and is told which it was")
    func requeuedNotDropped() async throws {
        try await withBrokerSession("undecodable requeue") { session in
            let dead = try await queueWithAnOversizedHeader(session)
            let reader = try await TestBroker.connect(purpose: "undecodable reader")
            let channel = try await reader.openChannel()
            let consumer = try await channel.consume(queue: dead, undecodableContent: .requeue)
            var failure: AMQPError?
            do {
                for try await _ in consumer {}
            } catch let error as AMQPError {
                failure = error
            }
            await reader.close()
            let undecodable = try #require(failure?.undecodableDelivery, "\(String(describing: failure))")
            #expect(undecodable.settlement == .requeued && undecodable.routingKey.contains("undecodable-source"))
            try await waitUntil("the requeued message back in its queue (else it was dropped)") {
                try await session.channel.queueStatus(dead).messageCount == 2
            }
        }
    }

    @Test("a connection that reads larger frames decodes the header whole, x-death included")
    func largerFramesReadIt() async throws {
        try await withBrokerSession("undecodable larger frames") { session in
            let dead = try await queueWithAnOversizedHeader(session)
            let reader = try await TestBroker.connect(purpose: "large-frame reader")
            try await reader.readFrames(upTo: 1 << 20)
            let channel = try await reader.openChannel()
            let consumer = try await channel.consume(queue: dead, undecodableContent: .requeue)
            let deliveries = try await receive(2, from: consumer)
            #expect(deliveries.map(\.text) == ["grows past the frame", "an ordinary one"])
            #expect(deliveries[0].properties.headers?["filler"] == Self.nearlyFrameSizedHeaders["filler"])
            guard case .array(let deaths)? = deliveries[0].properties.headers?["x-death"] else {
                Issue.record("no x-death")
                return
            }
            #expect(deaths.count == 1)
            try await channel.ack(deliveries[1], multiple: true)
            await reader.close()
        }
    }
}
