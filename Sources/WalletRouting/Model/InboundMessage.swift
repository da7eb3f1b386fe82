/// One inbound notification as the routing core sees it: the body bytes and the AMQP properties
/// the contract reads (CONTRACT.md §2). Transport-neutral: the worker copies these out of a delivery.
public struct InboundMessage: Sendable, Hashable {
    public var body: [UInt8]
    public var properties: InboundProperties
    /// The body's size when the transport did not keep the body (it was over the size limit): `body` is empty
    /// then, and the message is rejected for its size without being read.
    public var omittedBodyByteCount: UInt64?

    public init(body: [UInt8], properties: InboundProperties = InboundProperties(), omittedBodyByteCount: UInt64? = nil)
    {
        self.body = body
        self.properties = properties
        self.omittedBodyByteCount = omittedBodyByteCount
    }

    /// The body's size, whether or not it was kept.
    public var bodyByteCount: UInt64 {
        omittedBodyByteCount ?? UInt64(body.count)
    }
}

public struct InboundProperties: Sendable, Hashable {
    /// The idempotency key; results derive their `message_id` from it.
    public var messageID: String?
    /// The inbound `message_id` was not valid UTF-8 (`messageID` is nil then). Ids are compared byte for byte, and
    /// a repaired text would make two different ids one: such a message is rejected.
    public var messageIDIsInvalidUTF8 = false
    public var correlationID: String?
    /// The inbound `correlation_id` was not valid UTF-8 (`correlationID` is nil then): results could carry neither
    /// its bytes nor a repaired text the requester would recognise, so such a message is rejected.
    public var correlationIDIsInvalidUTF8 = false
    /// When set, every result is also published to the default exchange with this routing key.
    public var replyTo: String?
    /// Matched exactly: `DeviceInstallation` and `DeviceInstallationDeleted` select §7.
    public var type: String?
    /// AMQP timestamp, seconds since the epoch (processing-lag metric only).
    public var timestamp: Int64?
    /// The W3C `traceparent` header, copied unchanged onto every result.
    public var traceparent: String?

    public init(
        messageID: String? = nil,
        correlationID: String? = nil,
        replyTo: String? = nil,
        type: String? = nil,
        timestamp: Int64? = nil,
        traceparent: String? = nil,
        messageIDIsInvalidUTF8: Bool = false,
        correlationIDIsInvalidUTF8: Bool = false
    ) {
        self.messageIDIsInvalidUTF8 = messageIDIsInvalidUTF8
        self.correlationIDIsInvalidUTF8 = correlationIDIsInvalidUTF8
        self.messageID = messageID
        self.correlationID = correlationID
        self.replyTo = replyTo
        self.type = type
        self.timestamp = timestamp
        self.traceparent = traceparent
    }
}
