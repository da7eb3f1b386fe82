// CONTRACT.md §1: `reply_to` copies work with RabbitMQ's direct reply-to (`amq.rabbitmq.reply-to`), with a real
// requester: it consumes the pseudo-queue without acknowledgements and publishes its request on the same channel,
// and the broker rewrites `reply_to` into a name only that channel receives.
import AMQPTransport
import BrokerTestSupport
import Foundation
import Testing
import WalletWorker

@Suite("Direct reply-to through the broker (CONTRACT.md §1)", .timeLimit(.minutes(2)))
struct DirectReplyToTests {
    private static let action = #"{"action":"walletRefresh","digitalCardId":"DC-7"}"#

    @Test("the requester receives an identical copy of every result on its amq.rabbitmq.reply-to consumer")
    func requesterReceivesTheCopies() async throws {
        try await withWorkerEnvironment("direct-reply-to") { environment in
            let worker = try await environment.startWorker()
            let capture = try await environment.resultCapture()
            let requester = try await environment.collect(queue: "amq.rabbitmq.reply-to", acknowledgement: .automatic)
            try await requester.channel.enableConfirms()
            let request = InboundSpec(
                json: Self.action, messageID: "drt-1", correlationID: "rpc-1", replyTo: "amq.rabbitmq.reply-to")
            let outcome = try await requester.channel.publish(
                request.outbound(to: environment.topology.inboundExchange), confirmTimeout: .seconds(10))
            #expect(outcome.isConfirmed, "the request was not confirmed: \(outcome)")

            let primary = try await capture.results.waitFor(1, "the action's result")
            let copies = try await requester.waitFor(1, "the reply_to copy on the direct reply-to consumer")
            try #require(primary.count == 1 && copies.count == 1)
            #expect(copies[0].body == primary[0].body)
            #expect(copies[0].properties == primary[0].properties)
            #expect(copies[0].properties.messageID == "drt-1/0")
            #expect(copies[0].properties.correlationID == "rpc-1")
            #expect(copies[0].exchange.isEmpty, "a copy goes through the default exchange")
            #expect(
                copies[0].routingKey.hasPrefix("amq.rabbitmq.reply-to."),
                "the copy's routing key is the name the broker gave the requester: \(copies[0].routingKey)")
            #expect(try await environment.messageCount(environment.topology.workQueue) == 0)
            // RabbitMQ 3.10 returns a mandatory publish to a direct reply-to name even when it delivers it: the
            // copy goes without `mandatory`, so a delivered copy is not counted as unroutable.
            #expect(worker.metric("wallet_reply_copies_unroutable_total") == 0)
        }
    }

    @Test("a requester gone before its reply: the results are published, the message acknowledged, nothing retried")
    func requesterGoneBeforeTheReply() async throws {
        try await withWorkerEnvironment("direct-reply-to-gone") { environment in
            try await environment.declareTopology()
            let capture = try await environment.resultCapture()
            let dead = try await environment.deadLetterReader()

            // The request is queued while no worker runs; its requester disconnects before the worker starts.
            let connection = try await TestBroker.connect(purpose: "direct reply-to requester")
            do {
                let channel = try await connection.openChannel()
                let replies = try await channel.consume(queue: "amq.rabbitmq.reply-to", acknowledgement: .automatic)
                try await channel.enableConfirms()
                let request = InboundSpec(json: Self.action, messageID: "drt-gone", replyTo: "amq.rabbitmq.reply-to")
                let outcome = try await channel.publish(
                    request.outbound(to: environment.topology.inboundExchange), confirmTimeout: .seconds(10))
                #expect(outcome.isConfirmed, "the request was not confirmed: \(outcome)")
                withExtendedLifetime(replies) {}
            } catch {
                await connection.close()
                throw error
            }
            await connection.close()

            let worker = try await environment.startWorker()
            let results = try await capture.results.waitFor(1, "the action's result")
            #expect(results.map(\.properties.messageID) == ["drt-gone/0"])
            // A sentinel behind it: once its result is in, the first message was finished (one consumer, in order).
            let earlier = try await resultsBeforeSentinel(environment, capture)
            #expect(earlier.map(\.properties.messageID) == ["drt-gone/0"], "the result was published more than once")
            #expect(try await environment.messageCount(environment.topology.workQueue) == 0)
            #expect(try await environment.messageCount(environment.topology.retryQueue) == 0)
            #expect(dead.count == 0, "dead-lettered: \(dead.messages.map(\.summary))")
            // The broker drops a copy for a requester that has gone (direct reply-to is not fault-tolerant).
            #expect(worker.metric("wallet_reply_copies_unroutable_total") == 0)
        }
    }
}
