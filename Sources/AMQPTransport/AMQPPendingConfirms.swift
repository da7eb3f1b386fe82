internal import Locking

/// The outcomes of a batch of publishes that was sent without waiting: `AMQPChannel.startPublishing(_:confirmTimeout:)`
/// returns at once, so that several batches can wait for their confirms at the same time while their messages go
/// out in the order the batches were started.
public final class AMQPPendingConfirms: Sendable {
    private enum State {
        case waiting([Int: CheckedContinuation<[AMQPPublishOutcome], any Error>], nextID: Int)
        case settled(Result<[AMQPPublishOutcome], AMQPError>)
    }

    private let state = Locked(State.waiting([:], nextID: 0))

    init() {}

    /// One outcome per message, in order, once the broker has answered for every one. Throws `.timeout` when the
    /// answers took longer than the confirm timeout, and the channel's or connection's error when it failed.
    /// May be awaited more than once, from any task. A cancelled wait throws `.closed` at once (the publishes
    /// stay unconfirmed): a worker stopping while the broker blocks its connection must not wait out the timeout.
    public func outcomes() async throws(AMQPError) -> [AMQPPublishOutcome] {
        let id = state.withLock { state -> Int in
            guard case .waiting(let waiters, let nextID) = state else { return -1 }
            state = .waiting(waiters, nextID: nextID + 1)
            return nextID
        }
        do {
            return try await withTaskCancellationHandler {
                try await withCheckedThrowingContinuation { continuation in
                    let settled: Result<[AMQPPublishOutcome], AMQPError>? = state.withLock { state in
                        switch state {
                        case .settled(let result):
                            return result
                        case .waiting(var waiters, let nextID):
                            if Task.isCancelled { return .failure(Self.cancelled) }
                            waiters[id] = continuation
                            state = .waiting(waiters, nextID: nextID)
                            return nil
                        }
                    }
                    if let settled { continuation.resume(with: settled.mapError { $0 as any Error }) }
                }
            } onCancel: {
                let waiter: CheckedContinuation<[AMQPPublishOutcome], any Error>? = state.withLock { state in
                    guard case .waiting(var waiters, let nextID) = state else { return nil }
                    let waiter = waiters.removeValue(forKey: id)
                    state = .waiting(waiters, nextID: nextID)
                    return waiter
                }
                waiter?.resume(throwing: Self.cancelled)
            }
        } catch {
            throw error as? AMQPError ?? AMQPError(code: .protocolError, message: "\(error)")
        }
    }

    private static let cancelled = AMQPError(code: .closed, message: "cancelled while waiting for publisher confirms")

    func resume(returning outcomes: [AMQPPublishOutcome]) {
        settle(.success(outcomes))
    }

    func resume(throwing error: AMQPError) {
        settle(.failure(error))
    }

    /// The first settlement wins.
    private func settle(_ result: Result<[AMQPPublishOutcome], AMQPError>) {
        let waiters: [CheckedContinuation<[AMQPPublishOutcome], any Error>] = state.withLock { state in
            guard case .waiting(let waiters, _) = state else { return [] }
            state = .settled(result)
            return Array(waiters.values)
        }
        for waiter in waiters { waiter.resume(with: result.mapError { $0 as any Error }) }
    }
}
