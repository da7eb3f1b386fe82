import Logging

/// Logging metadata keys used by the transport, in one place so logs are searchable.
public enum AMQPLoggingKeys {
    public static let url = "amqp.url"
    public static let heartbeat = "amqp.heartbeat"
    public static let frameMax = "amqp.frame_max"
    public static let channel = "amqp.channel"
    public static let exchange = "amqp.exchange"
    public static let routingKey = "amqp.routing_key"
    public static let queue = "amqp.queue"
    public static let consumerTag = "amqp.consumer_tag"
    public static let error = "amqp.error"
}
