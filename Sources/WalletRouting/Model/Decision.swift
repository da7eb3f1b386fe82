/// A state change the worker must apply, in order, in the same store transaction that records the message.
public enum Effect: Sendable, Hashable {
    /// Write the card row as given (state, tokenized id, key type, payment keys).
    case upsertCard(CardRecord)
    /// Append a transaction record to the card's history (the router already checked the id is new).
    case storeTransaction(digitalCardId: String, record: TransactionRecord)
    case upsertInstallation(Installation)
    case deleteInstallation(installationId: String)
}

/// One message to publish, fully encoded.
public struct OutboundResult: Sendable, Hashable {
    /// The exchange name; the empty string is the default exchange (the `reply_to` copies).
    public var exchange: String
    public var routingKey: String
    /// Compact UTF-8 JSON.
    public var body: [UInt8]
    public var properties: OutboundProperties

    public init(exchange: String, routingKey: String, body: [UInt8], properties: OutboundProperties) {
        self.exchange = exchange
        self.routingKey = routingKey
        self.body = body
        self.properties = properties
    }
}

/// The AMQP properties of a result (CONTRACT.md §9). Every result is `application/json` and persistent.
public struct OutboundProperties: Sendable, Hashable {
    public static let contentType = "application/json"

    /// `<inbound message_id>/<n>`, or nil when the inbound message had none.
    public var messageID: String?
    public var correlationID: String?
    /// The result's `kind`.
    public var type: String
    public var traceparent: String?

    public init(messageID: String?, correlationID: String?, type: String, traceparent: String?) {
        self.messageID = messageID
        self.correlationID = correlationID
        self.type = type
        self.traceparent = traceparent
    }
}

/// What happens to the inbound message once its results are confirmed.
public enum Disposition: Sendable, Hashable {
    /// Acknowledge; the message id and results are recorded for deduplication.
    case acknowledge
    /// Publish the original to the dead-letter exchange with `x-worker-error: reason`, then acknowledge it.
    /// Not recorded as processed.
    case deadLetter(reason: String)
}

/// How a message ended, for metrics and logs.
public enum Outcome: String, Sendable, Hashable, CaseIterable {
    /// Results published, no domain error.
    case processed
    /// A normal result carrying an `error` or a rejected installation (acknowledged).
    case domainError
    /// Not an SDK notification and no action: nothing published (acknowledged).
    case ignored
    /// Bad input (§8): a `rejected` result and a dead letter.
    case rejected
}

/// Everything the router decided about one inbound message.
public struct Decision: Sendable, Hashable {
    public var effects: [Effect]
    /// In publication order, `reply_to` copies included right after their primary.
    public var results: [OutboundResult]
    public var disposition: Disposition
    public var outcome: Outcome
    /// The upper-cased `sender` when it was a string (metrics label and logs).
    public var sender: String?
    /// For logs.
    public var digitalCardId: String?

    public init(
        effects: [Effect], results: [OutboundResult], disposition: Disposition, outcome: Outcome,
        sender: String?, digitalCardId: String?
    ) {
        self.effects = effects
        self.results = results
        self.disposition = disposition
        self.outcome = outcome
        self.sender = sender
        self.digitalCardId = digitalCardId
    }
}
