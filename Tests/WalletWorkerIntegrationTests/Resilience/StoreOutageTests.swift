// Issue 13: a PostgreSQL failover of 30-60 s dead-lettered every message that arrived meanwhile (5 attempts, 5 s
// apart). Now the worker holds its batch and takes no more until the store answers. This is the one end-to-end
// test of a store outage; the worker's decisions are `ExecutorStoreOutageTests` (in process, on a clock turned by
// hand), and a read-only PostgreSQL found out by the store's check is `PostgresWalletStoreTests`.
import AMQPTransport
import BrokerTestSupport
import Foundation
import TestSupport
import Testing
import WalletStore
import WalletWorker

@Suite(
    "Store outage (PostgreSQL behind a relay)", .timeLimit(.minutes(3)),
    .enabled(
        if: ReplicaDatabase.isConfigured,
        "POSTGRES_URL is not set: scripts/test.sh starts a private PostgreSQL and sets it"))
struct StoreOutageTests {
    @Test(
        "while the store is unreachable nothing is retried or dead-lettered and the worker is not ready; it resumes when the store answers"
    )
    func outagePausesInsteadOfDeadLettering() async throws {
        try await ReplicaDatabase.with("outage") { database in
            let relay = try database.relay()
            defer { relay.close() }
            let store = try database.store(through: relay)
            // Two attempts 200 ms apart: the old worker dead-lettered every message within a second of the outage.
            try await withWorkerEnvironment(
                "store-outage",
                configure: {
                    $0.store = store
                    $0.retryAttempts = 2
                    $0.retryDelay = .milliseconds(200)
                }
            ) { environment in
                try await environment.declareTopology()
                let capture = try await environment.resultCapture()
                let deadLetters = try await environment.deadLetterReader()
                let worker = try await environment.startWorker()
                try await environment.publish(
                    InboundSpec(json: #"{"action":"warm"}"#, messageID: "\(environment.prefix).warm"))
                try await capture.results.waitFor(1, "the first result, store up")

                relay.refuse()
                let ids = (0..<5).map { "\(environment.prefix).during-\($0)" }
                try await environment.publish(ids.map { InboundSpec(json: #"{"action":"refresh"}"#, messageID: $0) })
                try await waitUntil("the worker to notice the outage", every: .milliseconds(20)) {
                    worker.health.isStoreUnavailable
                }
                #expect(!worker.health.isReady)
                #expect(worker.metric("wallet_store_available") == 0)
                // Waited by the worker's own probes, not by a guessed time: three failed checks (each probe waits at
                // least 250, then 500 ms) outlast the old worker's two attempts 200 ms apart.
                try await waitUntil("three failed store checks", every: .milliseconds(20)) {
                    worker.metric("wallet_store_checks_total", labels: [#"outcome="failed""#]) >= 3
                }
                #expect(deadLetters.count == 0, "dead-lettered while only waiting for the store")
                #expect(worker.metric("wallet_retries_total") == 0)
                #expect(capture.results.count == 1)

                relay.accept()
                let results = try await capture.results.waitFor(6, "the held messages' results")
                #expect(Set(results.compactMap(\.properties.messageID)).isSuperset(of: ids.map { "\($0)/0" }))
                try await waitUntil(
                    "ready again once the store answers", every: .milliseconds(20)
                ) { worker.health.isReady }
                #expect(worker.metric("wallet_store_available") == 1)
                #expect(worker.metric("wallet_store_outages_total") == 1)
                #expect(deadLetters.count == 0)
                #expect(worker.metric("wallet_reconnects_total") == 0)
                try await worker.stop()
            }
        }
    }
}
