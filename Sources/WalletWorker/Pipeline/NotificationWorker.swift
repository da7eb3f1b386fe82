import AMQPTransport
import Foundation
import Logging
import ServiceLifecycle
import Tracing
import WalletRouting
import WalletStore

/// The worker as a service: `--concurrency` pipelines consuming the work queue (or, in the ordered mode, one
/// pipeline per shard plus one on the work queue), plus the deduplication retention sweep, until graceful shutdown
/// (SIGTERM/SIGINT through the `ServiceGroup`).
///
/// What happens to each delivery is decided by one `DeliveryLifecycle` for the process, run by a `LifecycleDriver`;
/// each `Pipeline` executes its sessions' actions. On shutdown every work-queue pipeline cancels its consumer and
/// finishes what it received (store, publish, confirms, acknowledgement); a shard pipeline finishes its batch in
/// hand and hands the rest back to the broker; then the store is closed and `run()` returns.
public final class NotificationWorker: Service {
    public let health: WorkerHealth
    public let metrics: WorkerMetrics
    private let configuration: WorkerConfiguration
    private let store: any WalletStore
    private let connectionConfiguration: AMQPConnectionConfiguration
    /// The broker, through the executor's seam: RabbitMQ, or a scripted broker in the in-process tests.
    private let broker: any BrokerConnector
    /// Every timer, backoff and deadline of the worker: the machine's clock, or one turned by hand in tests.
    private let clock: WorkerClock
    private let stop: StopSignal
    private let logger: Logger
    /// Spans of every message when tracing is on; nil (the default) makes none.
    private let tracer: (any Tracer)?

    public convenience init(
        configuration: WorkerConfiguration, store: any WalletStore, metrics: WorkerMetrics, logger: Logger,
        tracer: (any Tracer)? = nil
    ) throws {
        let connection = try configuration.connectionConfiguration()
        self.init(
            configuration: configuration, connection: connection,
            broker: AMQPBrokerConnector(
                connection: connection, configuration: configuration, metrics: metrics, logger: logger),
            clock: .continuous, store: store, metrics: metrics, logger: logger, tracer: tracer)
    }

    /// A worker on the broker and clock given: the in-process tests' scripted broker and hand-turned clock.
    init(
        configuration: WorkerConfiguration, connection: AMQPConnectionConfiguration, broker: any BrokerConnector,
        clock: WorkerClock, store: any WalletStore, metrics: WorkerMetrics, logger: Logger, tracer: (any Tracer)? = nil
    ) {
        self.configuration = configuration
        self.tracer = tracer
        self.store = store
        self.metrics = metrics
        self.logger = logger
        self.health = WorkerHealth(pipelines: configuration.consumedQueues.count)
        self.connectionConfiguration = connection
        self.broker = broker
        self.clock = clock
        self.stop = StopSignal(clock: clock)
    }

    public func run() async throws {
        let router = NotificationRouter(settings: configuration.routingSettings)
        let queues = configuration.consumedQueues
        var lifecycle = DeliveryLifecycle.Configuration(
            topology: configuration.topology, retry: configuration.retrySchedule)
        lifecycle.reconnectBackoff = configuration.reconnectBackoff
        lifecycle.giveBackAfter = configuration.storeHoldLimit
        lifecycle.confirmTimeout = configuration.confirmTimeout
        lifecycle.consumerReleaseBound = ConsumerRelease.bound(heartbeat: configuration.heartbeat)
        lifecycle.resultsKillSwitch = ResultsKillSwitch.Settings(
            window: configuration.resultsPauseWindow, activation: configuration.resultsPauseActivation,
            tripRatio: configuration.resultsPauseRatio, quietActivation: configuration.resultsPauseQuietActivation)
        let driver = LifecycleDriver(
            DeliveryLifecycle(configuration: lifecycle, queues: queues, seed: .random(in: .min ... .max)),
            pipelines: queues.count, clock: clock)
        let storage = BatchStorage(store: store, router: router, metrics: metrics, clock: clock, logger: logger)
        let tracing = tracer.map {
            MessageTracing(
                tracer: $0, detail: configuration.tracing.detail, queues: queues.map(\.name),
                store: configuration.store,
                broker: connectionConfiguration.url)
        }
        let stopTally = StopTally()
        let storms = WarningStorms(interval: configuration.warningSummaryInterval, clock: clock)
        let pipelines = queues.enumerated().map { index, queue in
            var logger = logger
            logger[metadataKey: "pipeline"] = "\(index)"
            return Pipeline(
                index: index, queue: queue, configuration: configuration, broker: broker, storage: storage,
                driver: driver,
                observer: LifecycleObserver(
                    metrics: metrics, health: health, logger: logger, tracing: tracing, stopTally: stopTally,
                    storms: storms),
                metrics: metrics, stop: stop, clock: clock, logger: logger)
        }
        let observer = LifecycleObserver(
            metrics: metrics, health: health, logger: logger, tracing: tracing, stopTally: stopTally, storms: storms)
        metrics.storeAvailable.set(1.0)
        if let sharded = configuration.topology.sharded, configuration.concurrency > 1 {
            logger.notice(
                "--concurrency does not apply in the ordered mode: one pipeline per shard",
                metadata: ["shards": "\(sharded.count)"])
        }
        do {
            // Cancellation (ServiceLifecycle's, once the grace period is over) stops the loops too; the deliveries
            // not settled by then are left unacknowledged for the broker to redeliver.
            try await withTaskCancellationHandler {
                try await withGracefulShutdownHandler {
                    try await self.runUntilStopped(pipelines, driver: driver, storage: storage, observer: observer)
                } onGracefulShutdown: {
                    self.logger.info("shutting down: finishing the batches in hand")
                    self.health.stopping()
                    stopTally.stopRequested()
                    self.stop.stop()
                    driver.handle { $0.stopRequested(now: $1) }
                }
            } onCancel: {
                stopTally.stopRequested()
                self.health.stopping()
                self.stop.stop()
                driver.handle { $0.stopRequested(now: $1) }
            }
        } catch {
            health.failed("\(error)")
            // Not logged here: whoever runs the worker logs the failure once, with the exit status it gives.
            logger.debug("the worker stopped", metadata: ["error": "\(error)"])
            await store.close()
            throw error
        }
        await store.close()
        if Task.isCancelled {
            logger.warning("stopped by cancellation: the deliveries not yet acknowledged are redelivered by the broker")
        } else {
            logger.info("\(stopTally.stoppedLine)")
        }
    }

