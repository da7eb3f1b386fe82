import Synchronization
import Tracing

/// The spans of a pipeline's batches between their store-and-publish and their acknowledgement.
///
/// When a session fails, batches already published but not yet acknowledged are dropped with the session (the
/// broker redelivers them): their spans would never end, and swift-otel keeps a span until it ends. The pipeline
/// ends them here, with the session's error, once the session's tasks are over.
final class OpenMessageSpans: Sendable {
    private struct State {
        var nextToken = 0
        var batches: [Int: [any Span]] = [:]
    }

    private let state = Mutex(State())

    /// Registers a batch's open spans; the token removes them.
    func insert(_ spans: [any Span]) -> Int {
        state.withLock { state in
            let token = state.nextToken
            state.nextToken += 1
            state.batches[token] = spans
            return token
        }
    }

    /// The batch reached its acknowledgement, which ends its spans.
    func remove(_ token: Int) {
        _ = state.withLock { $0.batches.removeValue(forKey: token) }
    }

    /// Ends the spans of every batch the session dropped.
    func failAll(_ error: any Error) {
        let dropped = state.withLock { state in
            defer { state.batches.removeAll() }
            return state.batches.values.flatMap { $0 }
        }
        MessageTracing.fail(dropped, error)
    }
}
