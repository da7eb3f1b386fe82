import WalletRouting

/// Cards and transaction histories the SQLite store has read or written, kept between batches so that routing a
/// notification does not read them back from the file. The end-to-end profile put a fifth of the worker's CPU in
/// those reads (`newestTransactions` alone 12%).
///
/// It mirrors the committed file, and only while nothing else writes to it: the store checks SQLite's
/// `data_version` at the start of every batch (after taking the write lock) and clears the cache when another
/// connection has committed since the last batch (another process on the same file, the `sqlite3` CLI). A batch
/// updates the cache as it writes; when the batch rolls back, the store clears it.
///
/// Not thread-safe: the store keeps it in a `Mutex` held by the batch that has the write transaction, which lends
/// it to that batch's `SQLiteBatchTransaction` (hence `@unchecked`: the lend outlives no lock).
final class SQLiteStateCache: @unchecked Sendable {
    /// Bounds on what is kept; past them an arbitrary entry is dropped (and read again when needed).
    static let maximumCards = 100_000
    static let maximumHistories = 20_000

    private struct HistoryKey: Hashable {
        var digitalCardId: String
        var auxiliary: Bool?
    }

    /// The newest records of a card for one filter, exactly as `newestTransactions` returns them for `limit`.
    private struct History {
        var limit: Int
        var records: [TransactionRecord]
    }

    /// Known cards; `.some(nil)`: known not to exist.
    private var cards: [String: CardRecord?] = [:]
    private var histories: [HistoryKey: History] = [:]
    /// The file's `data_version` the contents match.
    private var dataVersion: Int?

    /// Clears the cache unless `dataVersion` is the one it was filled at; the batch's contents are then valid.
    func validate(dataVersion current: Int) {
        if dataVersion != current {
            clear()
            dataVersion = current
        }
    }

    /// Forgets everything (a rolled-back batch, another writer).
    func clear() {
        cards.removeAll(keepingCapacity: true)
        histories.removeAll(keepingCapacity: true)
        dataVersion = nil
    }

    // MARK: - Cards

    /// `.some(card)` when known (`card` nil when the card does not exist), nil when not cached.
    func card(_ digitalCardId: String) -> CardRecord?? {
        cards[digitalCardId]
    }

    func remember(card: CardRecord?, digitalCardId: String) {
        if cards.count >= Self.maximumCards, cards[digitalCardId] == nil { cards.remove(at: cards.startIndex) }
        cards[digitalCardId] = .some(card)
    }

    // MARK: - Histories

    func newestTransactions(digitalCardId: String, auxiliary: Bool?, limit: Int) -> [TransactionRecord]? {
        guard let history = histories[HistoryKey(digitalCardId: digitalCardId, auxiliary: auxiliary)],
            history.limit == limit
        else { return nil }
        return history.records
    }

    func remember(newest records: [TransactionRecord], digitalCardId: String, auxiliary: Bool?, limit: Int) {
        let key = HistoryKey(digitalCardId: digitalCardId, auxiliary: auxiliary)
        if histories.count >= Self.maximumHistories, histories[key] == nil { histories.remove(at: histories.startIndex) }
        histories[key] = History(limit: limit, records: records)
    }

    /// A record the batch stored: inserted where `newestTransactions` would read it (newest first by instant, the
    /// later stored first among equal instants, a NaN instant, stored as NULL, after every other), into each
    /// cached history of its card it belongs to.
    func stored(_ record: TransactionRecord, digitalCardId: String) {
        for auxiliary in [nil, record.isAuxiliaryTransaction] as [Bool?] {
            let key = HistoryKey(digitalCardId: digitalCardId, auxiliary: auxiliary)
            guard var history = histories[key] else { continue }
            histories[key] = nil  // Mutated without a copy.
            let position =
                history.records.firstIndex { !Self.sortsBefore($0.instant, record.instant) } ?? history.records.endIndex
            if position < history.limit {
                history.records.insert(record, at: position)
                if history.records.count > history.limit { history.records.removeLast() }
            }
            histories[key] = history
        }
    }

    /// Whether a stored record with `existing` sorts before a newly stored one with `new`: it is newer, or the new
    /// one has no instant (NaN, NULL in the file: last in a descending order) while it has one.
    private static func sortsBefore(_ existing: Double, _ new: Double) -> Bool {
        if existing.isNaN { return false }
        return new.isNaN || existing > new
    }
}
