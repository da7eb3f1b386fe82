import Testing

@testable import AMQPTransport
@testable import WalletWorker

/// The session's life on the broker's side: a connection closed under the worker, a consumer the broker cancels,
/// a resource alarm, a login refused or a broker not there yet, a shard handed over on stop.
@Suite("Executor: sessions, alarms, logins", .timeLimit(.minutes(1)))
struct ExecutorSessionTests {
    @Test func aConnectionClosedByTheBrokerLeavesTheUnsettledToItAndReconnectsAfterTheBackoff() async throws {
        let worker = InProcessWorker()
        await worker.waitUntilConsuming()
        worker.broker.answerPublishes { _ in .hold }
        worker.broker.deliver([.action("refresh", id: "m-1")])
        await worker.broker.waitForPublishes(1)

        worker.broker.session(1).closeByBroker(.consume, replyCode: 320, text: "CONNECTION_FORCED")
        await worker.broker.waitFor { $0.contains(.closed(session: 1)) }
        #expect(worker.broker.settlements.isEmpty, "settled on a connection that is gone")
        // Reconnects after the backoff, on the clock.
        await worker.clock.advanceToTimer(atMost: .seconds(1))
        await worker.broker.waitForSessions(2)
        worker.broker.answerPublishes { _ in .outcome(.confirmed) }
        var again = ScriptedMessage.action("refresh", id: "m-1")
        again.redelivered = true
        let tags = worker.broker.deliver([again])
        await worker.broker.waitForSettlements(1)
        #expect(worker.broker.settlements == [.ack(deliveryTag: tags[0], multiple: false)])
        #expect(worker.metric("wallet_reconnects_total") == 1)
        try await worker.stop()
    }

    @Test func aConsumerCancelledByTheBrokerStartsANewSession() async throws {
        let worker = InProcessWorker()
        await worker.waitUntilConsuming()
        worker.broker.session(1).cancelConsumerByBroker()
        await worker.broker.waitFor { $0.contains(.closed(session: 1)) }
        await worker.clock.advanceToTimer(atMost: .seconds(1))
        await worker.broker.waitForSessions(2)
        let tags = worker.broker.deliver([.action("refresh", id: "m-1")])
        await worker.broker.waitForSettlements(1)
        #expect(worker.broker.settlements == [.ack(deliveryTag: tags[0], multiple: false)])
        try await worker.stop()
    }

    @Test func aResourceAlarmIsCountedWhileItLastsAndHoldsTheAcknowledgementsBehindTheConfirms() async throws {
        let worker = InProcessWorker()
        await worker.waitUntilConsuming()
        worker.broker.answerPublishes { _ in .hold }
        let session = worker.broker.session(1)
        session.raise(.blocked(reason: "low on memory"), on: .publish)
        let tags = worker.broker.deliver([.action("refresh", id: "m-1")])
        await worker.broker.waitForPublishes(1)
        #expect(worker.metric("wallet_blocked_connections") == 1)
        #expect(worker.broker.settlements.isEmpty)

        session.raise(.unblocked, on: .publish)
        worker.broker.answerHeldPublish(.success([.confirmed]))
        await worker.broker.waitForSettlements(1)
        #expect(worker.broker.settlements == [.ack(deliveryTag: tags[0], multiple: false)])
        #expect(worker.metric("wallet_blocked_connections") == 0)
        try await worker.stop()
    }

    @Test func aStopDuringAnAlarmDoesNotWaitForConfirmsThatNeverCome() async throws {
        let worker = InProcessWorker()
        await worker.waitUntilConsuming()
        worker.broker.answerPublishes { _ in .hold }
        worker.broker.session(1).raise(.blocked(reason: "disk"), on: .publish)
        worker.broker.deliver([.action("refresh", id: "m-1")])
        await worker.broker.waitForPublishes(1)
        // SIGTERM: the worker stops consuming and waits for the confirm the alarm holds back, until the grace period
        // (ServiceLifecycle's) is over and the worker is cancelled.
        await worker.beginStop()
        await worker.broker.waitFor { $0.contains(.consumerCancelled(session: 1)) }
        try await worker.endGracePeriod()
        #expect(worker.broker.settlements.isEmpty, "acknowledged without a confirm")
        #expect(worker.broker.log.contains(.closed(session: 1)))
    }

    @Test func aRefusedFirstLoginStopsTheWorkerNamingTheRefusal() async throws {
        let worker = InProcessWorker(beforeStart: {
            $0.failLogins([AMQPError(code: .authenticationFailed, message: "ACCESS_REFUSED")])
        })
        let failure = await worker.failure()
        #expect(failure is BrokerLogin.Refused, "\(String(describing: failure))")
        #expect(worker.broker.sessionsOpened == 0)
    }

    @Test func anUnreachableBrokerAtStartIsWaitedForWithTheBackoff() async throws {
        let unreachable = AMQPError(code: .connectionFailed, message: "ECONNREFUSED")
        let worker = InProcessWorker(beforeStart: { $0.failLogins([unreachable, unreachable]) })
        await worker.clock.advanceToTimer(atMost: .seconds(1))
        await worker.clock.advanceToTimer(atMost: .seconds(2))
        await worker.waitUntilConsuming()
        #expect(worker.broker.log.first == .loginChecked)
        try await worker.stop()
    }

    @Test func aSessionThatFailsToOpenIsTriedAgainWithAGrowingBackoff() async throws {
        let lost = AMQPError(code: .connectionLost, message: "ECONNRESET")
        let worker = InProcessWorker(beforeStart: { $0.failSessionOpens([lost, lost]) })
        await worker.clock.advanceToTimer(atMost: .seconds(1))
        await worker.clock.advanceToTimer(atMost: .seconds(2))
        await worker.waitUntilConsuming()
        #expect(worker.health.isReady)
        try await worker.stop()
    }

    @Test func aStoppingShardClosesItsConsumeChannelBeforeItsConnections() async throws {
        let worker = InProcessWorker {
            $0.topology.orderedShards = 1
        }
        await worker.waitUntilConsuming(sessions: 2)
        let shard = worker.broker.log.compactMap { event -> Int? in
            if case .opened(let session, pipeline: 0) = event { session } else { nil }
        }[0]
        let tags = worker.broker.deliver(
            [.action("refresh", id: "m-1"), .action("refresh", id: "m-2")], session: shard)
        await worker.broker.waitForSettlements(1)
        try await worker.stop()
        let log = worker.broker.log
        let closedChannel = try #require(log.firstIndex(of: .consumeChannelClosed(session: shard)))
        let closed = try #require(log.firstIndex(of: .closed(session: shard)))
        #expect(closedChannel < closed)
        #expect(worker.broker.settlements.contains(.ack(deliveryTag: tags[1], multiple: true)))
    }
}
