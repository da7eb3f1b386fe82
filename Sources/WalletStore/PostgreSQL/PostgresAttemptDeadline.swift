import NIOCore
import PostgresNIO
import Synchronization

/// Bounds one use of a pooled connection from the client side, where the server's `statement_timeout` cannot
/// help: waiting for a connection (the server is down, or every connection is busy) and a server that stopped
/// answering (a network partition leaves the socket open). At the deadline a lease still waiting is cancelled, and
/// a leased connection is closed under the work.
///
/// The caller is answered at the deadline whatever the work does: PostgresNIO 1.33.2 never completes a query
/// written to a connection that has just closed (its `channel.write` drops the failure), so the work may never
/// end by itself. Such work is left behind on its closed connection; the caller goes on.
final class PostgresAttemptDeadline: Sendable {
    enum Phase: Sendable, Equatable {
        case leasing
        case running
        case finished
    }

    /// What was under way when the deadline passed.
    struct Exceeded: Error {
        var phase: Phase
    }

    private enum State {
        case leasing
        case running(PostgresConnection)
        case finished
        case expired(Phase)
    }

    private let state = Mutex(State.leasing)

    /// Runs `body` on a pooled connection of `client`: the lease may take at most `leaseLimit`, the whole use
    /// `totalLimit`.
    static func run<Result: Sendable>(
        on client: PostgresClient, leaseLimit: Duration, totalLimit: Duration,
        _ body: @escaping @Sendable (PostgresConnection) async throws -> Result
    ) async throws -> Result {
        let deadline = PostgresAttemptDeadline()
        return try await withCheckedThrowingContinuation { continuation in
            let answer = AnswerOnce(continuation)
            let work = Task {
                do {
                    let result = try await client.withConnection { connection in
                        try deadline.leased(connection)
                        defer { deadline.finish() }
                        // A query written to a closed connection would never be answered (see above).
                        guard !connection.isClosed else { throw ConnectionClosed() }
                        do {
                            return try await body(connection)
                        } catch {
                            // Hand a connection closed under the work back only once the pool has seen it close:
                            // else the next lease could get it.
                            if deadline.expiredPhase == .running { try? await connection.closeFuture.get() }
                            throw error
                        }
                    }
                    answer.resume(with: .success(result))
                } catch {
                    answer.resume(with: .failure(error))
                }
            }
            let timer = Task {
                try? await Task.sleep(for: leaseLimit)
                guard !Task.isCancelled else { return }
                // The answer first: the work's own failure once cancelled must not take its place.
                if deadline.expire(ifStill: .leasing) != nil {
                    answer.resume(with: .failure(Exceeded(phase: .leasing)))
                    work.cancel()  // cancels the lease request
                    return
                }
                try? await Task.sleep(for: totalLimit - leaseLimit)
                guard !Task.isCancelled else { return }
                if case .running(let connection)? = deadline.expire(ifStill: .running) {
                    answer.resume(with: .failure(Exceeded(phase: .running)))
                    // Closed under the work, which then fails at once (or, stuck in PostgresNIO, is left behind).
                    let _: EventLoopFuture<Void> = connection.close()
                    work.cancel()
                }
            }
            answer.onAnswer { timer.cancel() }
        }
    }

    /// The pool handed out a connection that had already closed (the server went away while it was idle).
    struct ConnectionClosed: Error {}

    private func leased(_ connection: PostgresConnection) throws {
        try state.withLock { state in
            guard case .leasing = state else { throw Exceeded(phase: .leasing) }
            state = .running(connection)
        }
    }

    private func finish() {
        state.withLock { state in
            if case .running = state { state = .finished }
        }
    }

    /// Ends the phase if it is still under way, returning what it was (with the connection in use); nil if not.
    private func expire(ifStill phase: Phase) -> State? {
        state.withLock { state in
            switch (state, phase) {
            case (.leasing, .leasing), (.running, .running):
                defer { state = .expired(phase) }
                return state
            default:
                return nil
            }
        }
    }

    private var expiredPhase: Phase? {
        state.withLock { state in
            if case .expired(let phase) = state { return phase }
            return nil
        }
    }
}

/// A deadline for work outside the pool (the migration on a connection of the store's own).
enum PostgresDeadline {
    struct Expired: Error {}

    /// Answers with `work`'s result, or throws `Expired` once `limit` has passed; then `onExpiry` runs (close the
    /// work's connection) and the work is left behind, as `PostgresAttemptDeadline` does.
    static func run<Result: Sendable>(
        within limit: Duration, onExpiry: @escaping @Sendable () -> Void,
        _ work: @escaping @Sendable () async throws -> Result
    ) async throws -> Result {
        try await withCheckedThrowingContinuation { continuation in
            let answer = AnswerOnce(continuation)
            let task = Task {
                do {
                    answer.resume(with: .success(try await work()))
                } catch {
                    answer.resume(with: .failure(error))
                }
            }
            let timer = Task {
                try? await Task.sleep(for: limit)
                guard !Task.isCancelled else { return }
                answer.resume(with: .failure(Expired()))
                onExpiry()
                task.cancel()
            }
            answer.onAnswer { timer.cancel() }
        }
    }
}

/// Resumes a continuation once: with the work's result or the deadline's error, whichever comes first.
private final class AnswerOnce<Result: Sendable>: Sendable {
    private struct State {
        var continuation: CheckedContinuation<Result, any Error>?
        var onAnswer: (@Sendable () -> Void)?
    }

    private let state: Mutex<State>

    init(_ continuation: CheckedContinuation<Result, any Error>) {
        state = Mutex(State(continuation: continuation))
    }

    /// Runs `action` once answered (at once if already).
    func onAnswer(_ action: @escaping @Sendable () -> Void) {
        let answered = state.withLock { state in
            if state.continuation != nil { state.onAnswer = action }
            return state.continuation == nil
        }
        if answered { action() }
    }

    func resume(with result: Swift.Result<Result, any Error>) {
        let (continuation, action) = state.withLock { state in (state.continuation.take(), state.onAnswer.take()) }
        continuation?.resume(with: result)
        action?()
    }
}
