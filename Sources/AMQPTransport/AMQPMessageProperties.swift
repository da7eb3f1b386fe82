/// The basic-class properties of a message (AMQP 0-9-1 §4.2.6); `nil` means absent.
public struct AMQPMessageProperties: Sendable, Hashable {
    public enum DeliveryMode: UInt8, Sendable, Hashable {
        case transient = 1
        case persistent = 2
    }

    public var contentType: String?
    public var contentEncoding: String?
    public var headers: AMQPTable?
    public var deliveryMode: DeliveryMode?
    public var priority: UInt8?
    public var correlationID: String?
    public var replyTo: String?
    public var expiration: String?
    public var messageID: String?
    /// Seconds since the Unix epoch.
    public var timestamp: UInt64?
    public var type: String?
    public var userID: String?
    public var appID: String?
    public var clusterID: String?
    /// Short-string properties that arrived as bytes that are not UTF-8, exactly as received. Their `String` field
    /// holds a repaired text; while that text is unchanged, encoding sends these bytes instead, so a message
    /// forwarded as it came (a dead letter, a retry) keeps them byte for byte. Empty for ordinary messages.
    public var undecodedStrings: [StringProperty: [UInt8]] = [:]

    /// The short-string properties.
    public enum StringProperty: Sendable, Hashable, CaseIterable {
        case contentType, contentEncoding, correlationID, replyTo, expiration, messageID, type, userID, appID, clusterID
    }

    public init(
        contentType: String? = nil, contentEncoding: String? = nil, headers: AMQPTable? = nil,
        deliveryMode: DeliveryMode? = nil, priority: UInt8? = nil, correlationID: String? = nil,
        replyTo: String? = nil, expiration: String? = nil, messageID: String? = nil, timestamp: UInt64? = nil,
        type: String? = nil, userID: String? = nil, appID: String? = nil, clusterID: String? = nil
    ) {
        self.contentType = contentType
        self.contentEncoding = contentEncoding
        self.headers = headers
        self.deliveryMode = deliveryMode
        self.priority = priority
        self.correlationID = correlationID
        self.replyTo = replyTo
        self.expiration = expiration
        self.messageID = messageID
        self.timestamp = timestamp
        self.type = type
        self.userID = userID
        self.appID = appID
        self.clusterID = clusterID
    }
}
