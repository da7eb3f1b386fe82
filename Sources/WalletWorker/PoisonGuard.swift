import AMQPTransport
import Synchronization

/// The last line of defence against a message that stops the pipeline in a way nobody foresaw: one that makes
/// the broker close a connection or channel, or the transport fail, every time it is processed.
///
/// When a session fails with such an error (`signature(of:)`), every delivery in flight becomes a suspect. A
/// suspect is processed alone, with nothing else in flight, so a failure while it is in flight is its own: after
/// `failureLimit` such failures in a row with the same signature it is dead-lettered unprocessed, with the error
/// (`DeliveryPlan(original:poison:...)`). A suspect that goes through is forgotten. Counted per message (its id,
/// body and routing key, not its delivery tag) in this process, across reconnects; a crash is not counted here
/// (a quorum queue's delivery limit covers that). Connection losses, timeouts and the like are not the message's
/// fault and count for nothing.
final class PoisonGuard: Sendable {
    static let failureLimit = 3
    /// Messages remembered at most; the least recently seen are forgotten first.
    static let capacity = 10_000

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

    private struct State {
        var records: [Key: Record] = [:]
        var clock: UInt64 = 0
    }

    private let state = Mutex(State())

    init() {}

    var isEmpty: Bool { state.withLock { $0.records.isEmpty } }

    static func key(_ delivery: AMQPDelivery) -> Key {
        key(routingKey: delivery.routingKey,
            messageID: delivery.properties.undecodedStrings[.messageID] ?? delivery.properties.messageID.map { Array($0.utf8) },
            correlationID: delivery.properties.correlationID, body: delivery.body,
            withheldBodySize: delivery.withheldBodySize)
    }

    /// A message's identity across redeliveries: not its delivery tag, which changes.
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

    /// The batch cut so that every suspect is a segment of its own, in order; the whole batch when there is none.
    func segments(_ deliveries: [AMQPDelivery]) -> [(deliveries: [AMQPDelivery], isSuspect: Bool)] {
        // The common case costs one lock and no hashing.
        guard !isEmpty else { return [(deliveries, false)] }
        return segments(keys: deliveries.map(Self.key)).map { (Array(deliveries[$0.range]), $0.isSuspect) }
    }

    func segments(keys: [Key]) -> [(range: Range<Int>, isSuspect: Bool)] {
        let suspects = state.withLock { state in keys.map { state.records[$0] != nil } }
        var segments: [(range: Range<Int>, isSuspect: Bool)] = []
        var start = 0
        for (index, isSuspect) in suspects.enumerated() where isSuspect {
            if start < index { segments.append((start..<index, false)) }
            segments.append((index..<index + 1, true))
            start = index + 1
        }
        if start < keys.count { segments.append((start..<keys.count, false)) }
        return segments
    }

    /// The record of a delivery that has failed `failureLimit` times alone: it must not be processed again.
    func condemned(_ delivery: AMQPDelivery) -> Record? {
        guard !isEmpty else { return nil }
        return condemned(key: Self.key(delivery))
    }

    func condemned(key: Key) -> Record? {
        state.withLock { state in
            state.records[key].flatMap { $0.failures >= Self.failureLimit ? $0 : nil }
        }
    }

    /// A session failed with `error` while these batches were in flight. A delivery that was alone in flight gets a
    /// failure counted against it; when several were, they all become suspects. Errors that are not a message's
    /// fault count for nothing.
    func recordFailure(inFlight batches: [[AMQPDelivery]], error: any Error) {
        guard let signature = Self.signature(of: error), !batches.isEmpty else { return }
        recordFailure(inFlight: batches.map { $0.map(Self.key) }, signature: signature, error: "\(error)")
    }

    func recordFailure(inFlight batches: [[Key]], signature: String, error: String) {
        let keys = batches.flatMap { $0 }
        let alone = keys.count == 1
        state.withLock { state in
            for key in keys {
                state.clock += 1
                var record = state.records[key] ?? Record()
                if alone {
                    record.failures = record.signature == signature ? record.failures + 1 : 1
                    record.signature = signature
                    record.error = error
                }
                record.touched = state.clock
                state.records[key] = record
            }
            Self.trim(&state)
        }
    }

    /// These deliveries were settled (acknowledged with their results, or dead-lettered): no longer suspects.
    func recordSettled(_ deliveries: [AMQPDelivery]) {
        guard !isEmpty else { return }
        recordSettled(keys: deliveries.map(Self.key))
    }

    func recordSettled(keys: [Key]) {
        state.withLock { state in
            for key in keys { state.records[key] = nil }
        }
    }

    /// What identifies "failing the same way", or nil for an error that is not a message's fault.
    static func signature(of error: any Error) -> String? {
        switch error {
        case is CancellationError, is TopologyError, is BatchProcessor.FatalStoreError:
            return nil
        case let error as AMQPError:
            switch error.code {
            case .protocolError, .invalidArgument:
                return "\(error.code)"
            case .connectionClosedByBroker, .channelClosedByBroker:
                // 5xx: the broker choked on what was sent (541 INTERNAL_ERROR, 505 UNEXPECTED_FRAME, ...); 406:
                // it refused a property. Not 320 (the broker shutting down), 404 (a missing exchange: every
                // message would fail alike), 403 (permissions).
                guard let code = error.replyCode, code == 406 || (500..<600).contains(code) else { return nil }
                return "\(error.code) \(code)"
            default:
                return nil
            }
        default:
            return String(reflecting: type(of: error))
        }
    }

    private static func trim(_ state: inout State) {
        guard state.records.count > capacity else { return }
        let oldest = state.records.sorted { $0.value.touched < $1.value.touched }.prefix(state.records.count - capacity / 2)
        for (key, _) in oldest { state.records[key] = nil }
    }
}
