import Foundation
import Testing
import WalletRouting
import WalletStore

/// A micro-measurement, not a timed test: prints µs per message for 20,000 realistic messages in batches of 200,
/// on the in-memory store (routing alone), on SQLite (routing + store) and, when `POSTGRES_URL` is set, on
/// PostgreSQL (same workload, a fresh schema). Run with
/// `WALLET_STORE_MEASURE=1 swift test -c release --filter StoreMeasurementTests` (PostgreSQL: through
/// scripts/test.sh, or with POSTGRES_URL set).
@Suite(.enabled(if: ProcessInfo.processInfo.environment["WALLET_STORE_MEASURE"] != nil))
struct StoreMeasurementTests {
    @Test func microsecondsPerMessage() async throws {
        let batches = Self.batches(cards: 200, messages: 20_000, batchSize: 200)
        let memory = try await Self.measure(InMemoryWalletStore(), batches)
        try await withTemporaryDirectory { directory in
            let store = try WalletStores.open(.sqlite(path: directory.appendingPathComponent("bench.sqlite").path))
            let sqlite = try await Self.measure(store, batches)
            await store.close()
            print(
                "store measurement: memory \(Self.format(memory)) µs/msg, sqlite \(Self.format(sqlite)) µs/msg "
                    + "(\(Int(1e6 / sqlite)) msg/s), "
                    + "store share \(Self.format(sqlite - memory)) µs/msg (wall clock, 20,000 messages, batches of 200)"
            )
        }
        guard PostgresTestDatabase.url != nil else { return }
        try await PostgresTestDatabase.withSchema { location in
            let store = try PostgresTestDatabase.store(location)
            let postgres = try await Self.measure(store, batches)
            await store.close()
            print(
                "store measurement: postgres \(Self.format(postgres)) µs/msg (\(Int(1e6 / postgres)) msg/s), "
                    + "store share \(Self.format(postgres - memory)) µs/msg (wall clock, 20,000 messages, batches of 200)"
            )
        }
    }

    /// Cards installed first, then TNS records (a store and a 10-record read each), MG replenishments and CPS
    /// informational messages, every one with a message_id, spread over the cards.
    private static func batches(cards: Int, messages: Int, batchSize: Int) -> [[InboundMessage]] {
        var all = (0..<cards).map { Messages.install("DC-\($0)", id: "install-\($0)") }
        for n in 0..<messages {
            let card = "DC-\(n % cards)"
            let id = "msg-\(n)"
            switch n % 4 {
            case 0, 1:
                let minute = String(format: "%02d", n / cards % 60)
                let hour = String(format: "%02d", n / cards / 60 % 24)
                all.append(Messages.tns(card, recordId: "T-\(n)", date: "2026-11-20T\(hour):\(minute):00Z", id: id))
            case 2: all.append(Messages.mg(card, id: id))
            default: all.append(Messages.cps(card, code: "CBP.info.paymentAccepted", id: id))
            }
        }
        return stride(from: 0, to: all.count, by: batchSize).map { Array(all[$0..<min($0 + batchSize, all.count)]) }
    }

    /// Wall-clock µs per message of the measured part (the install batch is excluded).
    private static func measure(_ store: any WalletStore, _ batches: [[InboundMessage]]) async throws -> Double {
        let router = NotificationRouter()
        let now = Date(timeIntervalSince1970: 1_795_000_000)
        _ = try await store.process(batches[0], router: router, now: now)
        let measured = batches.dropFirst()
        let clock = ContinuousClock()
        let start = clock.now
        for batch in measured {
            _ = try await store.process(batch, router: router, now: now)
        }
        let elapsed = clock.now - start
        let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
        return seconds * 1e6 / Double(measured.reduce(0) { $0 + $1.count })
    }

    private static func format(_ value: Double) -> String { String(format: "%.2f", value) }
}
