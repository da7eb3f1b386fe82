import Foundation
import GRDB
import WalletRouting

/// `StoreInspector` on a SQLite file, opened read-only (a running worker keeps writing; WAL lets both work).
final class SQLiteStoreInspector: StoreInspector {
    private let queue: DatabaseQueue
    private let fileName: String

    init(path: String) throws(StoreError) {
        fileName = URL(fileURLWithPath: path).path
        var configuration = GRDB.Configuration()
        configuration.readonly = true
        do {
            queue = try DatabaseQueue(path: path, configuration: configuration)
        } catch {
            throw StoreError.sqlite(error, phase: .opening, fileName: fileName)
        }
    }

    func card(_ digitalCardId: String, transactionLimit: Int) async throws(StoreError) -> InspectedCard? {
        try await read { db in
            let transaction = SQLiteBatchTransaction(db)
            guard let card = try transaction.card(digitalCardId) else { return nil }
            let count = try Int.fetchOne(
                db, sql: "SELECT count(*) FROM transactions WHERE digital_card_id = ?", arguments: [digitalCardId])
            return InspectedCard(
                card: card,
                transactions: try transaction.newestTransactions(
                    digitalCardId: digitalCardId, auxiliary: nil, limit: transactionLimit),
                transactionCount: count ?? 0)
        }
    }

    func message(_ messageID: String) async throws(StoreError) -> ProcessedMessage? {
        try await read { db in
            guard let decision = try SQLiteBatchTransaction(db).recordedDecision(messageID: messageID),
                let recordedAt = try Double.fetchOne(
                    db, sql: "SELECT recorded_at FROM processed_messages WHERE message_id = ?", arguments: [messageID])
            else { return nil }
            let undelivered = try UndeliveredResults.fetch(messageID, in: db)
            return ProcessedMessage(
                messageID: messageID, recordedAt: Date(timeIntervalSince1970: recordedAt), outcome: decision.outcome,
                sender: decision.sender, digitalCardId: decision.digitalCardId, results: decision.results,
                undelivered: undelivered)
        }
    }

    func installation(_ installationId: String) async throws(StoreError) -> Installation? {
        try await read { db in try SQLiteBatchTransaction(db).installation(installationId) }
    }

    func close() async {
        try? queue.close()
    }

    private func read<T: Sendable>(_ body: @escaping @Sendable (Database) throws -> T) async throws(StoreError) -> T {
        do {
            return try await queue.read(body)
        } catch {
            throw StoreError.sqlite(error, phase: .processing, fileName: fileName)
        }
    }
}

extension UndeliveredResults {
    /// The note of `messageID` in a SQLite store, whether or not the message is still recorded.
    static func fetch(_ messageID: String, in db: Database) throws -> UndeliveredResults? {
        try Row.fetchOne(
            db, sql: "SELECT dead_lettered_at, reason, error FROM undelivered_results WHERE message_id = ?",
            arguments: [messageID]
        ).map { row in
            UndeliveredResults(
                messageID: messageID, deadLetteredAt: Date(timeIntervalSince1970: row["dead_lettered_at"]),
                reason: row["reason"], error: row["error"])
        }
    }
}
