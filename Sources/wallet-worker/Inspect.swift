import ArgumentParser
import Foundation
import WalletStore
import WalletWorker

extension WalletWorkerCommand {
    struct Inspect: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Show what the store holds about a card, a processed message or an installation (read-only).",
            discussion: """
                Prints one JSON object. Reads only: the SQLite file is opened read-only, the PostgreSQL session \
                is read-only, and a running worker is not disturbed. Exits 1 when the store has no such entry \
                (a message is recorded only once processed and acknowledged with a message_id, and forgotten \
                after --dedup-retention), 2 when the store cannot be read.
                """,
            subcommands: [Card.self, Message.self, Installation.self])

        struct StoreOptions: ParsableArguments {
            @Option(help: "Store: sqlite:PATH or postgres://USER:PASSWORD@HOST:PORT/DATABASE (env WALLET_STORE). Default: sqlite:wallet.sqlite")
            var store: String?
            @Option(help: "PostgreSQL statement timeout, e.g. 5s (env WALLET_STORE_STATEMENT_TIMEOUT). Default: 5s")
            var storeStatementTimeout: String?

            /// Opens the inspector, runs `body`, prints its object or says nothing was found.
            func show(_ what: String, _ body: (any StoreInspector) async throws(StoreError) -> [UInt8]?) async throws {
                let location = try storeSetting(store) ?? WorkerConfiguration().store
                let timeout = try setting(
                    storeStatementTimeout, "--store-statement-timeout", "WALLET_STORE_STATEMENT_TIMEOUT",
                    expected: "a duration like 5s", duration) ?? .seconds(5)
                let found: [UInt8]?
                do {
                    let inspector = try await StoreInspectors.open(location, statementTimeout: timeout)
                    do {
                        found = try await body(inspector)
                    } catch {
                        await inspector.close()
                        throw error
                    }
                    await inspector.close()
                } catch let error as StoreError {
                    progressLine("wallet-worker inspect: \(error)")
                    throw ExitCode(2)
                }
                guard let found else {
                    progressLine("wallet-worker inspect: no \(what) in \(location)")
                    throw ExitCode.failure
                }
                _ = try StandardOutput.write(found + [UInt8(ascii: "\n")])
            }
        }

        struct Card: AsyncParsableCommand {
            static let configuration = CommandConfiguration(
                abstract: "A card's state, payment keys and newest transaction records.")
            @Argument(help: "The digitalCardId.") var digitalCardId: String
            @Option(help: "Transaction records shown, newest first. Default: 20") var transactions = 20
            @OptionGroup var options: StoreOptions

            func run() async throws {
                guard transactions >= 0 else { throw ValidationError("--transactions must be 0 or more") }
                try await options.show("card \(digitalCardId)") { inspector throws(StoreError) in
                    try await inspector.card(digitalCardId, transactionLimit: transactions).map {
                        InspectionJSON.card($0, now: Date())
                    }
                }
            }
        }

        struct Message: AsyncParsableCommand {
            static let configuration = CommandConfiguration(
                abstract: "A processed message: when, its outcome, and the results it published (replayed on a redelivery).")
            @Argument(help: "The inbound message_id.") var messageId: String
            @OptionGroup var options: StoreOptions

            func run() async throws {
                try await options.show("processed message \(messageId)") { inspector throws(StoreError) in
                    try await inspector.message(messageId).map(InspectionJSON.message)
                }
            }
        }

        struct Installation: AsyncParsableCommand {
            static let configuration = CommandConfiguration(abstract: "A device installation: platform, tags, push channel.")
            @Argument(help: "The installationId.") var installationId: String
            @Flag(help: "Show the whole push channel (a device's push token); by default only its last four characters")
            var showPushChannel = false
            @OptionGroup var options: StoreOptions

            func run() async throws {
                try await options.show("installation \(installationId)") { inspector throws(StoreError) in
                    try await inspector.installation(installationId).map {
                        InspectionJSON.installation($0, showPushChannel: showPushChannel)
                    }
                }
            }
        }
    }
}
