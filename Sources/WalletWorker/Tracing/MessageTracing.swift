import AMQPTransport
import Logging
#if OpenTelemetry
import OTel
#endif
import Tracing
import WalletStore

/// The spans of the messages a pipeline processes, following the OpenTelemetry messaging conventions: a CONSUMER
/// span `process <queue>` per delivery, continuing the inbound `traceparent` when it is valid; under it a CLIENT
/// span for the batch's store transaction and a PRODUCER span `publish <exchange>` per published message, from the
/// publish to its confirm.
///
/// Results keep the inbound `traceparent` unchanged (CONTRACT.md §2): nothing here injects a context into them.
/// A pipeline without tracing has no `MessageTracing` at all, so the hot path only tests an optional.
struct MessageTracing: Sendable {
    let tracer: any Tracer
    /// The queue the pipeline consumes: the work queue or a shard.
    let queue: String
    /// `db.system` of the store; nil for the in-memory store.
    let databaseSystem: String?
    /// The broker, as `server.address` and `server.port`.
    let serverAddress: String
    let serverPort: Int
    /// The spans of batches not yet at their acknowledgement, ended by the pipeline when a session drops them.
    let open = OpenMessageSpans()

    init(tracer: any Tracer, queue: String, store: StoreLocation, broker: AMQPURL) {
        self.tracer = tracer
        self.queue = queue
        self.serverAddress = broker.host
        self.serverPort = broker.port
        switch store {
        case .sqlite: databaseSystem = "sqlite"
        case .postgres: databaseSystem = "postgresql"
        case .memory: databaseSystem = nil
        }
    }

    /// One CONSUMER span per delivery, started now.
    func startMessageSpans(_ deliveries: [AMQPDelivery]) -> [any Span] {
        let name = "process \(queue)"
        return deliveries.map { delivery in
            var parent = InstrumentationContext.topLevel
            if let header = delivery.properties.headers?[WorkerHeaders.traceparent]?.text, TraceParent.isValid(header) {
                tracer.extract(header, into: &parent, using: TraceParentExtractor())
            }
            let span = tracer.startSpan(name, context: parent, ofKind: .consumer)
            guard span.isRecording else { return span }
            span.updateAttributes { attributes in
                attributes["messaging.system"] = "rabbitmq"
                attributes["messaging.operation.type"] = "process"
                attributes["messaging.operation.name"] = "process"
                // The RabbitMQ convention: the destination is the exchange it was published to ("" for the default
                // exchange) with its routing key; the queue it was consumed from is the subscription.
                attributes["messaging.destination.name"] = delivery.exchange
                attributes["messaging.destination.subscription.name"] = queue
                attributes["messaging.rabbitmq.destination.routing_key"] = delivery.routingKey
                attributes["server.address"] = serverAddress
                attributes["server.port"] = serverPort
                attributes["messaging.rabbitmq.message.delivery_tag"] = Int64(truncatingIfNeeded: delivery.deliveryTag)
                attributes["messaging.message.body.size"] = delivery.withheldBodySize.map { Int64(clamping: $0) } ?? Int64(delivery.body.count)
                if let messageID = delivery.properties.messageID, !messageID.isEmpty {
                    attributes["messaging.message.id"] = messageID
                }
                if let correlationID = delivery.properties.correlationID, !correlationID.isEmpty {
                    attributes["messaging.message.conversation_id"] = correlationID
                }
                if delivery.redelivered { attributes["wallet.redelivered"] = true }
            }
            return span
        }
    }

    /// One CLIENT span per message for the batch's store transaction (the messages share it).
    func startStoreSpans(parents: [any Span]) -> [any Span] {
        parents.map { parent in
            let span = tracer.startSpan("store transaction", context: parent.context, ofKind: .client)
            guard span.isRecording else { return span }
            span.updateAttributes { attributes in
                if let databaseSystem {
                    attributes["db.system"] = databaseSystem
                    attributes["db.system.name"] = databaseSystem
                }
                attributes["db.operation.batch.size"] = parents.count
            }
            return span
        }
    }

    /// One PRODUCER span per message the plans publish, in publication order (the order of their confirms).
    func startPublishSpans(_ plans: [DeliveryPlan], parents: [any Span]) -> [any Span] {
        var spans: [any Span] = []
        spans.reserveCapacity(plans.reduce(0) { $0 + $1.messages.count })
        for (plan, parent) in zip(plans, parents) {
            for message in plan.messages {
                let exchange = message.exchange.isEmpty ? "amq.default" : message.exchange
                let span = tracer.startSpan("publish \(exchange)", context: parent.context, ofKind: .producer)
                if span.isRecording {
                    span.updateAttributes { attributes in
                        attributes["messaging.system"] = "rabbitmq"
                        attributes["messaging.operation.type"] = "send"
                        attributes["messaging.operation.name"] = "publish"
                        attributes["messaging.destination.name"] = message.exchange
                        attributes["messaging.rabbitmq.destination.routing_key"] = message.routingKey
                        attributes["server.address"] = serverAddress
                        attributes["server.port"] = serverPort
                        if let messageID = message.properties.messageID, !messageID.isEmpty {
                            attributes["messaging.message.id"] = messageID
                        }
                    }
                }
                spans.append(span)
            }
        }
        return spans
    }

