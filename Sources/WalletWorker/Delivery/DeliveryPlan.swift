import AMQPTransport
import WalletMessages
import WalletRouting
import WalletStore

/// What the worker publishes for one delivery, and what it does with the delivery once those are confirmed.
/// Pure: built from the delivery and the store's decision (or the store's failure), tested without a broker.
struct DeliveryPlan: Sendable {
    var original: OriginalMessage
    /// Published in this order, in one confirmed batch with the rest of the batch's messages.
    var messages: [AMQPOutboundMessage]
    /// How the delivery leaves the worker once everything in `messages` is confirmed.
    var fate: DeliveryFate
    /// The store's decision, when it made one (not on a store failure).
    var stored: StoredDecision?
    /// For the plan that replaced one whose results were not taken: the decision the store had committed, whose
    /// results then went nowhere.
    var committed: StoredDecision?
    /// `reply_to` copies for a direct reply-to requester: sent apart from `messages`, on a connection of their
    /// own, unconfirmed (`DirectReplyPublisher`).
    var directReplies: [AMQPOutboundMessage] = []
    /// `reply_to` copies not published: the address is a direct reply-to RabbitMQ could not decode, or not UTF-8.
    var skippedReplyCopies = 0

    /// The plan for a delivery the store routed (or replayed). `frameMax` is the publishing connection's negotiated
    /// frame size: a content header must fit in one frame.
    init(original: OriginalMessage, stored: StoredDecision, topology: Topology, frameMax: Int) {
        self.original = original
        self.stored = stored
        var messages: [AMQPOutboundMessage] = []
        messages.reserveCapacity(stored.decision.results.count + 1)
        for result in stored.decision.results {
            // An address RabbitMQ cannot resolve closes the connection that publishes to it (541): direct reply-to
            // copies go on their own connection, and malformed addresses nowhere.
            if result.exchange.isEmpty && result.routingKey.hasPrefix(DirectReplyToAddress.prefix) {
                if DirectReplyToAddress.isPublishable(result.routingKey) {
                    directReplies.append(AMQPOutboundMessage(result))
                } else {
                    skippedReplyCopies += 1
                }
                continue
            }
            messages.append(AMQPOutboundMessage(result))
        }
        // The router made no copies for a reply_to that is not UTF-8 (`InboundMessage.init`): one per result skipped.
        if original.hasInvalidUTF8ReplyTo { skippedReplyCopies += stored.decision.results.count }
        switch stored.decision.disposition {
        case .acknowledge:
            fate = .processed
        case .deadLetter(let reason):
            let (brokerFate, deadLetter) = Self.deadLettering(
                original, reason: reason, topology: topology, frameMax: frameMax)
            fate = brokerFate ?? .rejected(reason: reason)
            messages += deadLetter
        }
        self.messages = messages
    }

    /// The dead letter the worker publishes (no fate), or, when it cannot, the fate that leaves it to the broker.
    private static func deadLettering(_ original: OriginalMessage, reason: String, topology: Topology, frameMax: Int)
        -> (DeliveryFate?, [AMQPOutboundMessage])
    {
        // A body the transport did not keep: only the broker has it whole. (A message whose `x-death` the broker could
        // not update is always read whole: `XDeathHeader.bodyMustBeKept`.)
        if original.withheldBodySize != nil {
            return (.rejectedToBroker(reason: reason), [])
        }
        let deadLetter = original.deadLetter(exchange: topology.deadLetterExchange, reason: reason, frameMax: frameMax)
        if let problem = deadLetter.properties.encodingProblem(frameMax: frameMax) {
            return (.rejectedToBroker(reason: "\(reason); its dead letter cannot be published: \(problem)"), [])
        }
        return (nil, [deadLetter])
    }

