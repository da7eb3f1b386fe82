import Foundation
import GRDB
import TestSupport
import Testing
import WalletRouting

@testable import WalletStore

/// Values bound in place from the transaction's arena, and the values too large for it that SQLite copies: both
/// must read back byte for byte, statement after statement.
@Suite("Binding arena")
struct BindingArenaTests {
    @Test func copiesUntilFullThenRefusesAndReleasesToAMark() throws {
        let arena = BindingArena(capacity: 8)
        let first = Array("abcd".utf8)
        let copy = try #require(first.withUnsafeBytes { arena.copy($0) })
        #expect(Array(UnsafeRawBufferPointer(start: copy, count: 4)) == first)
        let mark = arena.mark
        #expect(Array("efgh".utf8).withUnsafeBytes { arena.copy($0) } != nil)
        #expect(Array("i".utf8).withUnsafeBytes { arena.copy($0) } == nil, "full: the caller binds it transiently")
        arena.release(to: mark)
        #expect(Array("ijkl".utf8).withUnsafeBytes { arena.copy($0) } != nil, "the space after the mark is free again")
        #expect(Array(UnsafeRawBufferPointer(start: copy, count: 4)) == first, "what is before the mark is kept")
    }

    private static func record(_ index: Int, text: String) -> TransactionRecord {
        TransactionRecord(
            id: "record-\(index)", date: "2026-11-27T06:00:00.000+01:00", instant: Double(index), status: "CLEARED",
            type: "PURCHASE", currencyCode: "EUR", amount: JSONNumber(validatedLiteral: "\(index).50"),
            displayAmount: "€\(index).50", merchantName: text, merchantType: "5411", merchantPostalCode: "75001",
            terminalID: "T-\(index)", merchantID: "M-\(index)")
    }

    private static func decision(_ result: OutboundResult) -> Decision {
        Decision(
            effects: [], results: [result], disposition: .acknowledge, outcome: .processed, sender: "TNS",
            digitalCardId: "DC-1")
    }

    @Test func recordsBoundInPlaceAndTooLargeForTheArenaReadBackExactly() async throws {
        try await withTemporaryDirectory { directory in
            let queue = try DatabaseQueue(path: directory.appendingPathComponent("arena.sqlite").path)
            try SQLiteSchema.migrator.migrate(queue)
            // Over a megabyte of statements in one transaction: the arena is reused statement after statement.
            let records = (0..<2_000).map {
                Self.record($0, text: "merchant \($0) " + String(repeating: "é", count: $0 % 300))
            }
            let large = OutboundResult(
                exchange: "wallet.transactions", routingKey: "transactions.records",
                body: (0..<200_000).map { UInt8(truncatingIfNeeded: $0 &* 31) },
                properties: OutboundProperties(messageID: "m-large/0", correlationID: nil, type: "x", traceparent: nil))
            let small = OutboundResult(
                exchange: "wallet.cards", routingKey: "cards.events", body: Array(#"{"kind":"cardEvent"}"#.utf8),
                properties: OutboundProperties(messageID: "m-small/0", correlationID: "c", type: "y", traceparent: nil))
            let largeDecision = Self.decision(large)
            let smallDecision = Self.decision(small)
            let (read, largeBack, smallBack) = try await queue.write { db in
                let transaction = SQLiteBatchTransaction(db)
                try transaction.apply(records.map { .storeTransaction(digitalCardId: "DC-1", record: $0) })
                try transaction.record(messageID: "m-large", decision: largeDecision, at: Date())
                try transaction.record(messageID: "m-small", decision: smallDecision, at: Date())
                return (
                    try transaction.newestTransactions(digitalCardId: "DC-1", auxiliary: nil, limit: 5_000),
                    try transaction.recordedDecision(messageID: "m-large"),
                    try transaction.recordedDecision(messageID: "m-small")
                )
            }
            #expect(Set(read) == Set(records))
            #expect(largeBack?.results == [large])
            #expect(smallBack?.results == [small])
        }
    }
}
