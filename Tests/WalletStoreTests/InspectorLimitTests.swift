import Foundation
import Testing
import WalletRouting

@testable import WalletStore

/// Issue 24, item 11: `inspect card --transactions` near `Int.max` overflowed `2 * limit` reading a SQLite card's
/// history (on main this test traps). The command also refuses such a value with a clear error.
@Suite struct InspectorLimitTests {
    @Test func aHugeTransactionLimitReadsWhatThereIs() async throws {
        try await withTemporaryDirectory { directory in
            let path = directory.appendingPathComponent("wallet.sqlite").path
            let store = try WalletStores.open(.sqlite(path: path))
            _ = try await store.process(
                [Messages.install("DC-1", id: "m1"), Messages.tns("DC-1", recordId: "T-1", id: "m2")],
                router: NotificationRouter(), now: Date())
            await store.close()
            let inspector = try await StoreInspectors.open(.sqlite(path: path), statementTimeout: .seconds(5))
            let card = try await inspector.card("DC-1", transactionLimit: .max)
            await inspector.close()
            #expect(card?.transactions.map(\.id) == ["T-1"])
        }
    }
}
