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

extension UndecodableDelivery.Settlement {
    /// How a delivery whose content header cannot be decoded is settled for `consumer` (nil when none is registered:
    /// rejected to the dead-letter exchange). A `no-ack` consumer's delivery was acknowledged by the broker already.
    init(for consumer: ConsumerSink?) {
        if consumer?.automaticAcknowledgement == true {
            self = .acknowledgedByBroker
        } else {
            self = consumer?.deliveries.undecodableContent == .requeue ? .requeued : .rejected
        }
    }
}
