import Locking

/// Tasks waiting for a condition on a state that changes elsewhere (a scripted broker's log, a clock's sleepers, a
/// store's counts): each waits until its predicate holds of the state, or until its task is cancelled (a test's time
/// limit: the test's expectations then say what did not happen), never for a guessed time. The state's owner calls
/// `changed` after every change.
public final class ConditionWaiters<State: Sendable>: Sendable {
    private struct Waiter {
        let predicate: @Sendable (State) -> Bool
        let continuation: CheckedContinuation<Void, Never>
    }

    private let waiters = Locked<(next: Int, waiting: [Int: Waiter])>((0, [:]))

    public init() {}

    /// Returns once `predicate` holds of the state (`current` reads it now), or the task is cancelled.
    public func wait(until predicate: @escaping @Sendable (State) -> Bool, current: () -> State) async {
        let id = waiters.withLock { waiters in
            waiters.next += 1
            return waiters.next
        }
        await withTaskCancellationHandler {
            await withCheckedContinuation { continuation in
                waiters.withLock { $0.waiting[id] = Waiter(predicate: predicate, continuation: continuation) }
                // Registered first: a change from now on wakes it, and one before is seen here.
                if Task.isCancelled || predicate(current()) { resume(id) }
            }
        } onCancel: {
            resume(id)
        }
    }

    /// The state is now `state`: wakes the waiters whose predicate holds of it.
    public func changed(_ state: State) {
        let due = waiters.withLock { waiters -> [Waiter] in
            let due = waiters.waiting.filter { $0.value.predicate(state) }
            for id in due.keys { waiters.waiting.removeValue(forKey: id) }
            return Array(due.values)
        }
        for waiter in due { waiter.continuation.resume() }
    }

    /// Whoever removes a waiter resumes it, once.
    private func resume(_ id: Int) {
        waiters.withLock { $0.waiting.removeValue(forKey: id) }?.continuation.resume()
    }
}
