import Foundation
import Logging
import ServiceLifecycle
import TestSupport
import Tracing

@testable import AMQPTransport
@testable import WalletWorker

/// The whole worker in this process, on a scripted broker (`ScriptedBroker`), a clock turned by hand (`ManualClock`)
/// and an in-memory store that a test can take out (`ScriptedStore`): the executor's decisions, tested in
/// milliseconds, with no socket and no sleep.
final class InProcessWorker: Sendable {
    let broker = ScriptedBroker()
    let clock = ManualClock()
    let store = ScriptedStore()
    let metrics = WorkerMetrics()
    let configuration: WorkerConfiguration
    let worker: NotificationWorker
    private let group: ServiceGroup
    private let task: Task<Void, any Error>

    /// Quiet unless a test asks: expected failures are logged at warning.
    static let logger: Logger = {
        var logger = Logger(label: "in-process-worker")
        logger.logLevel = .critical
        return logger
    }()

    /// Starts a worker with the test's settings; `configure` sees the defaults, less the operations server and the
    /// queue depth polls (both real sockets). `beforeStart` scripts the broker before the worker first calls it;
    /// `logger` is the worker's (quiet by default); with `tracer`, the worker traces its messages through it.
    init(
        configure: (inout WorkerConfiguration) -> Void = { _ in }, beforeStart: (ScriptedBroker) -> Void = { _ in },
        logger: Logger = InProcessWorker.logger, tracer: (any Tracer)? = nil
    ) {
        beforeStart(broker)
        var configuration = WorkerConfiguration()
        configuration.httpPort = nil
        configuration.queuePollInterval = nil
        configuration.store = .memory
        // The warning storms' summary timer, out of the way of the timers a test steps through (`advanceToTimer`);
        // a test of the summaries sets it back.
        configuration.warningSummaryInterval = .seconds(86_400)
        configure(&configuration)
        self.configuration = configuration
        let connection = AMQPConnectionConfiguration(url: try! AMQPURL(parsing: configuration.amqpURL))
        worker = NotificationWorker(
            configuration: configuration, connection: connection, broker: broker, clock: WorkerClock(clock),
            store: store, metrics: metrics, logger: logger, tracer: tracer)
        var service = ServiceGroupConfiguration(
            services: [.init(service: worker)], gracefulShutdownSignals: [], logger: Self.logger)
        // No wall clock here. `WorkerApplication` gives the drain `shutdownGracePeriod` and then 2 s to return once
        // cancelled, past which ServiceLifecycle stops the process with a fatal error: in a test process that would
        // take every other test down with it (one did, on a loaded runner). A test ends the grace period itself
        // (`endGracePeriod`), and a worker that does not return is reported by its suite's time limit.
        service.maximumGracefulShutdownDuration = nil
        service.maximumCancellationDuration = nil
        let group = ServiceGroup(configuration: service)
        self.group = group
        task = Task { try await group.run() }
    }

    var health: WorkerHealth { worker.health }

    /// Waits until every pipeline has opened a session (and so consumes).
    func waitUntilConsuming(sessions: Int = 1) async {
        await broker.waitForSessions(sessions)
    }

    /// Graceful shutdown (SIGTERM): the worker finishes what it holds; returns when `run()` has.
    func stop() async throws {
        await group.triggerGracefulShutdown()
        try await task.value
    }

    /// Graceful shutdown (SIGTERM) without waiting for its end; `stop()` or `endGracePeriod()` waits.
    func beginStop() async {
        await group.triggerGracefulShutdown()
    }

    /// The grace period is over: the worker is cancelled, as ServiceLifecycle does past `shutdownGracePeriod`.
    /// Returns when `run()` has.
    func endGracePeriod() async throws {
        task.cancel()
        try await task.value
    }

    /// Waits for the worker's `run()` to end by itself (a failure no retry fixes), and returns its error.
    func failure() async -> (any Error)? {
        do {
            try await task.value
            return nil
        } catch {
            return error
        }
    }

    /// A metric's value, summed over the series whose labels contain every one of `labels` (`name="value"`).
    func metric(_ name: String, labels: [String] = []) -> Double {
        metricValue(in: String(decoding: metrics.exposition(), as: UTF8.self), name, labels: labels)
    }
}
