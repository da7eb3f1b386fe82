internal import CRabbitMQ
internal import CRabbitMQShims
import Logging

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Owns one librabbitmq connection and everything that hangs off it (channels, consumers, confirms).
///
/// librabbitmq connections are not thread-safe: a `ConnectionCore` is created, used and destroyed on its
/// `ConnectionRuntime`'s I/O thread only, so it needs no locks. Every C call runs on that thread.
final class ConnectionCore {
    let state: amqp_connection_state_t
    let logger: Logger
    private let failureLogLevel: Logger.Level
    let heartbeat: Duration
    let events: AsyncStream<AMQPConnectionEvent>.Continuation
    let socketDescriptor: Int32
    /// The frame size negotiated with the broker: a content header must fit in one frame.
    let frameMax: Int
    /// Plain TCP: batches of publishes are written with one `send` (`PublishFrames`); TLS goes through librabbitmq.
    private let writesPublishFrames: Bool
    private var publishFrames = PublishFrames()

    /// Set once: the connection is unusable from then on (lost, closed by the broker, or closed by us).
    private(set) var failure: AMQPError?
    private var channels: [UInt16: ChannelState] = [:]
    /// Why each retired channel ended, by channel id: a stale `AMQPChannel` keeps reporting its own close
    /// error even after its number was reused. Bounded: the oldest entries are dropped.
    private var retiredChannels: [Int: AMQPError] = [:]
    private var nextChannelID = 1
    /// Channel numbers are handed out round-robin, so a number is reused as late as possible (frames of a
    /// closed channel may still sit in librabbitmq's queue).
    private var lastChannelNumber: UInt16 = 0
    /// Set by connection.blocked: publishes are held in Swift instead of filling the socket (a blocked
    /// broker stops reading, and a send into a full socket would stall the I/O thread).
    private var isBlocked = false
    private var heldBatches: [HeldBatch] = []
    /// Consumer tags are unique per channel only, so consumers are keyed by both.
    private var consumers: [ConsumerKey: ConsumerSink] = [:]
    private var publishWaiters: [Int: PublishWaiter] = [:]
    private var nextBatchID = 1
    private var lastInbound = ContinuousClock.now
    /// A pump stopped at its frame budget: more may be buffered, so don't sleep in poll.
    private(set) var moreInputPending = false

    /// Frames handled per pump before queued commands (acks, publishes) get their turn.
    private static let frameBudget = 512

    // MARK: - Connect and close

