import ArgumentParser
import WalletWorker

/// The thin entry point: parse flags (then environment variables, then defaults) and hand over to `WalletWorker`.
@main
struct WalletWorkerCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "wallet-worker",
        abstract:
            "Processes digital-wallet notifications from RabbitMQ: route, store, publish with confirms, acknowledge.",
        discussion: "Every option can also be set by the environment variable named in its help; a flag wins.",
        version: WorkerVersion.description,
        subcommands: [
            Run.self, Route.self, Declare.self, Migrate.self, Inspect.self, DeadLetters.self, Settings.self,
            Metrics.self,
        ],
        defaultSubcommand: Run.self
    )
}
