/// The deliveries of one consumer, in batches: each batch is everything received since the previous one was taken
/// (at most the prefetch when every batch is acknowledged before the next is taken).
public struct AMQPConsumer: AsyncSequence, Sendable {
    public typealias Element = [AMQPDelivery]

    /// Who acknowledges the deliveries.
    public enum Acknowledgement: Sendable, Hashable {
        /// The application, with `ack`/`nack`/`reject` on the consuming channel; the prefetch applies.
        case manual
        /// The broker, as it sends each delivery (`no-ack`): nothing to acknowledge, no prefetch limit, and a
        /// delivery lost with the connection is gone. Required by `amq.rabbitmq.reply-to` (direct reply-to).
        case automatic
    }

    /// The consumer tag the broker knows this consumer by.
    public let tag: String
    let lifetime: ConsumerLifetime
    /// Keeps the channel (and so the connection) alive while the deliveries are iterated.
    let channel: AMQPChannel

    init(tag: String, deliveries: DeliveryBuffer, channel: AMQPChannel) {
        self.tag = tag
        self.lifetime = ConsumerLifetime(deliveries: deliveries)
        self.channel = channel
    }

    public struct AsyncIterator: AsyncIteratorProtocol {
        let lifetime: ConsumerLifetime

        /// The next batch, `nil` once the consumer was cancelled by us (or the iterating task was cancelled);
        /// throws `AMQPError` when the broker cancelled it or the channel or connection failed.
        public mutating func next() async throws -> [AMQPDelivery]? {
            try await lifetime.deliveries.take()
        }
    }

    public func makeAsyncIterator() -> AsyncIterator {
        AsyncIterator(lifetime: lifetime)
    }
}
