import AMQPTransport
import BrokerTestSupport
import Testing

/// What a consumer receives is exactly what was published: every basic property, every header type,
/// the body byte for byte, and the delivery's envelope.
@Suite("Publish and consume round trip", .timeLimit(.minutes(1)))
struct RoundTripTests {
    /// Every `AMQPFieldValue` case, nested in tables and arrays.
    static let everyHeaderType: AMQPTable = [
        "bool-true": .bool(true),
        "bool-false": .bool(false),
        "int8": .int8(-100),
        "uint8": .uint8(200),
        "int16": .int16(-30_000),
        "uint16": .uint16(60_000),
        "int32": .int32(-2_000_000_000),
        "uint32": .uint32(4_000_000_000),
        "int64": .int64(.min),
        "uint64": .uint64(.max),
        "float": .float(1.5),
        "double": .double(-2.25e300),
        "decimal": .decimal(scale: 2, value: 12_345),
        "string": .string("zażółć gęślą jaźń 🐇"),
        "empty-string": .string(""),
        "bytes": .bytes([0xFF, 0x00, 0xFE, 0x80]),
        "empty-bytes": .bytes([]),
        "timestamp": .timestamp(1_700_000_000),
        "void": .void,
        "array": .array([
            .int32(1), .string("two"), .bool(false), .uint8(4), .int64(-5), .double(6.5), .bytes([7]), .timestamp(8),
            .decimal(scale: 1, value: 9), .void, .array([.int16(10), .array([])]), .table(["eleven": .uint16(11)]),
        ]),
        "empty-array": .array([]),
        "table": .table([
            "nested": .table(["deep": .string("x"), "list": .array([.uint32(1), .table(["deeper": .float(-0.5)])])]),
            "count": .int16(7),
        ]),
        "empty-table": .table([:]),
    ]

    @Test("every basic property and every header type come back as published")
    func everyPropertyAndHeaderTypeRoundTrips() async throws {
        try await withBrokerSession("round trip") { session in
            let channel = session.channel
            let exchange = try await session.declareOwnedExchange("round-trip")
            let queue = try await session.declareOwnedQueue("round-trip")
            let routingKey = uniqueName("card.replenished")
            try await channel.bindQueue(queue, exchange: exchange, routingKey: routingKey)
            try await channel.enableConfirms()

            let published = AMQPMessageProperties(
                contentType: "application/json", contentEncoding: "identity", headers: Self.everyHeaderType,
                deliveryMode: .persistent, priority: 7, correlationID: "correlation-1", replyTo: "reply.queue",
                expiration: "600000", messageID: "message-1", timestamp: 1_700_000_123, type: "card.replenished",
                userID: "guest",  // the broker refuses (406) any user id but the connection's own
                appID: "wallet-notification-worker", clusterID: "cluster-a"
            )
            let body = (0...255).map { UInt8($0) }
            let outcome = try await within(.seconds(10), "the confirm") {
                try await channel.publish(
                    AMQPOutboundMessage(
                        exchange: exchange, routingKey: routingKey, body: body, properties: published, mandatory: true
                    ))
            }
            #expect(outcome == .confirmed)

            let consumer = try await channel.consume(queue: queue)
            let deliveries = try await receive(1, from: consumer)
            try #require(deliveries.count == 1)
            let delivery = deliveries[0]
            try await channel.ack(deliveryTag: delivery.deliveryTag)

            #expect(delivery.body == body)
            #expect(delivery.exchange == exchange)
            #expect(delivery.routingKey == routingKey)
            #expect(delivery.redelivered == false)
            #expect(delivery.deliveryTag == 1)  // the first delivery on a fresh channel
            #expect(delivery.consumerTag == consumer.tag)

            let received = delivery.properties
            #expect(received.contentType == "application/json")
            #expect(received.contentEncoding == "identity")
            #expect(received.deliveryMode == .persistent)
            #expect(received.priority == 7)
            #expect(received.correlationID == "correlation-1")
            #expect(received.replyTo == "reply.queue")
            #expect(received.expiration == "600000")
            #expect(received.messageID == "message-1")
            #expect(received.timestamp == 1_700_000_123)
            #expect(received.type == "card.replenished")
            #expect(received.userID == "guest")
            #expect(received.appID == "wallet-notification-worker")
            #expect(received.clusterID == "cluster-a")

            // RabbitMQ 3.10 does not re-encode the content header of a message it only routes and stores
            // (it keeps the publisher's bytes, `properties_bin`), so every field kind comes back as sent,
            // including the kinds it would itself parse differently ('L' unsigned 64-bit as signed 'l').
            let headers = try #require(received.headers)
            #expect(headers.entries.map(\.key) == Self.everyHeaderType.entries.map(\.key), "header order is kept")
            for (key, value) in Self.everyHeaderType.entries {
                #expect(headers[key] == value, "header '\(key)'")
            }
            #expect(received == published)
        }
    }

