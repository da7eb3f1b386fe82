internal import CRabbitMQ

extension AMQPConnection {
    /// Lets this connection read frames up to `bytes` long, above the frame size negotiated with the broker.
    ///
    /// RabbitMQ sends a content header whole even when it is larger than the negotiated frame size (a header
    /// table that grew past it when the broker added `x-death`), and librabbitmq refuses such a frame as bad
    /// data. Raising the local limit lets a consumer read those messages. Call it right after connecting, before
    /// opening a channel, and **never publish on this connection afterwards**: its publishes would be cut into
    /// frames of the raised size, which the broker refuses by closing the connection. Consume and settle here,
    /// publish on another connection. Memory: librabbitmq's output buffer grows to `bytes`.
    public func readFrames(upTo bytes: Int) async throws(AMQPError) {
        guard bytes > 0, bytes <= Int(Int32.max) else {
            throw AMQPError(code: .invalidArgument, message: "a frame limit of \(bytes) bytes is out of range")
        }
        try await runtime.perform { core throws(AMQPError) in
            if let failure = core.failure { throw failure }
            guard bytes > Int(amqp_get_frame_max(core.state)) else { return }
            let status = amqp_tune_connection(
                core.state, amqp_get_channel_max(core.state), Int32(bytes), amqp_get_heartbeat(core.state))
            try LibraryReply.check(status: status, context: "raising the frame size this connection reads to \(bytes)")
        }
    }
}
