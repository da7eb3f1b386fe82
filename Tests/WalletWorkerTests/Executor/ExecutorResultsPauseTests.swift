import Logging
import TestSupport
import Testing

@testable import AMQPTransport
@testable import WalletWorker

/// The results' side out (issue 36; CONTRACT.md §8): a downstream redeploy leaves every result exchange without a
/// queue, a disk alarm confirms nothing. The worker pauses instead of retrying and dead-lettering the traffic: it
/// gives back what it holds, drops readiness naming the cause, tries again on its clock, and resumes; a message
/// whose own route is missing is still retried alone. On the scripted broker and a clock turned by hand; through
/// RabbitMQ: `ResultsPauseTests` (one end-to-end test).
@Suite("Executor: the results pause", .timeLimit(.minutes(1)))
struct ExecutorResultsPauseTests {
    private static let topology = Topology()
    private static let noRoute = AMQPPublishOutcome.returned(replyCode: 312, replyText: "NO_ROUTE")

    private static func messages(_ range: Range<Int>, prefix: String = "m") -> [ScriptedMessage] {
        range.map { ScriptedMessage.action("refresh", id: "\(prefix)-\($0)") }
    }

    @Test func everyResultReturnedPausesGivesEverythingBackAndATrialResumes() async throws {
        let captured = CapturedLog()
        var logger = Logger(label: "pause") { _ in CapturedLog.Handler(captured) }
        logger.logLevel = .info
        let worker = InProcessWorker(logger: logger)
        await worker.waitUntilConsuming()
        worker.broker.answerPublishes { $0.isResult ? .outcome(Self.noRoute) : .outcome(.confirmed) }
        _ = worker.broker.deliver(Self.messages(0..<20))

        // Given back by closing the session: the broker requeues them in place; nothing retried, nothing settled.
        await worker.broker.waitFor { $0.contains(.closed(session: 1)) }
        #expect(worker.broker.settlements.isEmpty)
        #expect(worker.broker.retryCopies().isEmpty)
        #expect(worker.broker.published(to: Self.topology.deadLetterExchange).isEmpty)
        #expect(!worker.health.isReady)
        #expect(worker.health.notReadyBecause == "paused: results")
        #expect(worker.metric("wallet_paused", labels: [#"cause="results""#]) == 1)
        #expect(worker.metric("wallet_paused", labels: [#"cause="store""#]) == 0)
        #expect(captured.texts.count { $0.contains("every message's results are refused: paused") } == 1)

        // No session while paused; the trial comes on the clock (within 5 s) and consumes again.
        await worker.clock.advanceToTimer(atMost: .seconds(5))
        await worker.broker.waitForSessions(2)
        #expect(captured.texts.count { $0.contains("trying the results again") } == 1)
        worker.broker.answerPublishes { _ in .outcome(.confirmed) }
        let again = worker.broker.deliver(Self.messages(0..<20), session: 2)
        await worker.broker.waitForSettlements(1)
        #expect(worker.broker.settlements == [.ack(deliveryTag: again.last!, multiple: true)])
        await captured.waitFor("the results are taken again: resumed")
        #expect(worker.health.isReady)
        #expect(worker.metric("wallet_paused", labels: [#"cause="results""#]) == 0)
        let resumed = captured.texts.filter { $0.contains("the results are taken again: resumed") }
        #expect(resumed.count == 1)
        #expect(resumed.first?.contains("gave_back=20") ?? false, "\(resumed)")
        #expect(worker.broker.retryCopies().isEmpty)
        try await worker.stop()
    }

    @Test func aNackStormPausesToo() async throws {
        let worker = InProcessWorker()
        await worker.waitUntilConsuming()
        worker.broker.answerPublishes { $0.isResult ? .outcome(.nacked) : .outcome(.confirmed) }
        _ = worker.broker.deliver(Self.messages(0..<10))
        await worker.broker.waitFor { $0.contains(.closed(session: 1)) }
        #expect(worker.broker.retryCopies().isEmpty && worker.broker.settlements.isEmpty)
        #expect(worker.health.notReadyBecause == "paused: results")
        try await worker.stop()
    }

