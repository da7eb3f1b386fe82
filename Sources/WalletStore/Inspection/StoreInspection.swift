import Foundation
import WalletRouting

/// Read-only views of a store for operators (`wallet-worker inspect`): a card with its keys and history, a
/// processed message with its recorded results, an installation. Nothing here writes: the SQLite file is opened
/// read-only, the PostgreSQL session is `default_transaction_read_only`.
public protocol StoreInspector: Sendable {
    /// The card and its newest `transactionLimit` records (newest first), or nil when the store never saw it.
    func card(_ digitalCardId: String, transactionLimit: Int) async throws(StoreError) -> InspectedCard?
    /// A processed message as recorded for deduplication, or nil (never processed, rejected, or expired).
    func message(_ messageID: String) async throws(StoreError) -> ProcessedMessage?
    func installation(_ installationId: String) async throws(StoreError) -> Installation?
    func close() async
}

public struct InspectedCard: Sendable, Hashable {
    public var card: CardRecord
    /// Newest first, as a TNS result lists them.
    public var transactions: [TransactionRecord]
    /// All the records the store holds for the card (`transactions` may be fewer).
    public var transactionCount: Int

    public init(card: CardRecord, transactions: [TransactionRecord], transactionCount: Int) {
        self.card = card
        self.transactions = transactions
        self.transactionCount = transactionCount
    }
}

/// What the store recorded for a processed `message_id`: replayed verbatim when the id comes again.
public struct ProcessedMessage: Sendable, Hashable {
    public var messageID: String
    public var recordedAt: Date
    public var outcome: Outcome
    public var sender: String?
    public var digitalCardId: String?
    /// In publication order.
    public var results: [OutboundResult]
    /// Set when the message was dead-lettered after its effects were committed and no replay has delivered its
    /// results since.
    public var undelivered: UndeliveredResults?

    public init(
        messageID: String, recordedAt: Date, outcome: Outcome, sender: String?, digitalCardId: String?,
        results: [OutboundResult], undelivered: UndeliveredResults? = nil
    ) {
        self.messageID = messageID
        self.recordedAt = recordedAt
        self.outcome = outcome
        self.sender = sender
        self.digitalCardId = digitalCardId
        self.results = results
        self.undelivered = undelivered
    }
}

public enum StoreInspectors {
    /// Opens a read-only inspector on the store `location` names, after checking that its schema is this build's.
    /// - Throws: a permanent `StoreError` for the memory store (nothing to inspect in a new process), a missing
    ///   SQLite file, or a schema that is not this build's.
    public static func open(_ location: StoreLocation, statementTimeout: Duration = .seconds(5))
        async throws(StoreError) -> any StoreInspector
    {
        switch location {
        case .memory:
            throw StoreError(.permanent, "the memory store lives in the worker's process: nothing to inspect")
        case .sqlite(let path):
            guard FileManager.default.fileExists(atPath: path) else {
                throw StoreError(.permanent, "SQLite store file \(path) does not exist")
            }
            try await requireCurrentSchema(location, statementTimeout: statementTimeout)
            return try SQLiteStoreInspector(path: path)
        case .postgres(let postgres):
            try await requireCurrentSchema(location, statementTimeout: statementTimeout)
            return try await PostgresStoreInspector.connect(postgres, statementTimeout: statementTimeout)
        }
    }

    private static func requireCurrentSchema(_ location: StoreLocation, statementTimeout: Duration)
        async throws(StoreError)
    {
        let status = try await WalletStores.schemaStatus(location, statementTimeout: statementTimeout)
        guard status.isUsable else {
            throw StoreError(
                .permanent,
                "cannot inspect \(location): its schema is \(status); inspect reads this build's schema "
                    + "(`wallet-worker migrate --check` reports it)")
        }
    }
}
