import Testing
import WalletRouting

@testable import WalletStore

/// The SQLite store's cache of histories: packed records and the one list per card that serves every view.
/// `SQLiteWalletStoreTests.decisionsThroughTheCacheMatchTheInMemoryStore` checks it end to end against the
/// in-memory store; these pin the pieces.
@Suite struct SQLiteStateCacheTests {
    private static func record(
        _ id: String, instant: Double, auxiliary: Bool = false, merchantName: String? = nil
    ) -> TransactionRecord {
        TransactionRecord(
            id: id, date: "2026-11-20T10:00:00.000+01:00", instant: instant, status: "approved", type: "purchase",
            currencyCode: "EUR", amount: JSONNumber(validatedLiteral: "12.50"), merchantName: merchantName,
            isAuxiliaryTransaction: auxiliary)
    }

    @Test(arguments: [
        Self.record("T-1", instant: 1_795_000_000),
        // Every optional field, text past one length byte (200 and 20,000 bytes), and text outside ASCII.
        TransactionRecord(
            id: String(repeating: "i", count: 200), date: "2026-11-20T10:00:00Z", instant: .nan, status: "declined",
            type: "refund", currencyCode: "SEK", amount: JSONNumber(validatedLiteral: "-0.5e3"),
            displayAmount: "-500 kr", merchantName: "Café Ørsted ☕", merchantType: "5814", merchantPostalCode: "",
            terminalID: String(repeating: "t", count: 20_000), merchantID: "M-91", isAuxiliaryTransaction: true),
    ])
    func aPackedRecordUnpacksToTheSameRecord(record: TransactionRecord) {
        let unpacked = PackedTransactionRecord(record).record
        // NaN is not equal to itself: the instant is compared by its bits, the rest as values.
        #expect(unpacked.instant.bitPattern == record.instant.bitPattern)
        #expect(unpacked.withInstant(0) == record.withInstant(0))
    }

    @Test func everyViewReadsFromTheOneListOfACard() {
        let cache = SQLiteStateCache()
        // As the store reads it for limit 3: the newest three primary and the newest three auxiliary records (the
        // card has two), newest first.
        let stored: [TransactionRecord] = [
            Self.record("P5", instant: 50), Self.record("A2", instant: 45, auxiliary: true),
            Self.record("P4", instant: 40), Self.record("P3", instant: 30),
            Self.record("A1", instant: 25, auxiliary: true),
        ]
        cache.remember(SQLiteStateCache.History(limit: 3, records: stored), digitalCardId: "DC-1")
        func ids(_ auxiliary: Bool?) -> [String]? {
            cache.newestTransactions(digitalCardId: "DC-1", auxiliary: auxiliary, limit: 3)?.map(\.id)
        }
        #expect(ids(nil) == ["P5", "A2", "P4"])
        #expect(ids(false) == ["P5", "P4", "P3"])
        #expect(ids(true) == ["A2", "A1"])
        // Another limit is not what the list was read for.
        #expect(cache.newestTransactions(digitalCardId: "DC-1", auxiliary: nil, limit: 4) == nil)

        // A new primary record at an instant already held goes before it (the later stored first), and the
        // oldest primary record leaves the list; the auxiliary ones stay.
        cache.stored(Self.record("P6", instant: 40), digitalCardId: "DC-1")
        #expect(ids(nil) == ["P5", "A2", "P6"])
        #expect(ids(false) == ["P5", "P6", "P4"])
        #expect(ids(true) == ["A2", "A1"])
        // A record with no instant (NaN) goes last; an auxiliary one here, so the primary list is unchanged.
        cache.stored(Self.record("A0", instant: .nan, auxiliary: true), digitalCardId: "DC-1")
        #expect(ids(true) == ["A2", "A1", "A0"])
        #expect(ids(false) == ["P5", "P6", "P4"])
    }

    /// What is kept stays within both bounds however it arrives: histories read, records stored into them.
    @Test func theCacheKeepsWithinItsBoundsOfCardsAndRecords() {
        let cache = SQLiteStateCache(maximumCards: 3, maximumRecords: 5)
        let limit = 2
        /// The records cached per card, counted through the views: a history holds at most `limit` of each kind.
        func cached() -> [String: Int] {
            var counts: [String: Int] = [:]
            for card in (0..<6).map({ "DC-\($0)" }) {
                guard let primary = cache.newestTransactions(digitalCardId: card, auxiliary: false, limit: limit),
                    let auxiliary = cache.newestTransactions(digitalCardId: card, auxiliary: true, limit: limit)
                else { continue }
                counts[card] = primary.count + auxiliary.count
            }
            return counts
        }
        // Histories with no records count against the cards.
        for card in 0..<6 {
            cache.remember(SQLiteStateCache.History(limit: limit, records: []), digitalCardId: "DC-\(card)")
        }
        #expect(cached().count == 3)
        // Records stored into the cached histories count against the records: never more than 5 in all.
        for index in 0..<12 {
            for card in cached().keys.sorted() {
                let record = Self.record("T-\(index)", instant: Double(index), auxiliary: index % 2 == 0)
                cache.stored(record, digitalCardId: card)
                #expect(cached().values.reduce(0, +) <= 5)
            }
        }
        #expect(cached().values.reduce(0, +) >= 4, "the last card stored into keeps its history")
        // A history of 4 records leaves room for 1 more record in the others.
        let full = (0..<4).map { Self.record("F-\($0)", instant: Double(100 - $0), auxiliary: $0 < 2) }
        cache.remember(SQLiteStateCache.History(limit: limit, records: full), digitalCardId: "DC-5")
        #expect(cached()["DC-5"] == 4)
        #expect(cached().values.reduce(0, +) <= 5)
    }

    @Test func aCardNotCachedIsNotAnswered() {
        let cache = SQLiteStateCache()
        cache.stored(Self.record("P1", instant: 10), digitalCardId: "DC-2")
        #expect(cache.newestTransactions(digitalCardId: "DC-2", auxiliary: nil, limit: 10) == nil)
    }
}

extension TransactionRecord {
    /// The same record with another instant.
    fileprivate func withInstant(_ instant: Double) -> TransactionRecord {
        TransactionRecord(
            id: id, date: date, instant: instant, status: status, type: type, currencyCode: currencyCode,
            amount: amount, displayAmount: displayAmount, merchantName: merchantName, merchantType: merchantType,
            merchantPostalCode: merchantPostalCode, terminalID: terminalID, merchantID: merchantID,
            isAuxiliaryTransaction: isAuxiliaryTransaction)
    }
}
