import AMQPTransport
import Logging

/// Publishes `reply_to` copies for direct reply-to requesters (`amq.rabbitmq.reply-to.<pid>.<key>`) on a
/// connection of their own, opened when first needed.
///
/// The address comes from the inbound message, and RabbitMQ closes the publishing connection (541
/// INTERNAL_ERROR) on an address it cannot resolve: a malformed one (`DirectReplyToAddress` skips those) but also
/// a well-formed one naming a node it does not know. On the publish connection that would take the session down
/// with every unconfirmed result, and the redelivery would do it again. Here it costs only this connection: copies
/// written on it after the bad one and before the close arrived are lost (direct reply-to promises no more: a
/// requester that has gone loses its replies too). The publisher watches its connection: once the broker's close
/// arrives it is counted and forgotten, and the next copy opens a fresh one at once. A copy whose publish fails
/// (the close arrived between the two) is tried once more on a fresh connection; only a connection that cannot be
/// opened makes the next copies wait (at most one attempt a second, copies meanwhile counted as lost). The primary
/// results, their confirms and the acknowledgements never depend on these copies.
actor DirectReplyPublisher {
    private let connect: @Sendable () async throws -> any ReplyConnection
    private let metrics: WorkerMetrics
    private let clock: WorkerClock
    private let logger: Logger
    private var connection: (any ReplyConnection)?
    /// Which connection is current: the watch of an older one must not forget a newer one.
    private var generation = 0
    /// After a failed connect: no new attempt before then (on `clock`).
    private var nextAttempt: Duration?

    static let reconnectInterval: Duration = .seconds(1)

    init(
        metrics: WorkerMetrics, clock: WorkerClock, logger: Logger,
        connect: @escaping @Sendable () async throws -> any ReplyConnection
    ) {
        self.connect = connect
        self.metrics = metrics
        self.clock = clock
        self.logger = logger
    }

    /// Sends the copies without confirms. A publish that fails is tried once more on a new connection; a copy that
    /// still cannot go is counted as lost.
    func send(_ copies: [AMQPOutboundMessage]) async {
        for copy in copies {
            if await publish(copy) { continue }
            // The broker closed the connection since the last copy (it is noticed by this publish failing).
            await drop()
            if await publish(copy) { continue }
            await drop()
            metrics.lostReplyCopies.increment()
            logger.warning("could not publish a direct reply-to copy", metadata: ["reply_to": "\(copy.routingKey)"])
        }
    }

    func close(timeout: Duration = .seconds(5)) async {
        let connection = connection
        self.connection = nil
        await connection?.close(timeout: timeout)
    }

    private func publish(_ copy: AMQPOutboundMessage) async -> Bool {
        guard let connection = await openConnection() else { return false }
        do {
            try await connection.publish(copy)
            return true
        } catch {
            return false
        }
    }

    private func openConnection() async -> (any ReplyConnection)? {
        if let connection { return connection }
        let now = clock.now
        if let nextAttempt, now < nextAttempt { return nil }
        do {
            let connection = try await connect()
            self.connection = connection
            generation += 1
            // Ends with the connection's events: when the broker closes it, or `drop` or `close` does.
            let generation = generation
            Task { await watch(connection, generation: generation) }
            nextAttempt = nil
            return connection
        } catch {
            nextAttempt = now + Self.reconnectInterval
            logger.warning("could not open the direct reply-to connection", metadata: ["error": "\(error)"])
            return nil
        }
    }

    private func watch(_ watched: any ReplyConnection, generation watchedGeneration: Int) async {
        for await event in watched.events {
            guard case .closed(.some) = event else { continue }
            // The transport logged the broker's reason (at notice); the copies written since are gone unseen.
            metrics.closedReplyConnections.increment()
            if watchedGeneration == generation {
                connection = nil
            }
        }
    }

    private func drop() async {
        let connection = connection
        self.connection = nil
        await connection?.close(timeout: .seconds(1))
    }
}
