import Foundation
import GRDB
import WalletRouting

/// The store's view of one open SQLite transaction: what the router reads, what the batch writes.
///
/// Lives only inside a GRDB access block, on the connection that holds the transaction. Every statement is a
/// cached prepared statement of the connection, so a batch compiles no SQL after the first, bound and read
/// directly (`DirectStatement`). With a cache (a batch's transaction), cards and histories are read from it when it
/// has them and it is kept up to date with what the batch writes.
final class SQLiteBatchTransaction: WalletStoreTransaction {
    private let db: Database
    private let cache: SQLiteStateCache?
    /// The texts and blobs of the transaction's statements, bound in place: SQLite allocates nothing to copy them.
    /// Room for any ordinary row; a larger value (a big recorded result) is copied by SQLite.
    private let arena = BindingArena(capacity: 64 * 1024)
    private static let columns = StoredColumns(store: "SQLite store")

    /// Whether recorded results are written compressed (the file has `SQLiteSchema.compressedResults`).
    private let compressesResults: Bool
    /// The batch's recorded results, written in turn through one writer's buffers.
    private lazy var resultsWriter = RecordedResultsWriter(compressing: compressesResults)

    init(_ db: Database, cache: SQLiteStateCache? = nil, compressesResults: Bool = false) {
        self.db = db
        self.cache = cache
        self.compressesResults = compressesResults
    }

    /// The connection's cached statement for `sql`, bound from the arena (`Database.withDirectStatement`).
    private func withStatement<T>(_ sql: String, _ body: (inout DirectStatement) throws -> T) throws -> T {
        try db.withDirectStatement(sql: sql, arena: arena, body)
    }

    // MARK: - WalletStateReading

    func card(_ digitalCardId: String) throws -> CardRecord? {
        if let cached = cache?.card(digitalCardId) { return cached }
        let card = try readCard(digitalCardId)
        cache?.remember(card: card, digitalCardId: digitalCardId)
        return card
    }

    private func readCard(_ digitalCardId: String) throws -> CardRecord? {
        try withStatement(
            """
            SELECT state, tokenized_card_id, key_type, payments_left, keys_expire_at
            FROM cards WHERE digital_card_id = ?
            """
        ) { statement in
            statement.bind(digitalCardId)
            guard try statement.step() else { return nil }
            let paymentsLeft = statement.optionalInt(3)
            let expiresAt = statement.optionalDouble(4)
            return CardRecord(
                digitalCardId: digitalCardId,
                state: try Self.columns.decode(CardState.self, statement.text(0), column: "cards.state"),
                tokenizedCardId: statement.optionalText(1),
                keyType: try Self.columns.decode(KeyType.self, statement.text(2), column: "cards.key_type"),
                paymentKeys: paymentsLeft.flatMap { left in
                    expiresAt.map { PaymentKeyInfo(numberOfPaymentsLeft: left, expiresAt: $0) }
                })
        }
    }

    func hasTransaction(digitalCardId: String, recordId: String) throws -> Bool {
        try withStatement("SELECT 1 FROM transactions WHERE digital_card_id = ? AND record_id = ?") {
            statement in
            statement.bind(digitalCardId)
            statement.bind(recordId)
            return try statement.step()
        }
    }

    func newestTransactions(digitalCardId: String, auxiliary: Bool?, limit: Int) throws -> [TransactionRecord] {
        guard limit > 0 else { return [] }
        guard let cache else {
            return try readNewestTransactions(digitalCardId: digitalCardId, auxiliary: auxiliary, limit: limit)
        }
        if let cached = cache.newestTransactions(digitalCardId: digitalCardId, auxiliary: auxiliary, limit: limit) {
            return cached
        }
        // The card's newest primary and auxiliary records in one list: what the cache keeps for every view.
        let history = SQLiteStateCache.History(
            limit: limit, records: try readNewestOfBothKinds(digitalCardId: digitalCardId, limit: limit))
        cache.remember(history, digitalCardId: digitalCardId)
        return history.view(auxiliary: auxiliary)
    }

