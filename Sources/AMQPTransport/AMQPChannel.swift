internal import CRabbitMQ
internal import Locking

/// An AMQP channel: topology, consuming, acknowledging and publishing.
///
/// A channel closed by the broker (404, 406, 403, ...) stays closed: every later call throws that error.
/// Open a new channel to continue.
public final class AMQPChannel: Sendable {
    /// The channel number on its connection (reused by a later channel once this one is closed).
    public var number: UInt16 { reference.number }
    let reference: ChannelReference
    /// Channels keep their connection alive: dropping the connection object must not close it under them.
    let connection: AMQPConnection
    private var runtime: ConnectionRuntime { connection.runtime }

    init(reference: ChannelReference, connection: AMQPConnection) {
        self.reference = reference
        self.connection = connection
    }

    // MARK: - Topology

    public func declareExchange(
        _ name: String, type: String, durable: Bool = true, autoDelete: Bool = false, internal isInternal: Bool = false,
        arguments: AMQPTable = [:]
    ) async throws(AMQPError) {
        let reference = reference
        let number = reference.number
        try await runtime.perform { core throws(AMQPError) in
            let pool = CMemoryPool()
            _ = try core.rpc(channel: reference, "declaring exchange '\(name)'") {
                amqp_exchange_declare(
                    core.state, number, pool.bytes(name), pool.bytes(type), 0, durable ? 1 : 0,
                    autoDelete ? 1 : 0, isInternal ? 1 : 0, arguments.encoded(in: pool))
            }
        }
    }

    public func deleteExchange(_ name: String, ifUnused: Bool = false) async throws(AMQPError) {
        let reference = reference
        let number = reference.number
        try await runtime.perform { core throws(AMQPError) in
            let pool = CMemoryPool()
            _ = try core.rpc(channel: reference, "deleting exchange '\(name)'") {
                amqp_exchange_delete(core.state, number, pool.bytes(name), ifUnused ? 1 : 0)
            }
        }
    }

    /// Declares a queue (an empty name asks the broker to generate one) and returns its counts.
    @discardableResult
    public func declareQueue(
        _ name: String, durable: Bool = true, exclusive: Bool = false, autoDelete: Bool = false,
        arguments: AMQPTable = [:]
    ) async throws(AMQPError) -> AMQPQueueStatus {
        try await queueDeclare(
            name, passive: false, durable: durable, exclusive: exclusive, autoDelete: autoDelete, arguments: arguments)
    }

    /// Checks that a queue exists (404 otherwise) and returns its message and consumer counts.
    public func queueStatus(_ name: String) async throws(AMQPError) -> AMQPQueueStatus {
        try await queueDeclare(name, passive: true, durable: false, exclusive: false, autoDelete: false, arguments: [:])
    }

    private func queueDeclare(
        _ name: String, passive: Bool, durable: Bool, exclusive: Bool, autoDelete: Bool, arguments: AMQPTable
    ) async throws(AMQPError) -> AMQPQueueStatus {
        let reference = reference
        let number = reference.number
        return try await runtime.perform { core throws(AMQPError) in
            let pool = CMemoryPool()
            let ok = try core.rpc(channel: reference, "declaring queue '\(name)'") {
                amqp_queue_declare(
                    core.state, number, pool.bytes(name), passive ? 1 : 0, durable ? 1 : 0,
                    exclusive ? 1 : 0, autoDelete ? 1 : 0, arguments.encoded(in: pool))
            }
            guard let ok else { throw AMQPError(code: .protocolError, message: "queue.declare-ok missing") }
            return AMQPQueueStatus(
                name: ok.queue.string, messageCount: ok.message_count, consumerCount: ok.consumer_count)
        }
    }

    public func bindQueue(_ queue: String, exchange: String, routingKey: String, arguments: AMQPTable = [:])
        async throws(AMQPError)
    {
        let reference = reference
        let number = reference.number
        try await runtime.perform { core throws(AMQPError) in
            let pool = CMemoryPool()
            _ = try core.rpc(channel: reference, "binding queue '\(queue)' to '\(exchange)'") {
                amqp_queue_bind(
                    core.state, number, pool.bytes(queue), pool.bytes(exchange), pool.bytes(routingKey),
                    arguments.encoded(in: pool))
            }
        }
    }

