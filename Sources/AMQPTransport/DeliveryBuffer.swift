internal import Locking

/// The deliveries of one consumer that arrived and were not taken yet. The connection's I/O thread appends;
/// the consumer takes everything at once. A consumer that was busy with a batch therefore gets the next one whole
/// (up to the prefetch) instead of as many small batches as the I/O thread happened to read: batch size is what
/// makes a store commit and a confirm round trip per batch cheap per message.
final class DeliveryBuffer: Sendable {
    private struct State {
        var deliveries: [AMQPDelivery] = []
        /// Set once: the consumer ended (cancelled by us: success) or failed.
        var end: Result<Void, AMQPError>?
        var waiter: CheckedContinuation<[AMQPDelivery]?, any Error>?
        /// The consuming task was cancelled: the sequence has ended for it.
        var abandoned = false
    }

    private let state = Locked(State())
    /// Runs once when the consuming task is cancelled while it iterates (cancels the consumer on the broker).
    private let onAbandon: @Sendable () -> Void
    /// What the connection does with a delivery of this consumer whose content header it cannot decode.
    let undecodableContent: UndecodableContentHandling

    init(
        undecodableContent: UndecodableContentHandling = .rejectToDeadLetterExchange,
        onAbandon: @escaping @Sendable () -> Void
    ) {
        self.undecodableContent = undecodableContent
        self.onAbandon = onAbandon
    }

    /// Called on the I/O thread with what one pump read for this consumer.
    func append(_ deliveries: [AMQPDelivery]) {
        guard !deliveries.isEmpty else { return }
        let waiter = state.withLock { state -> CheckedContinuation<[AMQPDelivery]?, any Error>? in
            guard let waiter = state.waiter else {
                state.deliveries.append(contentsOf: deliveries)
                return nil
            }
            state.waiter = nil
            return waiter
        }
        waiter?.resume(returning: deliveries)
    }

    /// Ends the sequence after the deliveries already appended: normally, or with `error`.
    func finish(throwing error: AMQPError?) {
        let waiter = state.withLock { state -> CheckedContinuation<[AMQPDelivery]?, any Error>? in
            guard state.end == nil else { return nil }
            state.end = error.map { .failure($0) } ?? .success(())
            defer { state.waiter = nil }
            return state.waiter
        }
        if let error { waiter?.resume(throwing: error) } else { waiter?.resume(returning: nil) }
    }

    /// Everything received since the last call; nil at the end; throws the consumer's failure.
    func take() async throws -> [AMQPDelivery]? {
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { continuation in
                enum Next {
                    case deliver([AMQPDelivery])
                    case end(Result<Void, AMQPError>)
                    case wait
                }
                let next = state.withLock { state -> Next in
                    if !state.deliveries.isEmpty {
                        defer { state.deliveries = [] }
                        return .deliver(state.deliveries)
                    }
                    if let end = state.end { return .end(end) }
                    if state.abandoned { return .end(.success(())) }
                    state.waiter = continuation
                    return .wait
                }
                switch next {
                case .deliver(let deliveries): continuation.resume(returning: deliveries)
                case .end(.success): continuation.resume(returning: nil)
                case .end(.failure(let error)): continuation.resume(throwing: error)
                case .wait: break
                }
            }
        } onCancel: {
            abandon()
        }
    }

    /// The consumer is no longer wanted (its task was cancelled, or nothing references it any more): wake a waiting
    /// `take()` with the end, and cancel on the broker once unless the consumer already ended.
    func abandon() {
        let (waiter, first) = state.withLock { state in
            defer {
                state.waiter = nil
                state.abandoned = true
            }
            return (state.waiter, !state.abandoned && state.end == nil)
        }
        waiter?.resume(returning: nil)
        if first { onAbandon() }
    }
}

/// Held by an `AMQPConsumer` and its iterators, not by the connection: when the last of them goes away without the
/// consumer having ended, the consumer is cancelled on the broker (otherwise it would keep receiving messages
/// nobody takes, up to the prefetch, until the channel closes).
final class ConsumerLifetime: Sendable {
    let deliveries: DeliveryBuffer

    init(deliveries: DeliveryBuffer) {
        self.deliveries = deliveries
    }

    deinit {
        deliveries.abandon()
    }
}
