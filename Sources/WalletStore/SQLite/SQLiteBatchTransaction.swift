import Foundation
import GRDB
import WalletRouting

/// The store's view of one open SQLite transaction: what the router reads, what the batch writes.
///
/// Lives only inside a GRDB access block, on the connection that holds the transaction. Every statement is a
/// cached prepared statement of the connection, so a batch compiles no SQL after the first.
final class SQLiteBatchTransaction: WalletStoreTransaction {
    private let db: Database

    init(_ db: Database) {
        self.db = db
    }

    // MARK: - WalletStateReading

    func card(_ digitalCardId: String) throws -> CardRecord? {
        let statement = try db.cachedStatement(
            sql: """
                SELECT state, tokenized_card_id, key_type, payments_left, keys_expire_at
                FROM cards WHERE digital_card_id = ?
                """)
        return try firstRow(of: statement, arguments: [digitalCardId]) { row in
        let paymentsLeft = try row.decode(Int?.self, atIndex: 3)
        let expiresAt = try row.decode(Double?.self, atIndex: 4)
        return CardRecord(
            digitalCardId: digitalCardId,
            state: try Self.decode(CardState.self, row.decode(String.self, atIndex: 0), column: "cards.state"),
            tokenizedCardId: try row.decode(String?.self, atIndex: 1),
            keyType: try Self.decode(KeyType.self, row.decode(String.self, atIndex: 2), column: "cards.key_type"),
            paymentKeys: paymentsLeft.flatMap { left in
                expiresAt.map { PaymentKeyInfo(numberOfPaymentsLeft: left, expiresAt: $0) }
            })
        }
    }

    func hasTransaction(digitalCardId: String, recordId: String) throws -> Bool {
        let statement = try db.cachedStatement(
            sql: "SELECT 1 FROM transactions WHERE digital_card_id = ? AND record_id = ?")
        return try Row.fetchCursor(statement, arguments: [digitalCardId, recordId]).next() != nil
    }

    func newestTransactions(digitalCardId: String, auxiliary: Bool?, limit: Int) throws -> [TransactionRecord] {
        guard limit > 0 else { return [] }
        let columns = """
            record_id, date, instant, status, type, currency_code, amount, display_amount, merchant_name,
            merchant_type, merchant_postal_code, terminal_id, merchant_id, is_auxiliary
            """
        let order = "ORDER BY instant DESC, stored_sequence DESC LIMIT ?"
        let rows: RowCursor
        if let auxiliary {
            let statement = try db.cachedStatement(
                sql: "SELECT \(columns) FROM transactions WHERE digital_card_id = ? AND is_auxiliary = ? \(order)")
            rows = try Row.fetchCursor(statement, arguments: [digitalCardId, auxiliary, limit])
        } else {
            let statement = try db.cachedStatement(
                sql: "SELECT \(columns) FROM transactions WHERE digital_card_id = ? \(order)")
            rows = try Row.fetchCursor(statement, arguments: [digitalCardId, limit])
        }
        var records: [TransactionRecord] = []
        defer { withExtendedLifetime(rows) {} }  // rows are read in place: keep the cursor alive
        while let row = try rows.next() {
            records.append(
                TransactionRecord(
                    id: try row.decode(atIndex: 0),
                    date: try row.decode(atIndex: 1),
                    // SQLite stores a NaN as NULL; the router never produces one, but read back what was written.
                    instant: try row.decode(Double?.self, atIndex: 2) ?? .nan,
                    status: try row.decode(atIndex: 3),
                    type: try row.decode(atIndex: 4),
                    currencyCode: try row.decode(atIndex: 5),
                    amount: JSONNumber(validatedLiteral: try row.decode(atIndex: 6)),
                    displayAmount: try row.decode(atIndex: 7),
                    merchantName: try row.decode(atIndex: 8),
                    merchantType: try row.decode(atIndex: 9),
                    merchantPostalCode: try row.decode(atIndex: 10),
                    terminalID: try row.decode(atIndex: 11),
                    merchantID: try row.decode(atIndex: 12),
                    isAuxiliaryTransaction: try row.decode(atIndex: 13)))
        }
        return records
    }

