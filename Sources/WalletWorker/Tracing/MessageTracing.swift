import AMQPTransport
import Logging
import Synchronization
import Tracing
import WalletMessages
import WalletStore

/// The spans of the messages the worker processes, following the OpenTelemetry messaging conventions: a CONSUMER
/// span `process <queue>` per delivery, continuing the inbound `traceparent` when it is valid; with the `full`
/// detail, under it a CLIENT span for the batch's store transaction and a PRODUCER span `publish <exchange>` per
/// published message, from the publish to its confirm.
///
/// It observes the lifecycle and writes nothing of its own into the delivery path: a message span starts when its
/// delivery is received (`LifecycleEvent.received`) and ends with the delivery's fate (`LifecycleEvent.ended`),
/// whatever that is, a session's failure included; the executor wraps its store and publish actions in the other
/// spans. Results keep the inbound `traceparent` unchanged (CONTRACT.md §2): nothing here injects a context into
/// them. Without tracing there is no `MessageTracing` at all, so the hot path only tests an optional.
final class MessageTracing: Sendable {
    let tracer: any Tracer
    /// Whether the store and publish spans are made.
    let detail: TraceDetail
    /// `db.system` of the store; nil for the in-memory store.
    let databaseSystem: String?
    /// The queue each pipeline consumes: the work queue or a shard.
    private let queues: [String]
    /// The broker, as `server.address` and `server.port`.
    private let serverAddress: String
    private let serverPort: Int
    /// The message spans of deliveries not yet ended.
    private let open = Mutex<[SpanKey: any Span]>([:])

    private struct SpanKey: Hashable {
        var session: DeliveryLifecycle.SessionID
        var tag: UInt64
    }

    init(tracer: any Tracer, detail: TraceDetail, queues: [String], store: StoreLocation, broker: AMQPURL) {
        self.tracer = tracer
        self.detail = detail
        self.queues = queues
        self.serverAddress = broker.host
        self.serverPort = broker.port
        switch store {
        case .sqlite: databaseSystem = "sqlite"
        case .postgres: databaseSystem = "postgresql"
        case .memory: databaseSystem = nil
        }
    }

    /// One CONSUMER span per delivery, started now.
    func started(_ session: DeliveryLifecycle.SessionID, _ deliveries: [DeliveryLifecycle.Delivery]) {
        let queue = queues.indices.contains(session.pipeline) ? queues[session.pipeline] : "?"
        let name = "process \(queue)"
        let spans = deliveries.map { delivery -> (SpanKey, any Span) in
            let properties = delivery.original.properties
            var parent = InstrumentationContext.topLevel
            if let header = properties.headers?[WorkerHeaders.traceparent]?.textValue {
                tracer.extract(header, into: &parent, using: TraceParentExtractor())
            }
            let span = tracer.startSpan(name, context: parent, ofKind: .consumer)
            if span.isRecording {
                Self.update(span) { attributes in
                    // Room for these and the ones `finished` adds, so the dictionary is not grown three times.
                    attributes.reserveCapacity(20)
                    attributes["messaging.system"] = "rabbitmq"
                    attributes["messaging.operation.type"] = "process"
                    attributes["messaging.operation.name"] = "process"
                    // The RabbitMQ convention: the destination is the exchange it was published to ("" for the
                    // default exchange) with its routing key; the queue it was consumed from is the subscription.
                    attributes["messaging.destination.name"] = delivery.original.exchange
                    attributes["messaging.destination.subscription.name"] = queue
                    attributes["messaging.rabbitmq.destination.routing_key"] = delivery.original.routingKey
                    attributes["server.address"] = serverAddress
                    attributes["server.port"] = serverPort
                    attributes["messaging.rabbitmq.message.delivery_tag"] = Int64(truncatingIfNeeded: delivery.tag)
                    attributes["messaging.message.body.size"] =
                        delivery.original.withheldBodySize.map { Int64(clamping: $0) }
                        ?? Int64(delivery.original.body.count)
                    if let messageID = properties.messageID, !messageID.isEmpty {
                        attributes["messaging.message.id"] = messageID
                    }
                    if let correlationID = properties.correlationID, !correlationID.isEmpty {
                        attributes["messaging.message.conversation_id"] = correlationID
                    }
                    if delivery.redelivered { attributes["wallet.redelivered"] = true }
                }
            }
            return (SpanKey(session: session, tag: delivery.tag), span)
        }
        open.withLock { open in
            for (key, span) in spans { open[key] = span }
        }
    }

