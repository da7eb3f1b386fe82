import TestSupport
import Testing

@testable import WalletRouting
@testable import WalletStore

/// The PostgreSQL batch's history view (what it fetched, merged with what the batch stored) against the in-memory
/// state's, which sorts every record a card has: the same records in the same order, ties and filters included.
@Suite("PostgresBatchOverlay")
struct PostgresBatchOverlayTests {
    @Test func historiesMergedWithTheBatchsRecordsMatchTheInMemoryState() {
        var random = SplitMix64(seed: 38)
        for round in 0..<2_000 {
            // Few distinct instants, so ties are common, within the batch and across the fetched and the added.
            let stored = (0..<Int.random(in: 0...14, using: &random)).map { index in
                Self.record(
                    "R-\(index)", instant: Double(Int.random(in: 0...4, using: &random)),
                    auxiliary: Bool.random(using: &random))
            }
            let before = Int.random(in: 0...stored.count, using: &random)
            let limit = Int.random(in: 1...12, using: &random)
            let auxiliary = [nil, false, true][Int.random(in: 0...2, using: &random)]

            var earlier = InMemoryWalletState()
            earlier.apply(stored[..<before].map { .storeTransaction(digitalCardId: "DC-1", record: $0) })
            var everything = earlier
            everything.apply(stored[before...].map { .storeTransaction(digitalCardId: "DC-1", record: $0) })

            // What the batch's fetch finds: the newest `limit` stored before it, as the server orders them.
            var snapshot = PostgresBatchSnapshot()
            let key = HistoryKey(digitalCardId: "DC-1", auxiliary: auxiliary)
            snapshot.histories[key] = (
                limit, earlier.newestTransactions(digitalCardId: "DC-1", auxiliary: auxiliary, limit: limit)
            )
            let overlay = PostgresBatchOverlay(snapshot: snapshot)
            overlay.apply(stored[before...].map { .storeTransaction(digitalCardId: "DC-1", record: $0) })

            let merged = overlay.newestTransactions(digitalCardId: "DC-1", auxiliary: auxiliary, limit: limit)
            let expected = everything.newestTransactions(digitalCardId: "DC-1", auxiliary: auxiliary, limit: limit)
            #expect(merged.map(\.id) == expected.map(\.id), "round \(round): \(stored.count) records, \(before) before")
            #expect(overlay.missing.isEmpty)
        }
    }

    private static func record(_ id: String, instant: Double, auxiliary: Bool) -> TransactionRecord {
        TransactionRecord(
            id: id, date: "d", instant: instant, status: "approved", type: "purchase", currencyCode: "EUR",
            amount: JSONNumber(1), isAuxiliaryTransaction: auxiliary)
    }
}