    // MARK: - Effects

    func apply(_ effects: [Effect]) throws {
        for effect in effects {
            switch effect {
            case .upsertCard(let card):
                try upsert(card)
            case .storeTransaction(let digitalCardId, let record):
                try store(record, digitalCardId: digitalCardId)
            case .upsertInstallation(let installation):
                try upsert(installation)
            case .deleteInstallation(let installationId):
                try db.cachedStatement(sql: "DELETE FROM installations WHERE installation_id = ?")
                    .execute(arguments: [installationId])
            }
        }
    }

    private func upsert(_ card: CardRecord) throws {
        try db.cachedStatement(
            sql: """
                INSERT INTO cards (digital_card_id, state, tokenized_card_id, key_type, payments_left, keys_expire_at)
                VALUES (?, ?, ?, ?, ?, ?)
                ON CONFLICT (digital_card_id) DO UPDATE SET
                    state = excluded.state, tokenized_card_id = excluded.tokenized_card_id,
                    key_type = excluded.key_type, payments_left = excluded.payments_left,
                    keys_expire_at = excluded.keys_expire_at
                """
        ).execute(arguments: [
            card.digitalCardId, card.state.rawValue, card.tokenizedCardId, card.keyType.rawValue,
            card.paymentKeys?.numberOfPaymentsLeft, card.paymentKeys?.expiresAt,
        ])
    }

    private func store(_ record: TransactionRecord, digitalCardId: String) throws {
        // The first record with an id is kept (as InMemoryWalletState does): a repeat is ignored, not an error.
        try db.cachedStatement(
            sql: """
                INSERT INTO transactions (
                    digital_card_id, record_id, date, instant, status, type, currency_code, amount, display_amount,
                    merchant_name, merchant_type, merchant_postal_code, terminal_id, merchant_id, is_auxiliary)
                VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
                ON CONFLICT (digital_card_id, record_id) DO NOTHING
                """
        ).execute(arguments: [
            digitalCardId, record.id, record.date, record.instant, record.status, record.type, record.currencyCode,
            record.amount.literal, record.displayAmount, record.merchantName, record.merchantType,
            record.merchantPostalCode, record.terminalID, record.merchantID, record.isAuxiliaryTransaction,
        ])
    }

    private func upsert(_ installation: Installation) throws {
        try db.cachedStatement(
            sql: """
                INSERT INTO installations (installation_id, platform, push_channel, tags) VALUES (?, ?, ?, ?)
                ON CONFLICT (installation_id) DO UPDATE SET
                    platform = excluded.platform, push_channel = excluded.push_channel, tags = excluded.tags
                """
        ).execute(arguments: [
            installation.installationId, installation.platform, installation.pushChannel,
            try Self.encodeTags(installation.tags),
        ])
    }

    // MARK: - Processed messages

