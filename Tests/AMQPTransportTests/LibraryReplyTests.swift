import Testing

@testable import AMQPTransport

@Suite("librabbitmq status and reply mapping")
struct LibraryReplyTests {
    // Status values are librabbitmq's `AMQP_STATUS_*` (amqp.h); written out so no test imports the C module.
    @Test(arguments: [
        (Int32(-0x000D), AMQPError.Code.timeout),  // AMQP_STATUS_TIMEOUT,
        (Int32(-0x000F), .heartbeatTimeout),
        (Int32(-0x0009), .connectionLost),
        (Int32(-0x0007), .connectionLost),
        (Int32(-0x0011), .connectionLost),
        (Int32(-0x0005), .connectionFailed),
        (Int32(-0x0202), .tlsFailed),
        (Int32(-0x0201), .tlsFailed),
        (Int32(-0x000B), .invalidArgument),
        (Int32(-0x0002), .protocolError),
        (Int32(-0x0013), .authenticationFailed),
    ])
    func statusCodesMapToErrorCodes(_ status: Int32, _ code: AMQPError.Code) {
        let error = LibraryReply.error(status: status, context: "test")
        #expect(error.code == code)
        #expect(error.libraryStatus == status)
        #expect(error.message.hasPrefix("test: "))
    }

    @Test func okStatusDoesNotThrow() throws {
        try LibraryReply.check(status: Int32(0), context: "ok")
    }

    @Test(arguments: [
        (AMQPError.Code.connectionLost, nil as UInt16?, true),
        (.heartbeatTimeout, nil, true),
        (.timeout, nil, true),
        (.connectionClosedByBroker, 320, true),  // CONNECTION_FORCED: broker restarting
        (.connectionClosedByBroker, 541, true),  // INTERNAL_ERROR
        (.channelClosedByBroker, 404, false),  // NOT_FOUND: topology is wrong
        (.channelClosedByBroker, 406, false),  // PRECONDITION_FAILED: conflicting declare
        (.channelClosedByBroker, 403, false),  // ACCESS_REFUSED
        (.authenticationFailed, nil, false),
        (.invalidURL, nil, false),
    ])
    func retriabilityFollowsTheReplyCode(_ code: AMQPError.Code, _ replyCode: UInt16?, _ retriable: Bool) {
        #expect(AMQPError(code: code, message: "x", replyCode: replyCode).isRetriable == retriable)
    }

    @Test func errorsRecordWhereTheyWereMade() {
        let error = AMQPError(code: .timeout, message: "x")
        #expect(error.file.hasSuffix("LibraryReplyTests.swift"))
        #expect(error.line > 0)
    }
}
