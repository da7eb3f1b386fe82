import Logging
import TestSupport
import Testing
import WalletMessages

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
        let worker = InProcessWorker(logger: captured.logger(label: "pause", level: .info))
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
        #expect(worker.metric("wallet_results_pauses_total") == 1)
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
        #expect(worker.metric("wallet_results_pauses_total") == 1, "counted once, when it paused")
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
        #expect(worker.metric("wallet_results_pauses_total") == 0)
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
        #expect(worker.metric("wallet_results_pauses_total") == 1, "a failed trial is the same pause")
        #expect(worker.broker.retryCopies().isEmpty && worker.broker.settlements.isEmpty)
        #expect(worker.broker.published(to: Self.topology.deadLetterExchange).isEmpty)
        try await worker.stop()
    }

    /// A downstream redeploy at a few messages a minute never reaches the activation count: each message goes
    /// through its attempts alone. A last attempt refused after another message's refusal, with nothing taken for
    /// anyone in the 40 s its retries took at least, pauses the worker instead of dead-lettering it; the trial after
    /// the route is back delivers it.
    @Test func aQuietNightsLastAttemptPausesAndTheTrialDeliversIt() async throws {
        let captured = CapturedLog()
        let worker = InProcessWorker(logger: captured.logger(label: "quiet", level: .info))
        await worker.waitUntilConsuming()
        worker.broker.answerPublishes { $0.isResult ? .outcome(Self.noRoute) : .outcome(.confirmed) }
        _ = worker.broker.deliver([.action("refresh", id: "m-earlier")])
        await worker.broker.waitForSettlements(1)
        #expect(worker.broker.retryCopies().map(\.properties.messageID) == ["m-earlier"])
        var last = ScriptedMessage.action("refresh", id: "m-last")
        last.properties.headers = [WorkerHeaders.retryCount: .int32(4)]
        _ = worker.broker.deliver([last])

        await worker.broker.waitFor { $0.contains(.closed(session: 1)) }
        #expect(worker.broker.published(to: Self.topology.deadLetterExchange).isEmpty)
        #expect(worker.broker.retryCopies().count == 1 && worker.broker.settlements.count == 1, "given back")
        #expect(worker.health.notReadyBecause == "paused: results")
        await captured.waitFor("every message's results are refused: paused")
        #expect(
            captured.texts.contains { $0.contains("message 'm-last' refused on its last attempt (5)") },
            "\(captured.texts)")

        // The route is back by the trial: the message comes back, and its results are taken.
        await worker.clock.advanceToTimer(atMost: .seconds(5))
        await worker.broker.waitForSessions(2)
        worker.broker.answerPublishes { _ in .outcome(.confirmed) }
        let again = worker.broker.deliver([last], session: 2)
        await worker.broker.waitForSettlements(2)
        #expect(worker.broker.settlements.last == .ack(deliveryTag: again[0], multiple: false))
        await captured.waitFor("the results are taken again: resumed")
        #expect(worker.broker.published(to: Self.topology.deadLetterExchange).isEmpty)
        #expect(worker.metric("wallet_dead_letters_total") == 0)
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
