import Locking
import Testing

@testable import AMQPTransport

/// The hand-over between the I/O thread (appends) and the consuming task (takes everything at once).
@Suite("Delivery buffer")
struct DeliveryBufferTests {
    private func delivery(_ tag: UInt64) -> AMQPDelivery {
        AMQPDelivery(
            body: [UInt8(truncatingIfNeeded: tag)], properties: AMQPMessageProperties(), withheldBodySize: nil,
            deliveryTag: tag, redelivered: false, exchange: "x", routingKey: "rk", consumerTag: "c",
            channel: ChannelReference(number: 1, id: 1))
    }

    /// Counts `onAbandon` calls, from any thread.
    private final class Counter: Sendable {
        private let count = Locked(0)
        var value: Int { count.withLock { $0 } }
        func increment() { count.withLock { $0 += 1 } }
    }

    @Test func whatArrivedWhileTheConsumerWasBusyComesAsOneBatch() async throws {
        let buffer = DeliveryBuffer(onAbandon: {})
        buffer.append([delivery(1), delivery(2)])
        buffer.append([])
        buffer.append([delivery(3)])
        #expect(try await buffer.take()?.map(\.deliveryTag) == [1, 2, 3])
    }

    @Test func aWaitingTakeGetsTheNextAppend() async throws {
        let buffer = DeliveryBuffer(onAbandon: {})
        let taken = Task { try await buffer.take() }
        // The take may start waiting before or after the append: either way it gets exactly this batch.
        try await Task.sleep(for: .milliseconds(20))
        buffer.append([delivery(7)])
        #expect(try await taken.value?.map(\.deliveryTag) == [7])
    }

    @Test func aNormalEndComesAfterTheDeliveriesAlreadyAppended() async throws {
        let buffer = DeliveryBuffer(onAbandon: {})
        buffer.append([delivery(1)])
        buffer.finish(throwing: nil)
        #expect(try await buffer.take()?.map(\.deliveryTag) == [1])
        #expect(try await buffer.take() == nil)
        #expect(try await buffer.take() == nil, "the end is reported to every later take")
    }

    @Test func aFailureComesAfterTheDeliveriesAlreadyAppended() async throws {
        let buffer = DeliveryBuffer(onAbandon: {})
        buffer.append([delivery(1)])
        buffer.finish(throwing: AMQPError(code: .consumerCancelled, message: "cancelled"))
        buffer.finish(throwing: nil)  // the first end wins
        #expect(try await buffer.take()?.count == 1)
        let error = await #expect(throws: AMQPError.self) { try await buffer.take() }
        #expect(error?.code == .consumerCancelled)
    }

    @Test func aFailureWakesAWaitingTake() async throws {
        let buffer = DeliveryBuffer(onAbandon: {})
        let taken = Task { try await buffer.take() }
        try await Task.sleep(for: .milliseconds(20))
        buffer.finish(throwing: AMQPError(code: .connectionLost, message: "gone"))
        await #expect(throws: AMQPError.self) { try await taken.value }
    }

    @Test func cancellingAWaitingTakeEndsItAndCancelsTheConsumerOnce() async throws {
        let abandoned = Counter()
        let buffer = DeliveryBuffer(onAbandon: { abandoned.increment() })
        let taken = Task { try await buffer.take() }
        try await Task.sleep(for: .milliseconds(20))
        taken.cancel()
        #expect(try await taken.value == nil)
        buffer.abandon()
        #expect(abandoned.value == 1)
        #expect(try await buffer.take() == nil, "an abandoned buffer has ended")
    }

    @Test func abandoningAConsumerThatEndedDoesNotCancelItAgain() {
        let abandoned = Counter()
        let buffer = DeliveryBuffer(onAbandon: { abandoned.increment() })
        buffer.finish(throwing: nil)
        buffer.abandon()
        #expect(abandoned.value == 0)
    }

    @Test func theLastReferenceToAConsumerGoingAwayAbandonsIt() {
        let abandoned = Counter()
        let buffer = DeliveryBuffer(onAbandon: { abandoned.increment() })
        do {
            _ = ConsumerLifetime(deliveries: buffer)
        }
        #expect(abandoned.value == 1)
    }

    @Test func theUndecodableContentChoiceIsKept() {
        #expect(DeliveryBuffer(onAbandon: {}).undecodableContent == .rejectToDeadLetterExchange)
        #expect(DeliveryBuffer(undecodableContent: .requeue, onAbandon: {}).undecodableContent == .requeue)
    }
}
