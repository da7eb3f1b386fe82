import AMQPTransport
import Foundation

/// One message of the dead-letter queue as an operator sees it: who dead-lettered it and why, what it was, how
/// old it is. Pure: read from the delivery, nothing asked of the broker.
public struct DeadLetter: Sendable, Hashable {
    public var messageID: String?
    /// The notification's `sender` (CPS, TNS, MG, …), when the body is a JSON object that names one.
    public var sender: String?
    /// `x-worker-error`; for a message the broker dead-lettered, its `x-death` reason and queue.
    public var reason: String
    /// `worker` (it added `x-worker-error`) or `broker` (delivery limit, a body over the size limit, an expiry).
    public var deadLetteredBy: String
    /// The routing key it was published with (kept by both kinds of dead-lettering).
    public var routingKey: String
    /// When it was published (its AMQP `timestamp`), else when the broker dead-lettered it (`x-death` time).
    public var since: Date?
    public var bodyBytes: Int

    public init(_ delivery: AMQPDelivery) {
        self.init(body: delivery.body, properties: delivery.properties, routingKey: delivery.routingKey)
    }

    public init(body: [UInt8], properties: AMQPMessageProperties, routingKey: String) {
        let headers = properties.headers
        messageID = properties.messageID
        self.routingKey = routingKey
        bodyBytes = body.count
        sender = Self.sender(in: body)
        let firstDeath = Self.firstDeath(headers)
        if let error = headers?[WorkerHeaders.workerError]?.text {
            reason = error
            deadLetteredBy = "worker"
        } else if let firstDeath {
            let why = firstDeath["reason"]?.text ?? "?"
            let queue = firstDeath["queue"]?.text ?? "?"
            reason = "\(why) by the broker in \(queue)" + (why == "rejected" ? Self.brokerRejectionHint : "")
            deadLetteredBy = "broker"
        } else {
            reason = "no reason recorded (no x-worker-error, no x-death): published to the dead-letter exchange by someone else"
            deadLetteredBy = "unknown"
        }
        if let timestamp = properties.timestamp {
            since = Date(timeIntervalSince1970: TimeInterval(timestamp))
        } else if case .timestamp(let seconds)? = firstDeath?["time"] {
            since = Date(timeIntervalSince1970: TimeInterval(seconds))
        }
    }

    /// What makes the broker reject a message to the dead letters here.
    static let brokerRejectionHint =
        " (a quorum queue's delivery limit, or a body over twice --max-body-bytes that the worker did not read)"

    public func age(at now: Date) -> TimeInterval? {
        since.map { max(0, now.timeIntervalSince($0)) }
    }

    /// The first `x-death` entry: the broker's latest dead-lettering.
    static func firstDeath(_ headers: AMQPTable?) -> AMQPTable? {
        guard case .array(let entries)? = headers?[XDeathHeader.name], case .table(let first)? = entries.first else {
            return nil
        }
        return first
    }

    /// The top-level `sender` of a JSON object body; bodies over 1 MiB are not parsed.
    static func sender(in body: [UInt8]) -> String? {
        guard body.count <= 1 << 20, body.first(where: { ![0x20, 0x09, 0x0A, 0x0D].contains($0) }) == UInt8(ascii: "{"),
              let object = try? JSONSerialization.jsonObject(with: Data(body)) as? [String: Any]
        else { return nil }
        return object["sender"] as? String
    }

    /// One JSON object for `--json`.
    public func jsonLine(at now: Date) -> String {
        var object: [String: Any] = [
            "reason": reason, "deadLetteredBy": deadLetteredBy, "routingKey": routingKey, "bodyBytes": bodyBytes,
        ]
        object["messageId"] = messageID
        object["sender"] = sender
        if let since {
            object["since"] = since.formatted(.iso8601)
            object["ageSeconds"] = Int(age(at: now) ?? 0)
        }
        let data = (try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys, .withoutEscapingSlashes])) ?? Data("{}".utf8)
        return String(decoding: data, as: UTF8.self)
    }
}

/// Which dead letters a command applies to; every condition given must hold.
public struct DeadLetterFilter: Sendable, Hashable {
    /// A substring of the reason, case-insensitive.
    public var reason: String?
    public var sender: String?
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
        if let sender, letter.sender != sender { return false }
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

/// The message `dead-letters replay` publishes for a dead letter: to the inbound exchange (or, for a message first
/// sent straight to the work queue, the default exchange) with its original routing key (`OriginalDestination`:
/// kept through every retry level), body and properties, without the headers the worker and the broker added on its way to the dead
/// letters (`x-retry-count`, `x-worker-*`, `x-death` and `x-first-death-*`/`x-last-death-*`, and the
/// `x-original-x-death` and `x-original-expiration` the worker moved aside, `x-original-exchange` and
/// `x-original-routing-key`), so it starts afresh: all its attempts,
/// no stale error. `x-original-user-id` stays (RabbitMQ refuses a `user_id` that is not the publisher's).
public enum DeadLetterReplay {
    public static func message(for delivery: AMQPDelivery, inboundExchange: String) -> AMQPOutboundMessage {
        message(
            body: delivery.body, properties: delivery.properties, routingKey: delivery.routingKey,
            inboundExchange: inboundExchange)
    }

    static func message(
        body: [UInt8], properties original: AMQPMessageProperties, routingKey: String, inboundExchange: String
    ) -> AMQPOutboundMessage {
        var properties = original
        if let headers = properties.headers {
            let kept = headers.entries.filter { !isAddedOnTheWay($0.key) }
            properties.headers = kept.isEmpty ? nil : AMQPTable(kept)
        }
        let destination = OriginalDestination.replay(
            deadLetterRoutingKey: routingKey, headers: original.headers, inboundExchange: inboundExchange)
        return AMQPOutboundMessage(
            exchange: destination.exchange, routingKey: destination.routingKey, body: body, properties: properties,
            mandatory: true)
    }

    static func isAddedOnTheWay(_ key: String) -> Bool {
        key == WorkerHeaders.retryCount || key.hasPrefix("x-worker-") || key == XDeathHeader.name
            || key.hasPrefix("x-first-death-") || key.hasPrefix("x-last-death-")
            || key == XDeathHeader.keptAs || key == WorkerHeaders.originalExpiration
            || key == OriginalDestination.exchangeHeader || key == OriginalDestination.routingKeyHeader
    }
}
