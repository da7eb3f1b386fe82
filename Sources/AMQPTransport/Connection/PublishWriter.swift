internal import CRabbitMQ
internal import CRabbitMQShims

/// Writes publishes to the broker, by one of two paths: on plain TCP a batch's frames are encoded into one buffer
/// and written with one `send` (`PublishFrames`: three system calls per message were a tenth of the worker's CPU);
/// on TLS every message goes through librabbitmq's `amqp_basic_publish`, as only the library can write to OpenSSL.
///
/// Every error it throws means the socket is unusable: the connection must fail with it. A message AMQP cannot
/// encode is not an error here: it is left out and reported, so the rest of its batch goes on.
/// Used on the connection's I/O thread only.
struct PublishWriter {
    private let state: amqp_connection_state_t
    private let socketDescriptor: Int32
    private let frameMax: Int
    /// Two silent heartbeat intervals end a connection that reads nothing; the same bound for writing.
    private let stallLimit: Duration?
    /// Plain TCP: batches are written in one piece. TLS goes through librabbitmq.
    private let writesFramesItself: Bool
    /// Reused from batch to batch.
    private var publishFrames = PublishFrames()

    init(state: amqp_connection_state_t, socketDescriptor: Int32, frameMax: Int, heartbeat: Duration, useTLS: Bool) {
        self.state = state
        self.socketDescriptor = socketDescriptor
        self.frameMax = frameMax
        self.stallLimit = heartbeat > .zero ? heartbeat * 2 : nil
        self.writesFramesItself = !useTLS
    }

    /// Writes the messages in order; returns those left out because AMQP cannot encode them (by index, with why).
    /// A message librabbitmq fails to encode is left out whole: an encoding failure inside the library, after part of
    /// a publish was written, would end the connection.
    mutating func write(_ messages: [AMQPOutboundMessage], channel: UInt16) throws(AMQPError) -> [Int: String] {
        let pool = CMemoryPool(pageSize: 16_384)
        var unencodable: [Int: String] = [:]
        // The loops go by index: `enumerated()` would copy every message (its strings, body and properties).
        for index in messages.indices {
            if let problem = messages[index].encodingProblem(frameMax: frameMax) { unencodable[index] = problem }
        }
        guard writesFramesItself else {
            for index in messages.indices where unencodable[index] == nil {
                try writeThroughLibrary(messages[index], channel: channel, pool: pool)
            }
            return unencodable
        }
        publishFrames.removeAll()
        for index in messages.indices where unencodable[index] == nil {
            do throws(AMQPError) {
                try publishFrames.append(messages[index], channel: channel, frameMax: frameMax, pool: pool)
            } catch {
                unencodable[index] = "librabbitmq could not encode it: \(error.message)"
            }
        }
        try publishFrames.write(to: socketDescriptor, stallLimit: stallLimit)
        return unencodable
    }

    /// One message through `amqp_basic_publish` (three sends), on either kind of socket. The caller has checked that
    /// AMQP can encode it.
    func writeThroughLibrary(_ message: AMQPOutboundMessage, channel: UInt16, pool: CMemoryPool = CMemoryPool())
        throws(AMQPError)
    {
        var properties = message.properties.encoded(in: pool)
        let exchange = pool.bytes(message.exchange)
        let routingKey = pool.bytes(message.routingKey)
        let status = try withBorrowedBytes(message.body) { body in
            amqp_basic_publish(state, channel, exchange, routingKey, message.mandatory ? 1 : 0, 0, &properties, body)
        }
        try LibraryReply.check(status: status, context: "publishing to exchange '\(message.exchange)'")
    }
}
