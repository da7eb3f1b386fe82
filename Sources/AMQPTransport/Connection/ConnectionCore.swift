internal import CRabbitMQ
internal import CRabbitMQShims
import Logging

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// Owns one librabbitmq connection and coordinates what hangs off it: channels, consumers, confirms.
///
/// librabbitmq connections are not thread-safe: a `ConnectionCore` is created, used and destroyed on its
/// `ConnectionRuntime`'s I/O thread only, so it needs no locks. Every C call runs on that thread.
///
/// The decisions live in parts tested without a broker: `ConnectionHandshake` (what a failed connect or login
/// means), `ChannelTable` (channel numbers, ids and consumers) and `ConfirmWaiters` (who waits for which confirms,
/// deadlines, batches held while blocked). `FrameReader` reads frames and content; `ConfirmedPublisher` sends batches
/// through `PublishWriter` and answers their waiters (ConnectionCore+Publishing.swift hands them over).
/// This type puts them in order, reacts to what the broker sends, and fans a failure out to everything waiting.
final class ConnectionCore {
    let state: amqp_connection_state_t
    let logger: Logger
    private let failureLogLevel: Logger.Level
    let heartbeat: Duration
    let events: AsyncStream<AMQPConnectionEvent>.Continuation
    let socketDescriptor: Int32
    /// The frame size negotiated with the broker: a content header must fit in one frame.
    let frameMax: Int
    // Not private: the reactions to broker methods (ConnectionCore+BrokerMethods.swift) use these three too.
    let reader: FrameReader
    let publisher: ConfirmedPublisher

    /// Set once: the connection is unusable from then on (lost, closed by the broker, or closed by us).
    private(set) var failure: AMQPError?
    var channels = ChannelTable()
    /// A pump stopped at its frame budget: more may be buffered, so don't sleep in poll.
    private(set) var moreInputPending = false

    /// Frames handled per pump before queued commands (acks, publishes) get their turn.
    private static let frameBudget = 512

    // MARK: - Connect and close

    init(
        configuration: AMQPConnectionConfiguration, logger: Logger,
        events: AsyncStream<AMQPConnectionEvent>.Continuation
    ) throws(AMQPError) {
        let opened = try ConnectionHandshake.open(configuration: configuration, logger: logger)
        (state, socketDescriptor, heartbeat, frameMax) = (
            opened.state, opened.socketDescriptor, opened.heartbeat, opened.frameMax
        )
        self.logger = logger
        self.failureLogLevel = configuration.failureLogLevel
        self.events = events
        reader = FrameReader(state: state, heartbeat: heartbeat)
        publisher = ConfirmedPublisher(
            writer: PublishWriter(
                state: state, socketDescriptor: socketDescriptor, frameMax: frameMax, heartbeat: heartbeat,
                useTLS: configuration.url.useTLS))
    }

    /// Closes consumers, channels and the connection politely. Safe to call on a failed connection.
    func close() {
        guard failure == nil else { return }
        // Closing waits for the broker's replies; a broker that vanished without closing the socket must
        // not hold the worker past its shutdown grace period (librabbitmq's RPCs otherwise wait forever).
        var closeTimeout = timeval(Duration.seconds(5))
        _ = amqp_set_rpc_timeout(state, &closeTimeout)
        for consumer in channels.removeAllConsumers() {
            let pool = CMemoryPool()
            withExtendedLifetime(pool) {
                _ = amqp_basic_cancel(state, consumer.channel, pool.bytes(consumer.tag))
            }
            consumer.finish(throwing: nil)
        }
        for number in channels.openNumbers {
            _ = amqp_channel_close(state, number, Int32(AMQP_REPLY_SUCCESS))
        }
        let reply = amqp_connection_close(state, Int32(AMQP_REPLY_SUCCESS))
        if reply.reply_type != AMQP_RESPONSE_NORMAL {
            logger.debug(
                "connection.close was not acknowledged cleanly",
                metadata: ["reason": "\(String(describing: try? LibraryReply.check(reply, context: "close")))"])
        }
        fail(AMQPError(code: .closed, message: "the connection was closed by this process"), notify: false)
        events.yield(.closed(error: nil))
        logger.info("AMQP connection closed")
    }

    deinit {
        amqp_destroy_connection(state)
    }

    // MARK: - Failure

