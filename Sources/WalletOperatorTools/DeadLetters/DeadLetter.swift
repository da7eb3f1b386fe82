import AMQPTransport
import Foundation
import WalletMessages
import WalletRouting

/// A message of the dead-letter queue as the tools read it: what came with the delivery, nothing asked of the
/// broker. The body is empty when the tool did not read it (`withheldBodySize`: over its read limit).
public struct DeadLetterMessage: Sendable, Hashable {
    public var body: [UInt8]
    public var properties: AMQPMessageProperties
    public var routingKey: String
    public var withheldBodySize: UInt64?

    public init(body: [UInt8], properties: AMQPMessageProperties, routingKey: String, withheldBodySize: UInt64? = nil) {
        self.body = body
        self.properties = properties
        self.routingKey = routingKey
        self.withheldBodySize = withheldBodySize
    }

    public init(_ delivery: AMQPDelivery) {
        self.init(
            body: delivery.body, properties: delivery.properties, routingKey: delivery.routingKey,
            withheldBodySize: delivery.withheldBodySize)
    }
}

/// One message of the dead-letter queue as an operator sees it: who dead-lettered it and why, what it was, how
/// old it is, and what of it is missing. Pure: read from the message.
public struct DeadLetter: Sendable, Hashable {
    public var messageID: String?
    /// The notification's `sender` (CPS, TNS, MG, …), when the body is a JSON object that names one.
    public var sender: String?
    /// The reason as it was recorded: `x-worker-error`, or for a message the broker dead-lettered its `x-death`
    /// reason and queue (`rejected by the broker in wallet.notifications.work`). `--reason` matches this text.
    public var reason: String
    /// What usually causes a broker's reason (shown beside it, never matched by `--reason`); nil for the
    /// worker's own reasons, which say it themselves.
    public var hint: String?
    /// `worker` (it added `x-worker-error`) or `broker` (delivery limit, a body over the size limit, an expiry).
    public var deadLetteredBy: String
    /// The routing key it was published with (kept by both kinds of dead-lettering).
    public var routingKey: String
    /// When it was published (its AMQP `timestamp`), else when the broker dead-lettered it (`x-death` time).
    public var since: Date?
    /// Its publisher set the AMQP `timestamp` (kombu and Celery do not by default: such a message has no
    /// processing lag in the worker's metrics, and its age here is the broker's dead-lettering time, if any).
    public var hasTimestamp: Bool
    /// The body's size (the size the broker announced when the tool did not read it).
    public var bodyBytes: Int
    /// False when the tool did not read the body (over its limit): it can be listed, kept or purged, not shown
    /// or replayed.
    public var bodyRead: Bool
    /// What the worker left out of this dead letter to keep it within a frame (the body it never read, headers
    /// it dropped): replaying it would send a different message. Empty for a whole one.
    public var missing: [String]

    public init(_ delivery: AMQPDelivery, deadLetterQueue: String) {
        self.init(DeadLetterMessage(delivery), deadLetterQueue: deadLetterQueue)
    }

    /// - Parameter deadLetterQueue: its own `x-death` entries record the tool's looks (a message goes back to the
    ///   queue's tail through its loop), not why the message is there: they are skipped.
    public init(_ message: DeadLetterMessage, deadLetterQueue: String) {
        let headers = message.properties.headers
        messageID = message.properties.messageID
        routingKey = message.routingKey
        bodyRead = message.withheldBodySize == nil
        bodyBytes = message.withheldBodySize.map { Int(clamping: $0) } ?? message.body.count
        sender = bodyRead ? Self.sender(in: message.body) : nil
        let death = Self.latestDeath(headers, skipping: deadLetterQueue)
        hint = nil
        if let error = headers?[WorkerHeaders.workerError]?.textValue {
            reason = error
            deadLetteredBy = "worker"
        } else if let death {
            let why = death["reason"]?.textValue ?? "?"
            let queue = death["queue"]?.textValue ?? "?"
            reason = "\(why) by the broker in \(queue)"
            hint = Self.brokerHints[why]
            deadLetteredBy = "broker"
        } else {
            reason =
                "no reason recorded (no x-worker-error, no x-death): published to the dead-letter exchange by someone else"
            deadLetteredBy = "unknown"
        }
        hasTimestamp = message.properties.timestamp != nil
        if let timestamp = message.properties.timestamp {
            since = Date(timeIntervalSince1970: TimeInterval(timestamp))
        } else if case .timestamp(let seconds)? = death?["time"] {
            since = Date(timeIntervalSince1970: TimeInterval(seconds))
        }
        missing = Self.missing(headers)
    }

