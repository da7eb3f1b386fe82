internal import CRabbitMQ
import Logging

/// The connection's reactions to what the broker sends on its own: deliveries, returns, confirms, cancels, closes and
/// flow control. Kept apart from the coordinator in `ConnectionCore.swift` because it is re-entered: reading a
/// delivery's content (`FrameReader`) dispatches frames of other channels that arrive meanwhile. Every part it
/// touches (`ChannelTable`, `ConfirmedPublisher`) is reached through the core, never held across that re-entry.
extension ConnectionCore {
    /// Reacts to one frame from the broker. Re-entered while a delivery's content is read (`FrameReader`).
    func dispatch(_ frame: amqp_frame_t) {
        guard let method = reader.method(of: frame) else { return }
        let number = frame.channel
        switch method {
        case .deliver(let deliver):
            receive(deliver, on: number)
        case .returned(let returned):
            // A returned message is one of ours: its size is bounded by what we publish.
            switch readContent(on: number, bodyLimit: nil, context: "reading a returned message") {
            case .read(let body, let properties):
                channels[number]?.confirms?.returned(
                    exchange: returned.exchange, routingKey: returned.routingKey, body: body, properties: properties,
                    replyCode: returned.replyCode, replyText: returned.replyText)
                logger.debug(
                    "message returned by the broker",
                    metadata: [
                        AMQPLoggingKeys.exchange: "\(returned.exchange)",
                        AMQPLoggingKeys.routingKey: "\(returned.routingKey)",
                        "reply": "\(returned.replyCode) \(returned.replyText)",
                    ])
            case .undecodableHeader(let error), .failed(let error): fail(error)
            case .withheld: break
            }
        case .acknowledged(let tag, let multiple):
            if let resolutions = channels[number]?.confirms?.acknowledged(deliveryTag: tag, multiple: multiple) {
                publisher.resolve(resolutions)
            }
        case .negativelyAcknowledged(let tag, let multiple):
            if let resolutions = channels[number]?.confirms?.negativelyAcknowledged(
                deliveryTag: tag, multiple: multiple)
            {
                publisher.resolve(resolutions)
            }
        case .consumerCancelled(let tag):
            guard let consumer = channels.removeConsumer(channel: number, tag: tag) else { return }
            consumer.finish(
                throwing: AMQPError(
                    code: .consumerCancelled,
                    message: "the broker cancelled consumer '\(tag)' (queue deleted or failed over)"))
            logger.warning("consumer cancelled by the broker", metadata: [AMQPLoggingKeys.consumerTag: "\(tag)"])
        case .channelClosed(let error):
            acknowledgeChannelClose(number)
            closeChannel(number, because: error)
        case .connectionClosed(let error):
            acknowledgeConnectionClose()
            fail(error)
        case .blocked(let reason):
            logger.warning("connection blocked by the broker", metadata: ["reason": "\(reason)"])
            publisher.block()
            events.yield(.blocked(reason: reason))
        case .unblocked:
            logger.info("connection unblocked by the broker")
            do throws(AMQPError) { try publisher.unblock { channels[$0] } } catch { fail(error) }
            events.yield(.unblocked)
        case .ignored(let id):
            logger.debug(
                "ignoring method frame",
                metadata: ["method": "0x\(String(id, radix: 16))", AMQPLoggingKeys.channel: "\(number)"])
        }
    }

    /// A basic.deliver: reads its content and hands it to its consumer, or gives it back when nobody takes it.
    private func receive(_ deliver: InboundMethod.Deliver, on number: UInt16) {
        let tag = deliver.consumerTag
        let consumer = channels.consumer(channel: number, tag: tag)
        let body: [UInt8]
        let properties: AMQPMessageProperties
        let withheldBodySize: UInt64?
        switch readContent(
            on: number, bodyLimit: consumer?.maximumBodyBytes, keepingBodyWhen: consumer?.keepsBody,
            context: "reading a delivery")
        {
        case .failed(let error):
            return fail(error)
        case .read(let read, let readProperties):
            (body, properties, withheldBodySize) = (read, readProperties, nil)
        case .withheld(let byteCount, let readProperties):
            (body, properties, withheldBodySize) = ([], readProperties, byteCount)
        case .undecodableHeader(var error):
            // Redelivered, it would end every session the same way: the broker dead-letters it instead (the
            // queue's dead-letter exchange, with x-death), and this connection ends. The dead-letter tool's
            // queue dead-letters into its own loop, back into itself (`Topology`'s dead-letter queue); a
            // consumer that asks for `.requeue` leaves the message where it was. Never dropped either way.
            let settlement = UndecodableDelivery.Settlement(for: consumer)
            // Not on a channel that closed meanwhile: the broker requeued it already (see `destination`).
            if settlement != .acknowledgedByBroker, channels[number] != nil {
                _ = amqp_basic_reject(state, number, deliver.deliveryTag, settlement == .requeued ? 1 : 0)
            }
            error.undecodableDelivery = UndecodableDelivery(
                exchange: deliver.exchange, routingKey: deliver.routingKey, consumerTag: tag,
                redelivered: deliver.redelivered,
                settlement: settlement)
            let requeue = consumer?.deliveries.undecodableContent == .requeue
            logger.error(
                "a delivery's content header could not be decoded: \(requeue ? "requeued" : "rejected without requeue")",
                metadata: [
                    AMQPLoggingKeys.consumerTag: "\(tag)", AMQPLoggingKeys.routingKey: "\(deliver.routingKey)",
                    AMQPLoggingKeys.error: "\(error)",
                ])
            return fail(error)
        }
        switch channels.destination(ofDeliveryOn: number, consumerTag: tag, consumer: consumer) {
        case .consumer(let consumer, let channel):
            consumer.pending.append(
                AMQPDelivery(
                    body: body, properties: properties, withheldBodySize: withheldBodySize,
                    deliveryTag: deliver.deliveryTag,
                    redelivered: deliver.redelivered, exchange: deliver.exchange, routingKey: deliver.routingKey,
                    consumerTag: tag,
                    channel: channel, acknowledgedByBroker: consumer.automaticAcknowledgement))
        case .droppedAsAcknowledgedByBroker:
            logger.debug(
                "dropped a delivery for a cancelled no-ack consumer", metadata: [AMQPLoggingKeys.consumerTag: "\(tag)"])
        case .requeued:
            _ = amqp_basic_reject(state, number, deliver.deliveryTag, 1)
            logger.debug(
                "requeued a delivery for a cancelled consumer", metadata: [AMQPLoggingKeys.consumerTag: "\(tag)"])
        case .returnedWithItsChannel:
            logger.debug(
                "dropped a delivery of a closed channel (the broker requeued it with the channel)",
                metadata: [AMQPLoggingKeys.consumerTag: "\(tag)", AMQPLoggingKeys.channel: "\(number)"])
        }
    }

    private func readContent(
        on number: UInt16, bodyLimit: Int?,
        keepingBodyWhen keepsBody: (@Sendable (AMQPMessageProperties) -> Bool)? = nil, context: String
    ) -> FrameReader.Content {
        reader.readContent(
            channel: number, bodyLimit: bodyLimit, keepingBodyWhen: keepsBody, context: context,
            isUsable: { failure == nil },
            dispatch: dispatch)
    }
}
