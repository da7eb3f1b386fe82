import AMQPTransport
import WalletMessages
import WalletRouting

extension AMQPOutboundMessage {
    /// A result as the contract publishes it (§9): JSON, persistent, mandatory so an unbound exchange is noticed
    /// (except a copy for a direct reply-to requester, see `isDirectReplyTo`).
    init(_ result: OutboundResult) {
        var headers: AMQPTable?
        if let traceparent = result.properties.traceparent {
            headers = [WorkerHeaders.traceparent: .string(traceparent)]
        }
        self.init(
            exchange: result.exchange,
            routingKey: result.routingKey,
            body: result.body,
            properties: AMQPMessageProperties(
                contentType: OutboundProperties.contentType,
                headers: headers,
                deliveryMode: .persistent,
                correlationID: result.properties.correlationID,
                messageID: result.properties.messageID,
                type: result.properties.type
            ),
            mandatory: !Self.isDirectReplyTo(exchange: result.exchange, routingKey: result.routingKey)
        )
    }

    /// A `reply_to` copy for a requester using RabbitMQ's direct reply-to (`amq.rabbitmq.reply-to`, which the
    /// broker rewrites to `amq.rabbitmq.reply-to.<name>`). RabbitMQ 3.10 returns such a publish as unroutable
    /// (312 NO_ROUTE) when it is `mandatory`, even as it delivers it (DirectReplyToTests), so a return would say
    /// nothing: these copies go without `mandatory`. One whose requester has gone is dropped by the broker, which
    /// is direct reply-to's own guarantee.
    static func isDirectReplyTo(exchange: String, routingKey: String) -> Bool {
        exchange.isEmpty && routingKey.hasPrefix("amq.rabbitmq.reply-to.")
    }
}
