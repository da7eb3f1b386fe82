import Synchronization

/// The spans that ended and wait for export: a bounded queue under a lock, appended to by whichever thread ends a
/// span, emptied at once by the exporter. A span that finds it full is dropped and counted; the exporter is woken as soon
/// as a batch is waiting, else it comes at its schedule.
///
/// The bound counts the spans the exporter has taken and not yet sent too (`sent(_:)` gives them back), so a
/// collector that stalls holds at most `capacity` spans in memory, not a queue's worth taken plus a queue's worth
/// waiting.
final class FinishedSpanQueue: Sendable {
    let capacity: Int
    let batchSize: Int
    /// Rings once a batch is waiting (at most one ring is held).
    let wakeups: AsyncStream<Void>
    private let doorbell: AsyncStream<Void>.Continuation
    private let state = Mutex<(spans: [FinishedSpan], taken: Int)>(([], 0))
    private let dropped: @Sendable (Int) -> Void

    /// - Parameter dropped: told of each span dropped because the queue was full.
    init(capacity: Int, batchSize: Int, dropped: @escaping @Sendable (Int) -> Void) {
        self.capacity = max(1, capacity)
        self.batchSize = max(1, min(batchSize, capacity))
        (wakeups, doorbell) = AsyncStream.makeStream(of: Void.self, bufferingPolicy: .bufferingNewest(1))
        self.dropped = dropped
    }

    func append(_ span: FinishedSpan) {
        let capacity = capacity
        let batchSize = batchSize
        let (accepted, count) = state.withLock { state -> (Bool, Int) in
            guard state.spans.count + state.taken < capacity else { return (false, state.spans.count) }
            state.spans.append(span)
            return (true, state.spans.count)
        }
        if !accepted {
            dropped(1)
        } else if count == batchSize {
            doorbell.yield()
        }
    }

    /// Every span waiting, oldest first, taken out of the queue at once: the lock the message path takes to end a
    /// span is held for a swap, never for a copy (the exporter splits them into batches). They count against the
    /// capacity until `sent(_:)`.
    func takeAll() -> [FinishedSpan] {
        state.withLock { state in
            defer { state.spans = [] }
            state.taken += state.spans.count
            return state.spans
        }
    }

    /// `count` of the taken spans are done with (exported, or dropped and counted): room for as many new ones.
    func sent(_ count: Int) {
        state.withLock { $0.taken = max(0, $0.taken - count) }
    }

    /// The spans waiting (not taken).
    var count: Int { state.withLock { $0.spans.count } }

    /// Wakes the exporter (its schedule).
    func ring() { doorbell.yield() }

    /// Ends `wakeups` (the exporter then flushes what is left and stops).
    func close() { doorbell.finish() }
}
