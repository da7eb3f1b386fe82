import Testing

@testable import AMQPTransport

@Suite("Channel table: numbers, incarnations and consumers")
struct ChannelTableTests {
    private func consumer(channel: UInt16, tag: String, automatic: Bool = false) -> ConsumerSink {
        ConsumerSink(
            channel: channel, tag: tag, automaticAcknowledgement: automatic, maximumBodyBytes: nil,
            deliveries: DeliveryBuffer(onAbandon: {}))
    }

    @Test func numbersAreHandedOutRoundRobinAndIdsNeverRepeat() throws {
        var table = ChannelTable()
        let first = try table.open(negotiatedChannelMax: 3)
        let second = try table.open(negotiatedChannelMax: 3)
        #expect(first == ChannelReference(number: 1, id: 1))
        #expect(second == ChannelReference(number: 2, id: 2))
        table.retire(1, because: AMQPError(code: .closed, message: "closed"))
        // Number 1 is free again, but 3 comes first: a number is reused as late as possible.
        #expect(try table.open(negotiatedChannelMax: 3) == ChannelReference(number: 3, id: 3))
        #expect(try table.open(negotiatedChannelMax: 3) == ChannelReference(number: 1, id: 4))
    }

    @Test func aFullConnectionRefusesAnotherChannel() throws {
        var table = ChannelTable()
        _ = try table.open(negotiatedChannelMax: 2)
        _ = try table.open(negotiatedChannelMax: 2)
        #expect(throws: AMQPError.self) { try table.open(negotiatedChannelMax: 2) }
    }

    @Test func noNegotiatedLimitMeansTheProtocolsLimit() throws {
        var table = ChannelTable()
        for _ in 1...3 { _ = try table.open(negotiatedChannelMax: 0) }
        #expect(table.openNumbers == [1, 2, 3])
    }

    @Test func aStaleReferenceGetsItsOwnChannelsCloseErrorAfterTheNumberIsReused() throws {
        var table = ChannelTable()
        let old = try table.open(negotiatedChannelMax: 1)
        table.retire(old.number, because: AMQPError(code: .channelClosedByBroker, message: "404 NOT_FOUND"))
        let new = try table.open(negotiatedChannelMax: 1)
        #expect(new.number == old.number)
        #expect(try table.usable(new).id == new.id)
        let error = #expect(throws: AMQPError.self) { try table.usable(old) }
        #expect(error?.code == .channelClosedByBroker)
    }

    @Test func retiringAnUnknownNumberIsANoOp() {
        var table = ChannelTable()
        let retired = table.retire(7, because: AMQPError(code: .closed, message: "closed"))
        #expect(!retired)
    }

    @Test func aForgottenChannelIsClosedWithoutARecordedReason() throws {
        var table = ChannelTable()
        let reference = try table.open(negotiatedChannelMax: 0)
        table.forget(reference.number)
        #expect(table[reference.number] == nil)
        let error = #expect(throws: AMQPError.self) { try table.usable(reference) }
        #expect(error?.code == .closed)
    }

    @Test func theMemoryOfRetiredChannelsIsBoundedOldestFirst() throws {
        var table = ChannelTable()
        var references: [ChannelReference] = []
        for index in 0...ChannelTable.retiredLimit {
            let reference = try table.open(negotiatedChannelMax: 0)
            references.append(reference)
            table.retire(reference.number, because: AMQPError(code: .channelClosedByBroker, message: "close \(index)"))
        }
        // The oldest entry made room for the newest: it falls back to a generic "closed".
        #expect((#expect(throws: AMQPError.self) { try table.usable(references[0]) })?.code == .closed)
        #expect((#expect(throws: AMQPError.self) { try table.usable(references[1]) })?.code == .channelClosedByBroker)
        #expect(
            (#expect(throws: AMQPError.self) { try table.usable(references.last!) })?.message
                == "close \(ChannelTable.retiredLimit)")
    }

