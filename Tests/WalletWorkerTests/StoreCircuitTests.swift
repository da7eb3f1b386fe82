import AMQPTransport
import Foundation
import Logging
import Synchronization
import Testing
import WalletRouting
import WalletStore

@testable import WalletWorker

/// A store outage pauses the worker instead of sending its messages through the retries to the dead letters.
@Suite(.timeLimit(.minutes(1))) struct StoreCircuitTests {
    let logger = Logger(label: "store-circuit-tests", factory: { _ in SwiftLogNoOpLogHandler() })

    func processor(
        _ store: some WalletStore, health: WorkerHealth, metrics: WorkerMetrics, stop: StopSignal = StopSignal(),
        circuit: StoreCircuit? = nil
    ) -> BatchProcessor {
        BatchProcessor(
            store: store, router: NotificationRouter(), topology: Topology(), retry: .attempts(5),
            confirmTimeout: .seconds(5), metrics: metrics, logger: logger,
            storeCircuit: circuit ?? StoreCircuit(health: health, metrics: metrics, logger: logger), stop: stop)
    }

    let batch = [BatchPlannerTests.install("DC-1"), BatchPlannerTests.replenish("DC-1")]

    @Test func aBatchIsHeldWhileTheStoreIsDownThenProcessedNotRetried() async throws {
        let store = OutageStore(failingBatches: 2, storeDown: true)
        let health = WorkerHealth(pipelines: 0)
        let metrics = WorkerMetrics()
        let processor = processor(store, health: health, metrics: metrics)
        let watcher = Task {
            // Readiness goes false during the outage.
            while !health.isStoreUnavailable { try await Task.sleep(for: .milliseconds(1)) }
            return true
        }
        let plans = try await processor.planHeld(batch, processor.planner)
        #expect(plans.map(\.route) == [.results, .results], "no retry attempt spent, no dead letter")
        #expect(store.calls == 3)
        #expect(try await watcher.value)
        #expect(!health.isStoreUnavailable, "ready again once the store answered")
        let exposition = String(decoding: metrics.exposition(), as: UTF8.self)
        #expect(exposition.contains("wallet_store_outages_total 1"))
        #expect(exposition.contains("wallet_store_available 1"))
        // Every store transaction is timed, the failed ones apart (issue 25).
        #expect(exposition.contains(#"wallet_store_batch_seconds_count{outcome="failed"} 2"#), "\(exposition)")
        #expect(exposition.contains(#"wallet_store_batch_seconds_count{outcome="committed"} 1"#), "\(exposition)")
    }

    @Test func whenTheStoreAnswersButTheBatchKeepsFailingItGoesToTheRetryQueue() async throws {
        let store = OutageStore(failingBatches: .max, storeDown: false)
        let health = WorkerHealth(pipelines: 0)
        let processor = processor(store, health: health, metrics: WorkerMetrics())
        let plans = try await processor.planHeld(batch, processor.planner)
        #expect(store.calls == StoreCircuit.attemptsWhileStoreAnswers)
        #expect(plans.allSatisfy { if case .retry(attempt: 1, _) = $0.route { true } else { false } })
        #expect(!health.isStoreUnavailable, "the store answers: the worker stays ready")
    }

    @Test func stoppingEndsTheWaitAndLeavesTheBatchToTheBroker() async throws {
        let store = OutageStore(failingBatches: .max, storeDown: true)
        let stop = StopSignal()
        let health = WorkerHealth(pipelines: 0)
        let metrics = WorkerMetrics()
        // Delays of ten minutes: only the stop can end the wait within the suite's time limit (no wall-clock
        // bound, which a loaded runner breaks).
        let circuit = StoreCircuit(
            health: health, metrics: metrics, logger: logger, firstDelay: .seconds(600), longestDelay: .seconds(600))
        let processor = processor(store, health: health, metrics: metrics, stop: stop, circuit: circuit)
        let batch = batch
        let holding = Task { try await processor.planHeld(batch, processor.planner) }
        while store.calls < 1 { try await Task.sleep(for: .milliseconds(5)) }
        stop.stop()
        await #expect(throws: CancellationError.self) { try await holding.value }
        #expect(store.calls == 1, "no further try after the stop")
    }

    @Test func delaysGrowWithJitterUpToTheCeiling() {
        var generator = SystemRandomNumberGenerator()
        let circuit = StoreCircuit(health: WorkerHealth(pipelines: 0), metrics: WorkerMetrics(), logger: logger)
        for attempt in 1...12 {
            let ceiling = min(circuit.firstDelay * (1 << (attempt - 1)), circuit.longestDelay)
            for _ in 0..<20 {
                let delay = circuit.delay(attempt: attempt, using: &generator)
                #expect(delay <= ceiling && delay >= ceiling / 2, "attempt \(attempt): \(delay)")
            }
        }
    }
}

extension BatchProcessor {
    var planner: BatchPlanner {
        BatchPlanner(store: store, router: router, topology: topology, retry: retry, logger: logger)
    }
}

/// Fails its first `failingBatches` batches transiently; `checkAvailable` fails meanwhile when `storeDown`.
final class OutageStore: WalletStore {
    private let inner = InMemoryWalletStore()
    private let failingBatches: Int
    private let storeDown: Bool
    private let count = Mutex(0)

    init(failingBatches: Int, storeDown: Bool) {
        self.failingBatches = failingBatches
        self.storeDown = storeDown
    }

    var calls: Int { count.withLock { $0 } }

    func process(_ messages: [InboundMessage], router: NotificationRouter, now: Date) async throws(StoreError)
        -> [StoredDecision]
    {
        let call = count.withLock { count in
            count += 1
            return count
        }
        if call <= failingBatches { throw StoreError(.transient, "connection refused") }
        return try await inner.process(messages, router: router, now: now)
    }

    func dryRun(_ messages: [InboundMessage], router: NotificationRouter, now: Date) async throws(StoreError)
        -> [StoredDecision]
    {
        try await inner.dryRun(messages, router: router, now: now)
    }

    func checkAvailable() async throws(StoreError) {
        if storeDown && calls < failingBatches { throw StoreError(.transient, "connection refused") }
    }

    func expireProcessedMessages(recordedBefore cutoff: Date) async throws(StoreError) -> Int { 0 }

    func close() async {}
}
