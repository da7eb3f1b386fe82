import Synchronization
import WalletStore

/// Runs `DeliveryLifecycle`: feeds it inputs, under one lock, and hands each action to whoever executes it, in the
/// order the machine returned them. A pipeline's actions go to that pipeline's inbox (`Pipeline` runs them one after
/// another); the process's (store checks, timers, the worker's failure, outage reports) to the driver's own, run by
/// `run()`.
///
/// The machine's lock is held only while the machine runs: the actions it returns are appended to one outbox under
/// that lock (so two inputs arriving at once cannot reorder them), and handed over after it is released, by one
/// thread at a time (`drain`): the thread that gave an input hands over its actions, and those that other inputs
/// added meanwhile, unless another thread is already doing so. No publish, settlement, log line, metric or span
/// runs under the machine's lock, and the order is still the machine's.
///
/// A `publish` or `settle` only hands work to a connection's I/O thread, without waiting, and a `report` only counts
/// and logs: when its pipeline has run every action handed to it before, the session's `DirectActions` runs it at
/// once, in the thread handing it over, instead of waking the pipeline for it (a thread wake-up each).
final class LifecycleDriver: Sendable {
    /// Runs a session's `publish`, `settle` and `report` actions; false for any other action (or another session's).
    typealias DirectActions = @Sendable (LifecycleAction) -> Bool

    /// A pipeline's actions handed to its inbox and not yet run, and its session's `DirectActions`.
    private struct Lane {
        var queued = 0
        var direct: DirectActions?
    }

    /// Actions the machine returned, not yet handed over; `draining` while a thread hands them over.
    private struct Outbox {
        var pending: [LifecycleAction] = []
        var draining = false
    }

    private let machine: Mutex<DeliveryLifecycle>
    private let outbox = Mutex(Outbox())
    private let lanes: Mutex<[Lane]>
    private let pipelineInboxes: [AsyncStream<LifecycleAction>.Continuation]
    /// Each pipeline's actions, for its `Pipeline` to iterate.
    let inboxes: [AsyncStream<LifecycleAction>]
    private let processInbox: AsyncStream<LifecycleAction>.Continuation
    private let processActions: AsyncStream<LifecycleAction>
    private let clock: WorkerClock
    private let failure = Mutex<(any Error)?>(nil)

    init(_ machine: DeliveryLifecycle, pipelines: Int, clock: WorkerClock) {
        self.machine = Mutex(machine)
        self.clock = clock
        var inboxes: [AsyncStream<LifecycleAction>] = []
        var continuations: [AsyncStream<LifecycleAction>.Continuation] = []
        for _ in 0..<pipelines {
            let (stream, continuation) = AsyncStream<LifecycleAction>.makeStream()
            inboxes.append(stream)
            continuations.append(continuation)
        }
        self.inboxes = inboxes
        pipelineInboxes = continuations
        lanes = Mutex(Array(repeating: Lane(), count: pipelines))
        (processActions, processInbox) = AsyncStream<LifecycleAction>.makeStream()
    }

    /// The machine's `now`: monotonic time on the worker's clock.
    var now: Duration { clock.now }

    /// The failure the worker must exit with (`failWorker`), once every pipeline has stopped.
    var workerFailure: (any Error)? { failure.withLock { $0 } }

    /// Whether the store is out, for logs and tests.
    var isStoreOut: Bool { machine.withLock { $0.isStoreOut } }

    /// Gives the machine an input and dispatches the actions it returns.
    func handle(_ input: (inout DeliveryLifecycle, Duration) -> [LifecycleAction]) {
        let now = now
        machine.withLock { machine in
            let actions = input(&machine, now)
            guard !actions.isEmpty else { return }
            outbox.withLock { $0.pending += actions }
        }
        drain()
    }

    /// Hands over the outbox's actions, in order, until it is empty; returns at once if another thread is at it (it
    /// will hand over what this one added).
    private func drain() {
        var batch = outbox.withLock { outbox -> [LifecycleAction] in
            guard !outbox.draining, !outbox.pending.isEmpty else { return [] }
            outbox.draining = true
            defer { outbox.pending = [] }
            return outbox.pending
        }
        while !batch.isEmpty {
            for action in batch { dispatch(action) }
            batch = outbox.withLock { outbox in
                if outbox.pending.isEmpty { outbox.draining = false }
                defer { outbox.pending = [] }
                return outbox.pending
            }
        }
    }