    func recordedDecision(messageID: String) throws -> Decision? {
        // One statement for the common miss and for a replay: the message row, then its results in order.
        let statement = try db.cachedStatement(
            sql: """
                SELECT m.outcome, m.sender, m.digital_card_id,
                       r.position, r.exchange, r.routing_key, r.body, r.result_message_id, r.correlation_id,
                       r.type, r.traceparent
                FROM processed_messages AS m
                LEFT JOIN processed_results AS r ON r.message_id = m.message_id
                WHERE m.message_id = ?
                ORDER BY r.position
                """)
        let rows = try Row.fetchCursor(statement, arguments: [messageID])
        defer { withExtendedLifetime(rows) {} }  // rows are read in place: keep the cursor alive
        guard let first = try rows.next() else { return nil }
        let outcome = try Self.decode(Outcome.self, first.decode(String.self, atIndex: 0), column: "outcome")
        let sender = try first.decode(String?.self, atIndex: 1)
        let digitalCardId = try first.decode(String?.self, atIndex: 2)
        var results: [OutboundResult] = []
        var row: Row? = first
        while let current = row {
            // A message that published nothing (ignored) has one row with NULL result columns.
            if try current.decode(Int?.self, atIndex: 3) != nil {
                results.append(
                    OutboundResult(
                        exchange: try current.decode(atIndex: 4),
                        routingKey: try current.decode(atIndex: 5),
                        body: try current.withUnsafeData(atIndex: 6) { data in data.map { [UInt8]($0) } ?? [] },
                        properties: OutboundProperties(
                            messageID: try current.decode(atIndex: 7),
                            correlationID: try current.decode(atIndex: 8),
                            type: try current.decode(atIndex: 9),
                            traceparent: try current.decode(atIndex: 10))))
            }
            row = try rows.next()
        }
        return Decision.recorded(results: results, outcome: outcome, sender: sender, digitalCardId: digitalCardId)
    }

    func record(messageID: String, decision: Decision, at now: Date) throws {
        try db.cachedStatement(
            sql: """
                INSERT INTO processed_messages (message_id, recorded_at, outcome, sender, digital_card_id)
                VALUES (?, ?, ?, ?, ?)
                """
        ).execute(arguments: [
            messageID, now.timeIntervalSince1970, decision.outcome.rawValue, decision.sender, decision.digitalCardId,
        ])
        guard !decision.results.isEmpty else { return }
        let insertResult = try db.cachedStatement(
            sql: """
                INSERT INTO processed_results (
                    message_id, position, exchange, routing_key, body, result_message_id, correlation_id, type,
                    traceparent)
                VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)
                """)
        for (position, result) in decision.results.enumerated() {
            try insertResult.execute(arguments: [
                messageID, position, result.exchange, result.routingKey, Data(result.body),
                result.properties.messageID, result.properties.correlationID, result.properties.type,
                result.properties.traceparent,
            ])
        }
    }

    // MARK: - Reads outside the protocol (tests, diagnostics)

    func installation(_ installationId: String) throws -> Installation? {
        let statement = try db.cachedStatement(
            sql: "SELECT platform, push_channel, tags FROM installations WHERE installation_id = ?")
        return try firstRow(of: statement, arguments: [installationId]) { row in
            Installation(
                installationId: installationId, platform: try row.decode(atIndex: 0),
                pushChannel: try row.decode(atIndex: 1), tags: try Self.decodeTags(row.decode(atIndex: 2)))
        }
    }

    /// Reads the first row in place (a cursor row is the statement's current row: no copy). The cursor must
    /// outlive the reads: releasing it resets the statement and the row would read NULLs.
    private func firstRow<T>(of statement: Statement, arguments: StatementArguments, _ body: (Row) throws -> T)
        throws -> T?
    {
        let rows = try Row.fetchCursor(statement, arguments: arguments)
        return try withExtendedLifetime(rows) {
            guard let row = try rows.next() else { return nil }
            return try body(row)
        }
    }

    // MARK: - Column values

    /// A text column holding a raw value this build does not know: the file was written by something else.
    private static func decode<Value: RawRepresentable<String>>(_ type: Value.Type, _ text: String, column: String)
        throws(StoreError) -> Value
    {
        guard let value = Value(rawValue: text) else {
            throw StoreError(.permanent, "SQLite store holds an unknown \(column) value `\(text)`")
        }
        return value
    }

    private static func encodeTags(_ tags: [String]) throws -> String {
        String(decoding: try JSONEncoder().encode(tags), as: UTF8.self)
    }

    private static func decodeTags(_ text: String) throws -> [String] {
        do {
            return try JSONDecoder().decode([String].self, from: Data(text.utf8))
        } catch {
            throw StoreError(.permanent, "SQLite store holds installation tags that are not a JSON array of strings")
        }
    }
}
