import Synchronization

/// Tells the worker's loops to stop taking work (graceful shutdown), and lets them sleep until it fires, on the
/// worker's clock.
final class StopSignal: Sendable {
    private struct State {
        var isStopped = false
        var waiters: [Int: CheckedContinuation<Void, Never>] = [:]
        var handlers: [Int: @Sendable () -> Void] = [:]
        var nextID = 0
    }

    private let state = Mutex(State())
    private let clock: WorkerClock

    init(clock: WorkerClock) {
        self.clock = clock
    }

    var isStopped: Bool { state.withLock { $0.isStopped } }

    /// Fires once: wakes every sleeper and runs every registered handler.
    func stop() {
        let (waiters, handlers) = state.withLock {
            state -> ([CheckedContinuation<Void, Never>], [@Sendable () -> Void]) in
            guard !state.isStopped else { return ([], []) }
            state.isStopped = true
            defer {
                state.waiters = [:]
                state.handlers = [:]
            }
            return (Array(state.waiters.values), Array(state.handlers.values))
        }
        waiters.forEach { $0.resume() }
        handlers.forEach { $0() }
    }

    /// Runs `handler` when the signal fires (at once if it already has). Returns a token for `removeHandler`.
    @discardableResult
    func onStop(_ handler: @escaping @Sendable () -> Void) -> Int {
        let id: Int? = state.withLock { state in
            guard !state.isStopped else { return nil }
            state.nextID += 1
            state.handlers[state.nextID] = handler
            return state.nextID
        }
        guard let id else {
            handler()
            return -1
        }
        return id
    }

    func removeHandler(_ id: Int) {
        _ = state.withLock { $0.handlers.removeValue(forKey: id) }
    }

    /// Sleeps for `duration`, or less when the signal fires or the task is cancelled.
    func sleep(for duration: Duration) async {
        await withTaskGroup(of: Void.self) { group in
            group.addTask { [clock] in try? await clock.sleep(for: duration) }
            group.addTask { await self.waitUntilStopped() }
            await group.next()
            group.cancelAll()
        }
    }

    /// Returns when the signal fires or the task is cancelled.
    func waitUntilStopped() async {
        let id = state.withLock { state -> Int in
            state.nextID += 1
            return state.nextID
        }
        await withTaskCancellationHandler {
            await withCheckedContinuation { continuation in
                let resumeNow = state.withLock { state -> Bool in
                    if state.isStopped || Task.isCancelled { return true }
                    state.waiters[id] = continuation
                    return false
                }
                if resumeNow { continuation.resume() }
            }
        } onCancel: {
            let waiter = state.withLock { $0.waiters.removeValue(forKey: id) }
            waiter?.resume()
        }
    }
}
