import WalletStore

/// What the store made of a batch: the input `DeliveryLifecycle.storeAnswered` takes.
///
/// A batch is stored in one transaction, or, after the store refused some of its data, one message at a time
/// (`oneAtATime`): then the messages before a failure are committed and answered in `outcomes`, and only the rest is
/// held or retried, so no message is applied twice by the worker's own retries.
struct StoreAnswer: Sendable {
    /// What the store did with one message.
    enum Outcome: Sendable {
        /// Routed and committed (or a replay of recorded results).
        case stored(StoredDecision)
        /// The store cannot hold this message's data, even alone (`StoreError.Kind.refusedInput`).
        case refused(reason: String)
    }

    /// The first messages of the batch, in order, that the store is done with: every message when `failure` is nil.
    var outcomes: [Outcome]
    /// Why the store stopped before the end of the batch; the messages after `outcomes` were not committed.
    var failure: StoreError?

    /// The whole batch committed.
    static func stored(_ decisions: [StoredDecision]) -> StoreAnswer {
        StoreAnswer(outcomes: decisions.map(Outcome.stored), failure: nil)
    }

    /// Nothing of the batch committed.
    static func failed(_ error: StoreError) -> StoreAnswer {
        StoreAnswer(outcomes: [], failure: error)
    }
}
