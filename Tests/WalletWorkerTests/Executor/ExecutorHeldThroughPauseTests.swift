import Logging
import TestSupport
import Testing

@testable import AMQPTransport
@testable import WalletWorker

/// The results pause on a quorum work queue: the refused deliveries are held through the pause, unsettled on an open
/// channel with the consumer cancelled, and each trial publishes their recorded results again instead of
/// reconnecting and taking the head of the queue once more (each give-back would count toward the queue's delivery
/// limit). On the scripted broker and a clock turned by hand; the machine's rows are
/// `DeliveryLifecycleHeldThroughPauseTests`, the broker's count `LongRuns.QuorumPauseTests`.
@Suite("Executor: refused deliveries held through a results pause", .timeLimit(.minutes(1)))
struct ExecutorHeldThroughPauseTests {
    private static let noRoute = AMQPPublishOutcome.returned(replyCode: 312, replyText: "NO_ROUTE")

    private static func quorumWorker(logger: Logger = InProcessWorker.logger) -> InProcessWorker {
        InProcessWorker(configure: { $0.topology.workQueueType = .quorum }, logger: logger)
    }

    @Test func failedTrialsPublishTheSameResultsAgainOnTheSameSessionAndATakenOneSettlesThem() async throws {
        let captured = CapturedLog()
        var logger = Logger(label: "held") { _ in CapturedLog.Handler(captured) }
        logger.logLevel = .info
        let worker = Self.quorumWorker(logger: logger)
        await worker.waitUntilConsuming()
        worker.broker.answerPublishes { $0.isResult ? .outcome(Self.noRoute) : .outcome(.confirmed) }
        let tags = worker.broker.deliver((0..<10).map { ScriptedMessage.action("refresh", id: "m-\($0)") })

        // Paused: the consumer is cancelled, the session stays open for what it holds.
        await worker.broker.waitFor { $0.contains(.consumerCancelled(session: 1)) }
        await captured.waitFor("every message's results are refused: paused")
        #expect(!worker.broker.log.contains(.closed(session: 1)))
        #expect(worker.broker.settlements.isEmpty)
        #expect(worker.health.notReadyBecause == "paused: results")
        let first = worker.broker.published.filter(\.isResult)
        #expect(first.count == 10)

        // Two trials: each publishes the held results again, byte for byte, and opens no session. Before each, the
        // trial's timer is armed (after a failed trial, beside the stale deadline of the one before).
        for trial in 1...2 {
            await worker.clock.waitForSleepers(atLeast: trial == 1 ? 1 : 2, dueWithin: .seconds(60))
            worker.clock.advance(by: .seconds(60))
            await worker.broker.waitFor { log in
                let messages = log.flatMap { event -> [AMQPOutboundMessage] in
                    if case .published(_, let messages) = event { messages } else { [] }
                }
                return messages.count(where: \.isResult) == 10 * (trial + 1)
            }
            await captured.waitFor("the trial found the results still refused", count: trial)
        }
        let results = worker.broker.published.filter(\.isResult)
        #expect(Array(results[10..<20]) == first && Array(results[20..<30]) == first)
        #expect(worker.broker.sessionsOpened == 1)
        #expect(worker.broker.settlements.isEmpty)
        #expect(worker.broker.retryCopies().isEmpty)
        #expect(
            captured.texts.count {
                $0.contains("trying the results again: publishing the results of the deliveries held")
                    && $0.contains("held=10")
            } == 2)

        // The third trial's results are taken: acknowledged, resumed, and the pipeline consumes on a new session.
        worker.broker.answerPublishes { _ in .outcome(.confirmed) }
        await worker.clock.waitForSleepers(atLeast: 2, dueWithin: .seconds(60))
        worker.clock.advance(by: .seconds(60))
        await worker.broker.waitForSettlements(1)
        #expect(worker.broker.settlements == [.ack(deliveryTag: tags.last!, multiple: true)])
        await captured.waitFor("the results are taken again: resumed")
        await worker.broker.waitForSessions(2)
        #expect(worker.broker.log.contains(.closed(session: 1)))
        #expect(worker.health.isReady)
        #expect(worker.broker.published.filter(\.isResult).count == 40)
        try await worker.stop()
    }

    @Test func heldPastTheStoreHoldLimitTheyGoBackWithTheSessionsClose() async throws {
        let captured = CapturedLog()
        let worker = Self.quorumWorker(logger: captured.logger(level: .info))
        await worker.waitUntilConsuming()
        worker.broker.answerPublishes { $0.isResult ? .outcome(Self.noRoute) : .outcome(.confirmed) }
        _ = worker.broker.deliver((0..<10).map { ScriptedMessage.action("refresh", id: "m-\($0)") })
        await worker.broker.waitFor { $0.contains(.consumerCancelled(session: 1)) }

        // The first trial, and the hold limit (half the consumer timeout: 15 minutes by default), come due.
        let limit = worker.configuration.storeHoldLimit
        await worker.clock.waitForSleepers(atLeast: 2, dueWithin: limit)
        worker.clock.advance(to: limit)
        await worker.broker.waitFor { $0.contains(.closed(session: 1)) }
        await captured.waitFor("giving the deliveries held through the pause back")
        #expect(worker.clock.now.offset >= worker.configuration.storeHoldLimit)
        #expect(worker.clock.now.offset < worker.configuration.consumerTimeout)
        #expect(worker.broker.settlements.isEmpty, "given back by the close, unsettled")
        #expect(worker.broker.retryCopies().isEmpty)
        #expect(worker.health.notReadyBecause == "paused: results")
        try await worker.stop()
    }
}
