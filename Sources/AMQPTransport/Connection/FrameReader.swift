internal import CRabbitMQ
internal import CRabbitMQShims

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// Reads frames from librabbitmq for the connection's I/O thread: every frame already available (for the pump), a
/// method frame decoded into an `InboundMethod`, and the content header and body frames that follow a deliver or a
/// return. It also keeps the time the broker was last heard from, which is how a silent broker is noticed.
///
/// Reading content may meet frames of other channels: those are handed back to the caller's `dispatch` as they come
/// (which may read content in turn), so the caller stays the one place that reacts to the broker. Errors are
/// returned, never acted on here: the connection decides what fails.
final class FrameReader {
    private let state: amqp_connection_state_t
    private let heartbeat: Duration
    /// When a frame (or readable socket) last showed that the broker is there.
    private var lastInbound = ContinuousClock.now
    /// Consumer tags, exchanges, content types: the strings every delivery repeats, made once.
    private var recentStrings = RecentStrings()

    init(state: amqp_connection_state_t, heartbeat: Duration) {
        self.state = state
        self.heartbeat = heartbeat
    }

    /// Notes that the broker was heard from: heartbeat frames are consumed inside librabbitmq and never seen here,
    /// and RPC replies are read inside librabbitmq's own calls.
    func noteInbound() {
        lastInbound = .now
    }

    /// The broker sends a heartbeat every half interval when idle; two silent intervals mean it is gone.
    func silenceError() -> AMQPError? {
        guard heartbeat > .zero, ContinuousClock.now - lastInbound > heartbeat * 2 + .seconds(1) else { return nil }
        return AMQPError(code: .heartbeatTimeout, message: "no traffic from the broker for \(heartbeat * 2)")
    }

    // MARK: - Frames already available

    /// How a pass over the available frames ended.
    enum Pass: Equatable {
        /// Nothing more was buffered, or `isUsable` turned false.
        case drained
        /// `budget` frames were handled: more may be buffered.
        case budgetSpent
        /// Reading failed: the connection is lost.
        case failed(AMQPError)
    }

    /// Reads and dispatches every frame already available, up to `budget`, without blocking. Also services heartbeats:
    /// librabbitmq sends ours from inside the read when one is due.
    func readAvailable(budget: Int, isUsable: () -> Bool, dispatch: (amqp_frame_t) -> Void) -> Pass {
        var frame = amqp_frame_t()
        var immediately = timeval(tv_sec: 0, tv_usec: 0)
        var handled = 0
        while isUsable() {
            if handled == budget { return .budgetSpent }
            let status = amqp_simple_wait_frame_noblock(state, &frame, &immediately)
            if status == AMQP_STATUS_TIMEOUT.rawValue { break }
            guard status == AMQP_STATUS_OK.rawValue else {
                return .failed(LibraryReply.error(status: status, context: "reading from the broker"))
            }
            lastInbound = .now
            handled += 1
            dispatch(frame)
            amqp_maybe_release_buffers_on_channel(state, frame.channel)
        }
        return .drained
    }

    /// The method a frame carries; nil for a heartbeat, header or body frame, or an undecoded method.
    func method(of frame: amqp_frame_t) -> InboundMethod? {
        guard frame.frame_type == UInt8(AMQP_FRAME_METHOD) else { return nil }
        return InboundMethod(frame.payload.method, channel: frame.channel, strings: &recentStrings)
    }

    // MARK: - Content

    /// What followed a deliver or return on its channel.
    enum Content {
        /// The whole body, copied out of C memory.
        case read(body: [UInt8], properties: AMQPMessageProperties)
        /// A body over the consumer's limit: its frames were read and dropped, never held in memory.
        case withheld(byteCount: UInt64, properties: AMQPMessageProperties)
        /// librabbitmq could not decode the content header. The connection cannot read on (the library keeps
        /// the frame), but it can still send: the caller settles the message, then fails the connection.
        case undecodableHeader(AMQPError)
        /// Reading failed (or the connection failed meanwhile): the connection must end with this error.
        case failed(AMQPError)
    }