    @Test func consumerTagsAreUniquePerChannelOnly() throws {
        var table = ChannelTable()
        _ = try table.open(negotiatedChannelMax: 0)
        _ = try table.open(negotiatedChannelMax: 0)
        table.register(consumer(channel: 1, tag: "work"))
        #expect(throws: AMQPError.self) { try table.checkTagIsFree("work", channel: 1) }
        try table.checkTagIsFree("work", channel: 2)
        try table.checkTagIsFree("", channel: 1)  // the broker makes up a new tag
        #expect(table.consumer(channel: 1, tag: "work") != nil)
        #expect(table.consumer(channel: 2, tag: "work") == nil)
    }

    @Test func consumersAreRemovedByChannelOrAllAtOnce() throws {
        var table = ChannelTable()
        table.register(consumer(channel: 1, tag: "a"))
        table.register(consumer(channel: 1, tag: "b"))
        table.register(consumer(channel: 2, tag: "a"))
        #expect(Set(table.removeConsumers(onChannel: 1).map(\.tag)) == ["a", "b"])
        #expect(table.consumers.keys.map(\.channel) == [2])
        #expect(table.removeConsumer(channel: 2, tag: "missing") == nil)
        #expect(table.removeAllConsumers().count == 1)
        #expect(table.consumers.isEmpty)
    }

    @Test func aDeliveryGoesToItsConsumerStampedWithTheChannelIncarnation() throws {
        var table = ChannelTable()
        let reference = try table.open(negotiatedChannelMax: 0)
        let sink = consumer(channel: reference.number, tag: "work")
        table.register(sink)
        guard
            case .consumer(let receiver, let channel) = table.destination(
                ofDeliveryOn: 1, consumerTag: "work", consumer: sink)
        else {
            Issue.record("the delivery did not reach its consumer")
            return
        }
        #expect(receiver === sink)
        #expect(channel == reference)
    }

    @Test func aDeliveryForACancelledConsumerIsRequeuedUnlessTheBrokerAcknowledgedIt() throws {
        var table = ChannelTable()
        _ = try table.open(negotiatedChannelMax: 0)
        table.register(consumer(channel: 1, tag: "manual"))
        table.register(consumer(channel: 1, tag: "no-ack", automatic: true))
        table.removeConsumer(channel: 1, tag: "manual")
        table.removeConsumer(channel: 1, tag: "no-ack")
        #expect(isRequeued(table.destination(ofDeliveryOn: 1, consumerTag: "manual", consumer: nil)))
        // The tag of a `no-ack` consumer is remembered on its channel after the cancel.
        if case .droppedAsAcknowledgedByBroker = table.destination(
            ofDeliveryOn: 1, consumerTag: "no-ack", consumer: nil)
        {
        } else {
            Issue.record("a cancelled no-ack consumer's delivery must be dropped, not rejected")
        }
    }

    /// Issue 37: `dead-letters list` and `purge` sometimes ended with "CHANNEL_ERROR - expected 'channel.open'":
    /// deliveries in flight when the tool closed its consume channel were rejected on the closed channel.
    @Test func aDeliveryWhoseChannelClosedWhileItWasReadIsLeftToTheBroker() throws {
        var table = ChannelTable()
        _ = try table.open(negotiatedChannelMax: 0)
        let sink = consumer(channel: 1, tag: "work")
        table.register(sink)
        table.retire(1, because: AMQPError(code: .channelClosedByBroker, message: "closed"))
        let destination = table.destination(ofDeliveryOn: 1, consumerTag: "work", consumer: sink)
        #expect(isLeftToTheBroker(destination), "no reject on a closed channel: \(destination)")
        let unknown = table.destination(ofDeliveryOn: 9, consumerTag: "x", consumer: nil)
        #expect(isLeftToTheBroker(unknown), "nor on a channel this connection does not have open: \(unknown)")
    }

    private func isLeftToTheBroker(_ destination: DeliveryDestination) -> Bool {
        if case .returnedWithItsChannel = destination { return true }
        return false
    }

    private func isRequeued(_ destination: DeliveryDestination) -> Bool {
        if case .requeued = destination { return true }
        return false
    }
}
