import Testing

@testable import AMQPTransport
@testable import WalletWorker

/// A message that makes the broker close the publishing channel every time it is processed: isolated, counted, and
/// dead-lettered unprocessed after three failures alone; and when even its dead letter makes the broker close the
/// channel, rejected to the broker's own dead-lettering instead of blocking the head of its pipeline for ever.
@Suite("Executor: poison messages", .timeLimit(.minutes(1)))
struct ExecutorPoisonTests {
    /// 541 INTERNAL_ERROR: the broker choked on what was published.
    private static let choked = AMQPError(
        code: .channelClosedByBroker, message: "scripted: 541 INTERNAL_ERROR", replyCode: 541,
        replyText: "INTERNAL_ERROR")

    /// Delivers `message` to each new session until it is settled; returns the settlements and sessions it took.
    private func redeliverUntilSettled(_ message: ScriptedMessage, _ worker: InProcessWorker, sessions limit: Int)
        async -> (settlement: AMQPChannel.Settlement?, sessions: Int)
    {
        for session in 1...limit {
            await worker.broker.waitForSessions(session)
            var delivery = message
            delivery.redelivered = session > 1
            worker.broker.deliver([delivery], session: session)
            await worker.broker.waitFor { log in
                log.contains(.closed(session: session))
                    || log.contains { if case .settled = $0 { true } else { false } }
            }
            if let settlement = worker.broker.settlements.first { return (settlement, session) }
            await worker.clock.advanceToTimer(atMost: .seconds(60))
        }
        return (nil, limit)
    }

    @Test func aMessageThatClosesThePublishChannelEveryTimeIsDeadLetteredAfterThreeFailuresAlone() async throws {
        let worker = InProcessWorker()
        await worker.waitUntilConsuming()
        let choked = Self.choked
        // Its results choke the broker; its dead letter does not.
        worker.broker.answerPublishes { message in
            message.isResult && message.properties.messageID?.hasPrefix("poison") == true
                ? .fail(choked) : .outcome(.confirmed)
        }
        let (settlement, sessions) = await redeliverUntilSettled(.action("refresh", id: "poison"), worker, sessions: 6)

        #expect(sessions == 4, "three failures alone, then dead-lettered unprocessed")
        #expect(
            settlement.map { if case .ack = $0 { true } else { false } } == true, "\(String(describing: settlement))")
        let letters = worker.broker.published(to: Topology().deadLetterExchange)
        #expect(letters.map(\.properties.messageID) == ["poison"])
        #expect(letters.first?.header("x-worker-error")?.contains("3 times in a row") ?? false)
        try await worker.stop()
    }

    @Test func aPoisonMessageWhoseDeadLetterAlsoClosesTheChannelIsRejectedToTheBroker() async throws {
        let worker = InProcessWorker()
        await worker.waitUntilConsuming()
        let choked = Self.choked
        // Everything it makes chokes the broker, its dead letter too (its own headers, say).
        worker.broker.answerPublishes { message in
            message.properties.messageID?.hasPrefix("poison") == true ? .fail(choked) : .outcome(.confirmed)
        }
        let (settlement, sessions) = await redeliverUntilSettled(.action("refresh", id: "poison"), worker, sessions: 8)

        #expect(
            settlement.map { if case .nack(_, requeue: false) = $0 { true } else { false } } == true,
            "never settled in \(sessions) sessions: it blocks its pipeline for ever")
        #expect(sessions == 5)
        // The pipeline goes on with the next message.
        let tags = worker.broker.deliver([.action("refresh", id: "next")], session: sessions)
        await worker.broker.waitForSettlements(2)
        #expect(worker.broker.settlements.last == .ack(deliveryTag: tags[0], multiple: false))
        try await worker.stop()
    }
}
