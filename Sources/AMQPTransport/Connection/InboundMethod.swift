internal import CRabbitMQ
internal import CRabbitMQShims

/// A method the broker sent on its own (not the reply to one of our RPCs), copied out of librabbitmq's memory.
///
/// `FrameReader.method(of:)` decodes a method frame into one of these, so the connection reacts to Swift values and
/// never holds a pointer into a channel's pool, which librabbitmq recycles.
enum InboundMethod {
    /// basic.deliver: a message for a consumer; its content header and body frames follow on the channel.
    case deliver(Deliver)
    /// basic.return: a mandatory message no queue took; its content follows, and its basic.ack comes after.
    case returned(Returned)
    /// basic.ack of publishes in confirm mode.
    case acknowledged(deliveryTag: UInt64, multiple: Bool)
    /// basic.nack of publishes in confirm mode.
    case negativelyAcknowledged(deliveryTag: UInt64, multiple: Bool)
    /// basic.cancel: the broker cancelled a consumer (its queue was deleted or failed over).
    case consumerCancelled(tag: String)
    /// channel.close: the broker closed the channel; it waits for our close-ok.
    case channelClosed(AMQPError)
    /// connection.close: the broker closes the connection; it waits for our close-ok.
    case connectionClosed(AMQPError)
    /// connection.blocked: the broker stopped reading publishes (a resource alarm).
    case blocked(reason: String)
    /// connection.unblocked: publishing may go on.
    case unblocked
    /// Anything else: nothing to do.
    case ignored(methodID: UInt32)

    struct Deliver {
        var consumerTag: String
        var deliveryTag: UInt64
        var redelivered: Bool
        var exchange: String
        var routingKey: String
    }

    struct Returned {
        var replyCode: UInt16
        var replyText: String
        var exchange: String
        var routingKey: String
    }

    /// Decodes a method frame received on `channel`; nil for a method librabbitmq did not decode. A delivery's tag,
    /// exchange and routing key come from `strings` when they repeat.
    init?(_ method: amqp_method_t, channel: UInt16, strings: inout RecentStrings) {
        guard let decoded = method.decoded else { return nil }
        switch method.id {
        case CRabbitMQShims_BASIC_DELIVER_METHOD:
            let deliver = decoded.assumingMemoryBound(to: amqp_basic_deliver_t.self).pointee
            self = .deliver(
                Deliver(
                    consumerTag: strings.text(deliver.consumer_tag), deliveryTag: deliver.delivery_tag,
                    redelivered: deliver.redelivered != 0, exchange: strings.text(deliver.exchange),
                    routingKey: strings.text(deliver.routing_key)))
        case CRabbitMQShims_BASIC_RETURN_METHOD:
            let returned = decoded.assumingMemoryBound(to: amqp_basic_return_t.self).pointee
            self = .returned(
                Returned(
                    replyCode: returned.reply_code, replyText: returned.reply_text.string,
                    exchange: returned.exchange.string,
                    routingKey: returned.routing_key.string))
        case CRabbitMQShims_BASIC_ACK_METHOD:
            let ack = decoded.assumingMemoryBound(to: amqp_basic_ack_t.self).pointee
            self = .acknowledged(deliveryTag: ack.delivery_tag, multiple: ack.multiple != 0)
        case CRabbitMQShims_BASIC_NACK_METHOD:
            let nack = decoded.assumingMemoryBound(to: amqp_basic_nack_t.self).pointee
            self = .negativelyAcknowledged(deliveryTag: nack.delivery_tag, multiple: nack.multiple != 0)
        case CRabbitMQShims_BASIC_CANCEL_METHOD:
            self = .consumerCancelled(
                tag: decoded.assumingMemoryBound(to: amqp_basic_cancel_t.self).pointee.consumer_tag.string)
        case CRabbitMQShims_CHANNEL_CLOSE_METHOD:
            self = .channelClosed(LibraryReply.serverError(method, context: "channel \(channel)"))
        case CRabbitMQShims_CONNECTION_CLOSE_METHOD:
            self = .connectionClosed(LibraryReply.serverError(method, context: "connection"))
        case CRabbitMQShims_CONNECTION_BLOCKED_METHOD:
            self = .blocked(
                reason: decoded.assumingMemoryBound(to: amqp_connection_blocked_t.self).pointee.reason.string)
        case CRabbitMQShims_CONNECTION_UNBLOCKED_METHOD:
            self = .unblocked
        default:
            self = .ignored(methodID: method.id)
        }
    }
}
