import AMQPTransport
import BrokerTestSupport
import TestSupport
import Testing

/// Consumers: how their sequence ends, and what the broker does with messages they give back.
@Suite("Consumers and acknowledgements", .timeLimit(.minutes(1)))
struct ConsumerTests {
    @Test("deleting the queue under a consumer ends its sequence with .consumerCancelled")
    func queueDeletedUnderConsumerCancelsIt() async throws {
        try await withBrokerSession("deleted under consumer") { session in
            let channel = session.channel
            let queue = try await session.declareOwnedQueue("deleted-under-consumer")
            try await channel.enableConfirms()
            try await publishConfirmed([message(to: queue, "before the delete")], on: channel)
            let consumer = try await channel.consume(queue: queue)
            let first = try await receive(1, from: consumer)
            try #require(first.count == 1)
            try await channel.ack(deliveryTag: first[0].deliveryTag)

            // Iterate while another channel deletes the queue: the broker's basic.cancel must end the loop.
            async let cancellation = expectAMQPError("iterating a consumer whose queue is deleted") {
                for try await batch in consumer {
                    Issue.record("unexpected deliveries after the delete: \(batch.map(\.text))")
                }
            }
            let other = try await session.connection.openChannel()
            try await other.deleteQueue(queue)
            let error = try await cancellation
            #expect(error.code == .consumerCancelled)
            #expect(error.message.contains(consumer.tag))
            #expect(error.isRetriable)

            // A broker cancel ends the consumer, not the channel: it still declares, publishes and consumes.
            let next = try await session.declareOwnedQueue("after-cancel")
            try await publishConfirmed([message(to: next, "after the delete")], on: channel)
            let again = try await receive(1, from: try await channel.consume(queue: next))
            #expect(again.map(\.text) == ["after the delete"])
        }
    }

    @Test("nack and reject with requeue bring the message back with redelivered = true")
    func nackAndRejectWithRequeueRedeliver() async throws {
        try await withBrokerSession("requeue") { session in
            let channel = session.channel
            let queue = try await session.declareOwnedQueue("requeue")
            try await channel.enableConfirms()
            try await channel.setPrefetch(count: 10)
            try await publishConfirmed([message(to: queue, "nack me"), message(to: queue, "reject me")], on: channel)

            let consumer = try await channel.consume(queue: queue)
            let firstRound = try await receive(2, from: consumer)
            try #require(firstRound.map(\.text) == ["nack me", "reject me"])
            #expect(firstRound.allSatisfy { !$0.redelivered })
            try await channel.nack(deliveryTag: firstRound[0].deliveryTag, requeue: true)
            try await channel.reject(deliveryTag: firstRound[1].deliveryTag, requeue: true)

            let secondRound = try await receive(2, from: consumer)
            try #require(secondRound.count == 2)
            #expect(Set(secondRound.map(\.text)) == ["nack me", "reject me"])
            #expect(secondRound.allSatisfy { $0.redelivered })
            #expect(secondRound.allSatisfy { $0.deliveryTag > firstRound[1].deliveryTag }, "a redelivery has a new tag")

            // nack without requeue drops one, ack settles the other.
            let nackMe = try #require(secondRound.first { $0.text == "nack me" })
            let rejectMe = try #require(secondRound.first { $0.text == "reject me" })
            try await channel.nack(deliveryTag: nackMe.deliveryTag, requeue: false)
            try await channel.ack(deliveryTag: rejectMe.deliveryTag)

            // Closing the channel would requeue anything still unacknowledged: an empty queue shows both were settled.
            try await channel.cancel(consumerTag: consumer.tag)
            try await channel.close()
            #expect(try await session.connection.openChannel().queueStatus(queue).messageCount == 0)
        }
    }

    @Test("purge removes the ready messages and returns how many")
    func purgeReturnsTheCount() async throws {
        try await withBrokerSession("purge") { session in
            let channel = session.channel
            let queue = try await session.declareOwnedQueue("purge")
            try await channel.enableConfirms()
            try await publishConfirmed((1...7).map { message(to: queue, "purge \($0)") }, on: channel)
            #expect(try await channel.purgeQueue(queue) == 7)
            #expect(try await channel.queueStatus(queue).messageCount == 0)
            #expect(try await channel.purgeQueue(queue) == 0)
        }
    }

