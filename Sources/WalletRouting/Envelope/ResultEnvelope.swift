import Foundation

/// Builds the results of one inbound message: the envelope every result body starts with, the AMQP
/// properties, the `message_id` numbering and the `reply_to` copies (CONTRACT.md §1, §9).
///
/// Body: `kind`, `messageId`, `correlationId`, `sender`, `processedAt`, then the result's own fields.
/// Properties: `message_id` = `<inbound message_id>/<n>` with n the 0-based index in publication order, so a
/// redelivery republishes the same ids; a `reply_to` copy (same body, same properties) follows its primary on
/// the default exchange and takes no index.
struct ResultEnvelope {
    private let inboundMessageID: String?
    /// False when the inbound id is too long to number results with: they carry no `message_id` property.
    private let numbersResults: Bool
    private let correlationID: String?
    private let traceparent: String?
    private let replyTo: String?
    /// The processing time, formatted only when a first result is published (ignored messages publish none).
    private let processedAtEpochSeconds: Double
    private var nextIndex = 0

    /// In publication order, `reply_to` copies included.
    private(set) var results: [OutboundResult] = []

    /// The upper-cased `sender` of the envelope; nil for installations and unparseable bodies.
    var sender: String?

    init(inbound: InboundProperties, now: Date) {
        // An empty AMQP short string is no id: deduplicating every id-less message under "" would lose messages.
        inboundMessageID = inbound.messageID.flatMap { $0.isEmpty ? nil : $0 }
        numbersResults = (inboundMessageID?.utf8.count ?? 0) <= RoutingSettings.maximumMessageIDBytes
        correlationID = inbound.correlationID.flatMap { $0.isEmpty ? nil : $0 } ?? inboundMessageID
        traceparent = inbound.traceparent.flatMap {
            $0.utf8.count <= RoutingSettings.maximumTraceparentBytes ? $0 : nil
        }
        replyTo = inbound.replyTo.flatMap { $0.isEmpty ? nil : $0 }
        processedAtEpochSeconds = now.timeIntervalSince1970
    }

    /// Appends one result (and its `reply_to` copy). `writeFields` writes the result's own members, about
    /// `fieldBytes` of them (a hint that saves growing the buffer).
    mutating func publish(
        _ kind: ResultKind, exchange: String, routingKey: String, fieldBytes: Int = 256,
        writeFields: (inout JSONWriter) -> Void
    ) {
        // The common members are written into each result rather than encoded once and copied: a message
        // publishes 1.3 results on average, and a buffer of its own was two heap allocations per message.
        var writer = JSONWriter(
            reservingCapacity: 128 + fieldBytes + (inboundMessageID?.utf8.count ?? 0) + (correlationID?.utf8.count ?? 0)
        )
        writer.beginObject()
        writer.key("kind")
        writer.string(kind.rawValue)
        writeCommonMembers(into: &writer)
        writeFields(&writer)
        writer.endObject()

        let properties = OutboundProperties(
            messageID: numbersResults ? inboundMessageID.map { "\($0)/\(nextIndex)" } : nil,
            correlationID: correlationID,
            type: kind.rawValue,
            traceparent: traceparent
        )
        nextIndex += 1
        if results.isEmpty { results.reserveCapacity(replyTo == nil ? 2 : 4) }
        let result = OutboundResult(
            exchange: exchange, routingKey: routingKey, body: writer.takeBytes(), properties: properties)
        results.append(result)
        if let replyTo {
            results.append(ReplyCopies.copy(of: result, to: replyTo))
        }
    }

    /// `messageId`, `correlationId`, `sender` and `processedAt`, the members every result starts with.
    private func writeCommonMembers(into writer: inout JSONWriter) {
        writer.key("messageId")
        writer.string(inboundMessageID)
        writer.key("correlationId")
        writer.string(correlationID)
        writer.key("sender")
        writer.string(sender)
        writer.key("processedAt")
        writer.utcTimestamp(epochSeconds: processedAtEpochSeconds)
    }
}
