import Locking

/// A clock that moves only when a test turns it (`advance`), for the executor's timers, backoffs and deadlines:
/// a 5-minute retry delay passes in a microsecond, and two timers fire in the order of their deadlines. Modelled on
/// postgres-nio's `MockClock`.
///
/// Sleepers are resumed by `advance`, deadline first. A test that needs the code under test to have armed a timer
/// before it turns the clock waits for it (`waitForSleeper`, `advanceToTimer`): an event, never a guessed delay.
public final class ManualClock: Clock, Sendable {
    public struct Instant: InstantProtocol, CustomStringConvertible {
        /// Time since the clock was made.
        public var offset: Duration

        public init(offset: Duration) { self.offset = offset }

        public func advanced(by duration: Duration) -> Instant { Instant(offset: offset + duration) }
        public func duration(to other: Instant) -> Duration { other.offset - offset }
        public static func < (lhs: Instant, rhs: Instant) -> Bool { lhs.offset < rhs.offset }
        public var description: String { "\(offset)" }
    }

    private struct Sleeper {
        var deadline: Instant
        var continuation: CheckedContinuation<Void, any Error>
    }

    private struct State {
        var now = Instant(offset: .zero)
        var sleepers: [Int: Sleeper] = [:]
        var nextID = 0
    }

    private let state = Locked(State())
    /// Tests waiting for a sleeper: woken as sleepers arrive.
    private let watchers = ConditionWaiters<[Instant]>()

    public init() {}

    public var now: Instant { state.withLock { $0.now } }
    public var minimumResolution: Duration { .zero }

    public func sleep(until deadline: Instant, tolerance: Duration? = nil) async throws {
        let id = state.withLock { state -> Int in
            state.nextID += 1
            return state.nextID
        }
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                enum Outcome { case waiting, due, cancelled }
                let (outcome, deadlines) = state.withLock { state -> (Outcome, [Instant]) in
                    if Task.isCancelled { return (.cancelled, []) }
                    if deadline <= state.now { return (.due, []) }
                    state.sleepers[id] = Sleeper(deadline: deadline, continuation: continuation)
                    return (.waiting, state.sleepers.values.map(\.deadline))
                }
                switch outcome {
                case .waiting: watchers.changed(deadlines)
                case .due: continuation.resume()
                case .cancelled: continuation.resume(throwing: CancellationError())
                }
            }
        } onCancel: {
            let sleeper = state.withLock { $0.sleepers.removeValue(forKey: id) }
            sleeper?.continuation.resume(throwing: CancellationError())
        }
    }

    /// Moves the clock forward and wakes every sleeper whose deadline has come, earliest first.
    public func advance(by duration: Duration) {
        precondition(duration >= .zero, "a clock does not go back")
        let due = state.withLock { state -> [Sleeper] in
            state.now = state.now.advanced(by: duration)
            let now = state.now
            let due = state.sleepers.filter { $0.value.deadline <= now }
            for id in due.keys { state.sleepers.removeValue(forKey: id) }
            return due.values.sorted { $0.deadline < $1.deadline }
        }
        for sleeper in due { sleeper.continuation.resume() }
    }

    /// Moves the clock to `offset` since it was made (or leaves it where it is, if it is already past it).
    public func advance(to offset: Duration) {
        advance(by: max(.zero, offset - now.offset))
    }

    /// The deadlines of the sleepers waiting now, earliest first, as offsets since the clock was made.
    public var deadlines: [Duration] {
        state.withLock { $0.sleepers.values.map(\.deadline.offset).sorted() }
    }

    /// Waits until a sleeper's deadline satisfies `predicate` (one is waiting with such a deadline).
    public func waitForSleeper(where predicate: @escaping @Sendable (Duration) -> Bool) async {
        await waitForSleepers { $0.contains { predicate($0.offset) } }
    }

    /// Waits until at least `count` sleepers are due at most `delay` from now.
    public func waitForSleepers(atLeast count: Int, dueWithin delay: Duration) async {
        let limit = now.offset + delay
        await waitForSleepers { $0.count { $0.offset <= limit } >= count }
    }

    /// Waits for a sleeper due at most `delay` from now, then advances the clock to its deadline (the earliest such).
    public func advanceToTimer(atMost delay: Duration) async {
        let limit = now.offset + delay
        await waitForSleeper { $0 <= limit }
        advance(to: deadlines.first { $0 <= limit } ?? limit)
    }

    /// Returns once `predicate` holds of the sleepers' deadlines, or when the task is cancelled (a test's time limit).
    private func waitForSleepers(_ predicate: @escaping @Sendable ([Instant]) -> Bool) async {
        await watchers.wait(until: predicate) { state.withLock { $0.sleepers.values.map(\.deadline) } }
    }
}