    /// `stored_sequence` is not read: it is selected for `newestOfBothKinds`' ORDER BY, which can only name the
    /// compound select's result columns.
    private static let recordColumns = """
        record_id, date, instant, status, type, currency_code, amount, display_amount, merchant_name, merchant_type,
        merchant_postal_code, terminal_id, merchant_id, is_auxiliary, stored_sequence
        """

    /// One view, straight from the file (a transaction without a cache).
    private func readNewestTransactions(digitalCardId: String, auxiliary: Bool?, limit: Int) throws
        -> [TransactionRecord]
    {
        guard let auxiliary else {
            return Array(try readNewestOfBothKinds(digitalCardId: digitalCardId, limit: limit).prefix(limit))
        }
        return try withStatement(Self.newestOfOneKind) { statement in
            statement.bind(digitalCardId)
            statement.bind(auxiliary)
            statement.bind(limit)
            return try Self.readRecords(statement, reservingCapacity: limit)
        }
    }

    /// The card's newest `limit` primary and newest `limit` auxiliary records in one list, in the views' order.
    private func readNewestOfBothKinds(digitalCardId: String, limit: Int) throws -> [TransactionRecord] {
        try withStatement(Self.newestOfBothKinds) { statement in
            for auxiliary in [false, true] {
                statement.bind(digitalCardId)
                statement.bind(auxiliary)
                statement.bind(limit)
            }
            // Saturating: an operator's limit (`inspect card --transactions`) may be anything up to Int.max.
            let (both, overflow) = limit.multipliedReportingOverflow(by: 2)
            return try Self.readRecords(statement, reservingCapacity: overflow ? Int.max : both)
        }
    }

    /// The newest `limit` records of one kind of a card, in the views' order: one range of
    /// `transactions_newest_first_by_kind`.
    private static let newestOfOneKind = """
        SELECT \(recordColumns) FROM transactions WHERE digital_card_id = ? AND is_auxiliary = ?
        ORDER BY instant DESC, stored_sequence DESC LIMIT ?
        """

    /// Both kinds' ranges merged (at most twice `limit` rows sorted).
    private static let newestOfBothKinds = """
        SELECT * FROM (\(newestOfOneKind)) UNION ALL SELECT * FROM (\(newestOfOneKind))
        ORDER BY instant DESC, stored_sequence DESC
        """

