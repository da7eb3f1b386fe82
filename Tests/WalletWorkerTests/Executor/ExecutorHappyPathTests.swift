import Testing

@testable import AMQPTransport
@testable import WalletWorker

/// The executor on its ordinary day: a delivery in, its results out and confirmed, then its acknowledgement; a stop
/// finishes what is in hand. On the scripted broker and a clock turned by hand.
@Suite("Executor: results, acknowledgements, stop", .timeLimit(.minutes(1)))
struct ExecutorHappyPathTests {
    @Test func aDeliveryIsAcknowledgedOnlyAfterItsResultsAreConfirmed() async throws {
        let worker = InProcessWorker()
        await worker.waitUntilConsuming()
        worker.broker.answerPublishes { _ in .hold }
        let tags = worker.broker.deliver([ScriptedMessage.install("DC-1", id: "m-1")])

        await worker.broker.waitFor { $0.contains { if case .published = $0 { true } else { false } } }
        let published = worker.broker.published
        #expect(Set(published.map(\.exchange)) == ["wallet.events"])
        #expect(published.map(\.properties.messageID) == published.indices.map { "m-1/\($0)" })
        #expect(worker.broker.settlements.isEmpty, "acknowledged before its result was confirmed")

        worker.broker.answerHeldPublish(.success(published.map { _ in .confirmed }))
        await worker.broker.waitFor { if case .settled = $0 { true } else { false } }
        #expect(worker.broker.settlements == [.ack(deliveryTag: tags[0], multiple: false)])
        try await worker.stop()
    }

    @Test func aStopFinishesTheBatchInHandThenClosesTheSession() async throws {
        let worker = InProcessWorker()
        await worker.waitUntilConsuming()
        worker.broker.answerPublishes { _ in .hold }
        worker.broker.deliver([.install("DC-1", id: "m-1"), .install("DC-2", id: "m-2")])
        await worker.broker.waitFor { if case .published = $0 { true } else { false } }

        let stopping = Task { try await worker.stop() }
        await worker.broker.waitFor { if case .consumerCancelled = $0 { true } else { false } }
        #expect(worker.broker.settlements.isEmpty)
        let count = worker.broker.published.count
        worker.broker.answerHeldPublish(.success(Array(repeating: .confirmed, count: count)))
        try await stopping.value

        let log = worker.broker.log.map(\.description)
        #expect(worker.broker.settlements == [.ack(deliveryTag: 2, multiple: true)])
        #expect(log.last == "session 1 closed", "\(log)")
        #expect(!worker.health.isReady)
    }
}

extension ScriptedMessage {
    /// A CPS install of card `card`.
    static func install(_ card: String, id: String?) -> ScriptedMessage {
        ScriptedMessage(
            json: #"{"sender":"CPS","digitalCardId":"\#(card)","tokenizedCardId":"TK-\#(card)","keyType":"LUK","#
                + #""serverMessage":{"code":"CBP.info.tokenProvisioned","text":"added","severity":"info"}}"#,
            messageID: id)
    }

    /// A body that is not JSON: dead-lettered with its `rejected` result.
    static func notJSON(id: String?) -> ScriptedMessage {
        ScriptedMessage(json: #"{"sender":"CPS","#, messageID: id)
    }

    /// A non-SDK notification: one `action` result.
    static func action(_ action: String, id: String?) -> ScriptedMessage {
        ScriptedMessage(json: #"{"action":"\#(action)"}"#, messageID: id)
    }
}