    @Test("cancelling our consumer ends its sequence normally and stops deliveries")
    func cancelByUsEndsTheSequenceNormally() async throws {
        try await withBrokerSession("cancel by us") { session in
            let channel = session.channel
            let queue = try await session.declareOwnedQueue("cancel-by-us")
            try await channel.enableConfirms()
            try await publishConfirmed((1...3).map { message(to: queue, "before \($0)") }, on: channel)
            let consumer = try await channel.consume(queue: queue)
            let before = try await receive(3, from: consumer)
            try #require(before.count == 3)
            try await channel.ack(deliveryTag: before[2].deliveryTag, multiple: true)
            #expect(try await channel.queueStatus(queue).consumerCount == 1)

            async let rest = within(.seconds(10), "the consumer's sequence to end after cancel") {
                var rest: [AMQPDelivery] = []
                for try await batch in consumer { rest += batch }  // ends without throwing
                return rest
            }
            try await channel.cancel(consumerTag: consumer.tag)
            let afterCancel = try await rest
            #expect(afterCancel.isEmpty)

            try await publishConfirmed([message(to: queue, "after cancel")], on: channel)
            let status = try await channel.queueStatus(queue)
            #expect(status.consumerCount == 0)
            #expect(status.messageCount == 1, "nothing consumes after the cancel")
        }
    }

    /// Transport bug (ConnectionCore.cancelConsumer): the consumer is removed from the table before the
    /// basic.cancel round trip, so when that round trip fails (here the broker's channel.close for a double
    /// ack arrives as its reply) nothing ever finishes the consumer's stream and its loop waits forever.
    /// Whether the close is read by the pump first (fine) or by the cancel (hang) is a race; a few attempts
    /// hit the hang nearly always (40-95 % per attempt in local runs).
    @Test("a cancel that fails because the broker closed the channel still ends the consumer's sequence")
    func failedCancelStillEndsTheSequence() async throws {
        try await withBrokerSession("failed cancel") { session in
            let queue = try await session.declareOwnedQueue("failed-cancel")
            for attempt in 1...10 {
                let channel = try await session.connection.openChannel()
                try await channel.enableConfirms()
                try await publishConfirmed([message(to: queue, "attempt \(attempt)")], on: channel)
                let consumer = try await channel.consume(queue: queue)
                let delivery = try #require(try await receive(1, from: consumer).first)
                try await channel.ack(deliveryTag: delivery.deliveryTag)
                // A double ack: the broker closes the channel (406).
                try await channel.ack(deliveryTag: delivery.deliveryTag)
                let cancelled: String
                do {
                    try await channel.cancel(consumerTag: consumer.tag)
                    cancelled = "normally"
                } catch {
                    cancelled = "\(error)"  // the 406 that closed the channel, when the race went that way
                }
                do {
                    let rest = try await receive(1, from: consumer, within: .seconds(60))
                    #expect(rest.isEmpty)
                } catch is DeadlineExceeded {
                    Issue.record(
                        """
                        attempt \(attempt): the consumer's sequence never ended after cancel(consumerTag:) returned \(cancelled)
                        """)
                    return
                } catch let error as AMQPError {
                    #expect(error.code == .channelClosedByBroker)
                    #expect(error.replyCode == 406)
                }
            }
        }
    }

    @Test("a consumer that is no longer iterated nor referenced is cancelled on the broker")
    func droppedConsumerIsCancelledOnTheBroker() async throws {
        try await withBrokerSession("dropped consumer") { session in
            let channel = session.channel
            let queue = try await session.declareOwnedQueue("dropped-consumer")
            try await channel.enableConfirms()
            try await publishConfirmed([message(to: queue, "one")], on: channel)
            // The demo's pattern: iterate a consumer that only the loop holds, and break.
            for try await batch in try await channel.consume(queue: queue) {
                try await channel.ack(deliveryTag: batch.last!.deliveryTag, multiple: true)
                break
            }
            try await waitUntil("the broker to see the consumer cancelled", every: .milliseconds(50)) {
                try await channel.queueStatus(queue).consumerCount == 0
            }
            try await publishConfirmed([message(to: queue, "two")], on: channel)
            #expect(try await channel.queueStatus(queue).messageCount == 1)
        }
    }