    /// Binds exchange `destination` to exchange `source` (`exchange.bind`, a RabbitMQ extension): messages routed
    /// by `source` with a matching key are routed on by `destination`.
    public func bindExchange(_ destination: String, to source: String, routingKey: String, arguments: AMQPTable = [:])
        async throws(AMQPError)
    {
        let reference = reference
        let number = reference.number
        try await runtime.perform { core throws(AMQPError) in
            let pool = CMemoryPool()
            _ = try core.rpc(channel: reference, "binding exchange '\(destination)' to '\(source)'") {
                amqp_exchange_bind(
                    core.state, number, pool.bytes(destination), pool.bytes(source), pool.bytes(routingKey),
                    arguments.encoded(in: pool))
            }
        }
    }

    public func unbindQueue(_ queue: String, exchange: String, routingKey: String, arguments: AMQPTable = [:])
        async throws(AMQPError)
    {
        let reference = reference
        let number = reference.number
        try await runtime.perform { core throws(AMQPError) in
            let pool = CMemoryPool()
            _ = try core.rpc(channel: reference, "unbinding queue '\(queue)' from '\(exchange)'") {
                amqp_queue_unbind(
                    core.state, number, pool.bytes(queue), pool.bytes(exchange), pool.bytes(routingKey),
                    arguments.encoded(in: pool))
            }
        }
    }

    /// Removes every ready message; returns how many.
    @discardableResult
    public func purgeQueue(_ name: String) async throws(AMQPError) -> UInt32 {
        let reference = reference
        let number = reference.number
        return try await runtime.perform { core throws(AMQPError) in
            let pool = CMemoryPool()
            return try core.rpc(channel: reference, "purging queue '\(name)'") {
                amqp_queue_purge(core.state, number, pool.bytes(name))
            }?.message_count ?? 0
        }
    }

    /// Deletes a queue; returns how many messages it held.
    @discardableResult
    public func deleteQueue(_ name: String, ifUnused: Bool = false, ifEmpty: Bool = false) async throws(AMQPError)
        -> UInt32
    {
        let reference = reference
        let number = reference.number
        return try await runtime.perform { core throws(AMQPError) in
            let pool = CMemoryPool()
            return try core.rpc(channel: reference, "deleting queue '\(name)'") {
                amqp_queue_delete(core.state, number, pool.bytes(name), ifUnused ? 1 : 0, ifEmpty ? 1 : 0)
            }?.message_count ?? 0
        }
    }

    // MARK: - Consuming

    /// Limits unacknowledged deliveries on this channel (`basic.qos`).
    public func setPrefetch(count: UInt16) async throws(AMQPError) {
        let reference = reference
        let number = reference.number
        try await runtime.perform { core throws(AMQPError) in
            _ = try core.rpc(channel: reference, "basic.qos") { amqp_basic_qos(core.state, number, 0, count, 0) }
        }
    }

    /// Starts a consumer, with manual acknowledgement unless told otherwise. Deliveries arrive in batches (all
    /// that were available at once, at most the prefetch). A body over `maximumBodyBytes` is not kept: the
    /// delivery arrives with an empty body and `withheldBodySize` set; unless `keepingBodyWhen` accepts the
    /// delivery's properties (it is asked from the content header, before any body frame is read). The sequence
    /// ends when the consumer is cancelled by us, and throws when the broker cancels it (`.consumerCancelled`) or
    /// the channel or connection fails.
    /// A delivery whose content header cannot be decoded ends the connection; `undecodableContent` says how it
    /// is settled first (rejected to the queue's dead-letter exchange by default, or requeued).
    public func consume(
        queue: String, consumerTag: String = "", exclusive: Bool = false,
        acknowledgement: AMQPConsumer.Acknowledgement = .manual, arguments: AMQPTable = [:],
        maximumBodyBytes: Int? = nil, keepingBodyWhen keepsBody: (@Sendable (AMQPMessageProperties) -> Bool)? = nil,
        undecodableContent: UndecodableContentHandling = .rejectToDeadLetterExchange
    ) async throws(AMQPError) -> AMQPConsumer {
        let automatic = acknowledgement == .automatic
        let reference = reference
        let number = reference.number
        let runtime = runtime
        // Set once the tag is known; the buffer's abandon hook only runs after `consume` has returned it.
        let knownTag = Locked<String?>(nil)
        let deliveries = DeliveryBuffer(
            undecodableContent: undecodableContent,
            onAbandon: {
                // The consuming task was cancelled: cancel on the broker so it stops sending.
                guard let tag = knownTag.withLock({ $0 }) else { return }
                _ = runtime.submit { core in try? core.cancelConsumer(channel: number, tag: tag) }
            })
        let tag = try await runtime.perform { core throws(AMQPError) in
            try core.checkTagIsFree(consumerTag, channel: number)
            let pool = CMemoryPool()
            let ok = try core.rpc(channel: reference, "consuming from '\(queue)'") {
                amqp_basic_consume(
                    core.state, number, pool.bytes(queue), pool.bytes(consumerTag), 0, automatic ? 1 : 0,
                    exclusive ? 1 : 0, arguments.encoded(in: pool))
            }
            guard let ok else { throw AMQPError(code: .protocolError, message: "basic.consume-ok missing") }
            let tag = ok.consumer_tag.string
            core.register(
                ConsumerSink(
                    channel: number, tag: tag, automaticAcknowledgement: automatic, maximumBodyBytes: maximumBodyBytes,
                    keepsBody: keepsBody, deliveries: deliveries))
            return tag
        }
        knownTag.withLock { $0 = tag }
        return AMQPConsumer(tag: tag, deliveries: deliveries, channel: self)
    }