    /// Runs the process's actions (store checks and notes, timers) until the task is cancelled or the worker stops.
    func run(
        checkStore: @escaping @Sendable () async -> StoreError?,
        noteResultDelivery: @escaping @Sendable ([RecordedResultsDelivery]) async -> Void,
        observe: @escaping @Sendable (LifecycleEvent) -> Void, onFailure: @escaping @Sendable () -> Void
    ) async {
        await withDiscardingTaskGroup { group in
            for await action in processActions {
                switch action {
                case .startTimer(let timer, let delay):
                    group.addTask { [clock] in
                        guard (try? await clock.sleep(for: delay)) != nil else { return }
                        self.handle { $0.timerFired(timer, now: $1) }
                    }
                case .checkStore(let check):
                    group.addTask {
                        let failure = await checkStore()
                        self.handle { $0.storeChecked(check, failure: failure, now: $1) }
                    }
                case .noteResultDelivery(let changes):
                    group.addTask { await noteResultDelivery(changes) }
                case .failWorker(let error):
                    failure.withLock { $0 = $0 ?? error }
                    onFailure()
                case .report(let event):
                    observe(event)
                default:
                    break
                }
            }
            group.cancelAll()
        }
    }

    /// Sets (or with nil, clears) the `DirectActions` of pipeline `pipeline`'s open session.
    func runDirectly(in pipeline: Int, _ direct: DirectActions?) {
        lanes.withLock { $0[pipeline].direct = direct }
    }

    /// Pipeline `pipeline` has run one action of its inbox.
    func ran(in pipeline: Int) {
        lanes.withLock { $0[pipeline].queued -= 1 }
    }

    /// Ends the inboxes: the pipelines and `run()` return once they have run what was already handed to them.
    func finish() {
        for inbox in pipelineInboxes { inbox.finish() }
        processInbox.finish()
    }

    /// Hands one action over; only `drain`'s one thread at a time calls it, so nothing else adds to a pipeline's
    /// inbox between the look at its lane and the hand-over.
    private func dispatch(_ action: LifecycleAction) {
        guard let pipeline = Self.pipeline(of: action) else {
            processInbox.yield(action)
            return
        }
        // With nothing older in the inbox, the session's direct actions may run it here, outside every lock.
        let direct = lanes.withLock { lanes in lanes[pipeline].queued == 0 ? lanes[pipeline].direct : nil }
        if let direct, direct(action) { return }
        lanes.withLock { $0[pipeline].queued += 1 }
        pipelineInboxes[pipeline].yield(action)
    }

    /// The pipeline an action belongs to; nil for the process's.
    private static func pipeline(of action: LifecycleAction) -> Int? {
        switch action {
        case .connect(let id, _, _), .store(let id, _, _, _), .publish(let id, _, _, _), .sendDirectReplies(let id, _),
            .settle(let id, _), .cancelConsumer(let id), .endSession(let id, _):
            id.pipeline
        case .stopPipeline(let pipeline):
            pipeline
        case .startTimer, .checkStore, .noteResultDelivery, .failWorker:
            nil
        case .report(let event):
            event.session?.pipeline
        }
    }
}

extension LifecycleEvent {
    /// The session the event is about; nil for the process's (the store's availability).
    var session: DeliveryLifecycle.SessionID? {
        switch self {
        case .consuming(let id, _), .sessionEnded(let id, _, _), .sessionFailed(let id, _), .received(let id, _),
            .publishNotConfirmed(let id, _, _), .resultNotTaken(let id, _, _), .storingOneAtATime(let id, _, _),
            .batchFailsWhileStoreAnswers(let id, _, _), .givingBack(let id, _, _, _), .requeueDelayed(let id, _, _):
            id
        case .ended(let ends):
            ends.first?.session
        case .reconnecting(let pipeline, _, _):
            DeliveryLifecycle.SessionID(pipeline: pipeline, number: 0)
        case .replyCopiesReturned, .storeOutageBegan, .storeOutageEnded, .paused, .trialBegan, .resumed:
            nil
        }
    }
}
