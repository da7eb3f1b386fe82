import Testing

@testable import AMQPTransport

/// The frames `PublishFrames` writes to the socket, byte for byte, against AMQP 0-9-1 (§2.3.5 frame format,
/// §4.2.6 content header, basic.publish = class 60 method 40). The expected bytes are written out by hand from the
/// spec, not produced by the encoder under test.
@Suite("Publish frames: the bytes on the wire")
struct PublishFramesTests {
    private func frames(of message: AMQPOutboundMessage, channel: UInt16, frameMax: Int) throws -> [UInt8] {
        var frames = PublishFrames()
        try frames.append(message, channel: channel, frameMax: frameMax, pool: CMemoryPool())
        return frames.bytes
    }

    @Test func aPublishWithPropertiesAndABodyIsThreeFrames() throws {
        let message = AMQPOutboundMessage(
            exchange: "ex", routingKey: "rk", body: Array("hello".utf8),
            properties: AMQPMessageProperties(contentType: "t", deliveryMode: .persistent))
        let expected: [UInt8] = [
            // Method frame: type 1, channel 1, payload size 13.
            0x01, 0x00, 0x01, 0x00, 0x00, 0x00, 0x0D,
            0x00, 0x3C, 0x00, 0x28,  // class 60 (basic), method 40 (publish)
            0x00, 0x00,  // reserved-1 (ticket)
            0x02, 0x65, 0x78,  // exchange: short string "ex"
            0x02, 0x72, 0x6B,  // routing key: short string "rk"
            0x00,  // bits: mandatory 0, immediate 0
            0xCE,  // frame end
            // Content header frame: type 2, channel 1, payload size 17.
            0x02, 0x00, 0x01, 0x00, 0x00, 0x00, 0x11,
            0x00, 0x3C,  // class 60
            0x00, 0x00,  // weight
            0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x05,  // body size 5
            0x90, 0x00,  // property flags: content-type (bit 15), delivery-mode (bit 12)
            0x01, 0x74,  // content-type: short string "t"
            0x02,  // delivery-mode: persistent
            0xCE,
            // Body frame: type 3, channel 1, payload size 5.
            0x03, 0x00, 0x01, 0x00, 0x00, 0x00, 0x05,
            0x68, 0x65, 0x6C, 0x6C, 0x6F,  // "hello"
            0xCE,
        ]
        #expect(try frames(of: message, channel: 1, frameMax: 131_072) == expected)
    }

    @Test func aBodyLongerThanAFrameIsSplitAndAnEmptyBodyHasNoBodyFrame() throws {
        // frameMax 32: a body frame carries at most 32 - 8 = 24 bytes. Channel 0x0102 shows the byte order.
        let body = (0..<30).map { UInt8($0) }
        let message = AMQPOutboundMessage(exchange: "", routingKey: "q", body: body, mandatory: true)
        let bytes = try frames(of: message, channel: 0x0102, frameMax: 32)
        let head: [UInt8] = [
            0x01, 0x01, 0x02, 0x00, 0x00, 0x00, 0x0A,
            0x00, 0x3C, 0x00, 0x28, 0x00, 0x00,
            0x00,  // exchange: the empty short string
            0x01, 0x71,  // routing key "q"
            0x01,  // bits: mandatory
            0xCE,
            0x02, 0x01, 0x02, 0x00, 0x00, 0x00, 0x0E,
            0x00, 0x3C, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x1E,  // body size 30
            0x00, 0x00,  // no properties
            0xCE,
        ]
        let bodyFrames: [UInt8] =
            [0x03, 0x01, 0x02, 0x00, 0x00, 0x00, 0x18] + Array(body[0..<24]) + [0xCE]
            + [0x03, 0x01, 0x02, 0x00, 0x00, 0x00, 0x06] + Array(body[24..<30]) + [0xCE]
        #expect(bytes == head + bodyFrames)

        let empty = try frames(
            of: AMQPOutboundMessage(exchange: "", routingKey: "q", body: [], mandatory: true), channel: 0x0102,
            frameMax: 32)
        #expect(
            empty == Array(head[..<18]) + [0x02, 0x01, 0x02, 0x00, 0x00, 0x00, 0x0E, 0x00, 0x3C, 0x00, 0x00]
                + Array(repeating: 0, count: 8) + [0x00, 0x00, 0xCE])
    }

    @Test func messagesOfABatchFollowEachOtherAndTheBufferEmpties() throws {
        var frames = PublishFrames()
        let pool = CMemoryPool()
        let message = AMQPOutboundMessage(exchange: "ex", routingKey: "rk", body: [1])
        try frames.append(message, channel: 1, frameMax: 4096, pool: pool)
        try frames.append(message, channel: 1, frameMax: 4096, pool: pool)
        let one = try self.frames(of: message, channel: 1, frameMax: 4096)
        #expect(frames.bytes == one + one)
        frames.removeAll()
        #expect(frames.isEmpty)
    }

    @Test func theContentHeaderSizeCheckAgreesWithTheEncoder() throws {
        // `encodingProblem` promises that a header it accepts fits in one frame: at the exact frame size the encoder
        // succeeds, one byte less both refuse.
        let properties = AMQPMessageProperties(
            contentType: "application/json", headers: ["k": .string("v")], messageID: "m-1")
        let message = AMQPOutboundMessage(exchange: "", routingKey: "q", body: [], properties: properties)
        let bytes = try frames(of: message, channel: 1, frameMax: 4096)
        let methodFrameSize = 7 + 4 + 2 + 1 + 2 + 1 + 1
        let headerFrameSize = bytes.count - methodFrameSize
        #expect(message.encodingProblem(frameMax: headerFrameSize) == nil)
        #expect(try frames(of: message, channel: 1, frameMax: headerFrameSize).count == bytes.count)
        #expect(message.encodingProblem(frameMax: headerFrameSize - 1) != nil)
        #expect(throws: AMQPError.self) { try frames(of: message, channel: 1, frameMax: headerFrameSize - 1) }
    }
}