    init(configuration: AMQPConnectionConfiguration, logger: Logger, events: AsyncStream<AMQPConnectionEvent>.Continuation) throws(AMQPError) {
        guard let state = amqp_new_connection() else {
            throw AMQPError(code: .connectionFailed, message: "librabbitmq could not allocate a connection")
        }
        let url = configuration.url
        do throws(AMQPError) {
            let socket = try Self.makeSocket(state: state, configuration: configuration)
            let connectDeadline = ContinuousClock.now + configuration.connectTimeout
            var connectTimeout = timeval(configuration.connectTimeout)
            let status = amqp_socket_open_noblock(socket, url.host, Int32(url.port), &connectTimeout)
            if status != AMQP_STATUS_OK.rawValue {
                var error = LibraryReply.error(status: status, context: "connecting to \(url.host):\(url.port)")
                if error.code == .timeout {
                    error.code = .connectTimeout
                    error.message = "connecting to \(url.host):\(url.port): no answer within \(configuration.connectTimeout)"
                } else if error.code == .connectionLost || error.code == .protocolError {
                    error.code = .connectionFailed
                }
                // librabbitmq says only "a socket error occurred": a connect of our own learns which.
                if status == AMQP_STATUS_SOCKET_ERROR.rawValue,
                   let code = ConnectProbe.failure(host: url.host, port: url.port, timeout: .seconds(1)),
                   let reason = Self.connectFailure(code)
                {
                    error.message = "connecting to \(url.host):\(url.port): \(reason)"
                }
                throw error
            }
            // The AMQP handshake gets what is left of the same connect timeout.
            var handshakeTimeout = timeval(max(connectDeadline - .now, .milliseconds(1)))
            _ = amqp_set_handshake_timeout(state, &handshakeTimeout)
            var rpcTimeout = timeval(configuration.rpcTimeout)
            _ = amqp_set_rpc_timeout(state, &rpcTimeout)

            let heartbeatSeconds = Int32(configuration.heartbeat.secondsValue.rounded(.up))
            let reply = CRabbitMQShims_login(
                state, url.virtualHost, Int32(configuration.channelMax), Int32(configuration.frameMax), heartbeatSeconds,
                url.user, url.password, configuration.connectionName, "1.0"
            )
            do {
                try LibraryReply.check(reply, context: "logging in to \(url)")
            } catch var error {
                if reply.reply_type == AMQP_RESPONSE_SERVER_EXCEPTION {
                    var closeOk = amqp_connection_close_ok_t(dummy: 0)
                    _ = amqp_send_method(state, 0, CRabbitMQShims_CONNECTION_CLOSE_OK_METHOD, &closeOk)
                }
                if error.code == .timeout {
                    error.code = .connectTimeout
                    error.message = "logging in to \(url): no answer within \(configuration.connectTimeout)"
                }
                // 403 ACCESS_REFUSED: bad credentials; 530 NOT_ALLOWED: no access to the vhost.
                if error.replyCode == 403 || error.replyCode == 530 || reply.library_error == AMQP_STATUS_BROKER_UNSUPPORTED_SASL_METHOD.rawValue {
                    error.code = .authenticationFailed
                    error.message = "the broker refused the login of user '\(url.user)' to vhost '\(url.virtualHost)': \(error.replyText ?? error.message)"
                }
                throw error
            }
        } catch {
            amqp_destroy_connection(state)
            throw error
        }
        self.state = state
        self.logger = logger
        self.failureLogLevel = configuration.failureLogLevel
        self.events = events
        self.heartbeat = .seconds(Int(amqp_get_heartbeat(state)))
        self.socketDescriptor = amqp_get_sockfd(state)
        self.frameMax = Int(amqp_get_frame_max(state))
        self.writesPublishFrames = !configuration.url.useTLS
        logger.info("AMQP connection open", metadata: [
            AMQPLoggingKeys.url: "\(url)", AMQPLoggingKeys.heartbeat: "\(amqp_get_heartbeat(state))",
            AMQPLoggingKeys.frameMax: "\(amqp_get_frame_max(state))",
        ])
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

    private static func makeSocket(state: amqp_connection_state_t, configuration: AMQPConnectionConfiguration) throws(AMQPError) -> OpaquePointer {
        guard configuration.url.useTLS else {
            guard let socket = amqp_tcp_socket_new(state) else {
                throw AMQPError(code: .connectionFailed, message: "librabbitmq could not create a TCP socket")
            }
            return socket
        }
        guard let socket = amqp_ssl_socket_new(state) else {
            throw AMQPError(code: .tlsFailed, message: "librabbitmq could not create a TLS socket (OpenSSL initialisation failed)")
        }
        let tls = configuration.tls
        // librabbitmq trusts nothing by default: the configured file, else the system's bundle (SystemCABundle).
        if let caCertificatePath = SystemCABundle.path(for: tls) {
            try LibraryReply.check(status: amqp_ssl_socket_set_cacert(socket, caCertificatePath), context: "loading CA file \(caCertificatePath)")
        } else if tls.verifyPeer {
            throw AMQPError(
                code: .tlsFailed,
                message: "no CA certificates to verify the broker with: configure a CA file or set SSL_CERT_FILE "
                    + "(no system bundle at \(SystemCABundle.candidatePaths.joined(separator: ", ")))")
        }
        switch (tls.clientCertificatePath, tls.clientKeyPath) {
        case (let certificate?, let key?):
            try LibraryReply.check(status: amqp_ssl_socket_set_key(socket, certificate, key), context: "loading client certificate \(certificate)")
        case (nil, nil):
            break
        default:
            throw AMQPError(code: .invalidArgument, message: "a TLS client certificate needs both the certificate and the key file")
        }
        amqp_ssl_socket_set_verify_peer(socket, tls.verifyPeer ? 1 : 0)
        amqp_ssl_socket_set_verify_hostname(socket, tls.verifyHostname ? 1 : 0)
        return socket
    }

    /// Closes consumers, channels and the connection politely. Safe to call on a failed connection.
    func close() {
        guard failure == nil else { return }
        // Closing waits for the broker's replies; a broker that vanished without closing the socket must
        // not hold the worker past its shutdown grace period (librabbitmq's RPCs otherwise wait forever).
        var closeTimeout = timeval(Duration.seconds(5))
        _ = amqp_set_rpc_timeout(state, &closeTimeout)
        for consumer in consumers.values {
            let pool = CMemoryPool()
            withExtendedLifetime(pool) {
                _ = amqp_basic_cancel(state, consumer.channel, pool.bytes(consumer.tag))
            }
            consumer.finish(throwing: nil)
        }
        consumers.removeAll()
        for number in channels.keys.sorted() {
            _ = amqp_channel_close(state, number, Int32(AMQP_REPLY_SUCCESS))
        }
        let reply = amqp_connection_close(state, Int32(AMQP_REPLY_SUCCESS))
        if reply.reply_type != AMQP_RESPONSE_NORMAL {
            logger.debug("connection.close was not acknowledged cleanly", metadata: ["reason": "\(String(describing: try? LibraryReply.check(reply, context: "close")))"])
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
        for waiter in publishWaiters.values { waiter.pending.resume(throwing: error) }
        publishWaiters.removeAll()
        heldBatches.removeAll()
        for consumer in consumers.values { consumer.finish(throwing: error) }
        consumers.removeAll()
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
            var closeOk = amqp_channel_close_ok_t(dummy: 0)
            _ = amqp_send_method(state, channel, CRabbitMQShims_CHANNEL_CLOSE_OK_METHOD, &closeOk)
            closeChannel(channel, because: error)
        } else {
            if error.code == .connectionClosedByBroker {
                var closeOk = amqp_connection_close_ok_t(dummy: 0)
                _ = amqp_send_method(state, 0, CRabbitMQShims_CONNECTION_CLOSE_OK_METHOD, &closeOk)
            }
            fail(error)
        }
        return error
    }

    private func closeChannel(_ number: UInt16, because error: AMQPError) {
        guard channels[number] != nil else { return }
        retire(number, because: error)
        for (id, waiter) in publishWaiters where waiter.channel == number {
            waiter.pending.resume(throwing: error)
            publishWaiters[id] = nil
        }
        heldBatches.removeAll { $0.channel == number }
        for (key, consumer) in consumers where key.channel == number {
            consumer.finish(throwing: error)
            consumers[key] = nil
        }
        if error.code != .closed {
            logger.warning("AMQP channel closed by the broker", metadata: [AMQPLoggingKeys.channel: "\(number)", AMQPLoggingKeys.error: "\(error)"])
        }
    }

    /// Frees the channel's number once its close handshake is done, remembering why it ended.
    private func retire(_ number: UInt16, because error: AMQPError) {
        guard let channel = channels.removeValue(forKey: number) else { return }
        if retiredChannels.count >= 4096, let oldest = retiredChannels.keys.min() {
            retiredChannels[oldest] = nil
        }
        retiredChannels[channel.id] = error
    }

    /// Throws unless the connection and this very channel (not a later one reusing its number) are usable.
    func usableChannel(_ reference: ChannelReference) throws(AMQPError) -> ChannelState {
        if let failure { throw failure }
        if let channel = channels[reference.number], channel.id == reference.id {
            return channel
        }
        throw retiredChannels[reference.id]
            ?? AMQPError(code: .closed, message: "channel \(reference.number) is closed")
    }

    /// Runs one synchronous method and checks librabbitmq's reply.
    func rpc<T>(channel reference: ChannelReference, _ context: String, _ call: () -> UnsafeMutablePointer<T>?) throws(AMQPError) -> T? {
        _ = try usableChannel(reference)
        let result = call()
        let reply = amqp_get_rpc_reply(state)
        guard reply.reply_type == AMQP_RESPONSE_NORMAL else {
            throw handleFailedReply(reply, channel: reference.number, context: context)
        }
        lastInbound = .now
        return result?.pointee
    }

    /// Checks the status of an asynchronous send (publish, ack): a failure there is a socket failure.
    func checkSend(_ status: Int32, context: String) throws(AMQPError) {
        guard status != AMQP_STATUS_OK.rawValue else { return }
        let error = LibraryReply.error(status: status, context: context)
        fail(error)
        throw error
    }

    // MARK: - Channels

    /// Opens a channel on the lowest free number (numbers of closed channels are reused).
    func openChannel() throws(AMQPError) -> ChannelReference {
        if let failure { throw failure }
        let negotiated = Int(amqp_get_channel_max(state))
        let maximum = negotiated == 0 ? Int(UInt16.max) : negotiated
        let start = Int(lastChannelNumber)
        guard let number = (1...maximum).lazy.map({ UInt16((start + $0 - 1) % maximum + 1) }).first(where: { self.channels[$0] == nil }) else {
            throw AMQPError(code: .invalidArgument, message: "all \(maximum) channels of the connection are open")
        }
        lastChannelNumber = number
        let reference = ChannelReference(number: number, id: nextChannelID)
        nextChannelID += 1
        channels[number] = ChannelState(number: number, id: reference.id)
        _ = amqp_channel_open(state, number)
        let reply = amqp_get_rpc_reply(state)
        guard reply.reply_type == AMQP_RESPONSE_NORMAL else {
            let error = handleFailedReply(reply, channel: number, context: "opening channel \(number)")
            channels[number] = nil
            throw error
        }
        // The reply was read inside librabbitmq's RPC, so the pump never saw the socket readable.
        lastInbound = .now
        return reference
    }

    func closeChannel(_ reference: ChannelReference) throws(AMQPError) {
        _ = try usableChannel(reference)
        let number = reference.number
        for (key, consumer) in consumers where key.channel == number {
            consumer.finish(throwing: nil)
            consumers[key] = nil
        }
        let reply = amqp_channel_close(state, number, Int32(AMQP_REPLY_SUCCESS))
        guard reply.reply_type == AMQP_RESPONSE_NORMAL else {
            throw handleFailedReply(reply, channel: number, context: "closing channel \(number)")
        }
        lastInbound = .now
        closeChannel(number, because: AMQPError(code: .closed, message: "channel \(number) was closed by this process"))
    }

    func enableConfirms(channel reference: ChannelReference) throws(AMQPError) {
        let channel = try usableChannel(reference)
        guard channel.confirms == nil else { return }
        _ = try rpc(channel: reference, "confirm.select") { amqp_confirm_select(state, reference.number) }
        channel.confirms = PublisherConfirms()
    }

    // MARK: - Consumers

    /// Refuses a tag already consuming on this channel before the broker sees it (reusing a tag is a
    /// connection-level error there).
    func checkTagIsFree(_ tag: String, channel: UInt16) throws(AMQPError) {
        guard !tag.isEmpty, consumers[ConsumerKey(channel: channel, tag: tag)] != nil else { return }
        throw AMQPError(code: .invalidArgument, message: "consumer tag '\(tag)' is already consuming on channel \(channel)")
    }

    func register(_ consumer: ConsumerSink) {
        consumers[ConsumerKey(channel: consumer.channel, tag: consumer.tag)] = consumer
        if consumer.automaticAcknowledgement {
            channels[consumer.channel]?.automaticAcknowledgementTags.insert(consumer.tag)
        }
    }

    /// Cancels on the broker, then ends the consumer's sequence: normally on success, with the error otherwise
    /// (the consumer stays registered during the round trip, so a channel failure meanwhile still reaches it).
    func cancelConsumer(channel number: UInt16, tag: String) throws(AMQPError) {
        let key = ConsumerKey(channel: number, tag: tag)
        guard let consumer = consumers[key] else { return }
        let pool = CMemoryPool()
        do throws(AMQPError) {
            guard let channel = channels[consumer.channel] else {
                throw AMQPError(code: .closed, message: "channel \(consumer.channel) is closed")
            }
            _ = try rpc(channel: ChannelReference(number: channel.number, id: channel.id), "cancelling consumer \(tag)") {
                amqp_basic_cancel(state, consumer.channel, pool.bytes(tag))
            }
        } catch {
            consumers[key]?.finish(throwing: error)
            consumers[key] = nil
            throw error
        }
        consumers[key] = nil
        consumer.finish(throwing: nil)
    }

    // MARK: - Publishing with confirms

    /// Publishes the messages and registers a waiter resumed when the broker has confirmed (or nacked,
    /// or returned) every one of them, or when `timeout` passes.
    func publish(
        _ messages: [AMQPOutboundMessage], channel reference: ChannelReference, timeout: Duration,
        confirms: AMQPPendingConfirms
    ) {
        let number = reference.number
        do throws(AMQPError) {
            let channel = try usableChannel(reference)
            guard channel.confirms != nil else {
                throw AMQPError(code: .invalidArgument, message: "channel \(number) is not in confirm mode; call enableConfirms() first")
            }
            guard !messages.isEmpty else {
                confirms.resume(returning: [])
                return
            }
            let batchID = nextBatchID
            nextBatchID += 1
            publishWaiters[batchID] = PublishWaiter(
                channel: number, outcomes: Array(repeating: nil, count: messages.count), remaining: messages.count,
                deadline: .now + timeout, pending: confirms
            )
            if isBlocked {
                heldBatches.append(HeldBatch(batch: batchID, channel: number, messages: messages))
            } else {
                try send(messages, batch: batchID, on: channel)
            }
        } catch {
            // A send failure already failed the connection (and with it this waiter, if registered).
            if failure == nil { confirms.resume(throwing: error) }
        }
    }

    /// Sends a batch registered with a waiter and records each message for confirm tracking.
    /// A message AMQP cannot encode is not sent: it settles at once as `.unencodable`, and the rest go on (an
    /// encoding failure inside librabbitmq, after part of a publish was written, would end the connection).
    private func send(_ messages: [AMQPOutboundMessage], batch: Int, on channel: ChannelState) throws(AMQPError) {
        let pool = CMemoryPool(pageSize: 16_384)
        let frameMax = Int(amqp_get_frame_max(state))
        var unencodable: [Int: String] = [:]
        // The loops go by index: `enumerated()` would copy every message (its strings, body and properties).
        for index in messages.indices {
            if let problem = messages[index].encodingProblem(frameMax: frameMax) { unencodable[index] = problem }
        }
        if writesPublishFrames {
            try sendInOneWrite(messages, channel: channel.number, pool: pool, unencodable: &unencodable)
        }
        var settled: [PublisherConfirms.Resolution] = []
        for index in messages.indices {
            if let problem = unencodable[index] {
                settled.append(.init(batch: batch, index: index, outcome: .unencodable(reason: problem)))
                continue
            }
            if !writesPublishFrames { try send(messages[index], channel: channel.number, pool: pool) }
            channel.confirms!.published(
                batch: batch, index: index, exchange: messages[index].exchange, routingKey: messages[index].routingKey,
                body: messages[index].body, properties: messages[index].properties
            )
        }
        resolve(settled)
    }

    /// Sends what was held while the broker had the connection blocked, in order.
    private func releaseHeldBatches() {
        let held = heldBatches
        heldBatches.removeAll()
        for batch in held where publishWaiters[batch.batch] != nil {
            guard let channel = channels[batch.channel] else { continue }
            do throws(AMQPError) {
                try send(batch.messages, batch: batch.batch, on: channel)
            } catch {
                return  // the connection failed, and every waiter with it
            }
        }
    }

    /// Publishes without waiting for anything (no confirm mode needed). On a channel in confirm mode the
    /// broker still numbers it, so it is counted (with nobody waiting) to keep later confirms aligned.
    func publishUnconfirmed(_ message: AMQPOutboundMessage, channel reference: ChannelReference) throws(AMQPError) {
        let channel = try usableChannel(reference)
        if let problem = message.encodingProblem(frameMax: Int(amqp_get_frame_max(state))) {
            throw AMQPError(code: .invalidArgument, message: "not published to '\(message.exchange)': \(problem)")
        }
        try send(message, channel: reference.number, pool: CMemoryPool())
        channel.confirms?.published(
            batch: Self.unwatchedBatch, index: 0, exchange: message.exchange, routingKey: message.routingKey,
            body: message.body, properties: message.properties
        )
    }

    /// A batch's frames encoded into one buffer and written at once (`PublishFrames`).
    /// Messages in `unencodable` are left out; one librabbitmq fails to encode is added there (its frames are
    /// encoded apart before they are appended, so nothing of it is written).
    private func sendInOneWrite(
        _ messages: [AMQPOutboundMessage], channel number: UInt16, pool: CMemoryPool, unencodable: inout [Int: String]
    ) throws(AMQPError) {
        publishFrames.removeAll()
        let frameMax = Int(amqp_get_frame_max(state))
        for index in messages.indices where unencodable[index] == nil {
            var properties = messages[index].properties.encoded(in: pool)
            do throws(AMQPError) {
                try publishFrames.append(
                    channel: number, exchange: pool.bytes(messages[index].exchange),
                    routingKey: pool.bytes(messages[index].routingKey), mandatory: messages[index].mandatory,
                    properties: &properties, body: messages[index].body, frameMax: frameMax)
            } catch {
                unencodable[index] = "librabbitmq could not encode it: \(error.message)"
            }
        }
        do throws(AMQPError) {
            // Two silent heartbeat intervals end a connection that reads nothing; the same bound for writing.
            try publishFrames.write(to: socketDescriptor, stallLimit: heartbeat > .zero ? heartbeat * 2 : nil)
        } catch {
            fail(error)
            throw error
        }
    }

    /// Batch id of publishes nobody waits for; real batches start at 1.
    private static let unwatchedBatch = 0

    private func send(_ message: AMQPOutboundMessage, channel number: UInt16, pool: CMemoryPool) throws(AMQPError) {
        var properties = message.properties.encoded(in: pool)
        let exchange = pool.bytes(message.exchange)
        let routingKey = pool.bytes(message.routingKey)
        let status = try withBorrowedBytes(message.body) { body in
            amqp_basic_publish(state, number, exchange, routingKey, message.mandatory ? 1 : 0, 0, &properties, body)
        }
        try checkSend(status, context: "publishing to exchange '\(message.exchange)'")
    }

    private func resolve(_ resolutions: [PublisherConfirms.Resolution]) {
        for resolution in resolutions {
            // Settled in place: a copy of the waiter taken out of the dictionary would copy its outcomes for
            // every confirm, quadratic in the batch's size.
            guard publishWaiters[resolution.batch]?.settle(resolution.index, with: resolution.outcome) == true,
                let waiter = publishWaiters.removeValue(forKey: resolution.batch)
            else { continue }
            waiter.pending.resume(returning: waiter.outcomes.map { $0! })
        }
    }

    // MARK: - The I/O pump

    /// Reads and dispatches every frame already available (up to a budget), then flushes delivery
    /// batches to consumers and expires overdue confirm waits. Never blocks.
    func pump() {
        guard failure == nil else { return }
        // Heartbeat frames are consumed inside librabbitmq and never returned: note readable input before
        // the library reads it, or a busy connection that only receives heartbeats would look silent.
        var readable = pollfd(fd: socketDescriptor, events: Int16(POLLIN), revents: 0)
        if poll(&readable, 1, 0) > 0 { noteInbound() }
        var frame = amqp_frame_t()
        var immediately = timeval(tv_sec: 0, tv_usec: 0)
        var handled = 0
        moreInputPending = false
        while failure == nil {
            if handled == Self.frameBudget {
                moreInputPending = true
                break
            }
            // Also services heartbeats: librabbitmq sends ours from inside this call when one is due.
            let status = amqp_simple_wait_frame_noblock(state, &frame, &immediately)
            if status == AMQP_STATUS_TIMEOUT.rawValue { break }
            guard status == AMQP_STATUS_OK.rawValue else {
                fail(LibraryReply.error(status: status, context: "reading from the broker"))
                break
            }
            lastInbound = .now
            handled += 1
            dispatch(frame)
            amqp_maybe_release_buffers_on_channel(state, frame.channel)
        }
        for consumer in consumers.values { consumer.flush() }
        expireOverdueWaits()
        checkHeartbeat()
        // Everything decoded so far (RPC replies included) has been copied out: recycle the channel pools.
        // librabbitmq declines while frames are still queued.
        amqp_maybe_release_buffers(state)
    }

    /// Notes that the socket had data (heartbeat frames are consumed inside librabbitmq and never seen here).
    func noteInbound() {
        lastInbound = .now
    }

    /// How long the runtime may sleep in poll before the next deadline.
    var pollTimeoutMilliseconds: Int32 {
        if moreInputPending || amqp_frames_enqueued(state) != 0 || amqp_data_in_buffer(state) != 0 { return 0 }
        var timeout = Duration.milliseconds(200)
        if heartbeat > .zero { timeout = min(timeout, heartbeat / 4) }
        let now = ContinuousClock.now
        for waiter in publishWaiters.values { timeout = min(timeout, max(.zero, waiter.deadline - now)) }
        return Int32(timeout.secondsValue * 1000)
    }

    private func expireOverdueWaits() {
        guard !publishWaiters.isEmpty else { return }
        let now = ContinuousClock.now
        for (id, waiter) in publishWaiters where waiter.deadline <= now {
            publishWaiters[id] = nil
            heldBatches.removeAll { $0.batch == id }
            channels[waiter.channel]?.confirms?.abandon(batch: id)
            waiter.pending.resume(throwing: AMQPError(
                code: .timeout, message: "\(waiter.remaining) of \(waiter.outcomes.count) publishes were not confirmed in time"
            ))
        }
    }

    /// The broker sends a heartbeat every half interval when idle; two silent intervals mean it is gone.
    private func checkHeartbeat() {
        guard heartbeat > .zero, ContinuousClock.now - lastInbound > heartbeat * 2 + .seconds(1) else { return }
        fail(AMQPError(code: .heartbeatTimeout, message: "no traffic from the broker for \(heartbeat * 2)"))
    }

    private func dispatch(_ frame: amqp_frame_t) {
        guard frame.frame_type == UInt8(AMQP_FRAME_METHOD) else { return }
        let number = frame.channel
        let method = frame.payload.method
        guard let decoded = method.decoded else { return }
        switch method.id {
        case CRabbitMQShims_BASIC_DELIVER_METHOD:
            let deliver = decoded.assumingMemoryBound(to: amqp_basic_deliver_t.self).pointee
            let tag = deliver.consumer_tag.string
            let exchange = deliver.exchange.string
            let routingKey = deliver.routing_key.string
            let consumer = consumers[ConsumerKey(channel: number, tag: tag)]
            let content = readContent(
                channel: number, bodyLimit: consumer?.maximumBodyBytes, keepingBodyWhen: consumer?.keepsBody,
                context: "reading a delivery")
            let body: [UInt8], properties: AMQPMessageProperties, withheldBodySize: UInt64?
            switch content {
            case nil:
                return
            case .read(let read, let readProperties)?:
                (body, properties, withheldBodySize) = (read, readProperties, nil)
            case .withheld(let byteCount, let readProperties)?:
                (body, properties, withheldBodySize) = ([], readProperties, byteCount)
            case .undecodableHeader(var error)?:
                // Redelivered, it would end every session the same way: the broker dead-letters it instead (the
                // queue's dead-letter exchange, with x-death), and this connection ends. A consumer whose queue
                // has no dead-letter exchange that keeps it (the dead-letter tool's fallback) asks for a requeue:
                // the message stays where it was, never dropped.
                let requeue = consumer?.deliveries.undecodableContent == .requeue
                let settlement: UndecodableDelivery.Settlement
                if consumer?.automaticAcknowledgement != true {
                    _ = amqp_basic_reject(state, number, deliver.delivery_tag, requeue ? 1 : 0)
                    settlement = requeue ? .requeued : .rejected
                } else {
                    settlement = .acknowledgedByBroker
                }
                error.undecodableDelivery = UndecodableDelivery(
                    exchange: exchange, routingKey: routingKey, consumerTag: tag, redelivered: deliver.redelivered != 0,
                    settlement: settlement)
                logger.error("a delivery's content header could not be decoded: \(requeue ? "requeued" : "rejected without requeue")", metadata: [
                    AMQPLoggingKeys.consumerTag: "\(tag)", AMQPLoggingKeys.routingKey: "\(routingKey)",
                    AMQPLoggingKeys.error: "\(error)",
                ])
                fail(error)
                return
            }
            guard let channel = channels[number], let consumer else {
                // In flight while its consumer was being cancelled: give it back now rather than hold a
                // prefetch slot until the channel closes. The broker acknowledged it already if the consumer
                // was a `no-ack` one: rejecting that tag would close the channel, so it is dropped.
                if channels[number]?.automaticAcknowledgementTags.contains(tag) == true {
                    logger.debug("dropped a delivery for a cancelled no-ack consumer", metadata: [AMQPLoggingKeys.consumerTag: "\(tag)"])
                    return
                }
                _ = amqp_basic_reject(state, number, deliver.delivery_tag, 1)
                logger.debug("requeued a delivery for a cancelled consumer", metadata: [AMQPLoggingKeys.consumerTag: "\(tag)"])
                return
            }
            consumer.pending.append(AMQPDelivery(
                body: body, properties: properties, withheldBodySize: withheldBodySize, deliveryTag: deliver.delivery_tag,
                redelivered: deliver.redelivered != 0,
                exchange: exchange, routingKey: routingKey, consumerTag: tag,
                channel: ChannelReference(number: number, id: channel.id),
                acknowledgedByBroker: consumer.automaticAcknowledgement
            ))

        case CRabbitMQShims_BASIC_RETURN_METHOD:
            let returned = decoded.assumingMemoryBound(to: amqp_basic_return_t.self).pointee
            let replyText = returned.reply_text.string
            let exchange = returned.exchange.string
            let routingKey = returned.routing_key.string
            // A returned message is one of ours: its size is bounded by what we publish.
            let body: [UInt8], properties: AMQPMessageProperties
            switch readContent(channel: number, bodyLimit: nil, context: "reading a returned message") {
            case .read(let read, let readProperties)?:
                (body, properties) = (read, readProperties)
            case .undecodableHeader(let error)?:
                fail(error)
                return
            case .withheld?, nil:
                return
            }
            channels[number]?.confirms?.returned(
                exchange: exchange, routingKey: routingKey, body: body, properties: properties,
                replyCode: returned.reply_code, replyText: replyText
            )
            logger.debug("message returned by the broker", metadata: [AMQPLoggingKeys.exchange: "\(exchange)", AMQPLoggingKeys.routingKey: "\(routingKey)", "reply": "\(returned.reply_code) \(replyText)"])

        case CRabbitMQShims_BASIC_ACK_METHOD:
            let ack = decoded.assumingMemoryBound(to: amqp_basic_ack_t.self).pointee
            if let resolutions = channels[number]?.confirms?.acknowledged(deliveryTag: ack.delivery_tag, multiple: ack.multiple != 0) {
                resolve(resolutions)
            }

        case CRabbitMQShims_BASIC_NACK_METHOD:
            let nack = decoded.assumingMemoryBound(to: amqp_basic_nack_t.self).pointee
            if let resolutions = channels[number]?.confirms?.negativelyAcknowledged(deliveryTag: nack.delivery_tag, multiple: nack.multiple != 0) {
                resolve(resolutions)
            }

        case CRabbitMQShims_BASIC_CANCEL_METHOD:
            let cancel = decoded.assumingMemoryBound(to: amqp_basic_cancel_t.self).pointee
            let tag = cancel.consumer_tag.string
            if let consumer = consumers.removeValue(forKey: ConsumerKey(channel: number, tag: tag)) {
                consumer.flush()
                consumer.finish(throwing: AMQPError(code: .consumerCancelled, message: "the broker cancelled consumer '\(tag)' (queue deleted or failed over)"))
                logger.warning("consumer cancelled by the broker", metadata: [AMQPLoggingKeys.consumerTag: "\(tag)"])
            }

        case CRabbitMQShims_CHANNEL_CLOSE_METHOD:
            let error = LibraryReply.serverError(method, context: "channel \(number)")
            var closeOk = amqp_channel_close_ok_t(dummy: 0)
            _ = amqp_send_method(state, number, CRabbitMQShims_CHANNEL_CLOSE_OK_METHOD, &closeOk)
            closeChannel(number, because: error)

        case CRabbitMQShims_CONNECTION_CLOSE_METHOD:
            let error = LibraryReply.serverError(method, context: "connection")
            var closeOk = amqp_connection_close_ok_t(dummy: 0)
            _ = amqp_send_method(state, 0, CRabbitMQShims_CONNECTION_CLOSE_OK_METHOD, &closeOk)
            fail(error)

        case CRabbitMQShims_CONNECTION_BLOCKED_METHOD:
            let blocked = decoded.assumingMemoryBound(to: amqp_connection_blocked_t.self).pointee
            let reason = blocked.reason.string
            logger.warning("connection blocked by the broker", metadata: ["reason": "\(reason)"])
            isBlocked = true
            events.yield(.blocked(reason: reason))

        case CRabbitMQShims_CONNECTION_UNBLOCKED_METHOD:
            logger.info("connection unblocked by the broker")
            isBlocked = false
            releaseHeldBatches()
            events.yield(.unblocked)

        default:
            logger.debug("ignoring method frame", metadata: ["method": "0x\(String(method.id, radix: 16))", AMQPLoggingKeys.channel: "\(number)"])
        }
    }

    /// What followed a deliver or return on its channel.
    enum Content {
        /// The whole body, copied out of C memory.
        case read(body: [UInt8], properties: AMQPMessageProperties)
        /// A body over the consumer's limit: its frames were read and dropped, never held in memory.
        case withheld(byteCount: UInt64, properties: AMQPMessageProperties)
        /// librabbitmq could not decode the content header. The connection cannot read on (the library keeps
        /// the frame), but it can still send: the caller settles the message, then fails the connection.
        case undecodableHeader(AMQPError)
    }

    /// Reads the content header and body frames that follow a deliver or return, one frame at a time.
    ///
    /// Not `amqp_read_message`: it copies the properties with `amqp_basic_properties_clone`, which refuses a header
    /// table with an empty key (a legal table the broker forwards) and then leaves the body frames unread, so the
    /// connection could only end, and the message came back first in the queue. It also buffers the whole body
    /// before anyone can look at its size. Here the properties are copied to Swift straight from the frame, and a
    /// body over `bodyLimit` is read frame by frame and dropped, so memory per delivery is bounded in bytes.
    ///
    /// Frames of other channels that arrive meanwhile are queued by librabbitmq and dispatched by the next pump.
    /// Nil when the connection failed (it is failed here, with a reason).
    private func readContent(
        channel: UInt16, bodyLimit: Int?, keepingBodyWhen keepsBody: (@Sendable (AMQPMessageProperties) -> Bool)? = nil,
        context: String
    ) -> Content? {
        var frame = amqp_frame_t()
        let status = nextFrame(&frame, channel: channel)
        if Self.decodingFailures.contains(status) {
            return .undecodableHeader(LibraryReply.error(status: status, context: "\(context): decoding its content header"))
        }
        guard let header = checkedFrame(&frame, status: status, type: AMQP_FRAME_HEADER, context: context) else { return nil }
        let bodySize = header.payload.properties.body_size
        guard let decoded = header.payload.properties.decoded else {
            fail(AMQPError(code: .protocolError, message: "\(context): a content header without properties"))
            return nil
        }
        // Copied before the channel's pool is recycled below.
        let properties = AMQPMessageProperties(copying: decoded.assumingMemoryBound(to: amqp_basic_properties_t.self).pointee)
        // Decided from the content header, before any body frame is read: nothing is dropped that is then wanted.
        let withheld = (bodyLimit.map { bodySize > UInt64(max($0, 0)) } ?? false) && !(keepsBody?(properties) ?? false)
        var body: [UInt8] = []
        if !withheld { body.reserveCapacity(Int(bodySize)) }
        var received: UInt64 = 0
        while received < bodySize {
            amqp_maybe_release_buffers_on_channel(state, channel)
            guard let fragment = waitFrame(&frame, channel: channel, type: AMQP_FRAME_BODY, context: context) else { return nil }
            let bytes = fragment.payload.body_fragment
            received += UInt64(bytes.len)
            if !withheld, bytes.len > 0, let start = bytes.bytes {
                body.append(contentsOf: UnsafeRawBufferPointer(start: start, count: bytes.len))
            }
        }
        amqp_maybe_release_buffers_on_channel(state, channel)
        guard received == bodySize else {
            fail(AMQPError(code: .protocolError, message: "\(context): \(received) body bytes where the header announced \(bodySize)"))
            return nil
        }
        return withheld ? .withheld(byteCount: bodySize, properties: properties) : .read(body: body, properties: properties)
    }

    /// Statuses of a frame librabbitmq read but could not decode (as opposed to a socket failure).
    private static let decodingFailures: Set<Int32> = [
        AMQP_STATUS_BAD_AMQP_DATA.rawValue, AMQP_STATUS_UNKNOWN_CLASS.rawValue, AMQP_STATUS_INVALID_PARAMETER.rawValue,
        AMQP_STATUS_TABLE_TOO_BIG.rawValue,
    ]

    /// Waits for the next frame on `channel`, which must be of `type`; fails the connection otherwise.
    private func waitFrame(_ frame: inout amqp_frame_t, channel: UInt16, type: Int32, context: String) -> amqp_frame_t? {
        checkedFrame(&frame, status: nextFrame(&frame, channel: channel), type: type, context: context)
    }

    /// The next frame of `channel` (librabbitmq's own per-channel wait is not public). RabbitMQ writes a message's
    /// frames back to back, so another channel's frame here is rare; it is dispatched in turn. A broker silent for
    /// two heartbeat intervals in the middle of a message times out (AMQP_STATUS_TIMEOUT).
    private func nextFrame(_ frame: inout amqp_frame_t, channel: UInt16) -> Int32 {
        let deadline = ContinuousClock.now + (heartbeat > .zero ? heartbeat * 2 : .seconds(60))
        while failure == nil {
            var timeout = timeval(max(.zero, min(deadline - .now, .seconds(1))))
            let status = amqp_simple_wait_frame_noblock(state, &frame, &timeout)
            if status == AMQP_STATUS_TIMEOUT.rawValue {
                if ContinuousClock.now < deadline { continue }
                return status
            }
            guard status == AMQP_STATUS_OK.rawValue else { return status }
            lastInbound = .now
            if frame.channel == channel { return status }
            dispatch(frame)
        }
        return AMQP_STATUS_CONNECTION_CLOSED.rawValue
    }

    private func checkedFrame(_ frame: inout amqp_frame_t, status: Int32, type: Int32, context: String) -> amqp_frame_t? {
        guard status == AMQP_STATUS_OK.rawValue else {
            fail(LibraryReply.error(status: status, context: context))
            return nil
        }
        lastInbound = .now
        guard frame.frame_type == UInt8(type) else {
            fail(AMQPError(code: .protocolError, message: "\(context): frame type \(frame.frame_type) where \(type) was expected"))
            return nil
        }
        return frame
    }
}

/// Names one opened channel: its number (reused after it closes) and an id unique on the connection.
struct ChannelReference: Sendable, Hashable {
    var number: UInt16
    var id: Int
}

/// One open channel's state on the I/O thread (a closed channel leaves the table; why it ended is kept
/// in `retiredChannels`).
final class ChannelState {
    let number: UInt16
    let id: Int
    /// Non-nil once `confirm.select` succeeded.
    var confirms: PublisherConfirms?
    /// Tags of the channel's `no-ack` consumers, kept after they are cancelled (a few strings per channel): a
    /// delivery in flight during the cancel must not be rejected.
    var automaticAcknowledgementTags: Set<String> = []