    /// Reads the content header and body frames that follow a deliver or return, one frame at a time.
    ///
    /// Not `amqp_read_message`: it copies the properties with `amqp_basic_properties_clone`, which refuses a header
    /// table with an empty key (a legal table the broker forwards) and then leaves the body frames unread, so the
    /// connection could only end, and the message came back first in the queue. It also buffers the whole body
    /// before anyone can look at its size. Here the properties are copied to Swift straight from the frame, and a
    /// body over `bodyLimit` is read frame by frame and dropped, so memory per delivery is bounded in bytes.
    ///
    /// Frames of other channels that arrive meanwhile go to `dispatch` in turn, while `isUsable` holds.
    func readContent(
        channel: UInt16, bodyLimit: Int?, keepingBodyWhen keepsBody: (@Sendable (AMQPMessageProperties) -> Bool)? = nil,
        context: String, isUsable: () -> Bool, dispatch: (amqp_frame_t) -> Void
    ) -> Content {
        var frame = amqp_frame_t()
        let status = nextFrame(&frame, channel: channel, isUsable: isUsable, dispatch: dispatch)
        if Self.decodingFailures.contains(status) {
            return .undecodableHeader(
                LibraryReply.error(status: status, context: "\(context): decoding its content header"))
        }
        if let error = check(frame, status: status, type: AMQP_FRAME_HEADER, context: context) { return .failed(error) }
        let bodySize = frame.payload.properties.body_size
        guard let decoded = frame.payload.properties.decoded else {
            return .failed(AMQPError(code: .protocolError, message: "\(context): a content header without properties"))
        }
        // Copied before the channel's pool is recycled below.
        let properties = AMQPMessageProperties(
            copying: decoded.assumingMemoryBound(to: amqp_basic_properties_t.self).pointee, strings: &recentStrings)
        // Decided from the content header, before any body frame is read: nothing is dropped that is then wanted.
        let withheld = (bodyLimit.map { bodySize > UInt64(max($0, 0)) } ?? false) && !(keepsBody?(properties) ?? false)
        var body: [UInt8] = []
        if !withheld { body.reserveCapacity(Int(bodySize)) }
        var received: UInt64 = 0
        while received < bodySize {
            amqp_maybe_release_buffers_on_channel(state, channel)
            let status = nextFrame(&frame, channel: channel, isUsable: isUsable, dispatch: dispatch)
            if let error = check(frame, status: status, type: AMQP_FRAME_BODY, context: context) {
                return .failed(error)
            }
            let bytes = frame.payload.body_fragment
            received += UInt64(bytes.len)
            if !withheld, bytes.len > 0, let start = bytes.bytes {
                body.append(contentsOf: UnsafeRawBufferPointer(start: start, count: bytes.len))
            }
        }
        amqp_maybe_release_buffers_on_channel(state, channel)
        guard received == bodySize else {
            return .failed(
                AMQPError(
                    code: .protocolError,
                    message: "\(context): \(received) body bytes where the header announced \(bodySize)"))
        }
        return withheld
            ? .withheld(byteCount: bodySize, properties: properties) : .read(body: body, properties: properties)
    }

    /// Statuses of a frame librabbitmq read but could not decode (as opposed to a socket failure).
    private static let decodingFailures: Set<Int32> = [
        AMQP_STATUS_BAD_AMQP_DATA.rawValue, AMQP_STATUS_UNKNOWN_CLASS.rawValue, AMQP_STATUS_INVALID_PARAMETER.rawValue,
        AMQP_STATUS_TABLE_TOO_BIG.rawValue,
    ]

    /// The next frame of `channel` (librabbitmq's own per-channel wait is not public). RabbitMQ writes a message's
    /// frames back to back, so another channel's frame here is rare; it is dispatched in turn. A broker silent for
    /// two heartbeat intervals in the middle of a message times out (AMQP_STATUS_TIMEOUT).
    private func nextFrame(
        _ frame: inout amqp_frame_t, channel: UInt16, isUsable: () -> Bool, dispatch: (amqp_frame_t) -> Void
    ) -> Int32 {
        let deadline = ContinuousClock.now + (heartbeat > .zero ? heartbeat * 2 : .seconds(60))
        while isUsable() {
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

    /// Why a frame read with `status` is not the `type` expected next, or nil when it is.
    private func check(_ frame: amqp_frame_t, status: Int32, type: Int32, context: String) -> AMQPError? {
        guard status == AMQP_STATUS_OK.rawValue else { return LibraryReply.error(status: status, context: context) }
        lastInbound = .now
        guard frame.frame_type == UInt8(type) else {
            return AMQPError(
                code: .protocolError, message: "\(context): frame type \(frame.frame_type) where \(type) was expected")
        }
        return nil
    }
}
