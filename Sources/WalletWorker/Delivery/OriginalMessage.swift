import AMQPTransport
import WalletMessages
import WalletRouting

/// The parts of an inbound delivery the worker republishes (to the retry queue or the dead-letter exchange).
struct OriginalMessage: Sendable, Hashable {
    var body: [UInt8]
    var properties: AMQPMessageProperties
    /// The routing key it was published with, kept on its dead letter.
    var routingKey: String
    /// The body's size when the transport did not keep it (over `--max-body-bytes`): `body` is empty, and only
    /// the broker can dead-letter the message whole.
    var withheldBodySize: UInt64?
    /// The exchange it was published to (recorded on retry copies with the routing key: `OriginalDestination`).
    var exchange: String

    init(
        body: [UInt8], properties: AMQPMessageProperties, routingKey: String, withheldBodySize: UInt64? = nil,
        exchange: String = ""
    ) {
        self.body = body
        self.properties = properties
        self.routingKey = routingKey
        self.withheldBodySize = withheldBodySize
        self.exchange = exchange
    }

    /// The delivery as first published: back from a retry queue, its recorded exchange and routing key.
    init(_ delivery: AMQPDelivery) {
        let first = OriginalDestination(
            deliveredVia: delivery.exchange, routingKey: delivery.routingKey, headers: delivery.properties.headers)
        self.init(
            body: delivery.body, properties: delivery.properties, routingKey: first.routingKey,
            withheldBodySize: delivery.withheldBodySize, exchange: first.exchange)
    }

    /// A `reply_to` that is not valid UTF-8 names no queue the worker can address: its copies are skipped.
    var hasInvalidUTF8ReplyTo: Bool { properties.undecodedStrings[.replyTo] != nil }

    /// Failed attempts recorded on this delivery by earlier trips through the retry queue. The header comes with
    /// the message, so anyone can set it: a value out of range counts as 0 below and as the cap above, so it can
    /// neither overflow the next attempt's count nor buy extra attempts.
    var failedAttempts: Int {
        let recorded: Int64 =
            switch properties.headers?[WorkerHeaders.retryCount] {
            case .int8(let value)?: Int64(value)
            case .int16(let value)?: Int64(value)
            case .int32(let value)?: Int64(value)
            case .int64(let value)?: value
            case .uint8(let value)?: Int64(value)
            case .uint16(let value)?: Int64(value)
            case .uint32(let value)?: Int64(value)
            case .uint64(let value)?: Int64(clamping: value)
            default: 0
            }
        return Int(min(max(recorded, 0), Self.maximumRecordedAttempts))
    }

    /// Above any sensible `--retry-attempts`, far below overflow.
    static let maximumRecordedAttempts: Int64 = 1_000_000

    /// The original for the dead-letter exchange: untouched but for `x-worker-error`, and its `expiration` moved
    /// into `x-original-expiration` so the dead letter does not expire out of the dead-letter queue.
    /// When the copy would not fit `frameMax` (less room for the `x-death` the broker adds if it dead-letters the
    /// copy again), the original's largest headers are left out, named with their sizes in
    /// `x-worker-dropped-headers` and in the reason: RabbitMQ delivers a content header larger than the frame size
    /// it negotiated (it does not split them), which librabbitmq consumers cannot read.
    func deadLetter(exchange: String, reason: String, frameMax: Int) -> AMQPOutboundMessage {
        let moved = expirationMovedAside()
        var message = moved.message
        let extra = moved.header
        // Where it was first published, as the worker knows it: a publisher's own `x-original-*` headers are
        // replaced, so `dead-letters replay` never follows a destination a publisher wrote.
        let first = OriginalDestination(exchange: self.exchange, routingKey: self.routingKey).headers
        var copy = message.copy(
            exchange: exchange, routingKey: routingKey,
            addingHeaders: [(WorkerHeaders.workerError, .string(reason))] + extra + first)
        let limit = frameMax - Self.brokerHeaderAllowance
        guard copy.properties.encodingProblem(frameMax: limit) != nil else { return copy }

        var kept = (properties.headers?.entries ?? []).map { (key: $0.key, value: $0.value) }
        var dropped: [String] = []
        while copy.properties.encodingProblem(frameMax: limit) != nil,
            let largest = kept.indices.max(by: { kept[$0].value.encodedByteCount < kept[$1].value.encodedByteCount })
        {
            let entry = kept.remove(at: largest)
            dropped.append("\(entry.key.isEmpty ? "\"\"" : entry.key) (\(entry.value.encodedByteCount) bytes)")
            message.properties.headers = AMQPTable(kept)
            let list = dropped.joined(separator: ", ")
            copy = message.copy(
                exchange: exchange, routingKey: routingKey,
                addingHeaders: [
                    (WorkerHeaders.workerError, .string("\(reason); headers dropped to fit a frame: \(list)")),
                    (WorkerHeaders.droppedHeaders, .string(list)),
                ] + extra + first)
        }
        return copy
    }

    /// The copy for a retry queue: its own `expiration` (the message's, if any, moved into
    /// `x-original-expiration` like on a dead letter) so the wait is the worker's, not the message's TTL.
    func retryCopy(queue: String, expiration: Duration?, addingHeaders added: [(String, AMQPFieldValue)])
        -> AMQPOutboundMessage
    {
        var (message, header) = expirationMovedAside()
        message.properties.expiration = expiration.map { String($0.milliseconds) }
        let first = OriginalDestination(exchange: exchange, routingKey: routingKey).headers
        return message.copy(exchange: "", routingKey: queue, addingHeaders: added + header + first)
    }

    /// This message without its `expiration`, and the `x-original-expiration` header that keeps it byte for byte
    /// (none when it had no expiration): a copy must not expire by the original's TTL.
    private func expirationMovedAside() -> (message: OriginalMessage, header: [(String, AMQPFieldValue)]) {
        guard let expiration = properties.expiration else { return (self, []) }
        var message = self
        let exact = properties.undecodedStrings[.expiration].map(AMQPFieldValue.undecodedString) ?? .string(expiration)
        message.properties.expiration = nil
        message.properties.undecodedStrings[.expiration] = nil
        return (message, [(WorkerHeaders.originalExpiration, exact)])
    }

    /// Room kept free in a copy's content header for the `x-death` entry the broker adds when it dead-letters it.
    static let brokerHeaderAllowance = 1_024

    /// The original message, untouched but for the given headers and `user_id` (moved to `x-original-user-id`):
    /// for the dead-letter exchange and the retry queue.
    func copy(exchange: String, routingKey: String, addingHeaders added: [(String, AMQPFieldValue)])
        -> AMQPOutboundMessage
    {
        var properties = properties
        var headers = properties.headers ?? [:]
        for (key, value) in added {
            headers[key] = value
        }
        // RabbitMQ refuses a publish whose `user_id` is not the publishing connection's user (406, closing the
        // channel): a message the backend sent with its own `user_id` could never be retried or dead-lettered.
        if let userID = properties.userID {
            headers[WorkerHeaders.originalUserID] =
                properties.undecodedStrings[.userID].map(AMQPFieldValue.undecodedString) ?? .string(userID)
            properties.userID = nil
            properties.undecodedStrings[.userID] = nil
        }
        properties.headers = headers
        return AMQPOutboundMessage(
            exchange: exchange, routingKey: routingKey, body: body, properties: properties, mandatory: true)
    }
}
