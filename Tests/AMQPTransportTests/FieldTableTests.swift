import Testing

@testable import AMQPTransport

/// Tables go Swift → C structures → librabbitmq's wire encoder → its decoder → Swift: the same path
/// headers and queue arguments take to and from the broker.
@Suite("Field table conversion")
struct FieldTableTests {
    static let everyKind: AMQPTable = [
        "bool": .bool(true),
        "i8": .int8(-8), "u8": .uint8(8),
        "i16": .int16(-16), "u16": .uint16(16),
        "i32": .int32(-32), "u32": .uint32(32),
        "i64": .int64(-64), "u64": .uint64(64),
        "f32": .float(1.5), "f64": .double(-2.25),
        "decimal": .decimal(scale: 2, value: 1234),
        "string": .string("traceparent 00-ab-cd-01 é"),
        "bytes": .bytes([0, 255, 128]),
        "timestamp": .timestamp(1_763_700_000),
        "void": .void,
        "array": .array([.int32(1), .string("two"), .table(["three": .bool(false)]), .array([])]),
        "table": .table(["nested": .table(["deeper": .array([.int64(Int64.min), .uint64(UInt64.max)])])]),
        "empty table": .table([:]),
    ]

    @Test func everyFieldKindRoundTripsThroughLibrabbitmqsCodec() throws {
        let bytes = try FieldTableWireFormat.encode(Self.everyKind)
        let decoded = try FieldTableWireFormat.decode(bytes)
        #expect(decoded == Self.everyKind)
        #expect(decoded.entries.map(\.key) == Self.everyKind.entries.map(\.key), "entry order is kept")
    }

    @Test func emptyTableRoundTrips() throws {
        #expect(try FieldTableWireFormat.decode(FieldTableWireFormat.encode([:])).isEmpty)
    }

    @Test func aByteArrayComesBackAsBytes() throws {
        // Invalid UTF-8 in a byte array ('x') must not be lost or mangled.
        var table = AMQPTable()
        table["raw"] = .bytes([0xC3, 0x28])
        let decoded = try FieldTableWireFormat.decode(FieldTableWireFormat.encode(table))
        #expect(decoded["raw"] == .bytes([0xC3, 0x28]))
    }

    /// Issue 23, defect 8: a long string ('S') whose bytes are not UTF-8 came back as a byte array ('x'), so a
    /// message the worker dead-lettered changed its headers' kinds (CONTRACT §8: properties untouched).
    @Test func aLongStringThatIsNotUTF8IsEncodedAgainAsALongStringByteForByte() throws {
        // One entry "k" = 'S', length 2, bytes C3 28 (an invalid UTF-8 sequence), as RabbitMQ forwards it.
        let wire: [UInt8] = [1, UInt8(ascii: "k"), UInt8(ascii: "S"), 0, 0, 0, 2, 0xC3, 0x28]
        let framed = [0, 0, 0, UInt8(wire.count)] + wire
        let decoded = try FieldTableWireFormat.decode(framed)
        #expect(decoded["k"] == .undecodedString([0xC3, 0x28]))
        #expect(try FieldTableWireFormat.encode(decoded) == framed, "encoded again as 'S', byte for byte")
    }

    @Test func propertiesRoundTripThroughCStructures() {
        let properties = AMQPMessageProperties(
            contentType: "application/json", contentEncoding: "identity", headers: Self.everyKind,
            deliveryMode: .persistent, priority: 7, correlationID: "c-1", replyTo: "amq.rabbitmq.reply-to",
            expiration: "60000", messageID: "m-1", timestamp: 1_763_700_000, type: "cardEvent",
            userID: "guest", appID: "wallet", clusterID: "eu"
        )
        let pool = CMemoryPool()
        #expect(AMQPMessageProperties(copying: properties.encoded(in: pool)) == properties)
        #expect(AMQPMessageProperties(copying: AMQPMessageProperties().encoded(in: pool)) == AMQPMessageProperties())
    }

    @Test func subscriptReplacesAppendsAndRemoves() {
        var table: AMQPTable = ["a": .int32(1)]
        table["b"] = .bool(true)
        table["a"] = .int32(2)
        #expect(table.entries.map(\.key) == ["a", "b"])
        #expect(table["a"] == .int32(2))
        table["a"] = nil
        #expect(table.entries.map(\.key) == ["b"])
    }
}