    /// The rows of a statement selecting `recordColumns`.
    private static func readRecords(_ statement: borrowing DirectStatement, reservingCapacity capacity: Int) throws
        -> [TransactionRecord]
    {
        var records: [TransactionRecord] = []
        records.reserveCapacity(min(capacity, 16))
        while try statement.step() {
            records.append(
                TransactionRecord(
                    id: statement.text(0),
                    date: statement.text(1),
                    // SQLite stores a NaN as NULL; the router never produces one, but read back what was written.
                    instant: statement.optionalDouble(2) ?? .nan,
                    status: statement.text(3),
                    type: statement.text(4),
                    currencyCode: statement.text(5),
                    amount: JSONNumber(validatedLiteral: statement.text(6)),
                    displayAmount: statement.optionalText(7),
                    merchantName: statement.optionalText(8),
                    merchantType: statement.optionalText(9),
                    merchantPostalCode: statement.optionalText(10),
                    terminalID: statement.optionalText(11),
                    merchantID: statement.optionalText(12),
                    isAuxiliaryTransaction: statement.int(13) != 0))
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
                try withStatement("DELETE FROM installations WHERE installation_id = ?") { statement in
                    statement.bind(installationId)
                    try statement.execute()
                }
            }
        }
    }

    private func upsert(_ card: CardRecord) throws {
        try withStatement(
            """
            INSERT INTO cards (digital_card_id, state, tokenized_card_id, key_type, payments_left, keys_expire_at)
            VALUES (?, ?, ?, ?, ?, ?)
            ON CONFLICT (digital_card_id) DO UPDATE SET
                state = excluded.state, tokenized_card_id = excluded.tokenized_card_id,
                key_type = excluded.key_type, payments_left = excluded.payments_left,
                keys_expire_at = excluded.keys_expire_at
            """
        ) { statement in
            statement.bind(card.digitalCardId)
            statement.bind(card.state.rawValue)
            statement.bind(card.tokenizedCardId)
            statement.bind(card.keyType.rawValue)
            statement.bind(card.paymentKeys?.numberOfPaymentsLeft)
            statement.bind(card.paymentKeys?.expiresAt)
            try statement.execute()
        }
        cache?.remember(card: card, digitalCardId: card.digitalCardId)
    }

    private func store(_ record: TransactionRecord, digitalCardId: String) throws {
        // The first record with an id is kept (as InMemoryWalletState does): a repeat is ignored, not an error.
        try withStatement(
            """
            INSERT INTO transactions (
                digital_card_id, record_id, date, instant, status, type, currency_code, amount, display_amount,
                merchant_name, merchant_type, merchant_postal_code, terminal_id, merchant_id, is_auxiliary)
            VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
            ON CONFLICT (digital_card_id, record_id) DO NOTHING
            """
        ) { statement in
            statement.bind(digitalCardId)
            statement.bind(record.id)
            statement.bind(record.date)
            statement.bind(record.instant)
            statement.bind(record.status)
            statement.bind(record.type)
            statement.bind(record.currencyCode)
            statement.bind(record.amount.literal)
            statement.bind(record.displayAmount)
            statement.bind(record.merchantName)
            statement.bind(record.merchantType)
            statement.bind(record.merchantPostalCode)
            statement.bind(record.terminalID)
            statement.bind(record.merchantID)
            statement.bind(record.isAuxiliaryTransaction)
            try statement.execute()
        }
        // Not when the id was already stored (DO NOTHING): the history is unchanged.
        if db.changesCount > 0 { cache?.stored(record, digitalCardId: digitalCardId) }
    }

    private func upsert(_ installation: Installation) throws {
        let tags = try StoredColumns.encodeTags(installation.tags)
        try withStatement(
            """
            INSERT INTO installations (installation_id, platform, push_channel, tags) VALUES (?, ?, ?, ?)
            ON CONFLICT (installation_id) DO UPDATE SET
                platform = excluded.platform, push_channel = excluded.push_channel, tags = excluded.tags
            """
        ) { statement in
            statement.bind(installation.installationId)
            statement.bind(installation.platform)
            statement.bind(installation.pushChannel)
            statement.bind(tags)
            try statement.execute()
        }
    }

    // MARK: - Processed messages

    func recordedDecision(messageID: String) throws -> Decision? {
        try withStatement(
            "SELECT outcome, sender, digital_card_id, results FROM processed_messages WHERE message_id = ?"
        ) { statement in
            statement.bind(messageID)
            guard try statement.step() else { return nil }
            return Decision.recorded(
                results: try statement.withBytes(3) { bytes throws(StoreError) in
                    try RecordedResultsEncoding.decode(bytes)
                },
                outcome: try Self.columns.decode(Outcome.self, statement.text(0), column: "outcome"),
                sender: statement.optionalText(1),
                digitalCardId: statement.optionalText(2))
        }
    }

    func record(messageID: String, decision: Decision, at now: Date) throws {
        try withStatement(
            """
            INSERT INTO processed_messages (message_id, recorded_at, outcome, sender, digital_card_id, results)
            VALUES (?, ?, ?, ?, ?, ?)
            """
        ) { statement in
            statement.bind(messageID)
            statement.bind(now.timeIntervalSince1970)
            statement.bind(decision.outcome.rawValue)
            statement.bind(decision.sender)
            statement.bind(decision.digitalCardId)
            resultsWriter.withValue(of: decision.results) { statement.bind(bytes: $0) }
            try statement.execute()
        }
    }

    // MARK: - Reads outside the protocol (tests, diagnostics)

    func installation(_ installationId: String) throws -> Installation? {
        try withStatement(
            "SELECT platform, push_channel, tags FROM installations WHERE installation_id = ?"
        ) { statement in
            statement.bind(installationId)
            guard try statement.step() else { return nil }
            return Installation(
                installationId: installationId, platform: statement.text(0), pushChannel: statement.text(1),
                tags: try Self.columns.decodeTags(statement.text(2)))
        }
    }
}
