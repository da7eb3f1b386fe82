/// The deliveries of one consumer, in batches (each batch is what arrived together, at most the prefetch).
public struct AMQPConsumer: AsyncSequence, Sendable {
    public typealias Element = [AMQPDelivery]

    /// The consumer tag the broker knows this consumer by.
    public let tag: String
    let deliveries: AsyncThrowingStream<[AMQPDelivery], any Error>
    /// Keeps the channel (and so the connection) alive while the deliveries are iterated.
    let channel: AMQPChannel

    public struct AsyncIterator: AsyncIteratorProtocol {
        var base: AsyncThrowingStream<[AMQPDelivery], any Error>.AsyncIterator

        /// The next batch, `nil` once the consumer was cancelled by us; throws `AMQPError` when the
        /// broker cancelled it or the channel or connection failed.
        public mutating func next() async throws -> [AMQPDelivery]? {
            try await base.next()
        }
    }

    public func makeAsyncIterator() -> AsyncIterator {
        AsyncIterator(base: deliveries.makeAsyncIterator())
    }
}
