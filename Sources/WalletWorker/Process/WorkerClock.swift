/// The worker's time: every timer, backoff, deadline and duration the executor measures reads this clock, never
/// `ContinuousClock` directly. Production runs on `.continuous`; the in-process tests turn a clock by hand, so a
/// retry's backoff or the store's give-back deadline passes in a microsecond and in a known order.
///
/// It erases a `Clock` whose durations are `Duration` (the way postgres-nio's pool takes its clock), keeping only
/// what the worker needs: monotonic time since the clock was made, and a sleep.
public struct WorkerClock: Sendable {
    private let elapsed: @Sendable () -> Duration
    private let sleeper: @Sendable (Duration) async throws -> Void

    public init<C: Clock>(_ clock: C) where C.Duration == Duration {
        let origin = clock.now
        elapsed = { origin.duration(to: clock.now) }
        sleeper = { duration in
            try await clock.sleep(until: clock.now.advanced(by: duration), tolerance: nil)
        }
    }

    /// The machine clock: monotonic, and running while the system sleeps.
    public static var continuous: WorkerClock { WorkerClock(ContinuousClock()) }

    /// Time since this clock was made.
    public var now: Duration { elapsed() }

    /// Sleeps for `duration`; throws `CancellationError` when the task is cancelled first.
    public func sleep(for duration: Duration) async throws {
        try await sleeper(duration)
    }
}
