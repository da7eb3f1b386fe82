import Synchronization

/// What `/healthz` and `/readyz` report. Ready means every pipeline is consuming: a replica that is reconnecting,
/// waiting for its store, or draining after SIGTERM, is taken out of rotation.
public final class WorkerHealth: Sendable {
    private struct State {
        var consuming = 0
        var stopping = false
        var fatalError: String?
        /// The dependencies that paused the worker (`DeliveryLifecycle`): the store, the results.
        var paused: Set<PauseCause> = []
    }

    private let pipelines: Int
    private let state = Mutex(State())

    init(pipelines: Int) {
        self.pipelines = pipelines
    }

    /// Every pipeline is consuming, the store answers, and the worker is not shutting down.
    public var isReady: Bool { notReadyBecause == nil }

    /// Why the worker is not ready, for `/readyz`'s body: the dependencies that paused it first (the runbook is
    /// found by its cause), then what else keeps it out of rotation; nil when it is ready.
    public var notReadyBecause: String? {
        state.withLock { state in
            if let fatal = state.fatalError { return "failed: \(fatal)" }
            if !state.paused.isEmpty {
                return "paused: "
                    + PauseCause.allCases.filter(state.paused.contains).map(\.rawValue).joined(separator: ", ")
            }
            if state.stopping { return "stopping" }
            if state.consuming < pipelines { return "not consuming" }
            return nil
        }
    }

    /// The store does not answer: the pipelines hold their batches and take no more (`DeliveryLifecycle`).
    public var isStoreUnavailable: Bool { state.withLock { $0.paused.contains(.store) } }

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
        paused(.store, available == false)
    }

    /// `cause` paused the worker (`isPaused`), or no longer does.
    func paused(_ cause: PauseCause, _ isPaused: Bool) {
        state.withLock {
            if isPaused { $0.paused.insert(cause) } else { $0.paused.remove(cause) }
        }
    }

    func failed(_ reason: String) {
        state.withLock { $0.fatalError = reason }
    }
}
