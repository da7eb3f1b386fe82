import AMQPTransport

/// The last line of defence against a message that stops the pipeline in a way nobody foresaw: one that makes
/// the broker close a connection or channel, or the transport fail, every time it is processed. Part of
/// `DeliveryLifecycle`, which it tells what to isolate and what to condemn; pure, no lock.
///
/// When a session fails with such an error (`signature(of:)`), every delivery in flight becomes a suspect. A
/// suspect is processed alone, with nothing else in flight, so a failure while it is in flight is its own: after
/// `failureLimit` such failures in a row with the same signature it is dead-lettered unprocessed, with the error. A
/// suspect that goes through is forgotten. Counted per message (its id, body and routing key, not its delivery tag)
/// in this process, across reconnects and pipelines; a crash is not counted here (a quorum queue's delivery limit
/// covers that). Connection losses, timeouts, the broker's consumer timeout and the like are not the message's
/// fault and count for nothing.
struct PoisonSuspects: Sendable {
    /// Failures alone, in a row, with the same signature, that condemn a message. Default: 3.
    var failureLimit = 3
    /// Messages remembered at most; the least recently seen are forgotten first. Default: 10,000.
    var capacity = 10_000

    struct Key: Hashable, Sendable {
        fileprivate var value: Int
    }

    struct Record: Sendable, Equatable {
        /// Failures while processed alone, in a row, with `signature`.
        var failures = 0
        var signature = ""
        var error = ""
        fileprivate var touched: UInt64 = 0
    }

    private var records: [Key: Record] = [:]
    private var clock: UInt64 = 0

    init(failureLimit: Int = 3, capacity: Int = 10_000) {
        self.failureLimit = failureLimit
        self.capacity = capacity
    }

    var isEmpty: Bool { records.isEmpty }

    /// A message's identity across redeliveries: not its delivery tag, which changes.
    static func key(_ original: OriginalMessage) -> Key {
        key(
            routingKey: original.routingKey,
            messageID: original.properties.undecodedStrings[.messageID]
                ?? original.properties.messageID.map { Array($0.utf8) },
            correlationID: original.properties.correlationID, body: original.body,
            withheldBodySize: original.withheldBodySize)
    }

    static func key(
        routingKey: String, messageID: [UInt8]?, correlationID: String?, body: [UInt8], withheldBodySize: UInt64?
    ) -> Key {
        var hasher = Hasher()
        hasher.combine(routingKey)
        hasher.combine(messageID)
        hasher.combine(correlationID)
        hasher.combine(body)
        hasher.combine(withheldBodySize)
        return Key(value: hasher.finalize())
    }

    func isSuspect(_ key: Key) -> Bool { records[key] != nil }

    /// The record of a message that has failed `failureLimit` times alone: it must not be processed again.
    func condemned(_ key: Key) -> Record? {
        records[key].flatMap { $0.failures >= failureLimit ? $0 : nil }
    }

    /// Cuts `keys` so that every suspect is a segment of its own, in order; one segment when there is none.
    func segments(_ keys: [Key]) -> [(range: Range<Int>, isSuspect: Bool)] {
        var segments: [(range: Range<Int>, isSuspect: Bool)] = []
        var start = 0
        for (index, key) in keys.enumerated() where records[key] != nil {
            if start < index { segments.append((start..<index, false)) }
            segments.append((index..<index + 1, true))
            start = index + 1
        }
        if start < keys.count { segments.append((start..<keys.count, false)) }
        return segments
    }

    /// A session failed with an error of `signature` while these messages were in flight. A message that was alone
    /// in flight gets a failure counted against it; when several were, they all become suspects.
    mutating func recordFailure(inFlight keys: [Key], signature: String, error: String) {
        let alone = keys.count == 1
        for key in keys {
            clock += 1
            var record = records[key] ?? Record()
            if alone {
                record.failures = record.signature == signature ? record.failures + 1 : 1
                record.signature = signature
                record.error = error
            }
            record.touched = clock
            records[key] = record
        }
        trim()
    }

    /// These messages were settled (acknowledged with their results, or dead-lettered): no longer suspects.
    mutating func recordSettled(_ keys: [Key]) {
        for key in keys { records[key] = nil }
    }

    /// What identifies "failing the same way", or nil for an error that is not a message's fault.
    static func signature(of error: any Error) -> String? {
        switch error {
        case is CancellationError, is TopologyError, is StoreFailure:
            return nil
        case let error as AMQPError:
            switch error.code {
            case .protocolError, .invalidArgument:
                return "\(error.code)"
            case .connectionClosedByBroker, .channelClosedByBroker:
                // 5xx: the broker choked on what was sent (541 INTERNAL_ERROR, 505 UNEXPECTED_FRAME, ...); 406:
                // it refused a property. Not 320 (the broker shutting down), 404 (a missing exchange: every
                // message would fail alike), 403 (permissions), nor the broker's consumer timeout (a 406 too: the
                // worker held its deliveries too long, whatever they were).
                guard let code = error.replyCode, code == 406 || (500..<600).contains(code),
                    !isConsumerTimeout(error)
                else { return nil }
                return "\(error.code) \(code)"
            default:
                return nil
            }
        default:
            return String(reflecting: type(of: error))
        }
    }

    /// RabbitMQ's `consumer_timeout` closing a channel: "PRECONDITION_FAILED - delivery acknowledgement on channel 1
    /// timed out. Timeout value used: 1800000 ms. ...".
    static func isConsumerTimeout(_ error: AMQPError) -> Bool {
        guard error.replyCode == 406 else { return false }
        let text = error.replyText ?? error.message
        return text.contains("delivery acknowledgement") && text.contains("timed out")
    }

    private mutating func trim() {
        guard records.count > capacity else { return }
        let oldest = records.sorted { $0.value.touched < $1.value.touched }.prefix(records.count - capacity / 2)
        for (key, _) in oldest { records[key] = nil }
    }
}
