import AMQPTransport
import Foundation
import Logging
import WalletMessages

/// The real `BrokerConnector`: RabbitMQ through `AMQPTransport` (librabbitmq).
struct AMQPBrokerConnector: BrokerConnector {
    var connection: AMQPConnectionConfiguration
    var configuration: WorkerConfiguration
    var metrics: WorkerMetrics
    var logger: Logger

    func checkLogin() async throws(AMQPError) {
        var configuration = connection
        configuration.connectionName = "wallet-worker \(ProcessInfo.processInfo.hostName) login check"
        // The pipelines log their own failures; an unreachable broker is a warning of `BrokerLogin`'s own.
        configuration.failureLogLevel = .debug
        let connection = try await AMQPConnection.connect(configuration: configuration, logger: logger)
        await connection.close(timeout: .seconds(5))
    }

    func openSession(
        pipeline: Int, queue: ConsumedQueue,
        beforeConsuming: @Sendable (_ countConsumers: @Sendable () async throws -> Int) async throws -> Bool
    ) async throws -> any BrokerSession {
        let logger = pipelineLogger(pipeline)
        var opened: [AMQPConnection] = []
        do {
            let consumeConnection = try await connect(pipeline, role: "consume", logger: logger)
            opened.append(consumeConnection)
            let publishConnection = try await connect(pipeline, role: "publish", logger: logger)
            opened.append(publishConnection)
            if configuration.declaresTopology {
                try await configuration.topology.declare(
                    on: consumeConnection, retry: configuration.retrySchedule, logger: logger, metrics: metrics)
            }
            let consume = try await consumeConnection.openChannel()
            try await consume.setPrefetch(count: configuration.prefetch)
            let publish = try await publishConnection.openChannel()
            try await publish.enableConfirms()
            let count: @Sendable () async throws -> Int = {
                Int(try await consume.queueStatus(queue.name).consumerCount)
            }
            guard try await beforeConsuming(count) else { throw CancellationError() }
            // The content header's body size is checked before the body is read. A body somewhat over the limit is
            // read so the worker can dead-letter it itself with `x-worker-error` (CONTRACT §8); one over the read
            // ceiling is never buffered (the broker dead-letters it whole), unless its `x-death` would crash the
            // broker's dead-lettering: then it is read, and the worker dead-letters it itself, body untouched.
            let consumer = try await consume.consume(
                queue: queue.name, consumerTag: Self.consumerTag(pipeline),
                maximumBodyBytes: configuration.routing.bodyReadCeiling,
                keepingBodyWhen: XDeathHeader.bodyMustBeKept)
            // What the next session compares with, should this one fail (`ConsumerRelease`).
            let consumers = try? await count()
            return AMQPBrokerSession(
                consumeConnection: consumeConnection, publishConnection: publishConnection, consume: consume,
                publish: publish, consumer: consumer, consumersWhenStarted: consumers)
        } catch {
            for connection in opened { await connection.close(timeout: .seconds(5)) }
            throw error
        }
    }

    func openReplyConnection(pipeline: Int) async throws -> any ReplyConnection {
        // A malformed reply-to address ends the reply connection (541): expected, and logged by the publisher.
        let connection = try await connect(
            pipeline, role: "reply", failureLogLevel: .notice, logger: pipelineLogger(pipeline))
        do {
            return AMQPReplyConnection(connection: connection, channel: try await connection.openChannel())
        } catch {
            await connection.close(timeout: .seconds(1))
            throw error
        }
    }

    private func connect(
        _ pipeline: Int, role: String, failureLogLevel: Logger.Level = .error, logger: Logger
    ) async throws(AMQPError) -> AMQPConnection {
        var configuration = connection
        configuration.connectionName = "wallet-worker \(ProcessInfo.processInfo.hostName) #\(pipeline) \(role)"
        configuration.failureLogLevel = failureLogLevel
        return try await AMQPConnection.connect(configuration: configuration, logger: logger)
    }

    /// The worker's logger with the pipeline's number.
    private func pipelineLogger(_ pipeline: Int) -> Logger {
        var logger = logger
        logger[metadataKey: "pipeline"] = "\(pipeline)"
        return logger
    }

    private static func consumerTag(_ pipeline: Int) -> String {
        "wallet-worker.\(ProcessInfo.processInfo.hostName).\(ProcessInfo.processInfo.processIdentifier).\(pipeline)"
    }
}

/// A session over two `AMQPConnection`s.
private struct AMQPBrokerSession: BrokerSession {
    var consumeConnection: AMQPConnection
    var publishConnection: AMQPConnection
    var consume: AMQPChannel
    var publish: AMQPChannel
    var consumer: AMQPConsumer
    var consumersWhenStarted: Int?

    var frameMax: Int { publishConnection.frameMax }

    func nextDeliveries() async throws -> [AMQPDelivery]? {
        // The iterator only holds the consumer's buffer: a fresh one each time takes from the same deliveries.
        var deliveries = consumer.makeAsyncIterator()
        return try await deliveries.next()
    }

    func events(of connection: SessionConnection) -> AsyncStream<AMQPConnectionEvent> {
        switch connection {
        case .consume: consumeConnection.events
        case .publish: publishConnection.events
        }
    }

    func startPublishing(_ messages: [AMQPOutboundMessage], confirmTimeout: Duration) -> any PublishConfirmation {
        publish.startPublishing(messages, confirmTimeout: confirmTimeout)
    }

    func startSettling(_ settlements: [AMQPChannel.Settlement]) {
        consume.startSettling(settlements)
    }

    func cancelConsumer() async {
        try? await consume.cancel(consumerTag: consumer.tag)
    }

    func closeConsumeChannel() async {
        try? await consume.close()
    }

    func close(timeout: Duration) async {
        await consumeConnection.close(timeout: timeout)
        await publishConnection.close(timeout: timeout)
    }
}

/// Direct reply-to copies over an `AMQPConnection` of their own.
private struct AMQPReplyConnection: ReplyConnection {
    var connection: AMQPConnection
    var channel: AMQPChannel

    var events: AsyncStream<AMQPConnectionEvent> { connection.events }

    func publish(_ copy: AMQPOutboundMessage) async throws(AMQPError) {
        try await channel.publishUnconfirmed(copy)
    }

    func close(timeout: Duration) async {
        await connection.close(timeout: timeout)
    }
}