    /// Stops a consumer; its sequence ends after the deliveries already received.
    public func cancel(consumerTag: String) async throws(AMQPError) {
        let number = number
        try await runtime.perform { core throws(AMQPError) in try core.cancelConsumer(channel: number, tag: consumerTag)
        }
    }

    /// Acknowledges a delivery (and, with `multiple`, every earlier one of this channel). Refuses a delivery
    /// that came from another channel, or from an earlier channel that had this number.
    public func ack(_ delivery: AMQPDelivery, multiple: Bool = false) async throws(AMQPError) {
        try checkOwnership(of: delivery)
        try await ack(deliveryTag: delivery.deliveryTag, multiple: multiple)
    }

    public func nack(_ delivery: AMQPDelivery, multiple: Bool = false, requeue: Bool) async throws(AMQPError) {
        try checkOwnership(of: delivery)
        try await nack(deliveryTag: delivery.deliveryTag, multiple: multiple, requeue: requeue)
    }

    public func reject(_ delivery: AMQPDelivery, requeue: Bool) async throws(AMQPError) {
        try checkOwnership(of: delivery)
        try await reject(deliveryTag: delivery.deliveryTag, requeue: requeue)
    }

    private func checkOwnership(of delivery: AMQPDelivery) throws(AMQPError) {
        // Acknowledging it would close the channel (PRECONDITION_FAILED, unknown delivery tag).
        guard !delivery.acknowledgedByBroker else {
            throw AMQPError(
                code: .invalidArgument,
                message:
                    """
                    delivery \(delivery.deliveryTag) came from a consumer with automatic acknowledgement: the \
                    broker acknowledged it when it sent it
                    """
            )
        }
        guard delivery.channel == reference else {
            throw AMQPError(
                code: .invalidArgument,
                message:
                    """
                    delivery \(delivery.deliveryTag) came from another channel: delivery tags are valid only \
                    on the channel that delivered them
                    """
            )
        }
    }

    /// How one delivery is settled, for `startSettling(_:)`.
    public enum Settlement: Sendable, Hashable {
        /// `basic.ack`; with `multiple`, every unacknowledged delivery up to the tag.
        case ack(deliveryTag: UInt64, multiple: Bool)
        /// `basic.nack`: requeued, or (without `requeue`) dead-lettered by the queue.
        case nack(deliveryTag: UInt64, requeue: Bool)
    }

    /// Hands acknowledgements and rejections by raw delivery tag to the connection's I/O thread, to be sent in
    /// order, and returns at once: a batch's settlements cost one wake-up of that thread, and the caller does not
    /// wait for it (like `startPublishing`). A send that fails fails the connection: its consumers end with the
    /// error and its `events` report it. On a channel already closed they are not sent: the broker has requeued
    /// every delivery of that channel that was not settled.
    public func startSettling(_ settlements: [Settlement]) {
        guard !settlements.isEmpty else { return }
        let reference = reference
        let number = reference.number
        _ = runtime.submit { core in
            guard (try? core.usableChannel(reference)) != nil else { return }
            do throws(AMQPError) {
                for settlement in settlements {
                    switch settlement {
                    case .ack(let tag, let multiple):
                        try core.checkSend(
                            amqp_basic_ack(core.state, number, tag, multiple ? 1 : 0), context: "basic.ack")
                    case .nack(let tag, let requeue):
                        try core.checkSend(
                            amqp_basic_nack(core.state, number, tag, 0, requeue ? 1 : 0), context: "basic.nack")
                    }
                }
            } catch {
                return  // `checkSend` failed the connection
            }
        }
    }

