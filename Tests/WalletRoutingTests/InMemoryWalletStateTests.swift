import Testing

@testable import WalletRouting

@Suite("InMemoryWalletState")
struct InMemoryWalletStateTests {
    static func record(_ id: String, _ instant: Double, auxiliary: Bool = false) -> TransactionRecord {
        TransactionRecord(
            id: id, date: "d", instant: instant, status: "approved", type: "purchase", currencyCode: "EUR",
            amount: JSONNumber(1), isAuxiliaryTransaction: auxiliary)
    }

    @Test func newestFirstTiesLaterStoredFirstAndFilters() {
        var state = InMemoryWalletState()
        state.apply([
            .storeTransaction(digitalCardId: "C", record: Self.record("a", 10)),
            .storeTransaction(digitalCardId: "C", record: Self.record("b", 20, auxiliary: true)),
            .storeTransaction(digitalCardId: "C", record: Self.record("c", 10)),
            .storeTransaction(digitalCardId: "C", record: Self.record("d", 5)),
            .storeTransaction(digitalCardId: "C", record: Self.record("e", 10, auxiliary: true)),
            .storeTransaction(digitalCardId: "C", record: Self.record("a", 99)),  // duplicate id: ignored
            .storeTransaction(digitalCardId: "other", record: Self.record("z", 50)),
        ])
        #expect(
            state.newestTransactions(digitalCardId: "C", auxiliary: nil, limit: 10).map(\.id) == [
                "b", "e", "c", "a", "d",
            ])
        #expect(state.newestTransactions(digitalCardId: "C", auxiliary: false, limit: 10).map(\.id) == ["c", "a", "d"])
        #expect(state.newestTransactions(digitalCardId: "C", auxiliary: true, limit: 1).map(\.id) == ["b"])
        #expect(state.newestTransactions(digitalCardId: "C", auxiliary: nil, limit: 0).isEmpty)
        #expect(state.newestTransactions(digitalCardId: "none", auxiliary: nil, limit: 10).isEmpty)
        #expect(state.hasTransaction(digitalCardId: "C", recordId: "a"))
        #expect(!state.hasTransaction(digitalCardId: "C", recordId: "z"))
        #expect(state.transactions(digitalCardId: "C").first { $0.id == "a" }?.instant == 10)
    }

    @Test func cardsAndInstallations() {
        var state = InMemoryWalletState()
        let card = CardRecord(digitalCardId: "C", state: .active)
        let installation = Installation(installationId: "i", platform: "fcm", pushChannel: "t", tags: [])
        state.apply([.upsertCard(card), .upsertInstallation(installation)])
        #expect(state.card("C") == card)
        #expect(state.installations["i"] == installation)
        state.apply([
            .upsertCard(CardRecord(digitalCardId: "C", state: .deleted)), .deleteInstallation(installationId: "i"),
        ])
        #expect(state.card("C")?.state == .deleted)
        #expect(state.installations.isEmpty)
    }
}
