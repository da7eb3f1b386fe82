import ArgumentParser
import Foundation
import WalletOperatorTools
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
                after --dedup-retention; a rejected message is never recorded: \
                `wallet-worker dead-letters show --message-id ID` shows it), 2 when the store cannot be read. \
                A message the worker dead-lettered after its effects were committed (its results refused until its \
                retries ran out) is recorded with its outcome, and `undelivered` says when it was dead-lettered and why: \
                its results were never delivered, and a replay of its dead letter publishes them again (CONTRACT.md \
                §10); once a replay's results are confirmed, `undelivered` is null again.

                \(ExitStatus.helpText)
                """,
            subcommands: [Card.self, Message.self, Installation.self])

        struct Card: AsyncParsableCommand {
            static let configuration = CommandConfiguration(
                abstract: "A card's state, payment keys and newest transaction records.",
                discussion: ExitStatus.helpText)
            @Argument(help: "The digitalCardId.") var digitalCardId: String
            @Option(help: "Transaction records shown, newest first (at most 1000000).") var transactions = 20
            static let maximumTransactions = 1_000_000
            @OptionGroup var options: StoreToolOptions

            func run() async throws {
                guard (0...Self.maximumTransactions).contains(transactions) else {
                    throw ValidationError(
                        "--transactions \(transactions): expected 0 to \(Self.maximumTransactions) records")
                }
                try await options.show("card \(digitalCardId)") { inspector throws(StoreError) in
                    try await inspector.card(digitalCardId, transactionLimit: transactions).map {
                        InspectionJSON.card($0, now: Date())
                    }
                }
            }
        }

        struct Message: AsyncParsableCommand {
            static let configuration = CommandConfiguration(
                abstract:
                    "A processed message: when, its outcome, its results (replayed on a redelivery), whether delivered.",
                discussion: ExitStatus.helpText)
            @Argument(help: "The inbound message_id.") var messageId: String
            @OptionGroup var options: StoreToolOptions

            func run() async throws {
                try await options.show("processed message \(messageId)") { inspector throws(StoreError) in
                    try await inspector.message(messageId).map(InspectionJSON.message)
                }
            }
        }

        struct Installation: AsyncParsableCommand {
            static let configuration = CommandConfiguration(
                abstract: "A device installation: platform, tags, push channel.", discussion: ExitStatus.helpText)
            @Argument(help: "The installationId.") var installationId: String
            @Flag(help: "Show the whole push channel (a device's push token); by default only its last four characters")
            var showPushChannel = false
            @OptionGroup var options: StoreToolOptions

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

extension StoreToolOptions {
    /// Opens the inspector, runs `body`, prints its object or says nothing was found (exit 1); a store that cannot
    /// be read exits 2.
    fileprivate func show(_ what: String, _ body: (any StoreInspector) async throws(StoreError) -> [UInt8]?)
        async throws
    {
        let location = try location
        let timeout = try statementTimeout
        try logging.bootstrap(redactingStore: location)
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
            throw ExitCode(ExitStatus.unavailable.rawValue)
        }
        guard let found else {
            progressLine("wallet-worker inspect: no \(what) in \(location)\(notFoundHint(what))")
            throw ExitCode(ExitStatus.failure.rawValue)
        }
        _ = try StandardOutput.write(found + [UInt8(ascii: "\n")])
    }
}

/// Where to look when the store has no such entry: a message that was rejected, dead-lettered before its effects
/// were committed, or never processed is not recorded (CONTRACT.md §8), so its story is in the dead-letter queue.
private func notFoundHint(_ what: String) -> String {
    guard what.hasPrefix("processed message ") else { return "" }
    let id = what.dropFirst("processed message ".count)
    return """
        . Not recorded: never processed, older than --dedup-retention, or rejected or dead-lettered before its \
        effects were committed: `wallet-worker dead-letters show --message-id \(id)` shows a dead letter
        """
}
