import Foundation
import WalletRouting

/// A transaction record asked about by id (`hasTransaction`).
typealias RecordKey = ForeseenReads.Record

/// A card's newest records, all of them or of one kind (`newestTransactions`).
typealias HistoryKey = ForeseenReads.History

/// Everything a batch reads from the database: foreseen from its messages (`BatchRouting.foreseenReads`) and
/// fetched in a few statements before the batch is routed, so routing itself never waits on the server.
struct PostgresBatchKeys: Sendable {
    var cards: Set<String> = []
    var messageIDs: Set<String> = []
    var records: Set<RecordKey> = []
    /// The most records asked for, per history.
    var histories: [HistoryKey: Int] = [:]

    init() {}

    init(foreseen reads: ForeseenReads, messageIDs: Set<String>) {
        self.cards = reads.cards
        self.messageIDs = messageIDs
        self.records = reads.records
        self.histories = reads.histories
    }

    var isEmpty: Bool { cards.isEmpty && messageIDs.isEmpty && records.isEmpty && histories.isEmpty }

    mutating func formUnion(_ other: PostgresBatchKeys) {
        cards.formUnion(other.cards)
        messageIDs.formUnion(other.messageIDs)
        records.formUnion(other.records)
        histories.merge(other.histories, uniquingKeysWith: max)
    }

    mutating func askHistory(_ key: HistoryKey, limit: Int) {
        histories[key] = max(histories[key] ?? 0, limit)
    }
}

/// What the batch's transaction has fetched so far. Cards are row-locked (`FOR UPDATE`) when they exist; an absent
/// card cannot be locked, so creating one goes through the write's upsert, and finding it created by another
/// transaction retries the batch (see `PostgresBatchStatements.write`).
struct PostgresBatchSnapshot: Sendable {
    /// Fetched cards; a nil value is a card that did not exist.
    var cards: [String: CardRecord?] = [:]
    /// Fetched processed message ids; a nil value was not processed (or has expired).
    var decisions: [String: Decision?] = [:]
    var records: [RecordKey: Bool] = [:]
    /// Newest first (ties: the later stored first), at most `limit` of them.
    var histories: [HistoryKey: (limit: Int, records: [TransactionRecord])] = [:]

    /// The part of `keys` this snapshot cannot answer yet.
    func missing(from keys: PostgresBatchKeys) -> PostgresBatchKeys {
        var missing = PostgresBatchKeys()
        missing.cards = keys.cards.filter { !cards.keys.contains($0) }
        missing.messageIDs = keys.messageIDs.filter { !decisions.keys.contains($0) }
        missing.records = keys.records.filter { !records.keys.contains($0) }
        for (key, limit) in keys.histories where !covers(key, limit: limit) {
            missing.histories[key] = limit
        }
        return missing
    }

    /// Whether the fetched history holds the newest `limit` records: enough were fetched, or the card has fewer.
    func covers(_ key: HistoryKey, limit: Int) -> Bool {
        guard let fetched = histories[key] else { return false }
        return fetched.limit >= limit || fetched.records.count < fetched.limit
    }
}
