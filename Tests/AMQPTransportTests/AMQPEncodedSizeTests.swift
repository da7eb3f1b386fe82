import Testing

@testable import AMQPTransport

/// The sizes computed in Swift must match what librabbitmq's encoder writes, or a message that "fits" would fail
/// inside the library after part of it was written. Checked against the library's own table codec.
@Suite("Encoded sizes of properties and tables")
struct AMQPEncodedSizeTests {
    @Test func everyFieldKindHasTheSizeLibrabbitmqEncodesItIn() throws {
        for (key, value) in FieldTableTests.everyKind.entries {
            let table: AMQPTable = [key: value]
            #expect(try FieldTableWireFormat.encode(table).count == table.encodedByteCount, "\(key)")
        }
        #expect(
            try FieldTableWireFormat.encode(FieldTableTests.everyKind).count
                == FieldTableTests.everyKind.encodedByteCount)
        #expect(try FieldTableWireFormat.encode([:]).count == AMQPTable().encodedByteCount)
    }

    @Test func sizesFollowTheWireFormat() {
        #expect(AMQPTable().encodedByteCount == 4)
        // 4 (table length) + 1 + 3 ("key") + 1 (kind 'S') + 4 (string length) + 2 ("é" in UTF-8).
        #expect((["key": .string("é")] as AMQPTable).encodedByteCount == 15)
        #expect(AMQPFieldValue.bool(true).encodedByteCount == 2)
        #expect(AMQPFieldValue.int64(1).encodedByteCount == 9)
        #expect(AMQPFieldValue.decimal(scale: 1, value: 1).encodedByteCount == 6)
        #expect(AMQPFieldValue.array([.int32(1), .void]).encodedByteCount == 5 + 5 + 1)
        #expect(AMQPFieldValue.table(["a": .void]).encodedByteCount == 1 + 4 + 1 + 1 + 1)
    }

    @Test func aShortStringOver255BytesCannotBeEncoded() {
        #expect(
            AMQPMessageProperties(messageID: String(repeating: "m", count: 255)).encodingProblem(frameMax: 4096) == nil)
        let problem = AMQPMessageProperties(messageID: String(repeating: "m", count: 256)).encodingProblem(
            frameMax: 4096)
        #expect(problem == "message_id is 256 bytes, over AMQP's 255-byte short string")
        // Bytes, not characters: 128 two-byte characters are 256 bytes.
        #expect(
            AMQPMessageProperties(correlationID: String(repeating: "é", count: 128)).encodingProblem(frameMax: 4096)
                != nil)
    }

    @Test func undecodedBytesAreMeasuredAsSent() {
        var properties = AMQPMessageProperties(type: "x")
        properties.undecodedStrings[.type] = Array(repeating: 0xFF, count: 300)
        #expect(properties.encodingProblem(frameMax: 4096) == "type is 300 bytes, over AMQP's 255-byte short string")
    }

    @Test func propertiesMustFitInOneFrameWithTheHeaderOverhead() {
        // 2 (flags) + 1 + 10 (content type) + 1 (delivery mode) + 1 (priority) + 8 (timestamp) = 23 bytes.
        let properties = AMQPMessageProperties(
            contentType: "text/plain", deliveryMode: .persistent, priority: 1, timestamp: 1_700_000_000)
        let exact = 23 + AMQPMessageProperties.contentHeaderOverhead
        #expect(properties.encodingProblem(frameMax: exact) == nil)
        #expect(
            properties.encodingProblem(frameMax: exact - 1)
                == "its properties take 23 bytes, more than a frame of \(exact - 1) bytes holds")
    }

    @Test func headersCountWhole() {
        let headers: AMQPTable = ["x-trace": .string(String(repeating: "t", count: 100))]
        let properties = AMQPMessageProperties(headers: headers)
        let size = 2 + headers.encodedByteCount
        #expect(properties.encodingProblem(frameMax: size + AMQPMessageProperties.contentHeaderOverhead) == nil)
        #expect(properties.encodingProblem(frameMax: size + AMQPMessageProperties.contentHeaderOverhead - 1) != nil)
    }

    @Test func theExchangeAndRoutingKeyAreShortStringsToo() {
        let long = String(repeating: "k", count: 256)
        #expect(
            AMQPOutboundMessage(exchange: long, routingKey: "", body: []).encodingProblem(frameMax: 4096)
                == "exchange is 256 bytes, over AMQP's 255-byte short string")
        #expect(
            AMQPOutboundMessage(exchange: "", routingKey: long, body: []).encodingProblem(frameMax: 4096)
                == "routing key is 256 bytes, over AMQP's 255-byte short string")
        #expect(AMQPOutboundMessage(exchange: "", routingKey: "q", body: []).encodingProblem(frameMax: 4096) == nil)
    }
}
