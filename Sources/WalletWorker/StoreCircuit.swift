import Logging
import Synchronization
import WalletStore

/// What the worker does while its store does not answer (a PostgreSQL failover, a locked SQLite file): it stops
/// taking work instead of sending every message through its retries to the dead letters.
///
/// A batch whose store transaction fails transiently is held, unacknowledged (the broker sends nothing beyond the
/// prefetch meanwhile: consumption is paused), and tried again after an exponential delay with jitter; readiness
/// is false, `wallet_store_available` is 0, and one log line says why. When the store answers its check
/// (`WalletStore.checkAvailable`) but the same batch keeps failing, the failure is the batch's own: it goes to the
/// retry queue as before (`BatchPlanner`). Shared by the pipelines of a process.
final class StoreCircuit: Sendable {
    /// Tries of a held batch while the store answers its check, before the failure counts as the batch's own.
    static let attemptsWhileStoreAnswers = 3

    /// The delay after the first failure. Default: 500 ms.
    let firstDelay: Duration
    /// The longest delay between tries. Default: 30 s.
    let longestDelay: Duration

    private let health: WorkerHealth
    private let metrics: WorkerMetrics
    private let logger: Logger
    private let open = Mutex(false)

    init(
        health: WorkerHealth, metrics: WorkerMetrics, logger: Logger,
        firstDelay: Duration = .milliseconds(500), longestDelay: Duration = .seconds(30)
    ) {
        self.firstDelay = firstDelay
        self.longestDelay = longestDelay
        self.health = health
        self.metrics = metrics
        self.logger = logger
        metrics.storeAvailable.set(1.0)
    }

    var isOpen: Bool { open.withLock { $0 } }

    /// The store failed a batch: pause (the first time), logging why.
    func storeFailed(_ error: StoreError) {
        let opened = open.withLock { open in
            defer { open = true }
            return !open
        }
        guard opened else { return }
        health.storeAvailability(false)
        metrics.storeAvailable.set(0.0)
        metrics.storeOutages.increment()
        logger.error("the store does not answer: holding the batch in hand and taking no more until it does",
                     metadata: ["error": "\(error)"])
    }

    /// A batch went through: resume, if paused.
    func storeAnswered() {
        guard isOpen else { return }
        let closed = open.withLock { open in
            defer { open = false }
            return open
        }
        guard closed else { return }
        health.storeAvailability(true)
        metrics.storeAvailable.set(1.0)
        logger.notice("the store answers again: consuming")
    }

    /// The delay before the `attempt`th try of a held batch (1-based): doubling from `firstDelay` up to
    /// `longestDelay`, each drawn uniformly from its upper half so replicas do not retry in step.
    func delay(attempt: Int, using generator: inout some RandomNumberGenerator) -> Duration {
        let doublings = min(max(attempt - 1, 0), 16)
        let ceiling = min(firstDelay * (1 << doublings), longestDelay)
        let milliseconds = ceiling.milliseconds
        return .milliseconds(Int64.random(in: (milliseconds / 2)...milliseconds, using: &generator))
    }
}
