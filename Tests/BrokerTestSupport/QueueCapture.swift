import AMQPTransport
import Locking
import TestSupport

// The one queue capture of the integration tests: consume a queue in the background and keep what arrives, or drain
// what is ready in it.

/// A message as a consumer received it: where it was published, all properties and headers, the body bytes, and
/// when it arrived.
public struct CapturedMessage: Sendable, Hashable {
    public var queue: String
    public var exchange: String
    public var routingKey: String
    public var properties: AMQPMessageProperties
    public var body: [UInt8]
    public var redelivered: Bool

    public init(queue: String, _ delivery: AMQPDelivery) {
        self.queue = queue
        exchange = delivery.exchange
        routingKey = delivery.routingKey
        properties = delivery.properties
        body = delivery.body
        redelivered = delivery.redelivered
    }

    public var messageID: String? { properties.messageID }
    public var headers: AMQPTable? { properties.headers }
    public var text: String { String(decoding: body, as: UTF8.self) }

    public func stringHeader(_ key: String) -> String? {
        switch properties.headers?[key] {
        case .string(let value)?: value
        case .bytes(let bytes)?: String(decoding: bytes, as: UTF8.self)
        default: nil
        }
    }

    /// One line for failure messages.
    public var summary: String {
        let body = text.count > 300 ? String(text.prefix(300)) + "…" : text
        return "[\(exchange.isEmpty ? "(default)" : exchange) \(routingKey) id=\(properties.messageID ?? "nil") "
            + "type=\(properties.type ?? "nil")] \(body)"
    }
}

/// A capture that keeps every message whole.
public typealias MessageCapture = QueueCapture<CapturedMessage>

/// Consumes one queue on a channel of its own in the background and keeps a record of each message (the message
/// itself, or what `record` makes of it: a long run keeps small records), in arrival order.
public final class QueueCapture<Record: Sendable>: Sendable {
    public let queue: String
    /// The capture's own channel: a direct reply-to requester publishes its requests on it.
    public let channel: AMQPChannel
    private let records = Locked<[Record]>([])
    private let failureText = Locked<String?>(nil)
    private let task = Locked<Task<Void, Never>?>(nil)
    private let arrivals = ConditionWaiters<Progress>()

    private init(queue: String, channel: AMQPChannel) {
        self.queue = queue
        self.channel = channel
    }

    /// Starts consuming. With `.manual` the capture acknowledges what it keeps; with `.automatic` (needed for
    /// `amq.rabbitmq.reply-to`) the broker does.
    public static func start(
        queue: String, on connection: AMQPConnection, acknowledgement: AMQPConsumer.Acknowledgement = .manual,
        record: @escaping @Sendable (AMQPDelivery) -> Record
    ) async throws -> QueueCapture {
        let channel = try await connection.openChannel()
        try await channel.setPrefetch(count: 2_000)
        let consumer = try await channel.consume(queue: queue, acknowledgement: acknowledgement)
        let capture = QueueCapture(queue: queue, channel: channel)
        let task = Task {
            do {
                for try await batch in consumer {
                    guard let last = batch.last else { continue }
                    let kept = batch.map(record)
                    capture.records.withLock { $0.append(contentsOf: kept) }
                    capture.arrivals.changed(capture.progress)
                    if acknowledgement == .manual { try await channel.ack(last, multiple: true) }
                }
            } catch {
                capture.failureText.withLock { $0 = "the consumer of '\(queue)' failed: \(error)" }
                capture.arrivals.changed(capture.progress)
            }
        }
        capture.task.withLock { $0 = task }
        return capture
    }

    public var messages: [Record] { records.withLock { $0 } }
    public var count: Int { records.withLock { $0.count } }
    public var failure: String? { failureText.withLock { $0 } }
    public func record(at index: Int) -> Record { records.withLock { $0[index] } }

    /// The first record at or after `start` that matches, and how many records there are now.
    public func firstIndex(from start: Int, where matches: (Record) -> Bool) -> (Int?, Int) {
        records.withLock { records in
            guard start < records.count else { return (nil, records.count) }
            return (records[start...].firstIndex(where: matches), records.count)
        }
    }

    /// Waits until at least `count` records arrived and returns them: an event, with no deadline of its own (the
    /// test's time limit bounds it). Throws at once when the consumer failed; cancelled (the time limit), throws
    /// naming `what` and listing what arrived.
    @discardableResult
    public func waitFor(_ count: Int, _ what: @autoclosure () -> String = "") async throws -> [Record] {
        await arrivals.wait(until: { $0.count >= count || $0.failed }, current: { progress })
        if let failure { throw BrokerTestError(failure) }
        let snapshot = messages
        guard snapshot.count < count else { return snapshot }
        let what = what()
        throw BrokerTestError(
            "cancelled (the test's time limit) waiting for \(count) messages on '\(queue)'"
                + "\(what.isEmpty ? "" : " (\(what))"), got \(snapshot.count):\n"
                + snapshot.suffix(10).map { "  " + Self.summary($0) }.joined(separator: "\n"))
    }