    /// Acknowledges by raw delivery tag on this channel. Prefer `ack(_:)`, which checks the delivery's channel.
    public func ack(deliveryTag: UInt64, multiple: Bool = false) async throws(AMQPError) {
        let reference = reference
        let number = reference.number
        try await runtime.perform { core throws(AMQPError) in
            _ = try core.usableChannel(reference)
            try core.checkSend(amqp_basic_ack(core.state, number, deliveryTag, multiple ? 1 : 0), context: "basic.ack")
        }
    }

    public func nack(deliveryTag: UInt64, multiple: Bool = false, requeue: Bool) async throws(AMQPError) {
        let reference = reference
        let number = reference.number
        try await runtime.perform { core throws(AMQPError) in
            _ = try core.usableChannel(reference)
            try core.checkSend(
                amqp_basic_nack(core.state, number, deliveryTag, multiple ? 1 : 0, requeue ? 1 : 0),
                context: "basic.nack")
        }
    }

    public func reject(deliveryTag: UInt64, requeue: Bool) async throws(AMQPError) {
        let reference = reference
        let number = reference.number
        try await runtime.perform { core throws(AMQPError) in
            _ = try core.usableChannel(reference)
            try core.checkSend(
                amqp_basic_reject(core.state, number, deliveryTag, requeue ? 1 : 0), context: "basic.reject")
        }
    }

    // MARK: - Publishing

    /// Puts the channel in confirm mode (`confirm.select`); required by `publish(_:confirmTimeout:)`.
    public func enableConfirms() async throws(AMQPError) {
        let reference = reference
        try await runtime.perform { core throws(AMQPError) in try core.enableConfirms(channel: reference) }
    }

    /// Publishes the messages back to back and waits until the broker has answered for every one:
    /// one outcome per message, in order. Throws `.timeout` when the answers take longer than `confirmTimeout`,
    /// and the channel's error when the broker closes it (e.g. 404 for a missing exchange).
    public func publish(_ messages: [AMQPOutboundMessage], confirmTimeout: Duration = .seconds(30))
        async throws(AMQPError) -> [AMQPPublishOutcome]
    {
        try await startPublishing(messages, confirmTimeout: confirmTimeout).outcomes()
    }

    /// Publishes the messages back to back without waiting for their confirms: they are sent after those of every
    /// earlier call on this channel, and `outcomes()` on the returned handle waits for the broker's answers (the
    /// confirm timeout runs from now). Errors, a closed connection included, are reported by `outcomes()`.
    public func startPublishing(_ messages: [AMQPOutboundMessage], confirmTimeout: Duration = .seconds(30))
        -> AMQPPendingConfirms
    {
        let reference = reference
        let pending = AMQPPendingConfirms()
        if let terminated = runtime.submit({ core in
            core.publish(messages, channel: reference, timeout: confirmTimeout, confirms: pending)
        }) {
            pending.resume(throwing: terminated)
        }
        return pending
    }

    /// Publishes one message and waits for its confirm.
    public func publish(_ message: AMQPOutboundMessage, confirmTimeout: Duration = .seconds(30)) async throws(AMQPError)
        -> AMQPPublishOutcome
    {
        try await publish([message], confirmTimeout: confirmTimeout)[0]
    }

    /// Publishes without confirm mode; returns once the frames are written.
    public func publishUnconfirmed(_ message: AMQPOutboundMessage) async throws(AMQPError) {
        let reference = reference
        try await runtime.perform { core throws(AMQPError) in try core.publishUnconfirmed(message, channel: reference) }
    }

    /// Closes the channel; unacknowledged deliveries are requeued by the broker.
    public func close() async throws(AMQPError) {
        let reference = reference
        try await runtime.perform { core throws(AMQPError) in try core.closeChannel(reference) }
    }
}
