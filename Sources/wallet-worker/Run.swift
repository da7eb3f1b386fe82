import ArgumentParser
import Foundation
import Logging
import WalletWorker

extension WalletWorkerCommand {
    struct Run: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Declare the topology, then consume and process until SIGTERM or SIGINT (the default).")

        @OptionGroup var broker: BrokerOptions
        @OptionGroup var worker: WorkerOptions
        @OptionGroup var routing: RoutingOptions
        @OptionGroup var logging: LoggingOptions

        func run() async throws {
            var configuration = WorkerConfiguration()
            try broker.apply(to: &configuration)
            try worker.apply(to: &configuration)
            try routing.apply(to: &configuration)
            try logging.apply(to: &configuration)
            do {
                configuration.tracing = try TracingSettings(environment: ProcessInfo.processInfo.environment)
            } catch {
                throw ValidationError(error.description)
            }
            WorkerLogging.bootstrap(format: configuration.logFormat, level: configuration.logLevel)
            AllocatorTuning.apply()
            let logger = Logger(label: "wallet-worker")
            do {
                let application = try WorkerApplication.build(configuration: configuration, logger: logger)
                logger.info("starting", metadata: [
                    "store": "\(configuration.store)", "prefetch": "\(configuration.prefetch)",
                    "concurrency": "\(configuration.concurrency)",
                    "ordered_shards": "\(configuration.topology.orderedShards)",
                    "work_queue": "\(configuration.topology.workQueue)",
                ])
                try await application.run()
            } catch {
                logger.critical("wallet-worker failed", metadata: ["error": "\(error)"])
                throw ExitCode.failure
            }
        }
    }

    struct Declare: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Declare the exchanges and queues of the topology, then exit (for deploy jobs).")

        @OptionGroup var broker: BrokerOptions
        @OptionGroup var logging: LoggingOptions

        func run() async throws {
            var configuration = WorkerConfiguration()
            try broker.apply(to: &configuration)
            try logging.apply(to: &configuration)
            WorkerLogging.bootstrap(format: configuration.logFormat, level: configuration.logLevel)
            let logger = Logger(label: "wallet-worker")
            do {
                try await TopologyDeclaration.declare(configuration: configuration, logger: logger)
            } catch {
                logger.critical("declare failed", metadata: ["error": "\(error)"])
                throw ExitCode.failure
            }
        }
    }
}