    init(number: UInt16, id: Int) {
        self.number = number
        self.id = id
    }
}

/// A consumer's identity: tags are unique per channel, not per connection.
struct ConsumerKey: Hashable {
    var channel: UInt16
    var tag: String
}

/// A publish batch held while the connection is blocked (its waiter is registered already).
struct HeldBatch {
    var batch: Int
    var channel: UInt16
    var messages: [AMQPOutboundMessage]
}

/// A publish batch waiting for its confirms.
struct PublishWaiter {
    var channel: UInt16
    var outcomes: [AMQPPublishOutcome?]
    var remaining: Int
    var deadline: ContinuousClock.Instant
    var pending: AMQPPendingConfirms

    /// Records the outcome of the publish at `index` (the first one reported wins); true once all are settled.
    mutating func settle(_ index: Int, with outcome: AMQPPublishOutcome) -> Bool {
        if outcomes[index] == nil {
            outcomes[index] = outcome
            remaining -= 1
        }
        return remaining == 0
    }
}

/// Where a consumer's deliveries go: collected per pump, handed over as one batch.
final class ConsumerSink {
    let channel: UInt16
    let tag: String
    /// A `no-ack` consumer: the broker acknowledged its deliveries as it sent them.
    let automaticAcknowledgement: Bool
    /// Bodies larger than this are read and dropped instead of held (`AMQPDelivery.withheldBodySize`).
    let maximumBodyBytes: Int?
    /// Deliveries whose properties this accepts are read whole, whatever their body's size.
    let keepsBody: (@Sendable (AMQPMessageProperties) -> Bool)?
    let deliveries: DeliveryBuffer
    /// What the current pump read for this consumer; handed over in one piece by `flush()`.
    var pending: [AMQPDelivery] = []

    init(
        channel: UInt16, tag: String, automaticAcknowledgement: Bool, maximumBodyBytes: Int?,
        keepsBody: (@Sendable (AMQPMessageProperties) -> Bool)? = nil, deliveries: DeliveryBuffer
    ) {
        self.channel = channel
        self.tag = tag
        self.automaticAcknowledgement = automaticAcknowledgement
        self.maximumBodyBytes = maximumBodyBytes
        self.keepsBody = keepsBody
        self.deliveries = deliveries
    }

    func flush() {
        guard !pending.isEmpty else { return }
        deliveries.append(pending)
        pending.removeAll(keepingCapacity: true)
    }

    func finish(throwing error: AMQPError?) {
        flush()
        deliveries.finish(throwing: error)
    }
}

extension timeval {
    init(_ duration: Duration) {
        let (seconds, attoseconds) = duration.components
        self.init(tv_sec: Int(seconds), tv_usec: Int(attoseconds / 1_000_000_000_000))
    }
}
