import AMQPTransport

/// Where a message was first published: its exchange and routing key, kept across every retry level.
///
/// A retry copy goes to its retry queue through the default exchange, and the queue's TTL dead-letters it back to
/// the work queue (or shard) with that queue's name as routing key: the delivery that comes back no longer says
/// where the backend sent it. So the first retry copy records both in `x-original-exchange` and
/// `x-original-routing-key`; every later copy, the worker's dead letter (whose routing key is the original one)
/// and `dead-letters replay` read them back.
///
/// The headers are trusted only on a delivery that came back through the default exchange, as the retry queues
/// deliver: on a message from the inbound exchange they are a publisher's and are replaced. And `replay` never
/// publishes to an exchange a header names, only to the inbound exchange or, for a message the backend sent
/// straight to the work queue, to the default exchange.
public struct OriginalDestination: Sendable, Hashable {
    public static let exchangeHeader = "x-original-exchange"
    public static let routingKeyHeader = "x-original-routing-key"

    public var exchange: String
    public var routingKey: String

    public init(exchange: String, routingKey: String) {
        self.exchange = exchange
        self.routingKey = routingKey
    }

    /// A delivery's first destination: the recorded one when it came back from a retry queue (through the default
    /// exchange) with the headers, else where this delivery was published.
    public init(deliveredVia exchange: String, routingKey: String, headers: AMQPTable?) {
        if exchange.isEmpty, let recorded = Self.recorded(in: headers) {
            self = recorded
        } else {
            self.init(exchange: exchange, routingKey: routingKey)
        }
    }

    /// The destination the headers record, when both are there.
    public static func recorded(in headers: AMQPTable?) -> OriginalDestination? {
        guard let exchange = headers?[exchangeHeader]?.textValue, let routingKey = headers?[routingKeyHeader]?.textValue
        else {
            return nil
        }
        return OriginalDestination(exchange: exchange, routingKey: routingKey)
    }

    /// The headers a retry copy carries.
    public var headers: [(String, AMQPFieldValue)] {
        [(Self.exchangeHeader, .string(exchange)), (Self.routingKeyHeader, .string(routingKey))]
    }

    /// Where `dead-letters replay` publishes a dead letter so that it reaches the work queue as the backend sent
    /// it: the recorded routing key (else the dead letter's own, which the worker's dead letters keep), to the
    /// inbound exchange, or to the default exchange when that is where it was first published (a message sent
    /// straight to the work queue). A recorded exchange of any other name is not used.
    ///
    /// The headers may still be a publisher's: one that came through the default exchange itself is trusted like a
    /// retry queue's return, and a broker-made dead letter keeps the headers as they came. So the default exchange
    /// is used only with one of `ownQueues` (the work queue, the shards) as routing key: nil for any other, which
    /// would publish the message into whatever queue the header names.
    public static func replay(
        deadLetterRoutingKey: String, headers: AMQPTable?, inboundExchange: String, ownQueues: Set<String>
    ) -> OriginalDestination? {
        guard let recorded = recorded(in: headers) else {
            return OriginalDestination(exchange: inboundExchange, routingKey: deadLetterRoutingKey)
        }
        guard recorded.exchange.isEmpty else {
            return OriginalDestination(exchange: inboundExchange, routingKey: recorded.routingKey)
        }
        guard ownQueues.contains(recorded.routingKey) else { return nil }
        return recorded
    }
}
