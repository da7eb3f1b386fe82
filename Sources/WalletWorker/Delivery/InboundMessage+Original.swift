import AMQPTransport
import WalletMessages
import WalletRouting

extension InboundMessage {
    /// The routing core's view of a delivery: the body and the properties the contract reads.
    init(_ delivery: AMQPDelivery) {
        self.init(OriginalMessage(delivery))
    }

    /// The routing core's view of a delivery's original.
    init(_ original: OriginalMessage) {
        let properties = original.properties
        let messageIDIsInvalidUTF8 = properties.undecodedStrings[.messageID] != nil
        let correlationIDIsInvalidUTF8 = properties.undecodedStrings[.correlationID] != nil
        self.init(
            body: original.body,
            properties: InboundProperties(
                messageID: messageIDIsInvalidUTF8 ? nil : properties.messageID,
                correlationID: correlationIDIsInvalidUTF8 ? nil : properties.correlationID,
                // A repaired text would name another queue (and may outgrow a short string): no copies.
                replyTo: original.hasInvalidUTF8ReplyTo ? nil : properties.replyTo,
                type: properties.type,
                timestamp: properties.timestamp.map { Int64(clamping: $0) },
                traceparent: properties.headers?[WorkerHeaders.traceparent]?.textValue,
                messageIDIsInvalidUTF8: messageIDIsInvalidUTF8,
                correlationIDIsInvalidUTF8: correlationIDIsInvalidUTF8
            ),
            omittedBodyByteCount: original.withheldBodySize
        )
    }
}
