import AMQPTransport
import Logging
import ServiceLifecycle
import UnixSignals
import WalletRouting
import WalletStore

/// The worker, assembled from a configuration: what `wallet-worker run` starts, and what tests build in-process.
///
/// Services stop in reverse order on SIGTERM/SIGINT: the worker drains first, then the operations endpoint,
/// so `/metrics` stays up during the drain. The group gives the drain `shutdownGracePeriod`.
public struct WorkerApplication: Sendable {
    public let worker: NotificationWorker
    public let operations: OperationsServer?
    public let metrics: WorkerMetrics
    public let health: WorkerHealth
    /// Exports the spans when tracing is on (`WorkerConfiguration.tracing`).
    private let tracing: TracingBackend?
    private let configuration: WorkerConfiguration
    private let logger: Logger

    /// Opens the store and checks the configuration; nothing touches the broker until `run()`.
    public static func build(configuration: WorkerConfiguration, logger: Logger) throws -> WorkerApplication {
        try configuration.validate()
        let store = try WalletStores.open(
            configuration.store, busyTimeout: configuration.storeBusyTimeout, poolSize: configuration.storePoolSize,
            statementTimeout: configuration.storeStatementTimeout,
            schemaMode: configuration.migratesStore ? .migrateWithoutIndexBuilds : .requireCurrent)
        for warning in (store as? SQLiteWalletStore)?.permissionWarnings ?? [] {
            logger.warning("store file was readable by other users", metadata: ["detail": "\(warning)"])
        }
        let metrics = WorkerMetrics()
        let tracing = try TracingBackend.make(configuration.tracing, metrics: metrics, logger: logger)
        if tracing != nil {
            logger.info(
                "tracing on: spans are exported over OTLP/HTTP",
                metadata: [
                    "protocol": "\(configuration.tracing.otlpProtocol)", "detail": "\(configuration.tracing.detail)",
                ])
        }
        let worker = try NotificationWorker(
            configuration: configuration, store: store, metrics: metrics, logger: logger, tracer: tracing?.tracer)
        let operations = configuration.httpPort.map {
            OperationsServer(
                host: configuration.httpHost, port: $0, health: worker.health, metrics: metrics, logger: logger)
        }
        return WorkerApplication(
            worker: worker, operations: operations, metrics: metrics, health: worker.health, tracing: tracing,
            configuration: configuration, logger: logger)
    }

    /// Runs until SIGTERM or SIGINT (or until the worker fails for good, which throws). The operations endpoint
    /// takes its port first: when it is taken, nothing starts (the only line is the failure's).
    public func run() async throws {
        try await operations?.listen()
        try await serviceGroup(signals: [.sigterm, .sigint]).run()
    }

    /// The service group; tests pass no signals and trigger graceful shutdown themselves.
    public func serviceGroup(signals: [UnixSignal]) -> ServiceGroup {
        var services: [ServiceGroupConfiguration.ServiceConfiguration] = []
        if let tracing {
            // First, so it stops last: the spans of the batches drained after SIGTERM are still exported.
            services.append(
                .init(
                    service: tracing.service, successTerminationBehavior: .gracefullyShutdownGroup,
                    failureTerminationBehavior: .gracefullyShutdownGroup))
        }
        if let operations {
            // A failure stops the worker the graceful way, finishing the batches in hand, and is what `run()`
            // throws; the default would cancel the worker mid-batch. (Its port is taken before the group starts.)
            services.append(
                .init(
                    service: operations, successTerminationBehavior: .gracefullyShutdownGroup,
                    failureTerminationBehavior: .gracefullyShutdownGroup))
        }
        services.append(
            .init(
                service: worker, successTerminationBehavior: .gracefullyShutdownGroup,
                failureTerminationBehavior: .gracefullyShutdownGroup))
        var group = ServiceGroupConfiguration(services: services, gracefulShutdownSignals: signals, logger: logger)
        group.maximumGracefulShutdownDuration = configuration.shutdownGracePeriod
        group.maximumCancellationDuration = .seconds(2)
        return ServiceGroup(configuration: group)
    }
}

/// The configuration is inconsistent; the message names the setting.
public struct ConfigurationError: Error, CustomStringConvertible {
    public var description: String
    public init(_ description: String) { self.description = description }
}

extension WorkerConfiguration {
    /// The ranges of the settings table (`Setting`), checked for a configuration however it was made: the
    /// commands check them before anything starts (a usage error, status 64, as a value that does not parse), and
    /// `WorkerApplication.build` again for a configuration made in code.
    public func validate() throws {
        _ = try AMQPURL(parsing: amqpURL)
        for entry in Setting.configurable { try entry.checkRange(of: self) }
        // The one range that depends on another setting.
        if let longestRetryDelay, longestRetryDelay < retryDelay { throw Setting.retryDelayMax.outOfRange }
    }
}
