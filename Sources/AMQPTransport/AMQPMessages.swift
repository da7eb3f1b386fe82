/// A message delivered to a consumer, copied out of librabbitmq's buffers.
public struct AMQPDelivery: Sendable, Hashable {
    /// Empty when the body was withheld (see `withheldBodySize`).
    public var body: [UInt8]
    public var properties: AMQPMessageProperties
    /// Set when the body was larger than the consumer's `maximumBodyBytes`: its size as the broker announced it.
    /// The body was read off the socket and dropped, never held in memory; the message can only be settled
    /// (rejected to the queue's dead-letter exchange, which still has it whole, or acknowledged).
    public var withheldBodySize: UInt64?
    /// Valid only on the channel (and connection) that delivered it.
    public var deliveryTag: UInt64
    public var redelivered: Bool
    public var exchange: String
    public var routingKey: String
    public var consumerTag: String
    /// The channel (incarnation) that delivered it: `ack(_:)` refuses a delivery of another channel.
    let channel: ChannelReference
    /// Sent to a consumer with automatic acknowledgement: `ack(_:)` refuses it.
    var acknowledgedByBroker = false
}

/// A message to publish.
public struct AMQPOutboundMessage: Sendable, Hashable {
    public var exchange: String
    public var routingKey: String
    public var body: [UInt8]
    public var properties: AMQPMessageProperties
    /// Ask the broker to return the message when no queue is bound for it.
    public var mandatory: Bool

    public init(
        exchange: String, routingKey: String, body: [UInt8], properties: AMQPMessageProperties = .init(),
        mandatory: Bool = false
    ) {
        self.exchange = exchange
        self.routingKey = routingKey
        self.body = body
        self.properties = properties
        self.mandatory = mandatory
    }
}

/// What the broker said about one published message.
public enum AMQPPublishOutcome: Sendable, Hashable {
    /// basic.ack: the broker has taken responsibility for the message.
    case confirmed
    /// basic.nack: the broker could not take it (e.g. a queue's internal error); publish again.
    case nacked
    /// basic.return then basic.ack: `mandatory` and no queue was bound for it.
    case returned(replyCode: UInt16, replyText: String)
    /// Never sent: AMQP cannot encode it (a short string over 255 bytes, properties larger than a frame). It fails
    /// alone; the connection and the rest of the batch go on. Publishing it again fails the same way.
    case unencodable(reason: String)

    public var isConfirmed: Bool { self == .confirmed }
}

/// Counts reported by queue.declare (including a passive declare).
public struct AMQPQueueStatus: Sendable, Hashable {
    public var name: String
    public var messageCount: UInt32
    public var consumerCount: UInt32
}

/// Connection-level notifications from the broker.
public enum AMQPConnectionEvent: Sendable, Hashable {
    /// connection.blocked: a resource alarm; publishes are held by the broker until unblocked.
    case blocked(reason: String)
    case unblocked
    /// The connection ended; `error` is nil when this process closed it.
    case closed(error: AMQPError?)
}
