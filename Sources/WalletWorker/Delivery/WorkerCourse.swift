/// Whether the worker takes work: running, or stopping, because of SIGTERM or of a failure no retry fixes (a
/// topology the broker refuses, a store schema newer than this build). One sub-machine of `DeliveryLifecycle`, as
/// `SessionCourse` and `StoreAvailability` are: a stop happens once, and a failure is recorded once, whichever came
/// first.
struct WorkerCourse: Sendable, Equatable {
    enum State: Sendable, Equatable {
        case running
        /// No pipeline takes new work; `failure` is what the worker will exit with, if it failed.
        case stopping(failure: String?)
    }

    /// What a failure means, given where the worker was.
    enum Failure: Sendable, Equatable {
        /// It was running: the failure stops it (every pipeline is stopped as for SIGTERM, and gives back what it
        /// has not committed).
        case stopsTheWorker
        /// It was stopping already: nothing more may be stored anywhere.
        case duringTheStop
        /// It had failed already: the first failure is the one it exits with.
        case alreadyFailed
    }

    private(set) var state = State.running

    var isStopping: Bool {
        if case .stopping = state { true } else { false }
    }

    /// A failure stops the worker: what is held is given back rather than finished.
    var hasFailed: Bool {
        if case .stopping(.some) = state { true } else { false }
    }

    /// SIGTERM. True when this begins the stop.
    mutating func stop() -> Bool {
        guard case .running = state else { return false }
        state = .stopping(failure: nil)
        return true
    }

    /// A failure no retry fixes, described by `description`.
    mutating func fail(_ description: String) -> Failure {
        switch state {
        case .running:
            state = .stopping(failure: description)
            return .stopsTheWorker
        case .stopping(nil):
            state = .stopping(failure: description)
            return .duringTheStop
        case .stopping(.some):
            return .alreadyFailed
        }
    }
}