    /// The plan for a delivery whose processing failed transiently: retry it after its level's wait, or dead-letter
    /// it after the last attempt. `jitter` is a uniform draw from `0..<1` (`RetrySchedule.expiration`).
    init(
        original: OriginalMessage, transientFailure error: String, retry schedule: RetrySchedule, jitter: Double,
        topology: Topology, frameMax: Int
    ) {
        self.original = original
        self.stored = nil
        let attempt = original.failedAttempts + 1
        if let size = original.withheldBodySize {
            // Its body was never kept, so it cannot go to the retry queue: it was bad input anyway.
            let reason = "body is \(size) bytes, over the size limit"
            let (brokerFate, deadLetter) = Self.deadLettering(
                original, reason: reason, topology: topology, frameMax: frameMax)
            fate = brokerFate ?? .rejected(reason: reason)
            messages = deadLetter
            return
        }
        // The retry queue's TTL hands the copy to the broker's dead-lettering: no x-death it cannot update.
        var retried = original
        retried.properties.headers = XDeathHeader.movingMalformed(original.properties.headers)
        let level = schedule.level(afterAttempt: attempt)
        let retry = retried.retryCopy(
            queue: RetrySchedule.queue(topology.retryQueue, level: level),
            expiration: schedule.expiration(level: level, fraction: jitter),
            addingHeaders: [
                (WorkerHeaders.retryCount, .int32(Int32(clamping: attempt))),
                (WorkerHeaders.lastError, .string(error)),
            ])
        // A retry copy that would not fit a frame with the broker's `x-death` cannot come back: dead-lettered now.
        let retryFits =
            retry.properties.encodingProblem(
                frameMax: frameMax - OriginalMessage.brokerHeaderAllowance) == nil
        if attempt >= schedule.attempts || !retryFits {
            let reason =
                retryFits
                ? "transient failure, gave up after \(attempt) attempts: \(error)"
                : "transient failure (\(error)); its headers are too large for a retry copy"
            let (brokerFate, deadLetter) = Self.deadLettering(
                original, reason: reason, topology: topology, frameMax: frameMax)
            fate = brokerFate ?? .retriesExhausted(attempts: attempt, error: error)
            messages = deadLetter
        } else {
            fate = .retried(attempt: attempt, error: error)
            messages = [retry]
        }
    }

    /// The plan for a delivery the store refused to hold (`StoreError.Kind.refusedInput`), even stored alone:
    /// retrying would fail the same way, so it is dead-lettered at once, with the store's words.
    init(original: OriginalMessage, storeRefusal error: String, topology: Topology, frameMax: Int) {
        self.init(
            original: original, deadLettering: "the store refused this message: \(error)",
            as: DeliveryFate.storeRefused,
            topology: topology, frameMax: frameMax)
    }

    /// The plan for a delivery one of whose results AMQP cannot encode: no retry would encode it.
    init(original: OriginalMessage, unpublishable error: String, topology: Topology, frameMax: Int) {
        self.init(
            original: original, deadLettering: "a result of this message cannot be published: \(error)",
            as: DeliveryFate.unpublishable, topology: topology, frameMax: frameMax)
    }

    /// The plan for a delivery that failed alone, the same way, too often (`PoisonSuspects`): whatever it is, it
    /// would stop the queue again, so it is dead-lettered with the error instead of being processed.
    init(original: OriginalMessage, poison error: String, failures: Int, topology: Topology, frameMax: Int) {
        self.init(
            original: original, deadLettering: "processing failed \(failures) times in a row on this message: \(error)",
            as: DeliveryFate.poison, topology: topology, frameMax: frameMax)
    }

    /// The plan for a condemned message whose own dead letter failed the same way (the broker closed the channel on
    /// it too): published again, it would fail again, for ever, at the head of its pipeline. It is rejected to the
    /// work queue's dead-letter exchange instead: the broker dead-letters it untouched, with `x-death`.
    init(original: OriginalMessage, poisonEvenAsADeadLetter error: String, failures: Int) {
        self.original = original
        self.stored = nil
        messages = []
        fate = .rejectedToBroker(
            reason: "processing failed \(failures) times in a row on this message, its dead letter too: \(error)")
    }

    /// The plan for a delivery dead-lettered unprocessed, for `reason`: its fate is `fate(reason)`, or
    /// `rejectedToBroker` when only the broker can dead-letter it.
    private init(
        original: OriginalMessage, deadLettering reason: String, as fate: (String) -> DeliveryFate, topology: Topology,
        frameMax: Int
    ) {
        self.original = original
        self.stored = nil
        let (brokerFate, deadLetter) = Self.deadLettering(
            original, reason: reason, topology: topology, frameMax: frameMax)
        self.fate = brokerFate ?? fate(reason)
        messages = deadLetter
    }

    /// Whether the delivery is settled by rejecting it to the broker's dead-lettering instead of acknowledging it.
    var isRejectedToBroker: Bool {
        if case .rejectedToBroker = fate { return true }
        return false
    }

