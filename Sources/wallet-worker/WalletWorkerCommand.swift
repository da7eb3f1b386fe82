import ArgumentParser
import WalletWorker

@main
struct WalletWorkerCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "wallet-worker")
    func run() async throws {}
}
