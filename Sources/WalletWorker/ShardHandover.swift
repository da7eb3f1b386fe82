import Synchronization

/// How a shard pipeline stops gracefully, so that the standby replica takes the shard over in order.
///
/// A shard queue has a single active consumer. Cancelling it (`basic.cancel`) makes the broker activate a standby
/// at once, while this consumer still holds deliveries it received: the standby would process later messages of a
/// card while earlier ones are still here. Closing the channel instead makes the broker requeue what was not
/// acknowledged, in its original place, in the same step that activates the standby. So on stop the pipeline
/// finishes the batch in hand and then closes its consume channel without cancelling; deliveries it had not
/// started go back to the queue (and are redelivered to the standby, first). A session that fails closes a shard's
/// consume channel the same way before its connections, whose close would cancel the consumer first.
final class ShardHandover: Sendable {
    private struct State {
        var processing = false
        var stopRequested = false
    }

    private let state = Mutex(State())

    /// The stop signal fired. True when no batch is in hand: the caller closes the channel now. Otherwise the
    /// loop closes it after the batch.
    func requestStop() -> Bool {
        state.withLock { state in
            state.stopRequested = true
            return !state.processing
        }
    }

    /// Before a batch: false once a stop was requested (the batch is left to the broker, which requeues it).
    func beginBatch() -> Bool {
        state.withLock { state in
            guard !state.stopRequested else { return false }
            state.processing = true
            return true
        }
    }

    /// After a batch: true when a stop was requested meanwhile, so the loop ends.
    func endBatch() -> Bool {
        state.withLock { state in
            state.processing = false
            return state.stopRequested
        }
    }
}
