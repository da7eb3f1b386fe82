import AMQPTransport
import Logging

/// Publishes `reply_to` copies for direct reply-to requesters (`amq.rabbitmq.reply-to.<pid>.<key>`) on a
/// connection of their own, opened when first needed.
///
/// The address comes from the inbound message, and RabbitMQ closes the publishing connection (541
/// INTERNAL_ERROR) on an address it cannot resolve: a malformed one (`DirectReplyToAddress` skips those) but also
/// a well-formed one naming a node it does not know. On the publish connection that would take the session down
/// with every unconfirmed result, and the redelivery would do it again. Here it costs only this connection:
/// copies written on it after the bad one and before the close arrived are lost (direct reply-to promises no more:
/// a requester that has gone loses its replies too); the next copy opens a new connection (at most once a second,
/// copies meanwhile are counted as lost). The primary results, their confirms and the acknowledgements never depend on these copies.
actor DirectReplyPublisher {
    private let connect: @Sendable () async throws -> AMQPConnection
    private let metrics: WorkerMetrics
    private let logger: Logger
    private var connection: AMQPConnection?
    private var channel: AMQPChannel?
    private var nextAttempt: ContinuousClock.Instant?

    static let reconnectInterval: Duration = .seconds(1)

    init(metrics: WorkerMetrics, logger: Logger, connect: @escaping @Sendable () async throws -> AMQPConnection) {
        self.connect = connect
        self.metrics = metrics
        self.logger = logger
    }

    /// Sends the copies without confirms. A publish that fails (the broker closed the connection since the last
    /// one) is tried once more on a new connection; copies that still cannot go are counted as lost.
    func send(_ copies: [AMQPOutboundMessage]) async {
        var index = copies.startIndex
        var retried = false
        while index < copies.endIndex {
            guard let channel = await openChannel() else {
                metrics.lostReplyCopies.increment(by: Int64(copies.endIndex - index))
                return
            }
            do {
                try await channel.publishUnconfirmed(copies[index])
                index += 1
                retried = false
            } catch {
                await drop()
                if retried {
                    metrics.lostReplyCopies.increment()
                    logger.warning("could not publish a direct reply-to copy", metadata: [
                        "error": "\(error)", "reply_to": "\(copies[index].routingKey)",
                    ])
                    index += 1
                }
                retried.toggle()
            }
        }
    }

    func close(timeout: Duration = .seconds(5)) async {
        await connection?.close(timeout: timeout)
        connection = nil
        channel = nil
    }

    private func openChannel() async -> AMQPChannel? {
        // A connection the broker closed is noticed by the next publish failing.
        if let channel { return channel }
        let now = ContinuousClock.now
        if let nextAttempt, now < nextAttempt { return nil }
        nextAttempt = now + Self.reconnectInterval
        do {
            let connection = try await connect()
            self.connection = connection
            let channel = try await connection.openChannel()
            self.channel = channel
            return channel
        } catch {
            logger.warning("could not open the direct reply-to connection", metadata: ["error": "\(error)"])
            await drop()
            return nil
        }
    }

    private func drop() async {
        let connection = connection
        self.connection = nil
        channel = nil
        await connection?.close(timeout: .seconds(1))
    }
}