    /// Dead-lettering is a path where RabbitMQ does re-encode the headers (it adds `x-death`), so this pins
    /// what the broker normalises, as seen from this transport.
    @Test("dead-lettering re-encodes headers: keys sorted, unsigned 64-bit comes back signed, the rest unchanged")
    func deadLetteredHeadersAreNormalisedByTheBroker() async throws {
        try await withBrokerSession("dead letter") { session in
            let channel = session.channel
            let target = try await session.declareOwnedQueue("dead-letter-target")
            let source = try await session.declareOwnedQueue(
                "dead-letter-source",
                arguments: ["x-dead-letter-exchange": .string(""), "x-dead-letter-routing-key": .string(target)]
            )
            try await channel.enableConfirms()
            try await publishConfirmed(
                [message(to: source, "dead", properties: .init(headers: Self.everyHeaderType))], on: channel)
            let rejected = try await receive(1, from: try await channel.consume(queue: source))
            try #require(rejected.count == 1)
            try await channel.reject(deliveryTag: rejected[0].deliveryTag, requeue: false)
            let deadLettered = try await receive(1, from: try await channel.consume(queue: target))
            try #require(deadLettered.count == 1)
            try await channel.ack(deliveryTag: deadLettered[0].deliveryTag)
            let headers = try #require(deadLettered[0].properties.headers)

            // RabbitMQ (rabbit_binary_parser) reads both 'l' and 'L' as signed 64-bit and writes them back as 'l':
            // uint64(.max) returns as int64(-1). Every other kind, 8/16/32-bit unsigned included, keeps its kind.
            var expected = Self.everyHeaderType
            expected["uint64"] = .int64(-1)
            for (key, value) in expected.entries {
                #expect(headers[key] == value, "header '\(key)'")
            }
            // It stores the top-level table sorted by key (byte order) after adding its own headers;
            // nested tables keep their order.
            let added = ["x-death", "x-first-death-exchange", "x-first-death-queue", "x-first-death-reason"]
            let expectedKeys = (expected.entries.map(\.key) + added).sorted {
                $0.utf8.lexicographicallyPrecedes($1.utf8)
            }
            #expect(headers.entries.map(\.key) == expectedKeys)
            #expect(headers["x-first-death-reason"] == .string("rejected"))
            #expect(headers["x-first-death-queue"] == .string(source))
            guard case .array(let deaths)? = headers["x-death"], case .table(let death)? = deaths.first else {
                Issue.record("x-death is not an array of tables: \(String(describing: headers["x-death"]))")
                return
            }
            #expect(death["count"] == .int64(1))
            #expect(death["reason"] == .string("rejected"))
            #expect(death["queue"] == .string(source))
            #expect(death["routing-keys"] == .array([.string(source)]))
        }
    }

    @Test("absent properties stay absent; empty strings stay empty")
    func absentAndEmptyPropertiesRoundTrip() async throws {
        try await withBrokerSession("absent properties") { session in
            let channel = session.channel
            let queue = try await session.declareOwnedQueue("absent-properties")
            try await channel.enableConfirms()
            try await publishConfirmed(
                [
                    message(to: queue, "bare"),
                    message(to: queue, "", properties: .init(contentType: "", headers: [:], messageID: "")),
                ],
                on: channel
            )
            let consumer = try await channel.consume(queue: queue)
            let deliveries = try await receive(2, from: consumer)
            try #require(deliveries.count == 2)
            try await channel.ack(deliveryTag: deliveries[1].deliveryTag, multiple: true)

            #expect(deliveries[0].properties == AMQPMessageProperties())
            #expect(deliveries[0].body == Array("bare".utf8))
            #expect(deliveries[0].exchange == "")
            #expect(deliveries[0].routingKey == queue)
            #expect(deliveries[1].body.isEmpty)
            #expect(deliveries[1].properties == AMQPMessageProperties(contentType: "", headers: [:], messageID: ""))
        }
    }

    @Test("bodies at the frame boundaries arrive intact and in order, several to a batch")
    func bodiesAtFrameBoundariesRoundTrip() async throws {
        try await withBrokerSession("frame boundaries") { session in
            let channel = session.channel
            let queue = try await session.declareOwnedQueue("frame-boundaries")
            try await channel.enableConfirms()
            // A body frame holds frame_max - 8 bytes (128 KiB asked for, as the broker grants by default).
            let chunk = 131_072 - 8
            let sizes = [0, 1, chunk - 1, chunk, chunk + 1, 2 * chunk, 2 * chunk + 1, 5]
            let bodies = sizes.enumerated().map { index, size in
                (0..<size).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ index) }
            }
            let messages = bodies.enumerated().map { index, body in
                AMQPOutboundMessage(
                    exchange: "", routingKey: queue, body: body,
                    properties: .init(headers: ["index": .int64(Int64(index))], messageID: "body-\(index)"),
                    mandatory: true)
            }
            let outcomes = try await within(.seconds(10), "confirms of the boundary bodies") {
                try await channel.publish(messages + messages)
            }
            #expect(outcomes == Array(repeating: .confirmed, count: 2 * messages.count))
            let consumer = try await channel.consume(queue: queue)
            let deliveries = try await receive(2 * messages.count, from: consumer)
            try await channel.ack(deliveryTag: deliveries.last!.deliveryTag, multiple: true)
            #expect(deliveries.map(\.body) == bodies + bodies)
            #expect(deliveries.map(\.properties.messageID) == (messages + messages).map(\.properties.messageID))
            #expect(
                deliveries.map { $0.properties.headers?["index"] }
                    == (messages + messages).map { $0.properties.headers?["index"] })
        }
    }

    @Test("a body far larger than the frame size arrives intact")
    func bodySpanningManyFramesRoundTrips() async throws {
        try await withBrokerSession("large body") { session in
            let channel = session.channel
            let queue = try await session.declareOwnedQueue("large-body")
            try await channel.enableConfirms()
            // 1 MiB + 7: eight frames of 128 KiB (the frame_max asked for) and a partial one.
            var generator = SystemRandomNumberGenerator()
            let body = (0..<(1 << 20) + 7).map { _ in UInt8.random(in: 0...255, using: &generator) }
            try await publishConfirmed([AMQPOutboundMessage(exchange: "", routingKey: queue, body: body)], on: channel)
            let consumer = try await channel.consume(queue: queue)
            let deliveries = try await receive(1, from: consumer)
            try #require(deliveries.count == 1)
            try await channel.ack(deliveryTag: deliveries[0].deliveryTag)
            #expect(deliveries[0].body.count == body.count)
            #expect(deliveries[0].body == body)
        }
    }
}
