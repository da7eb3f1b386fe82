internal import CRabbitMQ
internal import CRabbitMQShims

extension AMQPMessageProperties {
    /// Copies every set property out of C memory.
    init(copying properties: amqp_basic_properties_t) {
        self.init()
        let flags = properties._flags
        func has(_ flag: amqp_flags_t) -> Bool { flags & flag != 0 }
        if has(CRabbitMQShims_CONTENT_TYPE_FLAG) { contentType = properties.content_type.string }
        if has(CRabbitMQShims_CONTENT_ENCODING_FLAG) { contentEncoding = properties.content_encoding.string }
        if has(CRabbitMQShims_HEADERS_FLAG) { headers = AMQPTable(copying: properties.headers) }
        if has(CRabbitMQShims_DELIVERY_MODE_FLAG) { deliveryMode = DeliveryMode(rawValue: properties.delivery_mode) }
        if has(CRabbitMQShims_PRIORITY_FLAG) { priority = properties.priority }
        if has(CRabbitMQShims_CORRELATION_ID_FLAG) { correlationID = properties.correlation_id.string }
        if has(CRabbitMQShims_REPLY_TO_FLAG) { replyTo = properties.reply_to.string }
        if has(CRabbitMQShims_EXPIRATION_FLAG) { expiration = properties.expiration.string }
        if has(CRabbitMQShims_MESSAGE_ID_FLAG) { messageID = properties.message_id.string }
        if has(CRabbitMQShims_TIMESTAMP_FLAG) { timestamp = properties.timestamp }
        if has(CRabbitMQShims_TYPE_FLAG) { type = properties.type.string }
        if has(CRabbitMQShims_USER_ID_FLAG) { userID = properties.user_id.string }
        if has(CRabbitMQShims_APP_ID_FLAG) { appID = properties.app_id.string }
        if has(CRabbitMQShims_CLUSTER_ID_FLAG) { clusterID = properties.cluster_id.string }
    }

    /// Builds the C properties inside `pool`.
    func encoded(in pool: CMemoryPool) -> amqp_basic_properties_t {
        var properties = amqp_basic_properties_t()
        var flags: amqp_flags_t = 0
        if let contentType {
            flags |= CRabbitMQShims_CONTENT_TYPE_FLAG
            properties.content_type = pool.bytes(contentType)
        }
        if let contentEncoding {
            flags |= CRabbitMQShims_CONTENT_ENCODING_FLAG
            properties.content_encoding = pool.bytes(contentEncoding)
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
            properties.correlation_id = pool.bytes(correlationID)
        }
        if let replyTo {
            flags |= CRabbitMQShims_REPLY_TO_FLAG
            properties.reply_to = pool.bytes(replyTo)
        }
        if let expiration {
            flags |= CRabbitMQShims_EXPIRATION_FLAG
            properties.expiration = pool.bytes(expiration)
        }
        if let messageID {
            flags |= CRabbitMQShims_MESSAGE_ID_FLAG
            properties.message_id = pool.bytes(messageID)
        }
        if let timestamp {
            flags |= CRabbitMQShims_TIMESTAMP_FLAG
            properties.timestamp = timestamp
        }
        if let type {
            flags |= CRabbitMQShims_TYPE_FLAG
            properties.type = pool.bytes(type)
        }
        if let userID {
            flags |= CRabbitMQShims_USER_ID_FLAG
            properties.user_id = pool.bytes(userID)
        }
        if let appID {
            flags |= CRabbitMQShims_APP_ID_FLAG
            properties.app_id = pool.bytes(appID)
        }
        if let clusterID {
            flags |= CRabbitMQShims_CLUSTER_ID_FLAG
            properties.cluster_id = pool.bytes(clusterID)
        }
        properties._flags = flags
        return properties
    }
}
