/// The outcomes of a batch of publishes that was sent without waiting: `AMQPChannel.startPublishing(_:confirmTimeout:)`
/// returns at once, so that several batches can wait for their confirms at the same time while their messages go
/// out in the order the batches were started.
public final class AMQPPendingConfirms: Sendable {
    private enum State {
        case waiting([CheckedContinuation<[AMQPPublishOutcome], any Error>])
        case settled(Result<[AMQPPublishOutcome], AMQPError>)
    }

    private let state = Locked(State.waiting([]))

    init() {}

    /// One outcome per message, in order, once the broker has answered for every one. Throws `.timeout` when the
    /// answers took longer than the confirm timeout, and the channel's or connection's error when it failed.
    /// May be awaited more than once, from any task.
    public func outcomes() async throws(AMQPError) -> [AMQPPublishOutcome] {
        do {
            return try await withCheckedThrowingContinuation { continuation in
                let settled: Result<[AMQPPublishOutcome], AMQPError>? = state.withLock { state in
                    switch state {
                    case .settled(let result):
                        return result
                    case .waiting(var waiters):
                        waiters.append(continuation)
                        state = .waiting(waiters)
                        return nil
                    }
                }
                if let settled { continuation.resume(with: settled.mapError { $0 as any Error }) }
            }
        } catch {
            throw error as? AMQPError ?? AMQPError(code: .protocolError, message: "\(error)")
        }
    }

    func resume(returning outcomes: [AMQPPublishOutcome]) {
        settle(.success(outcomes))
    }

    func resume(throwing error: AMQPError) {
        settle(.failure(error))
    }

    /// The first settlement wins.
    private func settle(_ result: Result<[AMQPPublishOutcome], AMQPError>) {
        let waiters: [CheckedContinuation<[AMQPPublishOutcome], any Error>] = state.withLock { state in
            guard case .waiting(let waiters) = state else { return [] }
            state = .settled(result)
            return waiters
        }
        for waiter in waiters { waiter.resume(with: result.mapError { $0 as any Error }) }
    }
}
