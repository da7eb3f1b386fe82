import CRabbitMQ
import Testing
@testable import AMQPTransport

@Suite("librabbitmq status and reply mapping")
struct LibraryReplyTests {
    @Test(arguments: [
        (AMQP_STATUS_TIMEOUT.rawValue, AMQPError.Code.timeout),
        (AMQP_STATUS_HEARTBEAT_TIMEOUT.rawValue, .heartbeatTimeout),
        (AMQP_STATUS_SOCKET_ERROR.rawValue, .connectionLost),
        (AMQP_STATUS_CONNECTION_CLOSED.rawValue, .connectionLost),
        (AMQP_STATUS_SOCKET_CLOSED.rawValue, .connectionLost),
        (AMQP_STATUS_HOSTNAME_RESOLUTION_FAILED.rawValue, .connectionFailed),
        (AMQP_STATUS_SSL_PEER_VERIFY_FAILED.rawValue, .tlsFailed),
        (AMQP_STATUS_SSL_HOSTNAME_VERIFY_FAILED.rawValue, .tlsFailed),
        (AMQP_STATUS_TABLE_TOO_BIG.rawValue, .invalidArgument),
        (AMQP_STATUS_BAD_AMQP_DATA.rawValue, .protocolError),
        (AMQP_STATUS_BROKER_UNSUPPORTED_SASL_METHOD.rawValue, .authenticationFailed),
    ])
    func statusCodesMapToErrorCodes(_ status: Int32, _ code: AMQPError.Code) {
        let error = LibraryReply.error(status: status, context: "test")
        #expect(error.code == code)
        #expect(error.libraryStatus == status)
        #expect(error.message.hasPrefix("test: "))
    }

    @Test func okStatusDoesNotThrow() throws {
        try LibraryReply.check(status: AMQP_STATUS_OK.rawValue, context: "ok")
    }

    @Test(arguments: [
        (AMQPError.Code.connectionLost, nil as UInt16?, true),
        (.heartbeatTimeout, nil, true),
        (.timeout, nil, true),
        (.connectionClosedByBroker, 320, true),   // CONNECTION_FORCED: broker restarting
        (.connectionClosedByBroker, 541, true),   // INTERNAL_ERROR
        (.channelClosedByBroker, 404, false),     // NOT_FOUND: topology is wrong
        (.channelClosedByBroker, 406, false),     // PRECONDITION_FAILED: conflicting declare
        (.channelClosedByBroker, 403, false),     // ACCESS_REFUSED
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