    /// How many of the plan's `reply_to` copies the broker returned (the requester's queue is gone).
    func returnedReplyCopies(in outcomes: ArraySlice<AMQPPublishOutcome>) -> Int {
        // Runs for every delivery of every batch: the messages are looked at only for a return, never copied.
        var returned = 0
        for (offset, outcome) in zip(messages.indices, outcomes) {
            if case .returned = outcome, isReplyCopy(messages[offset]) { returned += 1 }
        }
        return returned
    }

    private func isReplyCopy(_ message: AMQPOutboundMessage) -> Bool {
        message.exchange.isEmpty && message.routingKey == original.properties.replyTo
    }

    /// Nil when the broker took every message the delivery's fate depends on; else why not.
    /// A `reply_to` copy the broker returned is not a failure: the requester has gone, and the primary results
    /// (durable, on the result exchanges) were confirmed. A rejected delivery depends only on its dead letter:
    /// retrying it because its `rejected` result was not taken would dead-letter it again, and CONTRACT.md §8
    /// allows exactly one dead letter per rejected delivery.
    func failure(in outcomes: ArraySlice<AMQPPublishOutcome>) -> String? {
        firstFailure(in: outcomes, deciding: true)?.reason
    }

    /// Its fate depends on results published to the result exchanges (it was processed and published some): what
    /// the results' kill switch watches.
    var dependsOnResults: Bool {
        if case .processed = fate { !messages.isEmpty } else { false }
    }

    /// What this delivery's first publish says about the results' side (`ResultsKillSwitch`); nil when it says
    /// nothing: it published no result it depends on (a rejected delivery depends on its dead letter, a retry on
    /// its copy), or a result could not be encoded (the message's own failure).
    func resultsOutcome(in outcomes: ArraySlice<AMQPPublishOutcome>) -> ResultsKillSwitch.Outcome? {
        guard dependsOnResults else { return nil }
        guard let (message, reason) = firstFailure(in: outcomes, deciding: true) else { return .delivered }
        if outcomes.contains(where: { if case .unencodable = $0 { true } else { false } }) { return nil }
        return .refused(exchange: message.exchange, reason: reason)
    }

    /// Why a message the delivery's fate does not depend on (a rejected delivery's `rejected` result, once its
    /// dead letter was taken) was not taken, for the log; nil when there is none.
    func undeliveredResult(in outcomes: ArraySlice<AMQPPublishOutcome>) -> String? {
        firstFailure(in: outcomes, deciding: false)?.reason
    }

    private func firstFailure(in outcomes: ArraySlice<AMQPPublishOutcome>, deciding: Bool)
        -> (message: AMQPOutboundMessage, reason: String)?
    {
        let decidingCount: Int
        switch fate {
        case .rejected: decidingCount = 1  // the dead letter, published last
        case .rejectedToBroker: decidingCount = 0  // settled by the reject: its `rejected` result is logged if lost
        default: decidingCount = messages.count
        }
        // Runs for every delivery of every batch: offsets into both, no array of pairs.
        let firstDeciding = messages.count - decidingCount
        let considered = deciding ? firstDeciding..<messages.count : 0..<firstDeciding
        for offset in considered where offset < outcomes.count {
            let message = messages[offset]
            switch outcomes[outcomes.startIndex + offset] {
            case .confirmed:
                continue
            case .returned where isReplyCopy(message):
                continue
            case .returned(let replyCode, let replyText):
                let exchange = message.exchange.isEmpty ? "the default exchange" : "exchange '\(message.exchange)'"
                return (
                    message,
                    "returned by the broker (\(replyCode) \(replyText)): no queue bound to \(exchange) "
                        + "for routing key '\(message.routingKey)'"
                )
            case .nacked:
                return (message, "not confirmed: the broker nacked the publish to '\(message.exchange)'")
            case .unencodable(let reason):
                return (message, "not published to '\(message.exchange)': \(reason)")
            }
        }
        return nil
    }

    /// Whether a message the delivery's fate depends on could not be encoded at all: a retry cannot help.
    func isUnpublishable(in outcomes: ArraySlice<AMQPPublishOutcome>) -> Bool {
        outcomes.contains { if case .unencodable = $0 { true } else { false } } && failure(in: outcomes) != nil
    }
}