    /// With the `full` detail, one CLIENT span per delivery for the batch's store transaction (the deliveries share
    /// it); end them with `endStoreSpans`. None otherwise.
    func startStoreSpans(_ session: DeliveryLifecycle.SessionID, _ deliveries: [DeliveryLifecycle.Delivery])
        -> [any Span]
    {
        guard detail == .full else { return [] }
        return parents(session, deliveries.map(\.tag)).map { parent in
            let span = tracer.startSpan("store transaction", context: parent.context, ofKind: .client)
            if span.isRecording {
                Self.update(span) { attributes in
                    if let databaseSystem {
                        attributes["db.system"] = databaseSystem
                        attributes["db.system.name"] = databaseSystem
                    }
                    attributes["db.operation.batch.size"] = deliveries.count
                }
            }
            return span
        }
    }

    /// Ends the store spans with the store's answer.
    static func endStoreSpans(_ spans: [any Span], failure: StoreError?) {
        for span in spans {
            if let failure {
                span.attributes["error.type"] = errorType(failure)
                span.recordError(failure)
                span.setStatus(SpanStatus(code: .error, message: "\(failure)"))
            }
            span.end()
        }
    }

    /// With the `full` detail, one PRODUCER span per message the plans publish, in publication order (the order of
    /// their confirms). None otherwise.
    func startPublishSpans(_ session: DeliveryLifecycle.SessionID, tags: [UInt64], plans: [DeliveryPlan]) -> [any Span]
    {
        guard detail == .full else { return [] }
        var spans: [any Span] = []
        spans.reserveCapacity(plans.reduce(0) { $0 + $1.messages.count })
        for (plan, parent) in zip(plans, parents(session, tags)) {
            for message in plan.messages {
                let exchange = message.exchange.isEmpty ? "amq.default" : message.exchange
                let span = tracer.startSpan("publish \(exchange)", context: parent.context, ofKind: .producer)
                if span.isRecording {
                    Self.update(span) { attributes in
                        attributes["messaging.system"] = "rabbitmq"
                        attributes["messaging.operation.type"] = "send"
                        attributes["messaging.operation.name"] = "publish"
                        attributes["messaging.destination.name"] = exchange
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
            span.attributes["error.type"] = errorType(error)
            span.recordError(error)
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
        case let error as StoreFailure: "store.\(error.underlying.kind)"
        case is CancellationError: "cancelled"
        default: "\(type(of: error))"
        }
    }

    /// Ends a message span with its delivery's fate.
    func finished(_ end: DeliveryEnd) {
        guard let span = open.withLock({ $0.removeValue(forKey: SpanKey(session: end.session, tag: end.delivery.tag)) })
        else { return }
        defer { span.end() }
        guard span.isRecording else { return }
        Self.update(span) { attributes in
            attributes["wallet.fate"] = end.fate.name
            if let stored = end.stored {
                attributes["wallet.outcome"] = stored.decision.outcome.rawValue
                if let sender = stored.decision.sender { attributes["wallet.sender"] = sender }
                if stored.isReplay { attributes["wallet.replay"] = true }
            }
        }
        if let failure = end.fate.failureDescription {
            span.attributes["error.type"] = end.fate.name
            span.setStatus(SpanStatus(code: .error, message: failure))
        }
    }

    /// The log metadata of a delivery's message span (empty when it has none).
    func logMetadata(of delivery: DeliveryLifecycle.Delivery, session: DeliveryLifecycle.SessionID) -> Logger.Metadata {
        guard let span = open.withLock({ $0[SpanKey(session: session, tag: delivery.tag)] }) else { return [:] }
        return Self.logMetadata(of: span)
    }

    /// The message spans of these deliveries, in order; a span that no longer exists is replaced by a no-op one.
    private func parents(_ session: DeliveryLifecycle.SessionID, _ tags: [UInt64]) -> [any Span] {
        open.withLock { open in
            tags.map { open[SpanKey(session: session, tag: $0)] ?? NoOpTracer.NoOpSpan(context: .topLevel) }
        }
    }

    /// `trace_id`, `span_id` and `trace_flags` of a span, for the log lines about its message.
    static func logMetadata(of span: any Span) -> Logger.Metadata {
        span.context.spanIdentity?.logMetadata.mapValues { .string($0) } ?? [:]
    }

    /// Applies `update` to a span's attributes: in place on the worker's own spans (through `any Span`, the
    /// protocol's `updateAttributes` copies them out and back), as the protocol says on any other tracer's.
    private static func update(_ span: any Span, _ update: (inout SpanAttributes) -> Void) {
        if let span = span as? RecordedSpan {
            span.updateAttributes(update)
        } else {
            span.updateAttributes(update)
        }
    }
}

/// Hands the tracer the one header it reads; the tracer parses it (`TraceParent.parse`).
private struct TraceParentExtractor: Extractor {
    func extract(key: String, from traceparent: String) -> String? {
        key == WorkerHeaders.traceparent ? traceparent : nil
    }
}
