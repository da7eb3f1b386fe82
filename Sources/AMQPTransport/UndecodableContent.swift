/// What a manual-acknowledgement consumer does with a delivery whose content header librabbitmq cannot decode
/// (`AMQP_STATUS_BAD_AMQP_DATA` and kin: a header table larger than the frame size, after the broker added
/// `x-death` to it, or a field type the library does not know). The connection cannot read on after such a
/// header (librabbitmq keeps the frame), so either way the consumer's sequence then ends with the connection's
/// error, which names the delivery (`AMQPError.undecodableDelivery`).
public enum UndecodableContentHandling: Sendable, Hashable {
    /// Reject it without requeue: the queue's dead-letter exchange takes it whole (with `x-death`), so it cannot
    /// end the next session too. Only where the queue has a dead-letter exchange that keeps it: without one, the
    /// broker drops the message. The worker's work queue has one. Default.
    case rejectToDeadLetterExchange
    /// Give it back (reject with requeue): it stays where it was, and the next consumer meets it first again.
    case requeue
}

/// A delivery the transport could not read: what its method frame said, and how it was settled.
public struct UndecodableDelivery: Sendable, Hashable {
    public enum Settlement: Sendable, Hashable {
        /// Rejected without requeue (`UndecodableContentHandling.rejectToDeadLetterExchange`).
        case rejected
        /// Rejected with requeue (`UndecodableContentHandling.requeue`).
        case requeued
        /// Nothing to settle: a `no-ack` consumer's delivery, which the broker had acknowledged already.
        case acknowledgedByBroker
    }

    public var exchange: String
    public var routingKey: String
    public var consumerTag: String
    public var redelivered: Bool
    public var settlement: Settlement

    public init(exchange: String, routingKey: String, consumerTag: String, redelivered: Bool, settlement: Settlement) {
        self.exchange = exchange
        self.routingKey = routingKey
        self.consumerTag = consumerTag
        self.redelivered = redelivered
        self.settlement = settlement
    }
}