    /// Marks the connection dead and fails everything waiting on it.
    func fail(_ error: AMQPError, notify: Bool = true) {
        guard failure == nil else { return }
        failure = error
        publisher.failAll(error)
        for consumer in channels.removeAllConsumers() { consumer.finish(throwing: error) }
        if notify {
            logger.log(
                level: failureLogLevel, "AMQP connection failed", metadata: [AMQPLoggingKeys.error: "\(error)"])
            events.yield(.closed(error: error))
        }
    }

    /// Reacts to a failed synchronous method: a broker channel.close closes only that channel;
    /// anything else (connection.close, socket error, timeout) leaves the protocol state unknown and ends the connection.
    private func handleFailedReply(_ reply: amqp_rpc_reply_t, channel: UInt16, context: String) -> AMQPError {
        var error: AMQPError
        do {
            try LibraryReply.check(reply, context: context)
            error = AMQPError(code: .protocolError, message: "\(context): the broker sent no reply")
        } catch let caught {
            error = caught
        }
        if error.code == .channelClosedByBroker {
            acknowledgeChannelClose(channel)
            // The caller gets the error and says what it means (a passive declare's 404 is an answer, not a
            // problem): not logged here.
            closeChannel(channel, because: error, logged: false)
        } else {
            if error.code == .connectionClosedByBroker { acknowledgeConnectionClose() }
            fail(error)
        }
        return error
    }

    /// Answers the broker's channel.close, so it frees the channel's number.
    func acknowledgeChannelClose(_ number: UInt16) {
        var closeOk = amqp_channel_close_ok_t(dummy: 0)
        _ = amqp_send_method(state, number, CRabbitMQShims_CHANNEL_CLOSE_OK_METHOD, &closeOk)
    }

    /// Answers the broker's connection.close, as the protocol asks before the socket is closed.
    func acknowledgeConnectionClose() {
        var closeOk = amqp_connection_close_ok_t(dummy: 0)
        _ = amqp_send_method(state, 0, CRabbitMQShims_CONNECTION_CLOSE_OK_METHOD, &closeOk)
    }

    /// Retires a channel whose close handshake is done and fails what waited on it. A close the broker sent on its
    /// own (an acknowledgement it refused, a queue deleted) is `logged` at warning: nobody else will hear of it.
    func closeChannel(_ number: UInt16, because error: AMQPError, logged: Bool = true) {
        guard channels.retire(number, because: error) else { return }
        publisher.failChannel(number, error)
        for consumer in channels.removeConsumers(onChannel: number) { consumer.finish(throwing: error) }
        if logged, error.code != .closed {
            logger.warning(
                "AMQP channel closed by the broker",
                metadata: [AMQPLoggingKeys.channel: "\(number)", AMQPLoggingKeys.error: "\(error)"])
        }
    }

    /// Throws unless the connection and this very channel (not a later one reusing its number) are usable.
    func usableChannel(_ reference: ChannelReference) throws(AMQPError) -> ChannelState {
        if let failure { throw failure }
        return try channels.usable(reference)
    }

    /// Runs one synchronous method and checks librabbitmq's reply.
    func rpc<T>(channel reference: ChannelReference, _ context: String, _ call: () -> UnsafeMutablePointer<T>?)
        throws(AMQPError) -> T?
    {
        _ = try usableChannel(reference)
        let result = call()
        let reply = amqp_get_rpc_reply(state)
        guard reply.reply_type == AMQP_RESPONSE_NORMAL else {
            throw handleFailedReply(reply, channel: reference.number, context: context)
        }
        // The reply was read inside librabbitmq's RPC, so the pump never saw the socket readable.
        reader.noteInbound()
        return result?.pointee
    }

    /// Checks the status of an asynchronous send (publish, ack): a failure there is a socket failure.
    func checkSend(_ status: Int32, context: String) throws(AMQPError) {
        guard status != AMQP_STATUS_OK.rawValue else { return }
        let error = LibraryReply.error(status: status, context: context)
        fail(error)
        throw error
    }

    // MARK: - Channels and consumers

