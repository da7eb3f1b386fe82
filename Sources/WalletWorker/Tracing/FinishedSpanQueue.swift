import Synchronization

/// The spans that ended and wait for export: a bounded queue under a lock, appended to by whichever thread ends a
/// span, emptied at once by the exporter. A span that finds it full is dropped and counted; the exporter is woken as soon
/// as a batch is waiting, else it comes at its schedule.
final class FinishedSpanQueue: Sendable {
    let capacity: Int
    let batchSize: Int
    /// Rings once a batch is waiting (at most one ring is held).
    let wakeups: AsyncStream<Void>
    private let doorbell: AsyncStream<Void>.Continuation
    private let spans = Mutex<[FinishedSpan]>([])
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
        let (accepted, count) = spans.withLock { spans -> (Bool, Int) in
            guard spans.count < capacity else { return (false, spans.count) }
            spans.append(span)
            return (true, spans.count)
        }
        if !accepted {
            dropped(1)
        } else if count == batchSize {
            doorbell.yield()
        }
    }

    /// Every span waiting, oldest first, taken out of the queue at once: the lock the message path takes to end a
    /// span is held for a swap, never for a copy (the exporter splits them into batches).
    func takeAll() -> [FinishedSpan] {
        spans.withLock { spans in
            defer { spans = [] }
            return spans
        }
    }

    var count: Int { spans.withLock { $0.count } }

    /// Wakes the exporter (its schedule).
    func ring() { doorbell.yield() }

    /// Ends `wakeups` (the exporter then flushes what is left and stops).
    func close() { doorbell.finish() }
}
