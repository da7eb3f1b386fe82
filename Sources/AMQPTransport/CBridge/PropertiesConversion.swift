internal import CRabbitMQ
internal import CRabbitMQShims

extension AMQPMessageProperties {
    /// Copies every set property out of C memory.
    init(copying properties: amqp_basic_properties_t) {
        var strings = RecentStrings()
        self.init(copying: properties, strings: &strings)
    }

    /// Copies every set property out of C memory; the properties that repeat from message to message (content
    /// type, type, reply-to, ...) come from `strings` when they do. Message and correlation ids are unique: made
    /// anew.
    init(copying properties: amqp_basic_properties_t, strings: inout RecentStrings) {
        self.init()
        let flags = properties._flags
        func has(_ flag: amqp_flags_t) -> Bool { flags & flag != 0 }
        var undecoded: [StringProperty: [UInt8]] = [:]
        func text(_ bytes: amqp_bytes_t, _ field: StringProperty) -> String {
            let raw = bytes.buffer
            let repeats = field != .messageID && field != .correlationID
            // Validated straight from librabbitmq's buffer: no array before the string.
            if let valid = repeats ? strings.string(raw) : String(validating: raw, as: UTF8.self) { return valid }
            undecoded[field] = Array(raw)
            return String(decoding: raw, as: UTF8.self)
        }
        defer { undecodedStrings = undecoded }
        if has(CRabbitMQShims_CONTENT_TYPE_FLAG) { contentType = text(properties.content_type, .contentType) }
        if has(CRabbitMQShims_CONTENT_ENCODING_FLAG) {
            contentEncoding = text(properties.content_encoding, .contentEncoding)
        }
        if has(CRabbitMQShims_HEADERS_FLAG) { headers = AMQPTable(copying: properties.headers) }
        if has(CRabbitMQShims_DELIVERY_MODE_FLAG) { deliveryMode = DeliveryMode(rawValue: properties.delivery_mode) }
        if has(CRabbitMQShims_PRIORITY_FLAG) { priority = properties.priority }
        if has(CRabbitMQShims_CORRELATION_ID_FLAG) { correlationID = text(properties.correlation_id, .correlationID) }
        if has(CRabbitMQShims_REPLY_TO_FLAG) { replyTo = text(properties.reply_to, .replyTo) }
        if has(CRabbitMQShims_EXPIRATION_FLAG) { expiration = text(properties.expiration, .expiration) }
        if has(CRabbitMQShims_MESSAGE_ID_FLAG) { messageID = text(properties.message_id, .messageID) }
        if has(CRabbitMQShims_TIMESTAMP_FLAG) { timestamp = properties.timestamp }
        if has(CRabbitMQShims_TYPE_FLAG) { type = text(properties.type, .type) }
        if has(CRabbitMQShims_USER_ID_FLAG) { userID = text(properties.user_id, .userID) }
        if has(CRabbitMQShims_APP_ID_FLAG) { appID = text(properties.app_id, .appID) }
        if has(CRabbitMQShims_CLUSTER_ID_FLAG) { clusterID = text(properties.cluster_id, .clusterID) }
    }

    /// Builds the C properties inside `pool`.
    func encoded(in pool: CMemoryPool) -> amqp_basic_properties_t {
        var properties = amqp_basic_properties_t()
        var flags: amqp_flags_t = 0
        func exact(_ value: String, _ field: StringProperty) -> amqp_bytes_t {
            if let raw = undecodedStrings[field], String(decoding: raw, as: UTF8.self) == value {
                return pool.bytes(raw)
            }
            return pool.bytes(value)
        }
        if let contentType {
            flags |= CRabbitMQShims_CONTENT_TYPE_FLAG
            properties.content_type = exact(contentType, .contentType)
        }
        if let contentEncoding {
            flags |= CRabbitMQShims_CONTENT_ENCODING_FLAG
            properties.content_encoding = exact(contentEncoding, .contentEncoding)
        }
        if let headers {
            flags |= CRabbitMQShims_HEADERS_FLAG
            properties.headers = headers.encoded(in: pool)
        }
        if let deliveryMode {
            flags |= CRabbitMQShims_DELIVERY_MODE_FLAG
            properties.delivery_mode = deliveryMode.rawValue
        }
        if let priority {
            flags |= CRabbitMQShims_PRIORITY_FLAG
            properties.priority = priority
        }
        if let correlationID {
            flags |= CRabbitMQShims_CORRELATION_ID_FLAG
            properties.correlation_id = exact(correlationID, .correlationID)
        }
        if let replyTo {
            flags |= CRabbitMQShims_REPLY_TO_FLAG
            properties.reply_to = exact(replyTo, .replyTo)
        }
        if let expiration {
            flags |= CRabbitMQShims_EXPIRATION_FLAG
            properties.expiration = exact(expiration, .expiration)
        }
        if let messageID {
            flags |= CRabbitMQShims_MESSAGE_ID_FLAG
            properties.message_id = exact(messageID, .messageID)
        }
        if let timestamp {
            flags |= CRabbitMQShims_TIMESTAMP_FLAG
            properties.timestamp = timestamp
        }
        if let type {
            flags |= CRabbitMQShims_TYPE_FLAG
            properties.type = exact(type, .type)
        }
        if let userID {
            flags |= CRabbitMQShims_USER_ID_FLAG
            properties.user_id = exact(userID, .userID)
        }
        if let appID {
            flags |= CRabbitMQShims_APP_ID_FLAG
            properties.app_id = exact(appID, .appID)
        }
        if let clusterID {
            flags |= CRabbitMQShims_CLUSTER_ID_FLAG
            properties.cluster_id = exact(clusterID, .clusterID)
        }
        properties._flags = flags
        return properties
    }
}
