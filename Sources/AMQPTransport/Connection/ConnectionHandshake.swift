internal import CRabbitMQ
internal import CRabbitMQShims
import Logging

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// Opening a connection: the socket (TCP, or TLS with its certificates), the AMQP handshake and login, and what the
/// broker agreed to at tune time (heartbeat, frame size).
///
/// The C calls are kept in `open(configuration:logger:)` and `makeSocket`, in order and thin; what a failure means
/// for an operator (which error code, which message) is decided by the static functions below them, which are pure
/// and unit-tested.
enum ConnectionHandshake {
    /// A logged-in connection and what was negotiated for it.
    struct Opened {
        var state: amqp_connection_state_t
        var socketDescriptor: Int32
        /// The broker's heartbeat interval (zero: none).
        var heartbeat: Duration
        /// The frame size negotiated with the broker: a content header must fit in one frame.
        var frameMax: Int
    }

    /// Connects and logs in within `configuration.connectTimeout`. On failure nothing is left open.
    static func open(configuration: AMQPConnectionConfiguration, logger: Logger) throws(AMQPError) -> Opened {
        guard let state = amqp_new_connection() else {
            throw AMQPError(code: .connectionFailed, message: "librabbitmq could not allocate a connection")
        }
        let url = configuration.url
        do throws(AMQPError) {
            let socket = try makeSocket(state: state, configuration: configuration)
            let connectDeadline = ContinuousClock.now + configuration.connectTimeout
            var connectTimeout = timeval(configuration.connectTimeout)
            let status = amqp_socket_open_noblock(socket, url.host, Int32(url.port), &connectTimeout)
            if status != AMQP_STATUS_OK.rawValue {
                // librabbitmq says only "a socket error occurred": a connect of our own learns which.
                let probed =
                    status == AMQP_STATUS_SOCKET_ERROR.rawValue
                    ? ConnectProbe.failure(host: url.host, port: url.port, timeout: .seconds(1)) : nil
                throw connectError(
                    LibraryReply.error(status: status, context: "connecting to \(url.host):\(url.port)"),
                    probedErrno: probed, configuration: configuration)
            }
            // The AMQP handshake gets what is left of the same connect timeout.
            var handshakeTimeout = timeval(max(connectDeadline - .now, .milliseconds(1)))
            _ = amqp_set_handshake_timeout(state, &handshakeTimeout)
            var rpcTimeout = timeval(configuration.rpcTimeout)
            _ = amqp_set_rpc_timeout(state, &rpcTimeout)

            let reply = CRabbitMQShims_login(
                state, url.virtualHost, Int32(configuration.channelMax), Int32(configuration.frameMax),
                heartbeatSeconds(configuration.heartbeat), url.user, url.password, configuration.connectionName, "1.0"
            )
            do {
                try LibraryReply.check(reply, context: "logging in to \(url)")
            } catch {
                if reply.reply_type == AMQP_RESPONSE_SERVER_EXCEPTION {
                    var closeOk = amqp_connection_close_ok_t(dummy: 0)
                    _ = amqp_send_method(state, 0, CRabbitMQShims_CONNECTION_CLOSE_OK_METHOD, &closeOk)
                }
                throw loginError(
                    error,
                    saslMethodUnsupported: reply.library_error == AMQP_STATUS_BROKER_UNSUPPORTED_SASL_METHOD.rawValue,
                    configuration: configuration)
            }
        } catch {
            amqp_destroy_connection(state)
            throw error
        }
        let opened = Opened(
            state: state, socketDescriptor: amqp_get_sockfd(state), heartbeat: .seconds(Int(amqp_get_heartbeat(state))),
            frameMax: Int(amqp_get_frame_max(state)))
        logger.info(
            "AMQP connection open",
            metadata: [
                AMQPLoggingKeys.url: "\(url)", AMQPLoggingKeys.heartbeat: "\(amqp_get_heartbeat(state))",
                AMQPLoggingKeys.frameMax: "\(amqp_get_frame_max(state))",
            ])
        return opened
    }

