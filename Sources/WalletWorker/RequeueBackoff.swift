import Synchronization

/// The delay before requeueing deliveries whose retry or dead-letter publish also failed: 1 s, doubling up to
/// 30 s while it keeps happening, back to 1 s after a batch that needed none. Shared by a pipeline's batches.
final class RequeueBackoff: Sendable {
    static let first: Duration = .seconds(1)
    static let ceiling: Duration = .seconds(30)

    private let current = Mutex<Duration?>(nil)

    init() {}

    /// The delay to wait now; the next one is twice as long, up to `ceiling`.
    func next() -> Duration {
        current.withLock { delay in
            let now = delay ?? Self.first
            delay = min(now * 2, Self.ceiling)
            return now
        }
    }

    func reset() {
        current.withLock { $0 = nil }
    }
}
