/// How one delivery leaves the worker. The one name of it: its metric label, its span's status and the level of its
/// log line all come from here.
///
/// A `DeliveryPlan` carries the fate its delivery meets once everything it publishes is confirmed;
/// `DeliveryLifecycle` replaces it with `requeued` or `droppedWithSession` when that does not happen.
enum DeliveryFate: Sendable, Hashable {
    /// Its results were confirmed and it was acknowledged: processed, a domain error, ignored, or a replay of recorded
    /// results (the store's decision says which).
    case processed
    /// Bad input (CONTRACT.md §8): its `rejected` result and its dead letter were published, then it was acknowledged.
    case rejected(reason: String)
    /// A transient failure with attempts left: its copy waits in the retry queue, and it was acknowledged.
    case retried(attempt: Int, error: String)
    /// A transient failure on its last attempt: dead-lettered with the error.
    case retriesExhausted(attempts: Int, error: String)
    /// The store refused its data even stored alone: dead-lettered. No `rejected` result: the router accepted it.
    case storeRefused(reason: String)
    /// Processing it failed its session the same way too many times in a row (`PoisonSuspects`): dead-lettered
    /// unprocessed, with the error.
    case poison(reason: String)
    /// One of its results cannot be encoded: publishing it again would fail the same way, so it is dead-lettered.
    case unpublishable(reason: String)
    /// The worker cannot publish the original itself (a body over twice the limit, never kept; a copy that no
    /// longer fits a frame): rejected without requeue, the broker dead-letters it whole with `x-death`.
    case rejectedToBroker(reason: String)
    /// Given back to its queue with `basic.nack` or a channel close: the broker delivers it again.
    case requeued(reason: String)
    /// Its session failed before it was settled: the broker redelivers it.
    case droppedWithSession(error: String)

    /// The name of the fate: the `reason` label of `wallet_dead_letters_total` for the dead-lettering fates, the
    /// `wallet.fate` attribute of the message's span for all of them.
    var name: String {
        switch self {
        case .processed: "processed"
        case .rejected: "rejected"
        case .retried: "retried"
        case .retriesExhausted: "retries_exhausted"
        case .storeRefused: "store_refused"
        case .poison: "poison"
        case .unpublishable: "unpublishable"
        case .rejectedToBroker: "rejected_to_broker"
        case .requeued: "requeued"
        case .droppedWithSession: "dropped_with_session"
        }
    }

    /// The `reason` of `wallet_dead_letters_total` this fate counts under; nil when it is no dead letter.
    var deadLetterReason: WorkerMetrics.DeadLetterReason? {
        switch self {
        case .rejected: .rejected
        case .retriesExhausted: .retriesExhausted
        case .storeRefused: .storeRefused
        case .poison: .poison
        case .unpublishable: .unpublishable
        case .rejectedToBroker: .rejectedToBroker
        case .processed, .retried, .requeued, .droppedWithSession: nil
        }
    }

    /// Whether the delivery leaves the work queue: acknowledged or rejected, not given back to it.
    var leavesTheQueue: Bool {
        switch self {
        case .requeued, .droppedWithSession: false
        default: true
        }
    }

    /// The span's error message; nil for a delivery that was processed.
    var failureDescription: String? {
        switch self {
        case .processed: nil
        case .rejected(let reason): "dead-lettered: \(reason)"
        case .retried(let attempt, let error): "sent to the retry queue after attempt \(attempt): \(error)"
        case .retriesExhausted(let attempts, let error): "dead-lettered after \(attempts) attempts: \(error)"
        case .storeRefused(let reason): "dead-lettered, the store refused it: \(reason)"
        case .poison(let reason): "dead-lettered unprocessed: \(reason)"
        case .unpublishable(let reason): "dead-lettered, a result cannot be published: \(reason)"
        case .rejectedToBroker(let reason): "rejected to the broker's dead-lettering: \(reason)"
        case .requeued(let reason): "requeued: \(reason)"
        case .droppedWithSession(let error): "dropped with its session: \(error)"
        }
    }

    /// How much an operator needs to hear of a fate; the executor says it at a log level (`LifecycleObserver`).
    enum Severity: Sendable, Hashable {
        /// Nothing to act on: a delivery processed as it should be.
        case routine
        /// Worth reading when looking: a domain error's answer.
        case notable
        /// Something to look at, which the worker handled: bad input, a retry, a requeue.
        case attention
        /// A message the worker could not process: dead-lettered after its attempts, refused, poison.
        case failure
    }

    /// How much it says. A processed delivery is `notable` when its decision was a domain error, else `routine`:
    /// `isDomainError` says which.
    func severity(isDomainError: Bool) -> Severity {
        switch self {
        case .processed: isDomainError ? .notable : .routine
        case .rejected, .retried, .rejectedToBroker, .requeued: .attention
        case .droppedWithSession: .routine  // the session's failure is logged once, not per delivery
        case .retriesExhausted, .storeRefused, .poison, .unpublishable: .failure
        }
    }

    /// The delivery's log line.
    var logMessage: String {
        switch self {
        case .processed: "processed"
        case .rejected: "rejected and dead-lettered"
        case .retried: "sent to the retry queue"
        case .retriesExhausted: "dead-lettered after the last attempt"
        case .storeRefused: "dead-lettered: the store refused it"
        case .poison: "dead-lettered unprocessed: it failed too often"
        case .unpublishable: "dead-lettered: a result cannot be published"
        case .rejectedToBroker: "rejected to the broker's dead-lettering"
        case .requeued: "requeued"
        case .droppedWithSession: "left unacknowledged with its session"
        }
    }

    /// What the log line says about the fate beyond its message.
    var logMetadata: [String: String] {
        switch self {
        case .processed: [:]
        case .rejected(let reason), .storeRefused(let reason), .poison(let reason), .unpublishable(let reason),
            .rejectedToBroker(let reason), .requeued(let reason):
            ["reason": reason]
        case .retried(let attempt, let error): ["attempt": "\(attempt)", "error": error]
        case .retriesExhausted(let attempts, let error): ["attempts": "\(attempts)", "error": error]
        case .droppedWithSession(let error): ["error": error]
        }
    }
}
