import AMQPTransport
import Locking

// A hung transport call must fail its test quickly with a message, not stall the suite until its time limit.
// The transport's calls wait on continuations resumed by its I/O thread and ignore task cancellation,
// so a deadline cannot be a task group (which waits for every child): it races an unstructured task instead.

public struct DeadlineExceeded: Error, CustomStringConvertible {
    public var what: String
    public var limit: Duration
    public var description: String { "\(what) did not finish within \(limit): the transport hangs" }
}

/// Returns what `operation` returns, or throws `DeadlineExceeded` once `limit` has passed.
/// On a deadline the operation is cancelled (which ends a consumer loop; transport calls ignore it) and left behind.
public func within<T: Sendable>(
    _ limit: Duration, _ what: String, _ operation: @escaping @Sendable () async throws -> T
) async throws -> T {
    try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<T, any Error>) in
        let race = Race(continuation)
        let work = Task {
            do {
                race.finish(with: .success(try await operation()))
            } catch {
                race.finish(with: .failure(error))
            }
        }
        race.startTimer {
            try await Task.sleep(for: limit)
            if race.finish(with: .failure(DeadlineExceeded(what: what, limit: limit))) { work.cancel() }
        }
    }
}

/// An operation racing its deadline: the first to finish resumes the continuation; a finished
/// operation also stops the timer.
private final class Race<T: Sendable>: Sendable {
    private struct State {
        var continuation: CheckedContinuation<T, any Error>?
        var timer: Task<Void, any Error>?
    }

    private let state: Locked<State>

    init(_ continuation: CheckedContinuation<T, any Error>) {
        state = Locked(State(continuation: continuation))
    }

    func startTimer(_ body: @escaping @Sendable () async throws -> Void) {
        let timer = Task(operation: body)
        let finished = state.withLock { state in
            state.timer = timer
            return state.continuation == nil
        }
        if finished { timer.cancel() }
    }

    /// Returns whether this call was the one that resumed.
    @discardableResult
    func finish(with result: Result<T, any Error>) -> Bool {
        let (continuation, timer) = state.withLock { state in
            defer { state.timer = nil }
            return (state.continuation.take(), state.timer)
        }
        guard let continuation else { return false }
        timer?.cancel()  // when the timer itself finishes, it is already past its sleep
        continuation.resume(with: result)
        return true
    }
}

/// The operation succeeded where the test expected an `AMQPError`.
public struct UnexpectedSuccess: Error, CustomStringConvertible {
    public var what: String
    public var value: String
    public var description: String { "\(what) should have failed with an AMQPError, but it returned \(value)" }
}

/// Runs an operation that must fail with an `AMQPError` within `limit` (no crash, no hang); returns the error.
/// Any other error (including `DeadlineExceeded`) fails the test.
public func expectAMQPError<T: Sendable>(
    _ what: String, within limit: Duration = .seconds(10), _ operation: @escaping @Sendable () async throws -> T
) async throws -> AMQPError {
    do {
        let value = try await within(limit, what, operation)
        throw UnexpectedSuccess(what: what, value: "\(value)")
    } catch let error as AMQPError {
        return error
    }
}
