import Testing

@testable import WalletRouting

/// `TransactionRecord` keeps its fields in one shared object: it must still compare, hash and print as a value.
struct TransactionRecordTests {
    static func record(merchantID: String? = "M-1", instant: Double = 1_795_000_000) -> TransactionRecord {
        TransactionRecord(
            id: "T-1", date: "2026-11-20T10:00:00Z", instant: instant, status: "approved", type: "purchase",
            currencyCode: "EUR", amount: JSONNumber(validatedLiteral: "12.50"), merchantName: "Café",
            merchantID: merchantID)
    }

    @Test func recordsMadeApartFromTheSameValuesAreEqualAndHashAlike() {
        let first = Self.record()
        let second = Self.record()
        #expect(first == second)
        #expect(first.hashValue == second.hashValue)
        #expect(Set([first, second]).count == 1)
    }

    @Test func recordsDifferingInOneFieldAreNotEqual() {
        #expect(Self.record() != Self.record(merchantID: nil))
        #expect(Self.record() != Self.record(merchantID: "M-2"))
        #expect(Self.record() != Self.record(instant: 1_795_000_001))
    }

    @Test func aCopyReadsTheSameFields() {
        let record = Self.record()
        let copy = record
        #expect(copy == record)
        #expect(copy.id == "T-1" && copy.amount.literal == "12.50" && copy.merchantName == "Café")
        #expect(copy.displayAmount == nil && copy.isAuxiliaryTransaction == false)
    }

    @Test func itPrintsItsFields() {
        let text = String(describing: Self.record())
        #expect(text.hasPrefix("TransactionRecord(id: \"T-1\", date: \"2026-11-20T10:00:00Z\""), "\(text)")
        #expect(text.contains("merchantID: Optional(\"M-1\")"), "\(text)")
    }
}
