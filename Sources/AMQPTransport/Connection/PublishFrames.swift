internal import CRabbitMQ
internal import CRabbitMQShims

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// The frames of a batch of publishes in one buffer, for one write to the socket.
///
/// librabbitmq's `amqp_basic_publish` writes every frame (method, content header, body) with a `send` of its own:
/// three system calls per message, a tenth of the worker's CPU in the end-to-end profile. The method and header
/// frames are encoded by librabbitmq's own encoders (`CRabbitMQShims_encode_publish_head`), the body frames here.
/// Plain TCP only: a TLS connection must write through librabbitmq (OpenSSL), one `amqp_basic_publish` each.
/// Reused from batch to batch by the connection's I/O thread.
struct PublishFrames {
    private(set) var bytes: [UInt8] = []
    /// One message's method and header frames, encoded before they are appended.
    private var head: [UInt8] = []

    var isEmpty: Bool { bytes.isEmpty }

    /// Empties the buffer for the next batch, keeping its storage unless a batch of large bodies grew it past
    /// 4 MiB (that much is not held for the connection's lifetime).
    mutating func removeAll() {
        if bytes.capacity > 4 << 20 {
            bytes = []
        } else {
            bytes.removeAll(keepingCapacity: true)
        }
    }

    /// Appends one message's frames for `channel`; `frameMax` is the connection's negotiated frame size.
    mutating func append(
        channel: UInt16, exchange: amqp_bytes_t, routingKey: amqp_bytes_t, mandatory: Bool,
        properties: inout amqp_basic_properties_t, body: [UInt8], frameMax: Int
    ) throws(AMQPError) {
        let headCapacity = Int(CRABBITMQSHIMS_PUBLISH_METHOD_FRAME_MAX) + frameMax
        if head.count < headCapacity { head = [UInt8](repeating: 0, count: headCapacity) }
        let headSize = head.withUnsafeMutableBytes { buffer in
            CRabbitMQShims_encode_publish_head(
                channel, exchange, routingKey, mandatory ? 1 : 0, &properties, UInt64(body.count), frameMax,
                amqp_bytes_t(len: buffer.count, bytes: buffer.baseAddress))
        }
        guard headSize >= 0 else {
            throw LibraryReply.error(status: headSize, context: "encoding a publish")
        }
        bytes.append(contentsOf: head[..<Int(headSize)])

        // Body frames of at most frameMax bytes each, header and end byte included; none for an empty body.
        let chunkSize = frameMax - 8
        var offset = 0
        while offset < body.count {
            let end = min(offset + chunkSize, body.count)
            let size = UInt32(end - offset)
            bytes.append(UInt8(AMQP_FRAME_BODY))
            bytes.append(UInt8(truncatingIfNeeded: channel >> 8))
            bytes.append(UInt8(truncatingIfNeeded: channel))
            bytes.append(UInt8(truncatingIfNeeded: size >> 24))
            bytes.append(UInt8(truncatingIfNeeded: size >> 16))
            bytes.append(UInt8(truncatingIfNeeded: size >> 8))
            bytes.append(UInt8(truncatingIfNeeded: size))
            bytes.append(contentsOf: body[offset..<end])
            bytes.append(UInt8(AMQP_FRAME_END))
            offset = end
        }
    }

    /// Appends the frames of `message` for `channel`, its strings and properties encoded into `pool` on the way.
    mutating func append(_ message: AMQPOutboundMessage, channel: UInt16, frameMax: Int, pool: CMemoryPool)
        throws(AMQPError)
    {
        var properties = message.properties.encoded(in: pool)
        try append(
            channel: channel, exchange: pool.bytes(message.exchange), routingKey: pool.bytes(message.routingKey),
            mandatory: message.mandatory, properties: &properties, body: message.body, frameMax: frameMax)
    }

    /// Writes every byte to `socket` (non-blocking, as librabbitmq leaves it), waiting for room when the kernel's
    /// buffer is full: at most `stallLimit` without progress (nil: no limit).
    func write(to socket: Int32, stallLimit: Duration?) throws(AMQPError) {
        var offset = 0
        while offset < bytes.count {
            let sent = bytes.withUnsafeBytes { buffer in
                send(socket, buffer.baseAddress! + offset, buffer.count - offset, Int32(MSG_NOSIGNAL))
            }
            if sent > 0 {
                offset += sent
                continue
            }
            let code = errno
            switch code {
            case EINTR:
                continue
            case EAGAIN, EWOULDBLOCK:
                var writable = pollfd(fd: socket, events: Int16(POLLOUT), revents: 0)
                let timeout = stallLimit.map { Int32(clamping: $0.components.seconds * 1000) } ?? -1
                let ready = poll(&writable, 1, timeout)
                if ready == 0 {
                    throw AMQPError(
                        code: .connectionLost,
                        message: "publishing: the broker read nothing for \(stallLimit.map { "\($0)" } ?? "ever")")
                }
            default:
                throw AMQPError(
                    code: .connectionLost,
                    message: "publishing: writing to the broker failed: \(String(cString: strerror(code)))")
            }
        }
    }
}
