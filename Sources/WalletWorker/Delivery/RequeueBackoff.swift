/// The delay before requeueing deliveries whose retry or dead-letter publish also failed: 1 s, doubling up to 30 s
/// while it keeps happening, back to 1 s after a batch that needed none. One per pipeline, in `DeliveryLifecycle`.
struct RequeueBackoff: Sendable, Hashable {
    var first: Duration = .seconds(1)
    var ceiling: Duration = .seconds(30)
    private var current: Duration?

    init(first: Duration = .seconds(1), ceiling: Duration = .seconds(30)) {
        self.first = first
        self.ceiling = ceiling
    }

    /// The delay to wait now; the next one is twice as long, up to `ceiling`.
    mutating func next() -> Duration {
        let now = current ?? first
        current = min(now * 2, ceiling)
        return now
    }

    mutating func reset() {
        current = nil
    }
}
