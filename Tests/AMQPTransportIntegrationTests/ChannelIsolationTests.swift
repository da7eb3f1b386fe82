import AMQPTransport
import BrokerTestSupport
import TestSupport
import Testing

/// Regression tests from the transport review: consumers, deliveries and acknowledgements never cross
/// channels, and deliveries in flight during a cancel are given back at once.
@Suite("Channel isolation", .timeLimit(.minutes(1)))
struct ChannelIsolationTests {
    @Test("the same consumer tag on two channels keeps each channel's deliveries apart")
    func sameConsumerTagOnTwoChannels() async throws {
        try await withBrokerSession("same tag") { session in
            let first = session.channel
            let second = try await session.connection.openChannel()
            let queueA = try await session.declareOwnedQueue("tag-a")
            let queueB = try await session.declareOwnedQueue("tag-b")
            try await first.enableConfirms()
            try await publishConfirmed([message(to: queueA, "for A"), message(to: queueB, "for B")], on: first)

            let consumerA = try await first.consume(queue: queueA, consumerTag: "worker")
            let consumerB = try await second.consume(queue: queueB, consumerTag: "worker")
            let fromA = try await receive(1, from: consumerA)
            let fromB = try await receive(1, from: consumerB)
            #expect(fromA.map(\.text) == ["for A"])
            #expect(fromB.map(\.text) == ["for B"])

            // A's delivery acknowledged through B would ack B's message with the same tag number: refused.
            let misrouted = try await expectAMQPError("acknowledging A's delivery on channel B") {
                try await second.ack(fromA[0])
            }
            #expect(misrouted.code == .invalidArgument)
            try await first.ack(fromA[0])
            try await second.ack(fromB[0])
            #expect(try await first.queueStatus(queueA).messageCount == 0)
            #expect(try await first.queueStatus(queueB).messageCount == 0)
        }
    }

    @Test("a consumer tag already consuming on the channel is refused before the broker sees it")
    func duplicateTagOnOneChannelIsRefused() async throws {
        try await withBrokerSession("duplicate tag") { session in
            let queue = try await session.declareOwnedQueue("duplicate-tag")
            let channel = session.channel
            let first = try await channel.consume(queue: queue, consumerTag: "only-once")
            let error = try await expectAMQPError("consuming twice with one tag") {
                _ = try await channel.consume(queue: queue, consumerTag: "only-once")
            }
            #expect(error.code == .invalidArgument)
            // The connection and channel are unharmed (the broker would have closed the connection with 530).
            #expect(try await session.channel.queueStatus(queue).consumerCount == 1)
            withExtendedLifetime(first) {}
        }
    }

    @Test("deliveries in flight while a consumer is cancelled are requeued at once, not held until the channel closes")
    func deliveriesInFlightDuringCancelAreRequeued() async throws {
        try await withBrokerSession("cancel in flight") { session in
            let channel = session.channel
            let queue = try await session.declareOwnedQueue("cancel-in-flight")
            try await channel.enableConfirms()
            let total = 2_000
            for start in stride(from: 0, to: total, by: 500) {
                try await publishConfirmed((start..<start + 500).map { message(to: queue, "m\($0)") }, on: channel)
            }
            try await channel.setPrefetch(count: 500)
            let consumer = try await channel.consume(queue: queue)
            var acknowledged = 0
            for delivery in try await receive(1, from: consumer) {
                try await channel.ack(delivery)
                acknowledged += 1
            }
            try await channel.cancel(consumerTag: consumer.tag)
            // What reached the sequence before the cancel belongs to the application: the sequence hands it
            // over, then ends.
            for try await batch in consumer {
                for delivery in batch { try await channel.ack(delivery) }
                acknowledged += batch.count
            }

            // Everything else must be ready again while the channel stays open.
            var ready: UInt32 = 0
            #expect(acknowledged < total, "the cancel came before the whole queue was delivered")
            try await waitUntil(
                "the \(total - acknowledged) unacknowledged deliveries to be ready again on the open channel (\(ready) are)"
            ) {
                ready = try await channel.queueStatus(queue).messageCount
                return Int(ready) == total - acknowledged
            }
        }
    }

    @Test("a connection busy publishing, whose only inbound traffic is heartbeats, is not declared dead")
    func busyPublisherIsNotMistakenForADeadBroker() async throws {
        try await withBrokerSession("busy heartbeat", configure: { $0.heartbeat = .seconds(1) }) { session in
            let queue = try await session.declareOwnedQueue("busy-heartbeat")
            let until = ContinuousClock.now + .seconds(5)
            var published = 0
            while ContinuousClock.now < until {
                try await session.channel.publishUnconfirmed(message(to: queue, "tick"))
                published += 1
                if published % 5_000 == 0 { try await session.channel.purgeQueue(queue) }
            }
            #expect(published > 0)
            _ = try await session.channel.queueStatus(queue)  // still alive
        }
    }

    /// Transport bug: the replies to channel.open and channel.close are read inside librabbitmq's RPC, so a
    /// connection doing nothing else looked silent and failed with a heartbeat timeout after two intervals.
    @Test("a connection busy opening and closing channels, with no other inbound traffic, is not declared dead")
    func channelChurnIsNotMistakenForADeadBroker() async throws {
        try await withBrokerSession("churn heartbeat", configure: { $0.heartbeat = .seconds(1) }) { session in
            let until = ContinuousClock.now + .seconds(5)
            var opened = 0
            while ContinuousClock.now < until {
                try await session.connection.openChannel().close()
                opened += 1
            }
            #expect(opened > 0)
            _ = try await session.channel.queueStatus(try await session.declareOwnedQueue("churn-heartbeat"))
        }
    }
}
