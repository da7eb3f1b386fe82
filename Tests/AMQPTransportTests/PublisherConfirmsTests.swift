import Testing

@testable import AMQPTransport

@Suite("Publisher confirm bookkeeping")
struct PublisherConfirmsTests {
    private func publish(_ confirms: inout PublisherConfirms, batch: Int, count: Int, routingKey: String = "rk") {
        for index in 0..<count {
            confirms.published(batch: batch, index: index, exchange: "x", routingKey: routingKey, body: [UInt8(index)])
        }
    }

    @Test func sequenceNumbersStartAtOneAndIncrease() {
        var confirms = PublisherConfirms()
        #expect(confirms.published(batch: 1, index: 0, exchange: "", routingKey: "q", body: []) == 1)
        #expect(confirms.published(batch: 1, index: 1, exchange: "", routingKey: "q", body: []) == 2)
    }

    @Test func multipleAckResolvesEverythingUpToTheTag() {
        var confirms = PublisherConfirms()
        publish(&confirms, batch: 1, count: 5)
        let resolved = confirms.acknowledged(deliveryTag: 3, multiple: true)
        #expect(resolved.map(\.index) == [0, 1, 2])
        #expect(resolved.allSatisfy { $0.outcome == .confirmed })
        #expect(confirms.unresolvedCount == 2)
    }

    @Test func singleAcksAndNacksResolveOnlyTheirTag() {
        var confirms = PublisherConfirms()
        publish(&confirms, batch: 1, count: 3)
        #expect(
            confirms.negativelyAcknowledged(deliveryTag: 2, multiple: false) == [
                .init(batch: 1, index: 1, outcome: .nacked)
            ])
        #expect(
            confirms.acknowledged(deliveryTag: 2, multiple: false).isEmpty, "an already resolved tag resolves nothing")
        #expect(confirms.acknowledged(deliveryTag: 3, multiple: true).map(\.index) == [0, 2])
        #expect(confirms.unresolvedCount == 0)
    }

    @Test func multipleNackAcrossBatches() {
        var confirms = PublisherConfirms()
        publish(&confirms, batch: 1, count: 2)
        publish(&confirms, batch: 2, count: 2)
        let resolved = confirms.negativelyAcknowledged(deliveryTag: 3, multiple: true)
        #expect(resolved.map(\.batch) == [1, 1, 2])
        #expect(resolved.allSatisfy { $0.outcome == .nacked })
    }

    @Test func returnIsReportedWhenItsAckArrives() {
        var confirms = PublisherConfirms()
        confirms.published(batch: 1, index: 0, exchange: "x", routingKey: "routed", body: [1])
        confirms.published(batch: 1, index: 1, exchange: "x", routingKey: "nowhere", body: [2])
        confirms.returned(exchange: "x", routingKey: "nowhere", body: [2], replyCode: 312, replyText: "NO_ROUTE")
        let resolved = confirms.acknowledged(deliveryTag: 2, multiple: true)
        #expect(
            resolved == [
                .init(batch: 1, index: 0, outcome: .confirmed),
                .init(batch: 1, index: 1, outcome: .returned(replyCode: 312, replyText: "NO_ROUTE")),
            ])
    }

    @Test func identicalReturnedMessagesAreMatchedOldestFirst() {
        var confirms = PublisherConfirms()
        publish(&confirms, batch: 1, count: 1, routingKey: "nowhere")
        confirms.published(batch: 1, index: 1, exchange: "x", routingKey: "nowhere", body: [0])
        confirms.returned(exchange: "x", routingKey: "nowhere", body: [0], replyCode: 312, replyText: "NO_ROUTE")
        let first = confirms.acknowledged(deliveryTag: 1, multiple: false)
        #expect(first.first?.outcome == .returned(replyCode: 312, replyText: "NO_ROUTE"))
        #expect(confirms.acknowledged(deliveryTag: 2, multiple: false).first?.outcome == .confirmed)
    }

    @Test func abandonedBatchesAreForgotten() {
        var confirms = PublisherConfirms()
        publish(&confirms, batch: 1, count: 2)
        publish(&confirms, batch: 2, count: 2)
        confirms.abandon(batch: 1)
        #expect(confirms.acknowledged(deliveryTag: 4, multiple: true).map(\.batch) == [2, 2])
    }
}

@Suite("Publisher confirm bookkeeping: returns")
struct PublisherConfirmsReturnTests {
    @Test func returnIsMatchedOnPropertiesNotOnlyOnBody() {
        // Same exchange, routing key and body, different message ids: the return names the second one.
        var confirms = PublisherConfirms()
        let routed = AMQPMessageProperties(messageID: "m-1/0")
        let unroutable = AMQPMessageProperties(messageID: "m-2/0")
        confirms.published(batch: 1, index: 0, exchange: "x", routingKey: "rk", body: [1], properties: routed)
        confirms.published(batch: 1, index: 1, exchange: "x", routingKey: "rk", body: [1], properties: unroutable)
        confirms.returned(
            exchange: "x", routingKey: "rk", body: [1], properties: unroutable, replyCode: 312, replyText: "NO_ROUTE")
        #expect(
            confirms.acknowledged(deliveryTag: 2, multiple: true).map(\.outcome) == [
                .confirmed, .returned(replyCode: 312, replyText: "NO_ROUTE"),
            ])
    }

    @Test func returnWhosePropertiesChangedStillMatchesOnContent() {
        var confirms = PublisherConfirms()
        confirms.published(
            batch: 1, index: 0, exchange: "x", routingKey: "rk", body: [7], properties: .init(messageID: "a"))
        confirms.returned(
            exchange: "x", routingKey: "rk", body: [7], properties: .init(messageID: "a", userID: "guest"),
            replyCode: 312, replyText: "NO_ROUTE")
        #expect(
            confirms.acknowledged(deliveryTag: 1, multiple: false).first?.outcome
                == .returned(replyCode: 312, replyText: "NO_ROUTE"))
    }
}
