/// When a new session may consume after the last one failed with deliveries in hand (CONTRACT.md §10: queue order
/// across reconnects). The worker can notice a dead connection (a missed heartbeat, a reset) before the broker does;
/// until the broker notices too, it keeps the old consumer and the deliveries it sent it, and a new consumer would
/// get the messages behind them first. RabbitMQ gives those deliveries back, in place, when it drops the old
/// connection: after two missed heartbeats at the latest.
///
/// The rule: the new session opens its channels, then counts the queue's consumers (a passive `queue.declare`)
/// before it consumes. It consumes once the count is below what it was right after the last session's own consume
/// (the old consumer is gone), or once `bound` (two heartbeats and 5 s) has passed since the last session failed,
/// whatever the count says (another replica may have joined meanwhile). Pure: the executor counts, sleeps on its
/// clock and asks again.
struct ConsumerRelease: Sendable, Equatable {
    /// The queue's consumers right after the failed session's own `basic.consume`, its own included.
    var consumersWithTheLastSession: Int
    /// When the last session failed.
    var failedAt: Duration
    /// How long the broker may take to notice the dead connection: `2 x heartbeat + 5 s`.
    var bound: Duration
    /// How often the count is taken again. Default: 250 ms.
    var pollInterval: Duration = .milliseconds(250)

    /// The bound for a heartbeat: two missed intervals and 5 s of slack; with heartbeats off (0), the broker notices
    /// only through TCP: 30 s, as for the default heartbeat, is what the worker waits at most.
    static func bound(heartbeat: Duration) -> Duration {
        heartbeat > .zero ? heartbeat * 2 + .seconds(5) : .seconds(30)
    }

    enum Step: Sendable, Equatable {
        /// The broker let go of the last session's consumer: consume.
        case consumeReleased
        /// The bound passed: consume, whatever the count says.
        case consumeBoundPassed
        /// The old consumer may still hold deliveries: count again after `delay`.
        case countAgain(after: Duration)
    }

    /// What follows a count of `consumers` taken at `now`.
    func next(consumers: Int, now: Duration) -> Step {
        if consumers < consumersWithTheLastSession { return .consumeReleased }
        let waited = now - failedAt
        if waited >= bound { return .consumeBoundPassed }
        return .countAgain(after: min(pollInterval, bound - waited))
    }
}
