import Synchronization

/// What `/healthz` and `/readyz` report. Ready means every pipeline is consuming: a replica that is reconnecting,
/// waiting for its store, or draining after SIGTERM, is taken out of rotation.
public final class WorkerHealth: Sendable {
    private struct State {
        var consuming = 0
        var stopping = false
        var fatalError: String?
        var storeUnavailable = false
    }

    private let pipelines: Int
    private let state = Mutex(State())

    init(pipelines: Int) {
        self.pipelines = pipelines
    }

    /// Every pipeline is consuming, the store answers, and the worker is not shutting down.
    public var isReady: Bool {
        state.withLock {
            $0.consuming == pipelines && !$0.stopping && $0.fatalError == nil && !$0.storeUnavailable
        }
    }

    /// The store does not answer: the pipelines hold their batches and take no more (`DeliveryLifecycle`).
    public var isStoreUnavailable: Bool { state.withLock { $0.storeUnavailable } }

    /// The process is doing its job (it may be reconnecting); false once the worker has failed for good.
    public var isLive: Bool {
        state.withLock { $0.fatalError == nil }
    }

    func pipelineStartedConsuming() {
        state.withLock { $0.consuming += 1 }
    }

    func pipelineStoppedConsuming() {
        state.withLock { $0.consuming -= 1 }
    }

    func stopping() {
        state.withLock { $0.stopping = true }
    }

    func storeAvailability(_ available: Bool) {
        state.withLock { $0.storeUnavailable = !available }
    }

    func failed(_ reason: String) {
        state.withLock { $0.fatalError = reason }
    }
}