    @Test("direct reply-to: a no-ack consumer of amq.rabbitmq.reply-to receives the reply; its deliveries refuse ack")
    func directReplyTo() async throws {
        try await withBrokerSession("direct reply-to") { session in
            let requests = try await session.declareOwnedQueue("direct-reply-to-requests")
            // The requester consumes the pseudo-queue without acknowledgements and publishes on the same channel.
            let requester = session.channel
            let replies = try await requester.consume(queue: "amq.rabbitmq.reply-to", acknowledgement: .automatic)
            try await requester.enableConfirms()
            try await publishConfirmed(
                [message(to: requests, "ping", properties: .init(replyTo: "amq.rabbitmq.reply-to"))], on: requester)

            // The responder, on another channel: the broker rewrote reply_to into the requester's own name.
            let responder = try await session.connection.openChannel()
            try await responder.enableConfirms()
            let request = try await receive(1, from: try await responder.consume(queue: requests))
            try #require(request.count == 1)
            let replyTo = try #require(request[0].properties.replyTo)
            #expect(replyTo.hasPrefix("amq.rabbitmq.reply-to."), "reply_to as delivered: \(replyTo)")
            // Not mandatory: RabbitMQ 3.10 returns a mandatory publish to a reply-to name (312 NO_ROUTE) even as
            // it delivers it.
            let reply = AMQPOutboundMessage(exchange: "", routingKey: replyTo, body: Array("pong".utf8))
            try await publishConfirmed([reply], on: responder)
            try await responder.ack(request[0])

            let received = try await receive(1, from: replies)
            #expect(received.map(\.text) == ["pong"])
            let refusal = try await expectAMQPError("acknowledging a delivery the broker acknowledged") {
                try await requester.ack(received[0])
            }
            #expect(refusal.code == .invalidArgument)
            // Nothing reached the broker: the channel still works.
            try await requester.cancel(consumerTag: replies.tag)
            try await publishConfirmed([message(to: requests, "after")], on: requester)
            #expect(try await requester.queueStatus(requests).messageCount == 1)
        }
    }

    @Test("cancelling a no-ack consumer with deliveries in flight leaves the channel open")
    func cancellingANoAckConsumerInFlight() async throws {
        try await withBrokerSession("no-ack cancel") { session in
            let channel = session.channel
            let queue = try await session.declareOwnedQueue("no-ack-cancel")
            try await channel.enableConfirms()
            let count = 3_000
            try await publishConfirmed((0..<count).map { message(to: queue, "m\($0)") }, on: channel)

            // No prefetch limit: the broker streams the whole queue. Deliveries still arriving after the
            // cancel must be dropped, not rejected (their tags are already acknowledged: 406 on the channel).
            let consumer = try await channel.consume(queue: queue, acknowledgement: .automatic)
            let first = try await receive(1, from: consumer)
            try await channel.cancel(consumerTag: consumer.tag)
            var received = first.count
            for try await batch in consumer { received += batch.count }

            try await publishConfirmed([message(to: queue, "after the cancel")], on: channel)
            let left = Int(try await channel.queueStatus(queue).messageCount)
            #expect(left >= 1, "the message published after the cancel is in the queue")
            #expect(received + left - 1 <= count, "nothing came back: the broker acknowledged what it sent")
        }
    }
}

extension ConsumerTests {
    /// Issue 37: `dead-letters list` and `purge` sometimes ended with "CHANNEL_ERROR - expected 'channel.open'" and
    /// a failed connection. Deliveries that arrive while a channel.close waits for its close-ok are queued by
    /// librabbitmq and read after it: the transport rejected each on the channel that no longer existed, and the
    /// broker closed the connection for it. The broker requeues them with the channel; nothing is to be sent.
    @Test("closing a channel with deliveries in flight keeps the connection, and the broker requeues them all")
    func closingAChannelWithDeliveriesInFlightKeepsTheConnection() async throws {
        try await withBrokerSession("close in flight") { session in
            let count = 2_000
            let queue = try await session.declareOwnedQueue("close-in-flight")
            try await session.channel.enableConfirms()
            try await publishConfirmed(
                (0..<count).map { message(to: queue, "in flight \($0)") }, on: session.channel)

            for round in 0..<5 {
                let consuming = try await session.connection.openChannel()
                try await consuming.setPrefetch(count: 1_000)
                let consumer = try await consuming.consume(queue: queue)
                // The broker is streaming the prefetch when the close goes out (after the first batch has come): most
                // of it is in flight.
                for try await _ in consumer { break }
                try await consuming.close()

                // The same connection goes on (it was closed with 504 here), and every delivery is back in the queue
                // (consumed again to the last: an event, bounded by the suite's time limit, not a timed poll).
                let checking = try await session.connection.openChannel()
                var back = 0
                for try await batch in try await checking.consume(queue: queue) {
                    back += batch.count
                    if back >= count { break }
                }
                #expect(back == count, "round \(round): every delivery back in the queue")
                try await checking.close()
            }
        }
    }
}
