/// The wallet state in memory: for tests, the benchmark and the broker-free mode.
///
/// Applies effects as the store does. Each card's records are kept ordered newest first, and a new record is
/// inserted before every record with the same instant: the position keeps the insertion sequence that breaks
/// ties (the later stored first), and `newestTransactions` reads a prefix.
public struct InMemoryWalletState: WalletStateReading, Sendable {
    /// Cards by `digitalCardId`.
    public private(set) var cards: [String: CardRecord] = [:]
    /// Installations by `installationId`.
    public private(set) var installations: [String: Installation] = [:]
    private var histories: [String: TransactionLog] = [:]

    fileprivate struct TransactionLog: Sendable {
        /// Newest first by instant; among equal instants, the later stored first.
        var records: [TransactionRecord] = []
        var ids: Set<String> = []
    }

    public init() {}

    /// Applies the effects of one decision, in order.
    public mutating func apply(_ effects: [Effect]) {
        for effect in effects {
            switch effect {
            case .upsertCard(let card):
                cards[card.digitalCardId] = card
            case .storeTransaction(let digitalCardId, let record):
                store(record, digitalCardId: digitalCardId)
            case .upsertInstallation(let installation):
                installations[installation.installationId] = installation
            case .deleteInstallation(let installationId):
                installations[installationId] = nil
            }
        }
    }

    /// Every stored record of the card, newest first (ties: the later stored first).
    public func transactions(digitalCardId: String) -> [TransactionRecord] {
        histories[digitalCardId]?.records ?? []
    }

    // MARK: - WalletStateReading

    public func card(_ digitalCardId: String) -> CardRecord? {
        cards[digitalCardId]
    }

    public func hasTransaction(digitalCardId: String, recordId: String) -> Bool {
        histories[digitalCardId]?.ids.contains(recordId) ?? false
    }

    public func newestTransactions(digitalCardId: String, auxiliary: Bool?, limit: Int) -> [TransactionRecord] {
        guard limit > 0, let log = histories[digitalCardId] else { return [] }
        guard let auxiliary else { return Array(log.records.prefix(limit)) }
        var result: [TransactionRecord] = []
        for record in log.records where record.isAuxiliaryTransaction == auxiliary {
            result.append(record)
            if result.count == limit { break }
        }
        return result
    }

    // MARK: - Storage

    private mutating func store(_ record: TransactionRecord, digitalCardId: String) {
        // Mutated in place through the dictionary's defaulting subscript: one lookup, no copy of the log.
        histories[digitalCardId, default: TransactionLog()].store(record)
    }
}

extension InMemoryWalletState.TransactionLog {
    mutating func store(_ record: TransactionRecord) {
        // The first record with an id is kept, as the router expects.
        if ids.insert(record.id).inserted {
            // The new record is the latest stored: it goes before every record with the same or an older instant.
            records.insert(record, at: Self.insertionIndex(for: record.instant, in: records))
        }
    }

    /// The first index whose record is not newer than `instant` (binary search over the newest-first order).
    private static func insertionIndex(for instant: Double, in records: [TransactionRecord]) -> Int {
        var low = 0
        var high = records.count
        while low < high {
            let middle = (low + high) / 2
            if records[middle].instant > instant {
                low = middle + 1
            } else {
                high = middle
            }
        }
        return low
    }
}
