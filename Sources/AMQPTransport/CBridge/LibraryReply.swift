internal import CRabbitMQ
internal import CRabbitMQShims

/// The one choke point where librabbitmq's status codes and `amqp_rpc_reply_t` become `AMQPError`s.
enum LibraryReply {
    /// Checks a status returned by a non-RPC call (`amqp_basic_publish`, `amqp_basic_ack`, ...).
    static func check(status: Int32, context: String, file: String = #fileID, line: UInt = #line) throws(AMQPError) {
        guard status != AMQP_STATUS_OK.rawValue else { return }
        throw error(status: status, context: context, file: file, line: line)
    }

    static func error(status: Int32, context: String, file: String = #fileID, line: UInt = #line) -> AMQPError {
        AMQPError(
            code: code(forStatus: status),
            message: "\(context): \(String(cString: amqp_error_string2(status)))",
            libraryStatus: status, file: file, line: line
        )
    }

    /// Checks the reply of a synchronous method. A broker close is reported with its reply code and text.
    static func check(_ reply: amqp_rpc_reply_t, context: String, file: String = #fileID, line: UInt = #line)
        throws(AMQPError)
    {
        switch reply.reply_type {
        case AMQP_RESPONSE_NORMAL:
            return
        case AMQP_RESPONSE_LIBRARY_EXCEPTION:
            throw error(status: reply.library_error, context: context, file: file, line: line)
        case AMQP_RESPONSE_SERVER_EXCEPTION:
            throw serverError(reply.reply, context: context, file: file, line: line)
        default:
            throw AMQPError(
                code: .protocolError, message: "\(context): no reply from librabbitmq", file: file, line: line)
        }
    }

    /// A channel.close or connection.close the broker sent, as an error.
    static func serverError(_ method: amqp_method_t, context: String, file: String = #fileID, line: UInt = #line)
        -> AMQPError
    {
        if method.id == CRabbitMQShims_CHANNEL_CLOSE_METHOD, let decoded = method.decoded {
            let close = decoded.assumingMemoryBound(to: amqp_channel_close_t.self).pointee
            let text = close.reply_text.string
            return AMQPError(
                code: .channelClosedByBroker, message: "\(context): channel closed by the broker: \(text)",
                replyCode: close.reply_code, replyText: text, file: file, line: line
            )
        }
        if method.id == CRabbitMQShims_CONNECTION_CLOSE_METHOD, let decoded = method.decoded {
            let close = decoded.assumingMemoryBound(to: amqp_connection_close_t.self).pointee
            let text = close.reply_text.string
            return AMQPError(
                code: .connectionClosedByBroker, message: "\(context): connection closed by the broker: \(text)",
                replyCode: close.reply_code, replyText: text, file: file, line: line
            )
        }
        return AMQPError(
            code: .protocolError,
            message: "\(context): unexpected method 0x\(String(method.id, radix: 16)) from the broker",
            file: file, line: line
        )
    }

    static func code(forStatus status: Int32) -> AMQPError.Code {
        switch status {
        case AMQP_STATUS_TIMEOUT.rawValue: .timeout
        case AMQP_STATUS_HEARTBEAT_TIMEOUT.rawValue: .heartbeatTimeout
        case AMQP_STATUS_HOSTNAME_RESOLUTION_FAILED.rawValue, AMQP_STATUS_TCP_SOCKETLIB_INIT_ERROR.rawValue:
            .connectionFailed
        case AMQP_STATUS_CONNECTION_CLOSED.rawValue, AMQP_STATUS_SOCKET_ERROR.rawValue,
            AMQP_STATUS_SOCKET_CLOSED.rawValue,
            AMQP_STATUS_TCP_ERROR.rawValue, AMQP_STATUS_SOCKET_INUSE.rawValue:
            .connectionLost
        case AMQP_STATUS_SSL_ERROR.rawValue, AMQP_STATUS_SSL_HOSTNAME_VERIFY_FAILED.rawValue,
            AMQP_STATUS_SSL_PEER_VERIFY_FAILED.rawValue, AMQP_STATUS_SSL_CONNECTION_FAILED.rawValue,
            AMQP_STATUS_SSL_SET_ENGINE_FAILED.rawValue:
            .tlsFailed
        case AMQP_STATUS_INVALID_PARAMETER.rawValue, AMQP_STATUS_TABLE_TOO_BIG.rawValue, AMQP_STATUS_BAD_URL.rawValue:
            .invalidArgument
        case AMQP_STATUS_BROKER_UNSUPPORTED_SASL_METHOD.rawValue: .authenticationFailed
        default: .protocolError
        }
    }
}
