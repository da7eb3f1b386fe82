import Testing

@testable import AMQPTransport

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// What a failed connect or login tells an operator, decided without a broker.
@Suite("Connection handshake decisions")
struct ConnectionHandshakeTests {
    private let configuration: AMQPConnectionConfiguration = {
        var configuration = AMQPConnectionConfiguration(
            url: try! AMQPURL(parsing: "amqp://app:secret@broker.test:5673/wallet"))
        configuration.connectTimeout = .seconds(3)
        return configuration
    }()

    @Test func theHeartbeatIsAskedForInWholeSecondsRoundedUp() {
        #expect(ConnectionHandshake.heartbeatSeconds(.seconds(10)) == 10)
        #expect(ConnectionHandshake.heartbeatSeconds(.milliseconds(1_500)) == 2)
        #expect(ConnectionHandshake.heartbeatSeconds(.zero) == 0)
    }

    @Test func aConnectTimeoutNamesTheConfiguredTimeout() {
        let error = ConnectionHandshake.connectError(
            AMQPError(code: .timeout, message: "connecting: request timed out"), probedErrno: nil,
            configuration: configuration)
        #expect(error.code == .connectTimeout)
        #expect(error.message == "connecting to broker.test:5673: no answer within 3.0 seconds")
    }

    @Test func aLostOrGarbledConnectIsAFailedConnectNamedByTheProbe() {
        let error = ConnectionHandshake.connectError(
            AMQPError(code: .connectionLost, message: "connecting: a socket error occurred"), probedErrno: ECONNREFUSED,
            configuration: configuration)
        #expect(error.code == .connectionFailed)
        #expect(
            error.message
                == "connecting to broker.test:5673: connection refused (nothing listens on that port, or a firewall rejects it)"
        )
        let unexplained = ConnectionHandshake.connectError(
            AMQPError(code: .protocolError, message: "as it was"), probedErrno: EINVAL, configuration: configuration)
        #expect(unexplained.code == .connectionFailed)
        #expect(unexplained.message == "as it was")
    }

    @Test func onlyErrnosThatSaySomethingAboutTheConnectAreExplained() {
        #expect(ConnectionHandshake.connectFailure(ETIMEDOUT) == "connection timed out")
        #expect(ConnectionHandshake.connectFailure(ECONNRESET) == "connection reset by the peer")
        #expect(ConnectionHandshake.connectFailure(EHOSTUNREACH)?.hasSuffix("(no route to the broker)") == true)
        #expect(ConnectionHandshake.connectFailure(EINVAL) == nil)
    }

    @Test func refusedCredentialsOrVirtualHostAreAnAuthenticationFailure() {
        for replyCode: UInt16 in [403, 530] {
            let error = ConnectionHandshake.loginError(
                AMQPError(
                    code: .connectionClosedByBroker, message: "closed", replyCode: replyCode,
                    replyText: "ACCESS_REFUSED"),
                saslMethodUnsupported: false, configuration: configuration)
            #expect(error.code == .authenticationFailed)
            #expect(error.message == "the broker refused the login of user 'app' to vhost 'wallet': ACCESS_REFUSED")
        }
        let sasl = ConnectionHandshake.loginError(
            AMQPError(code: .protocolError, message: "unsupported SASL method"), saslMethodUnsupported: true,
            configuration: configuration)
        #expect(sasl.code == .authenticationFailed)
        #expect(sasl.message.hasSuffix(": unsupported SASL method"))
    }

    @Test func anUnansweredLoginIsAConnectTimeoutAndOtherFailuresPassThrough() {
        let timeout = ConnectionHandshake.loginError(
            AMQPError(code: .timeout, message: "timed out"), saslMethodUnsupported: false, configuration: configuration)
        #expect(timeout.code == .connectTimeout)
        #expect(timeout.message.hasSuffix("no answer within 3.0 seconds"))
        let forced = AMQPError(
            code: .connectionClosedByBroker, message: "closed", replyCode: 320, replyText: "CONNECTION_FORCED")
        #expect(
            ConnectionHandshake.loginError(forced, saslMethodUnsupported: false, configuration: configuration) == forced
        )
    }
}
