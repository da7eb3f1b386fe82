import AMQPTransport

/// The executor's seam to the broker: everything `Pipeline`, `DirectReplyPublisher` and the first login check need
/// from RabbitMQ, and nothing more. `AMQPBrokerConnector` is the real one, over `AMQPTransport`; the in-process
/// tests drive the executor with a scripted one that hands deliveries in and answers each publish by hand.
///
/// It is a seam, not a broker model: what crosses the wire (frames, confirms, returns, alarms, closes) is tested
/// against a real RabbitMQ, in `AMQPTransportIntegrationTests` and one end-to-end test per feature.
protocol BrokerConnector: Sendable {
    /// Logs in once and closes the connection: the worker's first login (`BrokerLogin`). Throws the transport's
    /// error, `.authenticationFailed` or `.tlsFailed` when the broker refuses the settings.
    func checkLogin() async throws(AMQPError)

    /// Opens pipeline `pipeline`'s session on `queue`: its connections (one for deliveries and acknowledgements, one
    /// for results), the topology (when the worker declares it), the channels, the prefetch, the confirms, and the
    /// consumer. `beforeConsuming` runs right before the consumer starts, with a way to count the queue's consumers
    /// (a passive `queue.declare`): it may wait (`ConsumerRelease`); false (the worker was told to stop while
    /// connecting) takes nothing and throws `CancellationError`. Throws what failed; a session half opened is closed
    /// first.
    func openSession(
        pipeline: Int, queue: ConsumedQueue,
        beforeConsuming: @Sendable (_ countConsumers: @Sendable () async throws -> Int) async throws -> Bool
    ) async throws -> any BrokerSession

    /// Opens the connection and channel that carry direct reply-to copies, unconfirmed.
    func openReplyConnection(pipeline: Int) async throws -> any ReplyConnection
}

/// One pipeline's open session: a consumer, a confirm channel for results, and the two connections' events.
protocol BrokerSession: Sendable {
    /// The largest frame the publish connection negotiated: a result bigger than its body frames' total is refused
    /// before it is sent.
    var frameMax: Int { get }

    /// The queue's consumers right after this session's own consume, its own included; nil when not counted.
    var consumersWhenStarted: Int? { get }

    /// The next deliveries received since the last call; nil once the consumer was cancelled by us; throws when the
    /// broker cancelled it or a connection failed.
    func nextDeliveries() async throws -> [AMQPDelivery]?

    /// The events of one of the session's connections: blocked, unblocked, closed (by the broker, with its error).
    func events(of connection: SessionConnection) -> AsyncStream<AMQPConnectionEvent>

    /// Sends `messages` in order on the confirm channel without waiting; their outcomes come in one answer.
    func startPublishing(_ messages: [AMQPOutboundMessage], confirmTimeout: Duration) -> any PublishConfirmation

    /// Acknowledges, requeues or rejects deliveries on the consume channel, in order, without waiting.
    func startSettling(_ settlements: [AMQPChannel.Settlement])

    /// Asks the broker to stop sending (`basic.cancel`); `nextDeliveries` returns nil after the deliveries in hand.
    func cancelConsumer() async

    /// Closes the consume channel alone: the broker requeues what is not settled, in place (a shard's hand-over).
    func closeConsumeChannel() async

    /// Closes both connections; waits at most `timeout` for the broker's answer.
    func close(timeout: Duration) async
}

/// A session's two connections.
enum SessionConnection: String, Sendable, CaseIterable {
    /// Deliveries and their acknowledgements.
    case consume
    /// Results, with publisher confirms.
    case publish
}

/// The broker's answer to one publish of several messages.
protocol PublishConfirmation: Sendable {
    /// One outcome per message, in order. Throws `.timeout` past the confirm timeout, and the channel's or
    /// connection's error when it failed.
    func outcomes() async throws(AMQPError) -> [AMQPPublishOutcome]
}

extension AMQPPendingConfirms: PublishConfirmation {}

/// The connection that carries direct reply-to copies.
protocol ReplyConnection: Sendable {
    /// Ends when the connection closes; `.closed` carries the broker's error when the broker closed it.
    var events: AsyncStream<AMQPConnectionEvent> { get }

    /// Sends one copy, unconfirmed; throws when the channel or connection is gone.
    func publish(_ copy: AMQPOutboundMessage) async throws(AMQPError)

    func close(timeout: Duration) async
}