    /// The pipelines, the lifecycle's own timers and store checks, the retention sweep and the queue depth polls,
    /// once the broker took the worker's login and the store is ready, until every pipeline has stopped. Throws the
    /// failure that stopped them, if one did (`failWorker`).
    private func runUntilStopped(
        _ pipelines: [Pipeline], driver: LifecycleDriver, storage: BatchStorage, observer: LifecycleObserver
    ) async throws {
        try await BrokerLogin.check(
            broker, url: "\(connectionConfiguration.url)", backoff: configuration.reconnectBackoff, stop: stop,
            logger: logger)
        try await prepareStore()
        guard !stop.isStopped else { return }
        await withTaskGroup(of: Void.self) { group in
            group.addTask {
                await driver.run(
                    checkStore: storage.check, noteResultDelivery: storage.noteResultDelivery, observe: observer.observe
                ) {
                    // A failure no retry fixes: the pipelines finish what they committed and stop.
                    self.health.stopping()
                    self.stop.stop()
                }
            }
            group.addTask { await self.expireProcessedMessages() }
            group.addTask { await self.summariseWarningStorms(observer.storms) }
            if configuration.queuePollInterval != nil {
                let monitor = QueueDepthMonitor(
                    configuration: configuration, connectionConfiguration: connectionConfiguration, metrics: metrics,
                    stop: stop, logger: logger)
                group.addTask { await monitor.run() }
            }
            group.addTask {
                await withDiscardingTaskGroup { pipelineGroup in
                    for pipeline in pipelines {
                        pipelineGroup.addTask { await pipeline.run() }
                    }
                }
                // Every pipeline has stopped.
                self.stop.stop()
                driver.finish()
            }
            driver.handle { machine, _ in machine.start() }
            await group.waitForAll()
        }
        observer.storms.flush(to: logger, all: true)
        if let failure = driver.workerFailure { throw failure }
    }

    /// Waits until the store can be used before consuming anything: a permanent failure (credentials, a missing
    /// database, a schema newer than this build) stops the worker; a transient one (the database not up yet) is
    /// retried with the reconnect backoff until it passes or the worker is asked to stop.
    private func prepareStore() async throws {
        var attempt = 0
        var generator = SystemRandomNumberGenerator()
        while !stop.isStopped {
            do {
                try await store.prepare()
                return
            } catch {
                guard error.isTransient else { throw StoreFailure(error) }
                attempt += 1
                logger.warning("store unavailable at start; trying again", metadata: ["error": "\(error)"])
                await stop.sleep(for: configuration.reconnectBackoff.delay(attempt: attempt, using: &generator))
            }
        }
    }

    /// Writes the count of each warning storm that ended before its next line, once per interval, until the stop
    /// (`runUntilStopped` writes what is left once every pipeline has stopped).
    private func summariseWarningStorms(_ storms: WarningStorms) async {
        while !stop.isStopped {
            await stop.sleep(for: storms.interval)
            storms.flush(to: logger)
        }
    }

    /// Forgets processed message ids older than the retention, at start and then every tenth of the retention
    /// (at most every 10 minutes).
    private func expireProcessedMessages() async {
        let retention = configuration.deduplicationRetention
        let period = min(retention / 10, .seconds(600))
        while !stop.isStopped {
            let cutoff = Date(timeIntervalSinceNow: -retention.secondsValue)
            do {
                let expired = try await store.expireProcessedMessages(recordedBefore: cutoff)
                if expired > 0 {
                    logger.info("expired processed message ids", metadata: ["count": "\(expired)"])
                }
            } catch {
                if stop.isStopped { return }  // cancelled by the stop, not a store problem
                logger.warning("could not expire processed message ids", metadata: ["error": "\(error)"])
            }
            await stop.sleep(for: period)
        }
    }
}

extension WorkerConfiguration {
    /// The transport's settings for every connection the worker opens, and the operator tools' (the executable
    /// gives them these).
    public func connectionConfiguration() throws -> AMQPConnectionConfiguration {
        var connection = AMQPConnectionConfiguration(url: try AMQPURL(parsing: amqpURL))
        connection.heartbeat = heartbeat
        connection.tls = tls
        return connection
    }
}
