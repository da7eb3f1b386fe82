import AMQPTransport
import Foundation
import Logging

/// One consume-process-publish loop over one queue, with its own two connections: deliveries and
/// acknowledgements on one, results on the other, so a publish that waits on a congested socket never delays
/// acknowledgements. The next batch is stored and published while earlier ones wait for their confirms.
/// It reconnects after any broker failure, re-declaring the topology, until the stop signal fires.
struct Pipeline: Sendable {
    var index: Int
    /// The work queue, or a shard of the ordered mode.
    var queue: ConsumedQueue
    var configuration: WorkerConfiguration
    var connectionConfiguration: AMQPConnectionConfiguration
    var processor: BatchProcessor
    var health: WorkerHealth
    var metrics: WorkerMetrics
    var stop: StopSignal
    var logger: Logger

    /// Runs sessions until the stop signal fires. Throws only what reconnecting cannot fix.
    func run() async throws {
        var attempt = 0
        var generator = SystemRandomNumberGenerator()
        while !stop.isStopped {
            let consumed: Bool
            do {
                consumed = try await runSession()
                if stop.isStopped { return }
                logger.warning("the consumer ended without a shutdown; starting a new session")
            } catch let failure as SessionFailure {
                // Anything else (a topology conflict, a permanent store error) is not fixed by reconnecting.
                if Task.isCancelled {
                    logger.warning("cancelled: the deliveries not yet acknowledged are redelivered by the broker")
                    return
                }
                consumed = failure.consumed
                if stop.isStopped, failure.consumed {
                    // The drain after SIGTERM lost its connection: what was not acknowledged is redelivered.
                    logger.warning("connection lost while draining", metadata: ["error": "\(failure.error)"])
                    return
                }
                logger.error("broker session failed", metadata: ["error": "\(failure.error)"])
                metrics.recordSessionFailure(failure.error)
            }
            attempt = consumed ? 1 : attempt + 1
            metrics.reconnects.increment()
            let delay = configuration.reconnectBackoff.delay(attempt: attempt, using: &generator)
            logger.info("reconnecting", metadata: ["in": "\(DurationText.format(delay))", "attempt": "\(attempt)"])
            await stop.sleep(for: delay)
        }
    }

    /// A session that failed; `consumed` tells whether it got as far as consuming (resets the backoff).
    struct SessionFailure: Error {
        var error: any Error
        var consumed: Bool
    }

    /// Connects, declares, consumes and processes until the consumer ends; returns whether it consumed.
    private func runSession() async throws -> Bool {
        var connections: [AMQPConnection] = []
        var consuming = false
        // A malformed reply-to address ends the reply connection (541): expected, and logged by the publisher.
        let replies = DirectReplyPublisher(metrics: metrics, logger: logger) {
            try await connect(role: "reply", failureLogLevel: .notice)
        }
        let inFlight = InFlightBatches()
        let inFlightGauge = metrics.trackInFlight { inFlight.all.reduce(0) { $0 + $1.count } }
        defer { inFlightGauge.end() }
        do {
            let consumeConnection = try await connect(role: "consume")
            connections.append(consumeConnection)
            let publishConnection = try await connect(role: "publish")
            connections.append(publishConnection)

            if configuration.declaresTopology {
                try await configuration.topology.declare(
                    on: consumeConnection, retry: configuration.retrySchedule, logger: logger, metrics: metrics)
            }

            let consume = try await consumeConnection.openChannel()
            try await consume.setPrefetch(count: configuration.prefetch)
            let publish = try await publishConnection.openChannel()
            try await publish.enableConfirms()
            // Stopped while connecting (SIGTERM, or the operations endpoint failing at start): take nothing.
            guard !stop.isStopped else {
                await close(connections, replies: replies)
                return false
            }
            // The content header's body size is checked before the body is read. A body somewhat over the limit is
            // read so the worker can dead-letter it itself with `x-worker-error` (CONTRACT §8); one over the
            // read ceiling is never buffered (see `DeliveryPlan`'s `rejectedToBroker`).
            let consumer = try await consume.consume(
                queue: queue.name, consumerTag: consumerTag,
                maximumBodyBytes: configuration.routing.bodyReadCeiling)

            consuming = true
            health.pipelineStartedConsuming()
            metrics.consumingPipelines.increment()
            defer {
                health.pipelineStoppedConsuming()
                metrics.consumingPipelines.decrement()
            }
            logger.info("consuming", metadata: ["queue": "\(queue.name)"])

            // On SIGTERM: a work queue pipeline stops the broker sending and finishes everything it received;
            // a shard pipeline finishes the batch in hand and closes the channel, handing the rest over in order.
            let handover = queue.isShard ? ShardHandover() : nil
            let handler = stop.onStop {
                if let handover {
                    if handover.requestStop() { Task { try? await consume.close() } }
                } else {
                    Task { try? await consume.cancel(consumerTag: consumer.tag) }
                }
            }
            defer { stop.removeHandler(handler) }

            try await withThrowingTaskGroup(of: Void.self) { group in
                group.addTask {
                    if let handover {
                        for try await batch in consumer {
                            guard handover.beginBatch() else { break }
                            // One batch at a time here: a suspect segment is alone in flight as it is.
                            for segment in processor.poisonGuard.segments(batch) {
                                inFlight.begin(segment.deliveries)
                                try await processor.process(
                                    segment.deliveries, consumeChannel: consume, publishChannel: publish,
                                    replies: replies)
                                inFlight.end(segment.deliveries)
                            }
                            if handover.endBatch() { break }
                        }
                    } else {
                        try await processOverlapped(
                            consumer, consume: consume, publish: publish, replies: replies, inFlight: inFlight)
                    }
                }
                group.addTask {
                    try await watch(consumeConnection, role: "consume")
                }
                group.addTask {
                    try await watch(publishConnection, role: "publish")
                }
                // The consumer finishing ends the session; a watcher only finishes by throwing.
                // A shard's channel is closed before anything cancels its consumer (cancelling the consumer task,
                // closing the connection): see `ShardHandover`.
                do {
                    try await group.next()
                } catch {
                    if handover != nil { try? await consume.close() }
                    throw error
                }
                if handover != nil { try? await consume.close() }
                group.cancelAll()
            }
        } catch {
            processor.poisonGuard.recordFailure(inFlight: inFlight.all, error: error)
            processor.tracing?.open.failAll(error)
            await close(connections, replies: replies)
            if error is TopologyError || error is BatchProcessor.FatalStoreError { throw error }
            throw SessionFailure(error: error, consumed: consuming)
        }
        await close(connections, replies: replies)
        return consuming
    }

