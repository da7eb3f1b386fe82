import NIOCore
import PostgresNIO
import Synchronization

/// Bounds one use of a pooled connection from the client side, where the server's `statement_timeout` cannot
/// help: waiting for a connection (the server is down, or every connection is busy) and a server that stopped
/// answering (a network partition leaves the socket open). At the deadline a lease still waiting is cancelled, and
/// a leased connection is closed under the work, which then fails at once.
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
        return try await withThrowingTaskGroup(of: Result?.self) { group in
            group.addTask {
                try await client.withConnection { connection in
                    try deadline.leased(connection)
                    defer { deadline.finish() }
                    do {
                        return try await body(connection)
                    } catch {
                        // Hand a connection closed under the work back only once the pool has seen it close:
                        // else the next lease could get it.
                        if deadline.expiredPhase == .running { try? await connection.closeFuture.get() }
                        throw error
                    }
                }
            }
            group.addTask {
                try await Task.sleep(for: leaseLimit)
                guard !deadline.expire(ifStill: .leasing) else { return nil }
                try await Task.sleep(for: totalLimit - leaseLimit)
                _ = deadline.expire(ifStill: .running)
                return nil
            }
            while let next = try await group.next() {
                if let result = next {
                    group.cancelAll()
                    return result
                }
                if let phase = deadline.expiredPhase {
                    // Cancels a lease still waiting; the work on a closed connection fails by itself.
                    group.cancelAll()
                    while (try? await group.next()) != nil {}
                    throw Exceeded(phase: phase)
                }
            }
            throw CancellationError()
        }
    }

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

    /// Ends the phase if it is still under way; true when it was (a running connection is closed).
    private func expire(ifStill phase: Phase) -> Bool {
        state.withLock { state in
            switch (state, phase) {
            case (.leasing, .leasing):
                state = .expired(.leasing)
                return true
            case (.running(let connection), .running):
                state = .expired(.running)
                let _: EventLoopFuture<Void> = connection.close()
                return true
            default:
                return false
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
