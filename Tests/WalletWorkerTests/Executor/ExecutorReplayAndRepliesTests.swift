import Foundation
import Testing

@testable import AMQPTransport
@testable import WalletWorker

/// A redelivered message republishes its recorded results byte for byte; direct reply-to copies go on a connection
/// of their own, which the broker may close without costing anything else.
@Suite("Executor: replays and reply-to copies", .timeLimit(.minutes(1)))
struct ExecutorReplayAndRepliesTests {
    @Test func aRedeliveryRepublishesTheRecordedResultsByteForByte() async throws {
        let worker = InProcessWorker()
        await worker.waitUntilConsuming()
        worker.broker.deliver([.install("DC-1", id: "m-1")])
        await worker.broker.waitForSettlements(1)
        let first = worker.broker.published

        var again = ScriptedMessage.install("DC-1", id: "m-1")
        again.redelivered = true
        worker.broker.deliver([again])
        await worker.broker.waitForSettlements(2)
        let second = Array(worker.broker.published.dropFirst(first.count))
        #expect(!first.isEmpty)
        #expect(second == first, "a replay publishes the recorded results, processedAt included")
        try await worker.stop()
    }

    /// A direct reply-to address RabbitMQ can decode: `amq.rabbitmq.reply-to.<NEW_PID_EXT term>.<key>`.
    private static let replyTo: String = {
        let node = Array("rabbit@test".utf8)
        let term: [UInt8] = [131, 88, 119, UInt8(node.count)] + node + Array(repeating: 0, count: 12)
        return "amq.rabbitmq.reply-to.\(Data(term).base64EncodedString()).\(Data([1, 2, 3]).base64EncodedString())"
    }()

    @Test func aReplyConnectionClosedByTheBrokerCostsOnlyItself() async throws {
        #expect(DirectReplyToAddress.isPublishable(Self.replyTo))
        let worker = InProcessWorker()
        await worker.waitUntilConsuming()
        worker.broker.deliver([ScriptedMessage(json: #"{"action":"refresh"}"#, messageID: "m-1", replyTo: Self.replyTo)]
        )
        await worker.broker.waitForSettlements(1)
        await worker.broker.waitFor { $0.contains { if case .replyCopy = $0 { true } else { false } } }
        #expect(worker.broker.published.map(\.exchange) == [Topology().resultExchanges.actions])

        // The broker closes the reply connection (541 on an address it could not resolve, say).
        try #require(worker.broker.replyConnection).closeByBroker()
        let tags = worker.broker.deliver([
            ScriptedMessage(json: #"{"action":"refresh"}"#, messageID: "m-2", replyTo: Self.replyTo)
        ])
        await worker.broker.waitForSettlements(2)
        await worker.broker.waitFor(2) { if case .replyCopy = $0 { true } else { false } }
        await worker.broker.waitFor(2) { $0 == .replyConnectionOpened }
        #expect(worker.broker.settlements.last == .ack(deliveryTag: tags[0], multiple: false))
        #expect(worker.broker.sessionsOpened == 1, "the reply connection's close cost the session")
        #expect(worker.metric("wallet_reply_copies_lost_total") == 0)
        try await worker.stop()
    }
}