    /// What makes the broker dead-letter a message here, by its `x-death` reason.
    static let brokerHints: [String: String] = [
        "rejected":
            "the worker rejected it to the broker: a body over twice --max-body-bytes that it did not read, or a "
            + "content header it could not decode",
        "delivery_limit":
            "a quorum queue's delivery limit: the message was delivered that often without being settled (crashes, "
            + "or a pause's give-backs over a long outage); replaying it is safe: a recorded message is replayed",
        "expired": "its TTL ran out in the queue",
        "maxlen": "the queue was over its length limit",
    ]

    /// The truncations the worker's headers record (`x-worker-omitted-body-bytes`, `x-worker-dropped-headers`).
    static func missing(_ headers: AMQPTable?) -> [String] {
        var missing: [String] = []
        if let omitted = headers?[WorkerHeaders.omittedBodyBytes] {
            missing.append("the body (\(DeadLetterDetail.text(omitted)) bytes, which the worker did not read)")
        }
        if let dropped = headers?[WorkerHeaders.droppedHeaders] {
            missing.append("headers dropped to fit a frame: \(DeadLetterDetail.text(dropped))")
        }
        return missing
    }

    public func age(at now: Date) -> TimeInterval? {
        since.map { max(0, now.timeIntervalSince($0)) }
    }

    /// The broker's latest dead-lettering that is not a look of the tool (an entry for `deadLetterQueue` itself).
    /// RabbitMQ keeps `x-death` newest first.
    static func latestDeath(_ headers: AMQPTable?, skipping deadLetterQueue: String) -> AMQPTable? {
        guard case .array(let entries)? = headers?[XDeathHeader.name] else { return nil }
        for case .table(let entry) in entries where entry["queue"]?.textValue != deadLetterQueue {
            return entry
        }
        return nil
    }

    /// The top-level `sender` of a JSON object body (the first, as the routing core reads it); bodies over 1 MiB
    /// are not parsed. The routing core's parser: through `JSONSerialization` this was a fifth of a look's CPU.
    static func sender(in body: [UInt8]) -> String? {
        guard body.count <= 1 << 20,
            body.first(where: { ![0x20, 0x09, 0x0A, 0x0D].contains($0) }) == UInt8(ascii: "{"),
            let object = (try? JSONParser.parse(body))?.objectValue
        else { return nil }
        return object["sender"]?.stringValue
    }

    /// One JSON object for `--json`, its keys in alphabetical order (as `jq -S` prints them), absent ones left out.
    /// Written with the routing core's `JSONWriter`: through `JSONSerialization` (its sorted keys compare by locale)
    /// this line was 57% of a 20,000-message `list --json`'s CPU, measured on the debug build the tests run.
    public func jsonLine(at now: Date) -> String {
        var writer = JSONWriter(reservingCapacity: 256 + reason.utf8.count + (hint?.utf8.count ?? 0))
        writer.beginObject()
        if let age = age(at: now) {
            writer.key("ageSeconds")
            writer.int(Int(age))
        }
        writer.key("bodyBytes")
        writer.int(bodyBytes)
        if !bodyRead {
            writer.key("bodyRead")
            writer.bool(false)
        }
        writer.key("deadLetteredBy")
        writer.string(deadLetteredBy)
        if let hint {
            writer.key("hint")
            writer.string(hint)
        }
        if let messageID {
            writer.key("messageId")
            writer.string(messageID)
        }
        if !missing.isEmpty {
            writer.key("missing")
            writer.beginArray()
            for name in missing { writer.string(name) }
            writer.endArray()
        }
        writer.key("reason")
        writer.string(reason)
        writer.key("routingKey")
        writer.string(routingKey)
        if let sender {
            writer.key("sender")
            writer.string(sender)
        }
        if let since {
            writer.key("since")
            writer.string(since.formatted(.iso8601))
        }
        writer.endObject()
        return String(decoding: writer.takeBytes(), as: UTF8.self)
    }
}

/// Which dead letters a command applies to; every condition given must hold.
public struct DeadLetterFilter: Sendable, Hashable {
    /// A substring of the recorded reason, case-insensitive (never of the hint shown beside a broker's reason).
    public var reason: String?
    /// The sender code, case-insensitive (`mg` finds `MG`, as `--reason` ignores case).
    public var sender: String?
    /// The message id, exactly: ids are case-sensitive.
    public var messageID: String?
    /// Only those at least this old.
    public var olderThan: Duration?
    /// Only those at most this old.
    public var newerThan: Duration?

    public init() {}

    public var isEmpty: Bool {
        reason == nil && sender == nil && messageID == nil && olderThan == nil && newerThan == nil
    }

