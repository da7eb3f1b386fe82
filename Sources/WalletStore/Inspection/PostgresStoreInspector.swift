import Foundation
import Logging
import PostgresNIO
import WalletRouting

/// `StoreInspector` on PostgreSQL: one connection of its own whose session is `default_transaction_read_only`, so
/// the server itself refuses any write; each read is a statement of its own (committed state, no locks held).
final class PostgresStoreInspector: StoreInspector {
    private let connection: PostgresConnection
    private let location: PostgresLocation
    private let statements: PostgresBatchStatements

    private init(connection: PostgresConnection, location: PostgresLocation, logger: Logger) {
        self.connection = connection
        self.location = location
        statements = PostgresBatchStatements(connection: connection, logger: logger)
    }

    static func connect(_ location: PostgresLocation, statementTimeout: Duration) async throws(StoreError)
        -> PostgresStoreInspector
    {
        var configuration = PostgresWalletStore.Configuration(location: location)
        configuration.statementTimeout = statementTimeout
        var settings = PostgresConnectionSettings(configuration)
        settings.readOnly = true
        let logger = PostgresWalletStore.silentLogger
        do {
            let connection = try await settings.connect(logger: logger)
            do {
                // Read-only and within the timeouts only if the settings reached the server (a pooler may drop them).
                try await settings.checkSessionSettings(on: connection, logger: logger)
            } catch {
                try? await connection.close()
                throw error
            }
            return PostgresStoreInspector(connection: connection, location: location, logger: logger)
        } catch {
            throw StoreError.postgres(error, at: location)
        }
    }

    func card(_ digitalCardId: String, transactionLimit: Int) async throws(StoreError) -> InspectedCard? {
        try await reading { statements in
            guard let card = try await statements.cards([digitalCardId], lock: false)[digitalCardId] else { return nil }
            let history = try await statements.histories([
                (key: HistoryKey(digitalCardId: digitalCardId, auxiliary: nil), limit: transactionLimit)
            ])
            var count = 0
            for try await row in try await statements.connection.query(
                "SELECT count(*)::int8 FROM transactions WHERE digital_card_id = \(digitalCardId)",
                logger: statements.logger)
            {
                count = try row.decode(Int.self)
            }
            return InspectedCard(card: card, transactions: history[0] ?? [], transactionCount: count)
        }
    }

    func message(_ messageID: String) async throws(StoreError) -> ProcessedMessage? {
        try await reading { statements in
            guard let decision = try await statements.decisions([messageID], lock: false)[messageID] else { return nil }
            var recordedAt = Date(timeIntervalSince1970: 0)
            for try await row in try await statements.connection.query(
                "SELECT extract(epoch FROM recorded_at)::float8 FROM processed_messages WHERE message_id = \(messageID)",
                logger: statements.logger)
            {
                recordedAt = Date(timeIntervalSince1970: try row.decode(Double.self))
            }
            return ProcessedMessage(
                messageID: messageID, recordedAt: recordedAt, outcome: decision.outcome, sender: decision.sender,
                digitalCardId: decision.digitalCardId, results: decision.results,
                undelivered: try await statements.undelivered(messageID))
        }
    }

    func installation(_ installationId: String) async throws(StoreError) -> Installation? {
        try await reading { statements in try await statements.installation(installationId) }
    }

    func close() async {
        try? await connection.close()
    }

    private func reading<T: Sendable>(_ body: (PostgresBatchStatements) async throws -> T) async throws(StoreError)
        -> T
    {
        do {
            return try await body(statements)
        } catch {
            throw StoreError.postgres(error, at: location)
        }
    }
}