    /// Opens a channel on the next free number (numbers of closed channels are reused, as late as possible).
    func openChannel() throws(AMQPError) -> ChannelReference {
        if let failure { throw failure }
        let reference = try channels.open(negotiatedChannelMax: Int(amqp_get_channel_max(state)))
        let number = reference.number
        _ = amqp_channel_open(state, number)
        let reply = amqp_get_rpc_reply(state)
        guard reply.reply_type == AMQP_RESPONSE_NORMAL else {
            let error = handleFailedReply(reply, channel: number, context: "opening channel \(number)")
            channels.forget(number)
            throw error
        }
        reader.noteInbound()
        return reference
    }

    func closeChannel(_ reference: ChannelReference) throws(AMQPError) {
        _ = try usableChannel(reference)
        let number = reference.number
        for consumer in channels.removeConsumers(onChannel: number) { consumer.finish(throwing: nil) }
        let reply = amqp_channel_close(state, number, Int32(AMQP_REPLY_SUCCESS))
        guard reply.reply_type == AMQP_RESPONSE_NORMAL else {
            throw handleFailedReply(reply, channel: number, context: "closing channel \(number)")
        }
        reader.noteInbound()
        closeChannel(number, because: AMQPError(code: .closed, message: "channel \(number) was closed by this process"))
    }

    func enableConfirms(channel reference: ChannelReference) throws(AMQPError) {
        let channel = try usableChannel(reference)
        guard channel.confirms == nil else { return }
        _ = try rpc(channel: reference, "confirm.select") { amqp_confirm_select(state, reference.number) }
        channel.confirms = PublisherConfirms()
    }

    func checkTagIsFree(_ tag: String, channel: UInt16) throws(AMQPError) {
        try channels.checkTagIsFree(tag, channel: channel)
    }

    func register(_ consumer: ConsumerSink) {
        channels.register(consumer)
    }

    /// Cancels on the broker, then ends the consumer's sequence: normally on success, with the error otherwise
    /// (the consumer stays registered during the round trip, so a channel failure meanwhile still reaches it).
    func cancelConsumer(channel number: UInt16, tag: String) throws(AMQPError) {
        guard let consumer = channels.consumer(channel: number, tag: tag) else { return }
        let pool = CMemoryPool()
        do throws(AMQPError) {
            guard let channel = channels[number] else {
                throw AMQPError(code: .closed, message: "channel \(number) is closed")
            }
            _ = try rpc(channel: channel.reference, "cancelling consumer \(tag)") {
                amqp_basic_cancel(state, number, pool.bytes(tag))
            }
        } catch {
            channels.removeConsumer(channel: number, tag: tag)?.finish(throwing: error)
            throw error
        }
        channels.removeConsumer(channel: number, tag: tag)
        consumer.finish(throwing: nil)
    }

    // MARK: - The I/O pump

    /// Reads and dispatches every frame already available (up to a budget), then flushes delivery
    /// batches to consumers and expires overdue confirm waits. Never blocks.
    func pump() {
        guard failure == nil else { return }
        // Heartbeat frames are consumed inside librabbitmq and never returned: note readable input before
        // the library reads it, or a busy connection that only receives heartbeats would look silent.
        var readable = pollfd(fd: socketDescriptor, events: Int16(POLLIN), revents: 0)
        if poll(&readable, 1, 0) > 0 { reader.noteInbound() }
        let pass = reader.readAvailable(budget: Self.frameBudget, isUsable: { failure == nil }, dispatch: dispatch)
        moreInputPending = pass == .budgetSpent
        if case .failed(let error) = pass { fail(error) }
        for consumer in channels.consumers.values { consumer.flush() }
        publisher.expireOverdue { channels[$0] }
        if let silence = reader.silenceError() { fail(silence) }
        // Everything decoded so far (RPC replies included) has been copied out: recycle the channel pools.
        // librabbitmq declines while frames are still queued.
        amqp_maybe_release_buffers(state)
    }

    /// Notes that the socket had data (heartbeat frames are consumed inside librabbitmq and never seen here).
    func noteInbound() {
        reader.noteInbound()
    }

    /// How long the runtime may sleep in poll before the next deadline.
    var pollTimeoutMilliseconds: Int32 {
        if moreInputPending || amqp_frames_enqueued(state) != 0 || amqp_data_in_buffer(state) != 0 { return 0 }
        var timeout = Duration.milliseconds(200)
        if heartbeat > .zero { timeout = min(timeout, heartbeat / 4) }
        return Int32(publisher.timeUntilNextDeadline(atMost: timeout).secondsValue * 1000)
    }
}
