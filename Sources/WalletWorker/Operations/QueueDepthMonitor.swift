import AMQPTransport
import Foundation
import Logging

/// Asks the broker, every `--queue-poll-interval`, how many messages wait in the queues the worker consumes and
/// feeds: the work queue (or the shards), every retry level and the dead-letter queue. A stalled worker then shows
/// as a backlog beside a `wallet_last_processed_timestamp_seconds` that stops moving (the `WalletStalled` alert),
/// and an autoscaler or a dashboard sees the same numbers KEDA does.
///
/// A passive `queue.declare` per queue, on a connection of its own (it consumes nothing, so a stuck pipeline cannot
/// hold it up). AMQP 0-9-1 reports ready messages and consumers only: the age of the oldest ready message is not
/// something the protocol tells (RabbitMQ's management API does, for classic queues); `wallet_processing_lag_seconds`
/// and the last-processed timestamp cover it from the worker's side. A failed poll is logged once and tried again
/// at the next interval; a queue the broker does not have (404) is left out until the next poll.
struct QueueDepthMonitor: Sendable {
    var queues: [(name: String, role: WorkerMetrics.QueueRole)]
    var interval: Duration
    var connectionConfiguration: AMQPConnectionConfiguration
    var metrics: WorkerMetrics
    var stop: StopSignal
    var logger: Logger

    init(
        configuration: WorkerConfiguration, connectionConfiguration: AMQPConnectionConfiguration,
        metrics: WorkerMetrics, stop: StopSignal, logger: Logger
    ) {
        var queues: [(String, WorkerMetrics.QueueRole)] = []
        var seen = Set<String>()
        func add(_ name: String, _ role: WorkerMetrics.QueueRole) {
            if seen.insert(name).inserted { queues.append((name, role)) }
        }
        for consumed in configuration.consumedQueues { add(consumed.name, .work) }
        for consumed in configuration.consumedQueues {
            for retry in configuration.retrySchedule.queues(consumed.retryQueue) { add(retry.name, .retry) }
        }
        add(configuration.topology.deadLetterQueue, .deadLetter)
        self.queues = queues
        self.interval = configuration.queuePollInterval ?? .seconds(15)
        self.connectionConfiguration = connectionConfiguration
        self.metrics = metrics
        self.stop = stop
        self.logger = logger
    }

    /// Polls until the stop signal fires.
    func run() async {
        var connection: AMQPConnection?
        var channel: AMQPChannel?
        var failing = false
        while !stop.isStopped {
            do {
                if connection == nil {
                    var configuration = connectionConfiguration
                    configuration.connectionName = "wallet-worker \(ProcessInfo.processInfo.hostName) queue depths"
                    configuration.failureLogLevel = .debug
                    connection = try await AMQPConnection.connect(configuration: configuration, logger: logger)
                }
                for (name, role) in queues where !stop.isStopped {
                    if channel == nil { channel = try await connection!.openChannel() }
                    do {
                        let status = try await channel!.queueStatus(name)
                        metrics.recordQueueDepth(
                            queue: name, role: role, ready: status.messageCount, consumers: status.consumerCount)
                    } catch  where error.code == .channelClosedByBroker {
                        // 404: not declared (yet), or its node is down; the channel is gone with it.
                        channel = nil
                    }
                }
                if failing { logger.info("queue depths readable again") }
                failing = false
            } catch {
                if !failing {
                    logger.warning(
                        "could not read the queue depths; trying again",
                        metadata: [
                            "error": "\(error)", "in": "\(DurationText.format(interval))",
                        ])
                }
                failing = true
                channel = nil
                await connection?.close(timeout: .seconds(2))
                connection = nil
            }
            await stop.sleep(for: interval)
        }
        await connection?.close(timeout: .seconds(2))
    }
}
