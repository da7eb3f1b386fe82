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
    /// Bounds on what is kept; past them an arbitrary entry is dropped (and read again when needed): at most
    /// `maximumCards` cards and as many histories, holding at most `maximumRecords` records. A packed record is
    /// about 160 bytes: 200,000 of them about 30 MiB. The end-to-end benchmark's 5,000 cards keep about 60,000.
    let maximumCards: Int
    let maximumRecords: Int

    init(maximumCards: Int = 100_000, maximumRecords: Int = 200_000) {
        self.maximumCards = maximumCards
        self.maximumRecords = maximumRecords
    }

    /// The newest `limit` primary and the newest `limit` auxiliary records of a card, merged in the order
    /// `newestTransactions` reads (newest first by instant, the later stored first among equal instants). Every
    /// view reads from it: all records are its first `limit`, primary or auxiliary records the first `limit` of
    /// that kind, since a view's records are among the newest `limit` of their own kind. One list per card instead
    /// of one per view: the three views of a card held the same records up to three times.
    struct History {
        var limit: Int
        var records: [PackedTransactionRecord]

        init(limit: Int, records: [TransactionRecord]) {
            self.limit = limit
            self.records = records.map(PackedTransactionRecord.init)
        }

        /// What `newestTransactions` returns for `auxiliary` and this history's limit.
        func view(auxiliary: Bool?) -> [TransactionRecord] {
            var view: [TransactionRecord] = []
            view.reserveCapacity(limit)
            for record in records where auxiliary == nil || record.isAuxiliaryTransaction == auxiliary {
                view.append(record.record)
                if view.count == limit { break }
            }
            return view
        }
    }

    /// Known cards; `.some(nil)`: known not to exist.
    private var cards: [String: CardRecord?] = [:]
    private var histories: [String: History] = [:]
    /// The records in `histories`.
    private var recordCount = 0
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
        recordCount = 0
        dataVersion = nil
    }

    // MARK: - Cards

    /// `.some(card)` when known (`card` nil when the card does not exist), nil when not cached.
    func card(_ digitalCardId: String) -> CardRecord?? {
        cards[digitalCardId]
    }

    func remember(card: CardRecord?, digitalCardId: String) {
        if cards.count >= maximumCards, cards[digitalCardId] == nil { cards.remove(at: cards.startIndex) }
        cards[digitalCardId] = .some(card)
    }

    // MARK: - Histories

    func newestTransactions(digitalCardId: String, auxiliary: Bool?, limit: Int) -> [TransactionRecord]? {
        guard let history = histories[digitalCardId], history.limit == limit else { return nil }
        return history.view(auxiliary: auxiliary)
    }

    /// Keeps `history` (as `SQLiteBatchTransaction.newestTransactions` reads it on a miss) for the card.
    func remember(_ history: History, digitalCardId: String) {
        recordCount -= histories.removeValue(forKey: digitalCardId)?.records.count ?? 0
        insert(history, digitalCardId: digitalCardId)
    }

    /// A record the batch stored: inserted where `newestTransactions` would read it (newest first by instant, the
    /// later stored first among equal instants, a NaN instant, stored as NULL, after every other), into the
    /// card's cached history; the oldest record of its kind goes when the kind then has more than the limit.
    func stored(_ record: TransactionRecord, digitalCardId: String) {
        // Taken out while it changes: mutated without a copy, and not a candidate for eviction.
        guard var history = histories.removeValue(forKey: digitalCardId) else { return }
        recordCount -= history.records.count
        let position =
            history.records.firstIndex { !Self.sortsBefore($0.instant, record.instant) } ?? history.records.endIndex
        history.records.insert(PackedTransactionRecord(record), at: position)
        let kind = record.isAuxiliaryTransaction
        if history.records.count(where: { $0.isAuxiliaryTransaction == kind }) > history.limit,
            let oldest = history.records.lastIndex(where: { $0.isAuxiliaryTransaction == kind })
        {
            history.records.remove(at: oldest)
        }
        insert(history, digitalCardId: digitalCardId)
    }

    /// Adds the history of a card that has none here, first dropping others until it fits the bounds.
    private func insert(_ history: History, digitalCardId: String) {
        while !histories.isEmpty,
            histories.count >= maximumCards || recordCount + history.records.count > maximumRecords
        {
            recordCount -= histories.remove(at: histories.startIndex).value.records.count
        }
        histories[digitalCardId] = history
        recordCount += history.records.count
    }

    /// Whether a stored record with `existing` sorts before a newly stored one with `new`: it is newer, or the new
    /// one has no instant (NaN, NULL in the file: last in a descending order) while it has one.
    private static func sortsBefore(_ existing: Double, _ new: Double) -> Bool {
        if existing.isNaN { return false }
        return new.isNaN || existing > new
    }
}
