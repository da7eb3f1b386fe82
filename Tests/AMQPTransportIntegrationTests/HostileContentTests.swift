// Deliveries librabbitmq 0.11's `amqp_read_message` could not take (issue 13): an empty header key failed the
// whole read and the connection; a huge body was buffered whole before anyone could look at its size.
import AMQPTransport
import BrokerTestSupport
import Testing

@Suite("Hostile content through the broker", .timeLimit(.minutes(2)))
struct HostileContentTests {
    @Test("a header table with an empty key is delivered as sent, and the consumer goes on")
    func emptyHeaderKeyIsDelivered() async throws {
        try await withBrokerSession("empty header key") { session in
            let channel = session.channel
            let queue = try await session.declareOwnedQueue("empty-key")
            try await channel.enableConfirms()
            let headers: AMQPTable = ["": .string("empty key"), "nested": .table(["": .int32(7)])]
            try await publishConfirmed(
                [
                    message(to: queue, "with empty key", properties: AMQPMessageProperties(headers: headers)),
                    message(to: queue, "after"),
                ],
                on: channel)

            let consumer = try await channel.consume(queue: queue)
            let deliveries = try await receive(2, from: consumer)
            #expect(deliveries.map(\.text) == ["with empty key", "after"])
            #expect(deliveries.first?.properties.headers == headers)
            // The same connection still works both ways.
            try await channel.ack(deliveries[1], multiple: true)
            try await publishConfirmed([message(to: queue, "third")], on: channel)
            #expect(try await receive(1, from: consumer).map(\.text) == ["third"])
        }
    }

    @Test("a body over the consumer's limit is not kept: its size is reported, the next message arrives whole")
    func bodyOverTheLimitIsWithheld() async throws {
        try await withBrokerSession("withheld body") { session in
            let channel = session.channel
            let queue = try await session.declareOwnedQueue("withheld")
            try await channel.enableConfirms()
            let huge = [UInt8](repeating: UInt8(ascii: "x"), count: 100_000_000)
            try await publishConfirmed(
                [
                    AMQPOutboundMessage(
                        exchange: "", routingKey: queue, body: huge,
                        properties: AMQPMessageProperties(messageID: "huge"), mandatory: true),
                    message(to: queue, "small", properties: AMQPMessageProperties(messageID: "small")),
                ],
                on: channel)

            let consumer = try await channel.consume(queue: queue, maximumBodyBytes: 1_000_000)
            let deliveries = try await receive(2, from: consumer, within: .seconds(60))
            try #require(deliveries.count == 2)
            #expect(deliveries[0].properties.messageID == "huge")
            #expect(deliveries[0].body.isEmpty)
            #expect(deliveries[0].withheldBodySize == 100_000_000)
            #expect(deliveries[1].text == "small")
            #expect(deliveries[1].withheldBodySize == nil)

            // Rejected without requeue it leaves the queue; the broker still has the body for a dead-letter queue.
            try await channel.nack(deliveries[0], requeue: false)
            try await channel.ack(deliveries[1])
            #expect(try await channel.declareQueue(queue, durable: false).messageCount == 0)
        }
    }

    @Test(
        "a message AMQP cannot encode fails alone as .unencodable: the rest of its batch is confirmed, the connection goes on"
    )
    func unencodableMessageFailsAlone() async throws {
        try await withBrokerSession("unencodable publish") { session in
            let channel = session.channel
            let queue = try await session.declareOwnedQueue("unencodable")
            try await channel.enableConfirms()
            // 250 invalid bytes repaired to text are 750 bytes: over a short string.
            var tooLong = AMQPMessageProperties(correlationID: String(repeating: "\u{FFFD}", count: 250))
            tooLong.headers = nil
            let bigHeaders = AMQPMessageProperties(headers: ["filler": .bytes([UInt8](repeating: 1, count: 200_000))])
            let outcomes = try await channel.publish(
                [
                    message(to: queue, "first"),
                    message(to: queue, "long correlation id", properties: tooLong),
                    message(to: queue, "headers over a frame", properties: bigHeaders),
                    AMQPOutboundMessage(
                        exchange: "", routingKey: String(repeating: "q", count: 300), body: [],
                        properties: AMQPMessageProperties(), mandatory: true),
                    message(to: queue, "last"),
                ],
                confirmTimeout: .seconds(10))
            #expect(outcomes.count == 5)
            #expect(outcomes[0] == .confirmed && outcomes[4] == .confirmed)
            for outcome in outcomes[1...3] {
                guard case .unencodable(let reason) = outcome else {
                    Issue.record("expected .unencodable, got \(outcome)")
                    continue
                }
                #expect(!reason.isEmpty)
            }
            // The same channel and connection still publish, and only the encodable messages arrived.
            try await publishConfirmed([message(to: queue, "after")], on: channel)
            let consumer = try await channel.consume(queue: queue)
            #expect(try await receive(3, from: consumer).map(\.text) == ["first", "last", "after"])
        }
    }

    @Test("short-string properties that are not UTF-8 are read and sent again byte for byte")
    func nonUTF8PropertiesRoundTrip() async throws {
        try await withBrokerSession("non-UTF-8 properties") { session in
            let channel = session.channel
            let queue = try await session.declareOwnedQueue("non-utf8")
            try await channel.enableConfirms()
            let first: [UInt8] = [0xFF, 0x20, 0x41]
            let second: [UInt8] = [0xFE, 0x20, 0x41]
            func properties(_ raw: [UInt8]) -> AMQPMessageProperties {
                var properties = AMQPMessageProperties(messageID: String(decoding: raw, as: UTF8.self))
                properties.undecodedStrings[.messageID] = raw
                return properties
            }
            try await publishConfirmed(
                [
                    message(to: queue, "first", properties: properties(first)),
                    message(to: queue, "second", properties: properties(second)),
                ],
                on: channel)
            let consumer = try await channel.consume(queue: queue)
            let deliveries = try await receive(2, from: consumer)
            try #require(deliveries.count == 2)
            // The repaired texts are equal; the bytes are not.
            #expect(deliveries[0].properties.messageID == deliveries[1].properties.messageID)
            #expect(deliveries[0].properties.undecodedStrings[.messageID] == first)
            #expect(deliveries[1].properties.undecodedStrings[.messageID] == second)

            // Forwarded unchanged, the bytes go out again.
            let forwarded = AMQPOutboundMessage(
                exchange: "", routingKey: queue, body: deliveries[0].body, properties: deliveries[0].properties,
                mandatory: true)
            try await channel.ack(deliveries[1], multiple: true)
            try await publishConfirmed([forwarded], on: channel)
            let again = try await receive(1, from: consumer)
            #expect(again.first?.properties.undecodedStrings[.messageID] == first)
        }
    }
}