    public func matches(_ letter: DeadLetter, at now: Date) -> Bool {
        if let reason, !letter.reason.localizedCaseInsensitiveContains(reason) { return false }
        if let sender, letter.sender?.caseInsensitiveCompare(sender) != .orderedSame { return false }
        if let messageID, letter.messageID != messageID { return false }
        if olderThan != nil || newerThan != nil {
            // Without a time it matches no age condition: replaying or purging it by age would be a guess.
            guard let age = letter.age(at: now) else { return false }
            if let olderThan, age < olderThan.secondsValue { return false }
            if let newerThan, age > newerThan.secondsValue { return false }
        }
        return true
    }
}

/// The message `dead-letters replay` publishes for a dead letter: to the inbound exchange with its original
/// routing key, body and properties, without the headers the worker and the broker added on its way to the dead
/// letters (`x-retry-count`, `x-worker-*`, `x-death` and `x-first-death-*`/`x-last-death-*`, `x-delivery-count`, and the
/// `x-original-x-death`, `x-original-expiration`, `x-original-exchange` and `x-original-routing-key` the worker moved
/// aside), so it starts afresh: all its attempts,
/// no stale error. A `user_id` moves to `x-original-user-id`, as on the worker's own copies (RabbitMQ refuses a
/// publish whose `user_id` is not the publisher's: broker-made dead letters keep the backend's).
public enum DeadLetterReplay {
    /// Why a dead letter cannot be replayed as it is.
    public struct Refusal: Error, Sendable, Hashable, CustomStringConvertible {
        public var description: String
    }

    /// The replay, or why not: a truncated dead letter (`DeadLetter.missing`) unless `force`, and one whose body
    /// the tool did not read, always.
    /// `ownQueues` are the queues the workers consume (`Topology.consumedQueueNames`): the only ones a replay may
    /// publish to through the default exchange.
    public static func message(
        for message: DeadLetterMessage, inboundExchange: String, ownQueues: Set<String>, force: Bool = false
    ) -> Result<AMQPOutboundMessage, Refusal> {
        if let size = message.withheldBodySize {
            return .failure(
                Refusal(
                    description:
                        "its body (\(size) bytes) is over the tool's read limit (twice --max-body-bytes): not replayed; "
                        + "give the tool the --max-body-bytes the workers run with"))
        }
        let missing = DeadLetter.missing(message.properties.headers)
        if !missing.isEmpty && !force {
            return .failure(
                Refusal(
                    description:
                        "truncated by the worker, a replay would be another message: it lacks "
                        + missing.joined(separator: "; ") + " (--force replays it as it is)"))
        }
        var properties = message.properties
        // Where the backend sent it, kept through every retry level (`OriginalDestination`).
        guard
            let destination = OriginalDestination.replay(
                deadLetterRoutingKey: message.routingKey, headers: properties.headers,
                inboundExchange: inboundExchange, ownQueues: ownQueues)
        else {
            let named = OriginalDestination.recorded(in: properties.headers)?.routingKey ?? ""
            return .failure(
                Refusal(
                    description:
                        "its x-original-* headers send it through the default exchange to '\(named)', which is not a "
                        + "queue the workers consume: a publisher can write those headers, so it is not replayed "
                        + "there (look at it with `show`, purge it, or republish it by hand)"))
        }
        var kept = (properties.headers?.entries ?? []).filter { !isAddedOnTheWay($0.key) }
        if let userID = properties.userID {
            let exact = properties.undecodedStrings[.userID].map(AMQPFieldValue.undecodedString) ?? .string(userID)
            kept.removeAll { $0.key == WorkerHeaders.originalUserID }
            kept.append((key: WorkerHeaders.originalUserID, value: exact))
            properties.userID = nil
            properties.undecodedStrings[.userID] = nil
        }
        properties.headers = kept.isEmpty ? nil : AMQPTable(kept)
        return .success(
            AMQPOutboundMessage(
                exchange: destination.exchange, routingKey: destination.routingKey, body: message.body,
                properties: properties, mandatory: true))
    }

    static func isAddedOnTheWay(_ key: String) -> Bool {
        // x-delivery-count: a quorum queue's count of this delivery's returns, not the message's.
        key == WorkerHeaders.retryCount || key == "x-delivery-count" || key.hasPrefix("x-worker-")
            || key == XDeathHeader.name
            || key.hasPrefix("x-first-death-") || key.hasPrefix("x-last-death-")
            || key == XDeathHeader.keptAs || key == WorkerHeaders.originalExpiration
            || key == OriginalDestination.exchangeHeader || key == OriginalDestination.routingKeyHeader
    }
}
