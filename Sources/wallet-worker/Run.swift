import ArgumentParser
import Foundation
import Logging
import WalletWorker

extension WalletWorkerCommand {
    struct Run: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Declare the topology, then consume and process until SIGTERM or SIGINT (the default).",
            discussion: """
                Every option can be set by the environment variable its help names (a flag wins), or by a file \
                holding the value named by that variable with _FILE appended (AMQP_URL_FILE=/run/secrets/amqp-url, \
                WALLET_STORE_FILE=...; a trailing newline is dropped; the variable wins over its _FILE). \
                Durations: 250ms, 5s, 10m, 24h (a bare number is seconds).

                Tracing (off by default) is set by the OpenTelemetry variables, which have no flag and no _FILE \
                form: OTEL_TRACES_EXPORTER=otlp, OTEL_EXPORTER_OTLP_ENDPOINT (default http://localhost:4318) or \
                OTEL_EXPORTER_OTLP_TRACES_ENDPOINT, OTEL_EXPORTER_OTLP_PROTOCOL or OTEL_EXPORTER_OTLP_TRACES_PROTOCOL \
                (http/protobuf or http/json), \
                OTEL_EXPORTER_OTLP_HEADERS (k=v,k2=v2, e.g. a collector's token; never logged), \
                OTEL_EXPORTER_OTLP_COMPRESSION or OTEL_EXPORTER_OTLP_TRACES_COMPRESSION (none; gzip is not done, \
                with a warning), OTEL_EXPORTER_OTLP_TIMEOUT, OTEL_SERVICE_NAME, OTEL_RESOURCE_ATTRIBUTES, OTEL_TRACES_SAMPLER and \
                OTEL_TRACES_SAMPLER_ARG, OTEL_BSP_SCHEDULE_DELAY, OTEL_BSP_MAX_QUEUE_SIZE, \
                OTEL_BSP_MAX_EXPORT_BATCH_SIZE, OTEL_BSP_EXPORT_TIMEOUT, OTEL_SDK_DISABLED. Which spans a message makes \
                (env WALLET_TRACE_DETAIL): message, one span per message (the default); full, also the store and \
                publish spans.

                At start the worker logs in to the broker once: a refused login or vhost, or a TLS certificate that \
                does not verify, stops it (status 2); an unreachable broker is waited for. Later refusals are \
                retried and counted (wallet_broker_login_refusals_total).

                \(ExitStatus.helpText)
                """)

        @OptionGroup var broker: BrokerOptions
        @OptionGroup var worker: WorkerOptions
        @OptionGroup var routing: RoutingOptions
        @OptionGroup var logging: LoggingOptions

        /// Checked when parsed, so that a setting that does not parse or is out of range is said with `run`'s usage.
        func validate() throws {
            _ = try settings()
        }

        /// The configuration the options give (each flag, else its variable, else its `_FILE`, else the default),
        /// before the `OTEL_*` variables.
        func settings() throws -> WorkerConfiguration {
            var configuration = WorkerConfiguration()
            try broker.apply(to: &configuration)
            try worker.apply(to: &configuration)
            try routing.apply(to: &configuration)
            try logging.apply(to: &configuration)
            return try configuration.validatedAsUsage()
        }

        func run() async throws {
            var configuration = try settings()
            do {
                configuration.tracing = try TracingSettings(environment: ProcessInfo.processInfo.environment)
            } catch {
                throw ValidationError(error.description)
            }
            WorkerLogging.bootstrap(
                format: configuration.logFormat, level: configuration.logLevel,
                secrets: SecretRedaction.of(configuration, environment: ProcessInfo.processInfo.environment))
            AllocatorTuning.apply()
            let logger = Logger(label: "wallet-worker")
            let application: WorkerApplication
            do {
                application = try WorkerApplication.build(configuration: configuration, logger: logger)
            } catch {
                // An exporter this build lacks, the store's settings refused when it opens: usage as well.
                let status = error is ConfigurationError ? ExitStatus.usage : ExitStatus.of(error)
                logger.critical(
                    "wallet-worker failed", metadata: ["error": "\(error)", "exit_status": "\(status.rawValue)"])
                throw ExitCode(status.rawValue)
            }
            do {
                logger.info(
                    "starting",
                    metadata: [
                        "version": "\(WorkerVersion.current)", "store": "\(configuration.store)",
                        "prefetch": "\(configuration.prefetch)",
                        "concurrency": "\(configuration.concurrency)",
                        "ordered_shards": "\(configuration.topology.orderedShards)",
                        "work_queue": "\(configuration.topology.workQueue)",
                    ])
                try await application.run()
            } catch {
                let status = ExitStatus.of(error)
                logger.critical(
                    "wallet-worker failed", metadata: ["error": "\(error)", "exit_status": "\(status.rawValue)"])
                throw ExitCode(status.rawValue)
            }
        }
    }

    struct Declare: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Declare the exchanges and queues of the topology, then exit (for deploy jobs).",
            discussion: """
                Takes the broker and topology options of run (and their variables, and _FILE forms). Exits 1 \
                when the broker refuses a declaration (406: it exists with other arguments; 403: no configure \
                permission) or a retry or dead-letter queue could not be declared now.

                \(ExitStatus.helpText)
                """)

        @OptionGroup var broker: BrokerOptions
        @OptionGroup var logging: LoggingOptions

        func run() async throws {
            var configuration = WorkerConfiguration()
            try broker.apply(to: &configuration)
            try logging.apply(to: &configuration)
            configuration = try configuration.validatedAsUsage()
            WorkerLogging.bootstrap(
                format: configuration.logFormat, level: configuration.logLevel,
                secrets: SecretRedaction.of(configuration, environment: ProcessInfo.processInfo.environment))
            let logger = Logger(label: "wallet-worker")
            do {
                try await TopologyDeclaration.declare(configuration: configuration, logger: logger)
            } catch {
                let status = ExitStatus.of(error)
                logger.critical("declare failed", metadata: ["error": "\(error)", "exit_status": "\(status.rawValue)"])
                throw ExitCode(status.rawValue)
            }
        }
    }
}