    /// Ends publish spans with their messages' confirms (same order).
    static func endPublishSpans(_ spans: [any Span], outcomes: [AMQPPublishOutcome]) {
        for (span, outcome) in zip(spans, outcomes) {
            switch outcome {
            case .confirmed: break
            case .nacked:
                span.attributes["error.type"] = "nacked"
                span.setStatus(SpanStatus(code: .error, message: "nacked by the broker"))
            case .returned(let replyCode, let replyText):
                span.attributes["error.type"] = "returned"
                span.setStatus(SpanStatus(code: .error, message: "returned: \(replyCode) \(replyText)"))
            case .unencodable(let reason):
                span.attributes["error.type"] = "unencodable"
                span.setStatus(SpanStatus(code: .error, message: "unencodable: \(reason)"))
            }
            span.end()
        }
    }

    /// Ends spans whose work failed as a whole (a confirm timeout, a lost channel, cancellation).
    static func fail(_ spans: [any Span], _ error: any Error) {
        for span in spans {
            span.recordError(error)
            span.attributes["error.type"] = errorType(error)
            span.setStatus(SpanStatus(code: .error, message: "\(error)"))
            span.end()
        }
    }

    /// `error.type`: a low-cardinality class of the failure (the transport's code, the store's kind, else the
    /// error's type).
    static func errorType(_ error: any Error) -> String {
        switch error {
        case let error as AMQPError: "amqp.\(error.code)"
        case let error as StoreError: "store.\(error.kind)"
        case let error as BatchProcessor.FatalStoreError: "store.\(error.underlying.kind)"
        case is CancellationError: "cancelled"
        default: "\(type(of: error))"
        }
    }

    /// Ends a message span once its delivery has left the work queue (or was requeued), with the worker's outcome.
    static func finish(_ span: any Span, plan: DeliveryPlan, requeued: Bool) {
        defer { span.end() }
        guard span.isRecording else { return }
        span.updateAttributes { attributes in
            attributes["wallet.route"] = requeued ? "requeued" : plan.route.traceName
            if let stored = plan.stored {
                attributes["wallet.outcome"] = stored.decision.outcome.rawValue
                if let sender = stored.decision.sender { attributes["wallet.sender"] = sender }
                if stored.isReplay { attributes["wallet.replay"] = true }
            }
        }
        if requeued {
            span.attributes["error.type"] = "requeued"
            span.setStatus(SpanStatus(code: .error, message: "requeued: the retry and dead-letter publishes failed"))
        } else if let failure = plan.route.failureDescription {
            span.attributes["error.type"] = plan.route.traceName
            span.setStatus(SpanStatus(code: .error, message: failure))
        }
    }

    /// `trace_id`, `span_id` and `trace_flags` of a span, for the log lines about its message.
    static func logMetadata(of span: any Span) -> Logger.Metadata {
        #if OpenTelemetry
        InstrumentationContext.withValue(span.context) { metadataProvider.get() }
        #else
        [:]  // no span of this build carries OpenTelemetry's context
        #endif
    }

    #if OpenTelemetry
    private static let metadataProvider = OTel.makeLoggingMetadataProvider()
    #endif
}

/// Hands the tracer the one header it reads, already checked by `TraceParent.isValid`.
private struct TraceParentExtractor: Extractor {
    func extract(key: String, from traceparent: String) -> String? {
        key == WorkerHeaders.traceparent ? traceparent : nil
    }
}

extension DeliveryPlan.Route {
    /// The route as a span attribute value.
    var traceName: String {
        switch self {
        case .results: "results"
        case .deadLetter: "dead_letter"
        case .retry: "retry"
        case .retriesExhausted: "retries_exhausted"
        case .storeRefused: "store_refused"
        case .poison: "poison"
        case .rejectedToBroker: "rejected_to_broker"
        case .unpublishable: "unpublishable"
        }
    }

    /// Why the message failed, for its span's error status; nil when it was processed.
    var failureDescription: String? {
        switch self {
        case .results: nil
        case .deadLetter(let reason): "dead-lettered: \(reason)"
        case .retry(let attempt, let error): "sent to the retry queue after attempt \(attempt): \(error)"
        case .retriesExhausted(let attempts, let error): "dead-lettered after \(attempts) attempts: \(error)"
        case .storeRefused(let reason): "dead-lettered, the store refused it: \(reason)"
        case .poison(let reason): "dead-lettered unprocessed: \(reason)"
        case .rejectedToBroker(let reason): "rejected to the broker's dead-lettering: \(reason)"
        case .unpublishable(let reason): "dead-lettered, a result cannot be published: \(reason)"
        }
    }
}
