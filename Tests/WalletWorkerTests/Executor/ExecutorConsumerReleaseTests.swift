import Testing

@testable import AMQPTransport
@testable import WalletWorker

/// CONTRACT.md §10 across reconnects: a session that follows a failed one consumes only once the broker has let go
/// of the failed session's consumer (and the deliveries it still holds), or once two heartbeats and 5 s have passed.
/// On the scripted broker, whose consumer counts the test sets, and a clock turned by hand. Through RabbitMQ, with a
/// connection frozen by a black hole: `LongRuns.ReconnectOrderTests`.
@Suite("Executor: the next session after a failure", .timeLimit(.minutes(1)))
struct ExecutorConsumerReleaseTests {
    /// Session 1 consumed (the only consumer) and failed while the broker still counts its consumer: counts answer
    /// `consumers` from then on.
    private func failedWhileTheBrokerHoldsItsConsumer(consumers: Int = 1) async -> InProcessWorker {
        let worker = InProcessWorker()
        await worker.waitUntilConsuming()
        worker.broker.setConsumers(consumers)
        worker.broker.session(1).closeByBroker(.consume, replyCode: 320, text: "CONNECTION_FORCED")
        await worker.broker.waitFor { $0.contains(.closed(session: 1)) }
        await worker.clock.advanceToTimer(atMost: .seconds(1))
        return worker
    }

    /// Waits until the session sleeps before its next count: the clock may be turned then, not before.
    private static func waitForThePoll(_ worker: InProcessWorker) async {
        let now = worker.clock.now.offset
        await worker.clock.waitForSleeper { $0 > now && $0 <= now + .milliseconds(250) }
    }

    @Test func theNextSessionConsumesOnceTheOldConsumerIsGone() async throws {
        let worker = await failedWhileTheBrokerHoldsItsConsumer()
        // It counts, finds the old consumer still there, and waits on the clock.
        await worker.broker.waitFor(1) { $0 == .countedConsumers(1) }
        for _ in 0..<3 {
            await worker.clock.advanceToTimer(atMost: .milliseconds(250))
        }
        await worker.broker.waitFor(4) { $0 == .countedConsumers(1) }
        #expect(worker.broker.sessionsOpened == 1, "consumed while the broker held the old consumer")

        // The broker drops it: the next count lets the session consume.
        worker.broker.setConsumers(0)
        await worker.clock.advanceToTimer(atMost: .milliseconds(250))
        await worker.broker.waitForSessions(2)
        let tags = worker.broker.deliver([.action("refresh", id: "m-1")], session: 2)
        await worker.broker.waitForSettlements(1)
        #expect(worker.broker.settlements == [.ack(deliveryTag: tags[0], multiple: false)])
        try await worker.stop()
    }

    @Test func pastTwoHeartbeatsAndFiveSecondsItConsumesWhateverTheCount() async throws {
        // Other replicas' consumers, say, keep the count up: the bound (25 s at the default heartbeat) ends the wait.
        let worker = await failedWhileTheBrokerHoldsItsConsumer(consumers: 3)
        await worker.broker.waitFor(1) { $0 == .countedConsumers(3) }
        // 20 s on: still within the bound, it counts again and goes on waiting.
        await Self.waitForThePoll(worker)
        worker.clock.advance(by: .seconds(20))
        await worker.broker.waitFor(2) { $0 == .countedConsumers(3) }
        await Self.waitForThePoll(worker)
        #expect(worker.broker.sessionsOpened == 1)
        // Past two heartbeats and 5 s (25 s) since the failure: it consumes.
        worker.clock.advance(by: .seconds(6))
        await worker.broker.waitForSessions(2)
        let tags = worker.broker.deliver([.action("refresh", id: "m-1")], session: 2)
        await worker.broker.waitForSettlements(1)
        #expect(worker.broker.settlements == [.ack(deliveryTag: tags[0], multiple: false)])
        try await worker.stop()
    }

    @Test func aStopWhileWaitingEndsTheWorkerWithoutConsuming() async throws {
        let worker = await failedWhileTheBrokerHoldsItsConsumer()
        await worker.broker.waitFor(1) { $0 == .countedConsumers(1) }
        try await worker.stop()
        #expect(worker.broker.sessionsOpened == 1)
    }
}
