import Testing

/// `SocketReader`'s chunked bodies: how the tests' HTTP client reads Prometheus's larger API answers, and the OTLP
/// receiver an exporter's chunked posts.
@Suite struct DechunkedTests {
    @Test func chunksAreJoinedEvenWhenOneEndsInsideACharacter() {
        // "é" is two bytes (C3 A9); the first chunk ends between them.
        let body: [UInt8] =
            Array("7\r\n{\"a\":\"".utf8) + [0xC3] + Array("\r\n3;ext=1\r\n".utf8) + [0xA9]
            + Array("\"}\r\n0\r\n\r\n".utf8)
        #expect(Self.dechunked(body).map { String(decoding: $0, as: UTF8.self) } == #"{"a":"é"}"#)
    }

    @Test(arguments: ["4\r\nabc", "4\r\nabcdXY0\r\n\r\n", "zz\r\nab\r\n0\r\n\r\n", "2\r\nab\r\n"])
    func aBodyCutShortOrMalformedIsRefused(_ body: String) {
        #expect(Self.dechunked(Array(body.utf8)) == nil)
    }

    private static func dechunked(_ bytes: [UInt8]) -> [UInt8]? {
        var reader = SocketReader(descriptor: -1, buffered: bytes)
        return reader.readChunkedBody()
    }
}
