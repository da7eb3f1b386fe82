/// The size of a message's content header as librabbitmq encodes it, computed in Swift so a caller can tell
/// before publishing whether a message can be sent at all: a content header must fit in one frame, and every
/// short string (message id, reply-to, ...) in 255 bytes.
extension AMQPMessageProperties {
    /// Content-header frame overhead: frame header (7) and end (1), class, weight and body size (12).
    public static let contentHeaderOverhead = 20

    /// Why these properties cannot be encoded into a content header within `frameMax`, or nil when they can.
    public func encodingProblem(frameMax: Int) -> String? {
        var size = 2  // property flags
        for (name, field) in Self.shortStringNames {
            guard let text = text(of: field) else { continue }
            let length = undecodedByteCount(field) ?? text.utf8.count
            if length > 255 { return "\(name) is \(length) bytes, over AMQP's 255-byte short string" }
            size += 1 + length
        }
        if let headers { size += headers.encodedByteCount }
        if deliveryMode != nil { size += 1 }
        if priority != nil { size += 1 }
        if timestamp != nil { size += 8 }
        if size + Self.contentHeaderOverhead > frameMax {
            return "its properties take \(size) bytes, more than a frame of \(frameMax) bytes holds"
        }
        return nil
    }

    /// The short-string properties by their AMQP names. A constant: checking a message allocates nothing (this runs
    /// for every message published).
    private static let shortStringNames: [(name: String, field: StringProperty)] = [
        ("content_type", .contentType), ("content_encoding", .contentEncoding), ("correlation_id", .correlationID),
        ("reply_to", .replyTo), ("expiration", .expiration), ("message_id", .messageID), ("type", .type),
        ("user_id", .userID), ("app_id", .appID), ("cluster_id", .clusterID),
    ]

    private func text(of field: StringProperty) -> String? {
        switch field {
        case .contentType: contentType
        case .contentEncoding: contentEncoding
        case .correlationID: correlationID
        case .replyTo: replyTo
        case .expiration: expiration
        case .messageID: messageID
        case .type: type
        case .userID: userID
        case .appID: appID
        case .clusterID: clusterID
        }
    }

    private func undecodedByteCount(_ field: StringProperty) -> Int? {
        undecodedStrings[field]?.count
    }
}

extension AMQPOutboundMessage {
    /// Why this message cannot be published on a connection with `frameMax`, or nil when it can: its exchange and
    /// routing key are short strings too.
    public func encodingProblem(frameMax: Int) -> String? {
        if exchange.utf8.count > 255 {
            return "exchange is \(exchange.utf8.count) bytes, over AMQP's 255-byte short string"
        }
        if routingKey.utf8.count > 255 {
            return "routing key is \(routingKey.utf8.count) bytes, over AMQP's 255-byte short string"
        }
        return properties.encodingProblem(frameMax: frameMax)
    }
}

extension AMQPTable {
    /// Bytes of the encoded table, its 4-byte length included.
    public var encodedByteCount: Int {
        storage.reduce(4) { $0 + 1 + $1.key.utf8.count + $1.value.encodedByteCount }
    }
}

extension AMQPFieldValue {
    /// Bytes of the encoded value, its 1-byte kind included.
    public var encodedByteCount: Int {
        switch self {
        case .bool, .int8, .uint8: 2
        case .int16, .uint16: 3
        case .int32, .uint32, .float: 5
        case .int64, .uint64, .double, .timestamp: 9
        case .decimal: 6
        case .string(let text): 5 + text.utf8.count
        case .bytes(let bytes), .undecodedString(let bytes): 5 + bytes.count
        case .array(let values): values.reduce(5) { $0 + $1.encodedByteCount }
        case .table(let table): 1 + table.encodedByteCount
        case .void: 1
        }
    }
}