    @Test func aConfirmTimeoutPausesTheWorkerAndRetriesNothing() async throws {
        let worker = InProcessWorker()
        await worker.waitUntilConsuming()
        worker.broker.answerPublishes { $0.isResult ? .hold : .outcome(.confirmed) }
        _ = worker.broker.deliver([.action("refresh", id: "m-1")])
        await worker.broker.waitForPublishes(1)
        worker.broker.answerHeldPublish(.failure(AMQPError(code: .timeout, message: "scripted: no confirm")))

        await worker.broker.waitFor { $0.contains(.closed(session: 1)) }
        #expect(worker.broker.retryCopies().isEmpty)
        #expect(worker.broker.settlements.isEmpty, "given back by the session's close, for the replay")
        #expect(worker.health.notReadyBecause == "paused: results")
        try await worker.stop()
    }

    @Test func aMessageWhoseOwnRouteIsMissingIsRetriedAloneWithoutAPause() async throws {
        let worker = InProcessWorker()
        await worker.waitUntilConsuming()
        // One card's results have no queue; every other message's do.
        worker.broker.answerPublishes { message in
            message.isResult && message.properties.messageID?.hasPrefix("lost-") == true
                ? .outcome(Self.noRoute) : .outcome(.confirmed)
        }
        for round in 0..<5 {
            let batch = Self.messages(0..<9, prefix: "ok-\(round)") + [.action("refresh", id: "lost-\(round)")]
            let tags = worker.broker.deliver(batch)
            await worker.broker.waitFor {
                $0.contains(.settled(session: 1, .ack(deliveryTag: tags.last!, multiple: true)))
            }
        }
        #expect(worker.broker.retryCopies().map(\.properties.messageID) == (0..<5).map { "lost-\($0)" })
        #expect(worker.health.isReady)
        #expect(worker.broker.sessionsOpened == 1)
        #expect(worker.metric("wallet_paused", labels: [#"cause="results""#]) == 0)
        try await worker.stop()
    }

    @Test func aTrialThatFailsPausesAgainOnALongerWait() async throws {
        let worker = InProcessWorker()
        await worker.waitUntilConsuming()
        worker.broker.answerPublishes { $0.isResult ? .outcome(Self.noRoute) : .outcome(.confirmed) }
        _ = worker.broker.deliver(Self.messages(0..<10))
        await worker.broker.waitFor { $0.contains(.closed(session: 1)) }

        await worker.clock.advanceToTimer(atMost: .seconds(5))
        await worker.broker.waitForSessions(2)
        _ = worker.broker.deliver(Self.messages(0..<10), session: 2)
        await worker.broker.waitFor { $0.contains(.closed(session: 2)) }
        // The second trial waits 5 to 10 s.
        let now = worker.clock.now.offset
        await worker.clock.waitForSleeper { $0 >= now + .seconds(5) && $0 <= now + .seconds(10) }
        #expect(worker.broker.sessionsOpened == 2)
        #expect(worker.broker.retryCopies().isEmpty && worker.broker.settlements.isEmpty)
        #expect(worker.broker.published(to: Self.topology.deadLetterExchange).isEmpty)
        try await worker.stop()
    }

    @Test func aStopWhilePausedEndsAtOnce() async throws {
        let worker = InProcessWorker()
        await worker.waitUntilConsuming()
        worker.broker.answerPublishes { $0.isResult ? .outcome(Self.noRoute) : .outcome(.confirmed) }
        _ = worker.broker.deliver(Self.messages(0..<10))
        await worker.broker.waitFor { $0.contains(.closed(session: 1)) }
        try await worker.stop()
        #expect(worker.broker.sessionsOpened == 1, "no trial after the stop")
    }
}