    private static func makeSocket(state: amqp_connection_state_t, configuration: AMQPConnectionConfiguration)
        throws(AMQPError) -> OpaquePointer
    {
        guard configuration.url.useTLS else {
            guard let socket = amqp_tcp_socket_new(state) else {
                throw AMQPError(code: .connectionFailed, message: "librabbitmq could not create a TCP socket")
            }
            return socket
        }
        guard let socket = amqp_ssl_socket_new(state) else {
            throw AMQPError(
                code: .tlsFailed, message: "librabbitmq could not create a TLS socket (OpenSSL initialisation failed)")
        }
        let tls = configuration.tls
        // librabbitmq trusts nothing by default: the configured file, else the system's bundle (SystemCABundle).
        if let caCertificatePath = SystemCABundle.path(for: tls) {
            try LibraryReply.check(
                status: amqp_ssl_socket_set_cacert(socket, caCertificatePath),
                context: "loading CA file \(caCertificatePath)")
        } else if tls.verifyPeer {
            throw AMQPError(
                code: .tlsFailed,
                message: "no CA certificates to verify the broker with: configure a CA file or set SSL_CERT_FILE "
                    + "(no system bundle at \(SystemCABundle.candidatePaths.joined(separator: ", ")))")
        }
        switch (tls.clientCertificatePath, tls.clientKeyPath) {
        case (let certificate?, let key?):
            try LibraryReply.check(
                status: amqp_ssl_socket_set_key(socket, certificate, key),
                context: "loading client certificate \(certificate)")
        case (nil, nil):
            break
        default:
            throw AMQPError(
                code: .invalidArgument, message: "a TLS client certificate needs both the certificate and the key file")
        }
        amqp_ssl_socket_set_verify_peer(socket, tls.verifyPeer ? 1 : 0)
        amqp_ssl_socket_set_verify_hostname(socket, tls.verifyHostname ? 1 : 0)
        return socket
    }

    // MARK: - Decisions (pure)

    /// The heartbeat asked for at login, in whole seconds as AMQP counts them (rounded up: never more often than asked).
    static func heartbeatSeconds(_ heartbeat: Duration) -> Int32 {
        Int32(heartbeat.secondsValue.rounded(.up))
    }

    /// A failed socket connect as an operator reads it: a timeout is the connect timeout, a lost or garbled
    /// connection is a failed connect, and `probedErrno` (what a connect of our own learned) names the cause.
    static func connectError(_ error: AMQPError, probedErrno: Int32?, configuration: AMQPConnectionConfiguration)
        -> AMQPError
    {
        var error = error
        let url = configuration.url
        if error.code == .timeout {
            error.code = .connectTimeout
            error.message = "connecting to \(url.host):\(url.port): no answer within \(configuration.connectTimeout)"
        } else if error.code == .connectionLost || error.code == .protocolError {
            error.code = .connectionFailed
        }
        if let probedErrno, let reason = connectFailure(probedErrno) {
            error.message = "connecting to \(url.host):\(url.port): \(reason)"
        }
        return error
    }

    /// What a failed connect's errno means for an operator; nil when it says nothing about the connect.
    static func connectFailure(_ code: Int32) -> String? {
        switch code {
        case ECONNREFUSED: "connection refused (nothing listens on that port, or a firewall rejects it)"
        case EHOSTUNREACH, ENETUNREACH: "\(String(cString: strerror(code))) (no route to the broker)"
        case ETIMEDOUT: "connection timed out"
        case ECONNRESET: "connection reset by the peer"
        default: nil
        }
    }

    /// A refused or unanswered login as an operator reads it: a timeout is the connect timeout; 403 ACCESS_REFUSED
    /// (bad credentials), 530 NOT_ALLOWED (no access to the vhost) and an unsupported SASL method are a refused login.
    static func loginError(_ error: AMQPError, saslMethodUnsupported: Bool, configuration: AMQPConnectionConfiguration)
        -> AMQPError
    {
        var error = error
        let url = configuration.url
        if error.code == .timeout {
            error.code = .connectTimeout
            error.message = "logging in to \(url): no answer within \(configuration.connectTimeout)"
        }
        if error.replyCode == 403 || error.replyCode == 530 || saslMethodUnsupported {
            error.code = .authenticationFailed
            error.message =
                "the broker refused the login of user '\(url.user)' to vhost '\(url.virtualHost)': \(error.replyText ?? error.message)"
        }
        return error
    }
}