    /// Stores and publishes the next batch while earlier ones wait for their publisher confirms: the broker's
    /// confirm latency, not the worker, sets the pace of a strictly sequential loop. The first stage stores each
    /// batch and sends its results, in order; the second waits for the confirms and acknowledges, in the same
    /// order. The prefetch bounds what is in flight. A failure of either stage ends both; after the consumer ends
    /// (a drain), every batch in flight is finished. A shard pipeline does not overlap: its handover finishes
    /// exactly the batch in hand.
    private func processOverlapped(
        _ consumer: AMQPConsumer, consume: AMQPChannel, publish: AMQPChannel, replies: DirectReplyPublisher,
        inFlight: InFlightBatches
    ) async throws {
        let (published, publishedInput) = AsyncStream<BatchProcessor.PublishedBatch>.makeStream()
        try await withThrowingTaskGroup(of: Void.self) { stages in
            stages.addTask {
                defer { publishedInput.finish() }
                for try await deliveries in consumer where !deliveries.isEmpty {
                    for segment in processor.poisonGuard.segments(deliveries) {
                        // A suspect is processed with nothing else in flight, so a failure meanwhile is its own.
                        if segment.isSuspect { try await inFlight.waitUntilEmpty() }
                        inFlight.begin(segment.deliveries)
                        publishedInput.yield(
                            try await processor.storeAndPublish(segment.deliveries, on: publish, replies: replies))
                        if segment.isSuspect { try await inFlight.waitUntilEmpty() }
                    }
                }
            }
            stages.addTask {
                for await batch in published {
                    try await processor.acknowledge(batch, consumeChannel: consume, publishChannel: publish)
                    inFlight.end(batch.deliveries)
                }
            }
            while try await stages.next() != nil {}
        }
    }

    /// Logs blocked and unblocked; throws when the connection ends under the session.
    private func watch(_ connection: AMQPConnection, role: String) async throws {
        var blocked = false
        defer { if blocked { metrics.blockedConnections.decrement() } }
        for await event in connection.events {
            switch event {
            case .blocked(let reason):
                logger.warning("the broker blocked the connection (resource alarm)",
                               metadata: ["connection": "\(role)", "reason": "\(reason)"])
                if !blocked { metrics.blockedConnections.increment() }
                blocked = true
            case .unblocked:
                logger.notice("the broker unblocked the connection", metadata: ["connection": "\(role)"])
                if blocked { metrics.blockedConnections.decrement() }
                blocked = false
            case .closed(let error):
                throw error ?? AMQPError(code: .closed, message: "the \(role) connection closed")
            }
        }
    }

    private func connect(role: String, failureLogLevel: Logger.Level = .error) async throws -> AMQPConnection {
        var configuration = connectionConfiguration
        configuration.connectionName = "wallet-worker \(ProcessInfo.processInfo.hostName) #\(index) \(role)"
        configuration.failureLogLevel = failureLogLevel
        return try await AMQPConnection.connect(configuration: configuration, logger: logger)
    }

    /// Closes the session's connections. Cancelled (the shutdown grace period is over), it does not wait for the
    /// broker's answer, which a blocked connection (a resource alarm) would never send: the sockets are shut.
    private func close(_ connections: [AMQPConnection], replies: DirectReplyPublisher) async {
        let timeout: Duration = Task.isCancelled ? .milliseconds(100) : .seconds(5)
        await replies.close(timeout: timeout)
        for connection in connections {
            await connection.close(timeout: timeout)
        }
    }

    private var consumerTag: String {
        "wallet-worker.\(ProcessInfo.processInfo.hostName).\(ProcessInfo.processInfo.processIdentifier).\(index)"
    }
}