    /// Waits until more than `count` records arrived (true), or `deadline` passed (false): an event, with a bound
    /// for a test that measures how soon something arrives. Throws at once when the consumer failed.
    public func waitForMoreThan(_ count: Int, until deadline: ContinuousClock.Instant) async throws -> Bool {
        let arrived = await withTaskGroup(of: Bool.self) { group in
            group.addTask { [arrivals] in
                await arrivals.wait(until: { $0.count > count || $0.failed }, current: { self.progress })
                return !Task.isCancelled
            }
            group.addTask {
                try? await Task.sleep(until: deadline, clock: .continuous)
                return false
            }
            let first = await group.next()!
            group.cancelAll()
            return first
        }
        if let failure { throw BrokerTestError(failure) }
        return arrived || self.count > count
    }

    /// Every record captured so far, what the queue still held when this was called included, and nothing enqueued
    /// after: publishes a marker straight to the queue (the default exchange, `messageID` `capture-marker.<random>`)
    /// and waits for it. A queue gives its messages to its one consumer in order, so once the marker is in,
    /// everything enqueued before it is too: "nothing more came" is an event, not a window of guessed length.
    /// `messageID` reads a record's message id. What is returned leaves out every marker; `messages` keeps them, in
    /// the order they arrived.
    public func recordsBeforeAMarker(messageID: (Record) -> String?) async throws -> [Record] {
        let marker = Self.markerPrefix + String(UInt64.random(in: 0...UInt64.max))
        try await channel.publishUnconfirmed(
            AMQPOutboundMessage(
                exchange: "", routingKey: queue, body: [], properties: AMQPMessageProperties(messageID: marker)))
        return try await recordsBefore(marker, messageID: messageID)
    }

    /// As `recordsBeforeAMarker`, for a dead-letter queue: the marker comes the way the broker's own dead letters
    /// do, behind every dead letter `source` made before it. Published to `source` (a classic queue whose
    /// dead-letter exchange leads here) with `expiration` 0 while nothing consumes it, it expires at once, and
    /// `source`'s queue process dead-letters it in turn, after the rejects it was sent earlier: a consumer that
    /// closed its connection before this call has every reject of its own in that turn. The worker's own dead letters
    /// (published with confirms) are here already.
    public func recordsBeforeADeadLetteredMarker(from source: String, messageID: (Record) -> String?)
        async throws -> [Record]
    {
        let marker = Self.markerPrefix + String(UInt64.random(in: 0...UInt64.max))
        try await channel.publishUnconfirmed(
            AMQPOutboundMessage(
                exchange: "", routingKey: source, body: [],
                properties: AMQPMessageProperties(expiration: "0", messageID: marker)))
        return try await recordsBefore(marker, messageID: messageID)
    }

    private func recordsBefore(_ marker: String, messageID: (Record) -> String?) async throws -> [Record] {
        var searched = 0
        while true {
            try await waitFor(searched + 1, "the capture's marker, behind what came before it")
            let (found, count) = firstIndex(from: searched) { messageID($0) == marker }
            if let found {
                return messages[..<found].filter { !(messageID($0)?.hasPrefix(Self.markerPrefix) ?? false) }
            }
            searched = count
        }
    }

    private static var markerPrefix: String { "capture-marker." }

    /// What `waitFor` waits on: how many records arrived, and whether the consumer failed.
    private struct Progress: Sendable {
        var count: Int
        var failed: Bool
    }

    private var progress: Progress { Progress(count: count, failed: failure != nil) }

    private static func summary(_ record: Record) -> String {
        (record as? CapturedMessage)?.summary ?? "\(record)"
    }

    public func stop() async {
        let task = task.withLock { $0 }
        task?.cancel()
        _ = await task?.value
        try? await channel.close()
    }
}

extension QueueCapture where Record == CapturedMessage {
    public static func start(
        queue: String, on connection: AMQPConnection, acknowledgement: AMQPConsumer.Acknowledgement = .manual
    ) async throws -> MessageCapture {
        try await start(queue: queue, on: connection, acknowledgement: acknowledgement) {
            CapturedMessage(queue: queue, $0)
        }
    }

    /// Every message captured so far and still in the queue when this was called (`recordsBeforeAMarker`).
    public func messagesBeforeAMarker() async throws -> [CapturedMessage] {
        try await recordsBeforeAMarker(messageID: \.messageID)
    }

    /// Consumes (and acknowledges) every message ready in `queue` until it has been empty for `quiet`; returns them
    /// in order.
    public static func drain(
        _ queue: String, on connection: AMQPConnection, quiet: Duration = .milliseconds(500),
        within limit: Duration = .seconds(60)
    ) async throws -> [CapturedMessage] {
        let capture = try await start(queue: queue, on: connection)
        let status = try await connection.openChannel()
        var seen = -1
        var quietSince = ContinuousClock.now
        do {
            try await eventually("draining '\(queue)' (\(capture.count) messages so far)", within: limit) {
                if let failure = capture.failure { throw BrokerTestError(failure) }
                let count = capture.count
                if count != seen {
                    seen = count
                    quietSince = .now
                    return false
                }
                guard ContinuousClock.now - quietSince >= quiet else { return false }
                return try await status.queueStatus(queue).messageCount == 0
            }
        } catch {
            await capture.stop()
            try? await status.close()
            throw error
        }
        await capture.stop()
        try? await status.close()
        return capture.messages
    }
}
