import Testing
import WalletStore

@testable import AMQPTransport
@testable import WalletWorker

/// The store out: the worker holds what it has, takes no more, drops readiness, probes on its clock, gives back
/// before the broker's consumer timeout, and resumes when the store answers; nothing is retried or dead-lettered.
/// The same through a real PostgreSQL and RabbitMQ: `StoreOutageTests` (one end-to-end test).
@Suite("Executor: a store outage", .timeLimit(.minutes(1)))
struct ExecutorStoreOutageTests {
    @Test func anOutageHoldsTheBatchProbesOnTheClockAndResumesWhenTheStoreAnswers() async throws {
        let worker = InProcessWorker()
        await worker.waitUntilConsuming()
        worker.store.setOutage(ScriptedStore.unreachable)
        let tags = worker.broker.deliver((0..<5).map { ScriptedMessage.action("refresh", id: "held-\($0)") })

        // The first probe is armed (within a second): the outage has begun.
        await worker.clock.waitForSleeper { $0 <= .seconds(1) }
        #expect(worker.health.isStoreUnavailable)
        #expect(!worker.health.isReady)
        #expect(worker.metric("wallet_store_available") == 0)
        #expect(worker.broker.published.isEmpty && worker.broker.settlements.isEmpty)

        // Probes fail while it stays out, each on the clock.
        let checks = worker.store.checks
        await worker.clock.advanceToTimer(atMost: .seconds(1))
        let now = worker.clock.now.offset
        await worker.clock.waitForSleeper { $0 > now && $0 <= now + .seconds(2) }
        #expect(worker.store.checks == checks + 1)
        #expect(worker.broker.published.isEmpty)
        #expect(
            worker.metric("wallet_store_checks_total", labels: [#"outcome="failed""#]) == Double(checks + 1),
            "every check failed, each counted")

        worker.store.setOutage(nil)
        await worker.clock.advanceToTimer(atMost: .seconds(2))
        await worker.broker.waitForSettlements(1)
        #expect(
            Set(worker.broker.published.compactMap(\.properties.messageID)) == Set(tags.indices.map { "held-\($0)/0" }))
        #expect(worker.broker.settlements == [.ack(deliveryTag: tags.last!, multiple: true)])
        #expect(worker.broker.retryCopies().isEmpty)
        #expect(worker.health.isReady && !worker.health.isStoreUnavailable)
        #expect(worker.metric("wallet_store_outages_total") == 1)
        #expect(
            worker.metric("wallet_store_checks_total", labels: [#"outcome="passed""#]) == 1, "the probe that passed")
        try await worker.stop()
    }

    @Test func heldPastHalfTheConsumerTimeoutTheDeliveriesAreGivenBackAndThePipelinePauses() async throws {
        let worker = InProcessWorker { $0.consumerTimeout = .seconds(60) }
        await worker.waitUntilConsuming()
        worker.store.setOutage(ScriptedStore.unreachable)
        let tags = worker.broker.deliver((0..<3).map { ScriptedMessage.action("refresh", id: "held-\($0)") })

        // Given back at 30 s (half the broker's consumer timeout), not before; probes meanwhile find it out.
        await worker.clock.waitForSleeper { $0 == .seconds(30) }
        while worker.clock.now.offset < .seconds(30) {
            #expect(worker.broker.settlements.isEmpty, "given back before half the consumer timeout")
            await worker.clock.advanceToTimer(atMost: .seconds(30))
        }
        // Given back by closing the session: the broker requeues them in place, in order, unsettled.
        await worker.broker.waitFor { $0.contains(.closed(session: 1)) }
        #expect(worker.broker.settlements.isEmpty)
        #expect(worker.broker.published.isEmpty)
        _ = tags

        // Paused: no session while the store is out, however long.
        for _ in 0..<5 {
            let checks = worker.store.checks
            await worker.clock.advanceToTimer(atMost: .seconds(60))
            await worker.store.waitForChecks(checks + 1)
        }
        #expect(worker.broker.sessionsOpened == 1)

        worker.store.setOutage(nil)
        await worker.clock.advanceToTimer(atMost: .seconds(60))
        await worker.broker.waitForSessions(2)
        let again = worker.broker.deliver((0..<3).map { ScriptedMessage.action("refresh", id: "held-\($0)") })
        await worker.broker.waitForSettlements(1)
        #expect(worker.broker.settlements.last == .ack(deliveryTag: again.last!, multiple: true))
        #expect(worker.broker.published(to: Topology().deadLetterExchange).isEmpty)
        try await worker.stop()
    }

    @Test func aBatchThatFailsWhileTheStoreAnswersGoesToTheRetryQueue() async throws {
        let worker = InProcessWorker()
        await worker.waitUntilConsuming()
        // Not an outage: the store's checks pass, yet this batch fails, three times.
        let own = StoreError(.transient, "scripted: deadlock")
        worker.store.failNextBatches([own, own, own])
        let tags = worker.broker.deliver([.action("refresh", id: "m-1")])
        for _ in 0..<2 { await worker.clock.advanceToTimer(atMost: .seconds(5)) }
        await worker.broker.waitForSettlements(1)

        #expect(worker.store.batches == 3)
        #expect(worker.broker.retryCopies().map(\.properties.messageID) == ["m-1"])
        #expect(worker.broker.settlements == [.ack(deliveryTag: tags[0], multiple: false)])
        #expect(!worker.health.isStoreUnavailable)
        try await worker.stop()
    }

    @Test func aPermanentStoreFailureStopsTheWorkerWithIt() async throws {
        let worker = InProcessWorker()
        await worker.waitUntilConsuming()
        worker.store.failNextBatches([StoreError(.permanent, "scripted: the schema is newer than this build")])
        worker.broker.deliver([.action("refresh", id: "m-1")])
        let failure = await worker.failure()
        #expect("\(failure.map { "\($0)" } ?? "none")".contains("newer than this build"))
        #expect(worker.broker.settlements.isEmpty, "nothing uncommitted is acknowledged")
    }
}

extension ExecutorStoreOutageTests {
    /// A review's suspicion: a store check that fails after its session has ended was ignored (`storeChecked`
    /// found no session and returned), so the next session consumed into a store that was out.
    @Test func aCheckThatFindsTheStoreOutAfterItsSessionEndedBeginsTheOutage() async throws {
        let worker = InProcessWorker()
        await worker.waitUntilConsuming()
        worker.store.holdChecks()
        worker.store.failNextBatches([StoreError(.transient, "scripted: deadlock")])
        worker.broker.deliver([.action("refresh", id: "m-1")])
        // The batch failed; its check is at the store when the connection goes.
        await worker.store.waitForHeldCheck()
        worker.broker.session(1).closeByBroker(.consume)
        await worker.broker.waitFor { $0.contains(.closed(session: 1)) }
        // The pipeline reconnects first, so the only short timer left is the probe's.
        await worker.clock.advanceToTimer(atMost: .seconds(1))
        await worker.broker.waitForSessions(2)
        worker.store.setOutage(ScriptedStore.unreachable)
        worker.store.answerHeldChecks(StoreError(.transient, "scripted: the database does not answer", outage: true))

        // The outage begins: a probe is armed (250 to 500 ms ahead), and the worker is not ready.
        let now = worker.clock.now.offset
        await worker.clock.waitForSleeper { $0 > now && $0 <= now + .seconds(1) }
        #expect(worker.health.isStoreUnavailable)
        #expect(worker.metric("wallet_store_outages_total") == 1)
        try await worker.stop()
    }
}
