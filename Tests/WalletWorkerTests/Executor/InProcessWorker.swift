import Foundation
import Logging
import ServiceLifecycle
import Synchronization
import TestSupport
import WalletRouting
import WalletStore

@testable import AMQPTransport
@testable import WalletWorker

/// The whole worker in this process, on a scripted broker (`ScriptedBroker`), a clock turned by hand (`ManualClock`)
/// and an in-memory store that a test can take out (`ScriptedStore`): the executor's decisions, tested in
/// milliseconds, with no socket and no sleep.
final class InProcessWorker: Sendable {
    let broker = ScriptedBroker()
    let clock = ManualClock()
    let store = ScriptedStore()
    let metrics = WorkerMetrics()
    let configuration: WorkerConfiguration
    let worker: NotificationWorker
    private let group: ServiceGroup
    private let task: Task<Void, any Error>

    /// Quiet unless a test asks: expected failures are logged at warning.
    static let logger: Logger = {
        var logger = Logger(label: "in-process-worker")
        logger.logLevel = .critical
        return logger
    }()

    /// Starts a worker with the test's settings; `configure` sees the defaults, less the operations server and the
    /// queue depth polls (both real sockets). `beforeStart` scripts the broker before the worker first calls it.
    init(
        configure: (inout WorkerConfiguration) -> Void = { _ in }, beforeStart: (ScriptedBroker) -> Void = { _ in }
    ) {
        beforeStart(broker)
        var configuration = WorkerConfiguration()
        configuration.httpPort = nil
        configuration.queuePollInterval = nil
        configuration.store = .memory
        configure(&configuration)
        self.configuration = configuration
        let connection = AMQPConnectionConfiguration(url: try! AMQPURL(parsing: configuration.amqpURL))
        worker = NotificationWorker(
            configuration: configuration, connection: connection, broker: broker, clock: WorkerClock(clock),
            store: store, metrics: metrics, logger: Self.logger)
        var service = ServiceGroupConfiguration(
            services: [.init(service: worker)], gracefulShutdownSignals: [], logger: Self.logger)
        // As `WorkerApplication` runs it: past the grace period, the worker is cancelled.
        service.maximumGracefulShutdownDuration = configuration.shutdownGracePeriod
        service.maximumCancellationDuration = .seconds(2)
        let group = ServiceGroup(configuration: service)
        self.group = group
        task = Task { try await group.run() }
    }

    var health: WorkerHealth { worker.health }

    /// Waits until every pipeline has opened a session (and so consumes).
    func waitUntilConsuming(sessions: Int = 1) async {
        await broker.waitForSessions(sessions)
    }

    /// Graceful shutdown (SIGTERM): the worker finishes what it holds; returns when `run()` has.
    func stop() async throws {
        await group.triggerGracefulShutdown()
        try await task.value
    }

    /// Waits for the worker's `run()` to end by itself (a failure no retry fixes), and returns its error.
    func failure() async -> (any Error)? {
        do {
            try await task.value
            return nil
        } catch {
            return error
        }
    }

    /// A metric's value, summed over the series whose labels contain every one of `labels` (`name="value"`).
    func metric(_ name: String, labels: [String] = []) -> Double {
        let exposition = String(decoding: metrics.exposition(), as: UTF8.self)
        var total = 0.0
        for line in exposition.split(separator: "\n") where !line.hasPrefix("#") {
            guard let space = line.lastIndex(of: " ") else { continue }
            let series = line[..<space]
            let metricName = series.prefix { $0 != "{" && $0 != " " }
            guard metricName == name, labels.allSatisfy({ series.contains($0) }) else { continue }
            total += Double(line[line.index(after: space)...]) ?? 0
        }
        return total
    }
}

/// The in-memory store with a switch: while `outage` is set, every call fails with it, as a database that does
/// not answer would. Counts the checks the worker makes.
final class ScriptedStore: WalletStore {
    private let inner = InMemoryWalletStore()
    private let state = Mutex<(outage: StoreError?, checks: Int, batches: Int, failNextBatches: [StoreError])>(
        (nil, 0, 0, []))
    /// Tests waiting for the worker's store checks (their count).
    private let checkWaiters = ConditionWaiters<Int>()

    /// Waits until the worker has checked the store `count` times in all (each probe is one check).
    func waitForChecks(_ count: Int) async {
        await checkWaiters.wait(until: { $0 >= count }) { checks }
    }

    /// Checks held until the test answers them (`answerHeldChecks`), when `holdsChecks`.
    private let heldChecks = Mutex<(holds: Bool, waiting: [CheckedContinuation<HeldCheck, Never>])>((false, []))

    enum HeldCheck {
        case notHeld
        case answered(StoreError?)
    }

    /// Tests waiting for a check to be held (the number held).
    private let heldCheckWaiters = ConditionWaiters<Int>()

    /// Waits until a check is held.
    func waitForHeldCheck() async {
        await heldCheckWaiters.wait(until: { $0 > 0 }) { heldChecks.withLock { $0.waiting.count } }
    }

    /// From now on, each check waits for `answerHeldChecks`.
    func holdChecks() {
        heldChecks.withLock { $0.holds = true }
    }

    /// Answers every held check with `failure` (nil: passed) and stops holding them.
    func answerHeldChecks(_ failure: StoreError?) {
        let waiting = heldChecks.withLock { held in
            defer { held = (false, []) }
            return held.waiting
        }
        for check in waiting { check.resume(returning: .answered(failure)) }
    }

    /// Takes the store out (or, with nil, brings it back).
    func setOutage(_ error: StoreError?) {
        state.withLock { $0.outage = error }
    }

    /// The next batches fail with these errors, in order, whatever the outage switch says.
    func failNextBatches(_ errors: [StoreError]) {
        state.withLock { $0.failNextBatches += errors }
    }

    var checks: Int { state.withLock { $0.checks } }
    var batches: Int { state.withLock { $0.batches } }

    static let unreachable = StoreError(.transient, "scripted: the database does not answer", outage: true)

    func process(_ messages: [InboundMessage], router: NotificationRouter, now: Date) async throws(StoreError)
        -> [StoredDecision]
    {
        let failure = state.withLock { state -> StoreError? in
            state.batches += 1
            if !state.failNextBatches.isEmpty { return state.failNextBatches.removeFirst() }
            return state.outage
        }
        if let failure { throw failure }
        return try await inner.process(messages, router: router, now: now)
    }

    func dryRun(_ messages: [InboundMessage], router: NotificationRouter, now: Date) async throws(StoreError)
        -> [StoredDecision]
    {
        try await inner.dryRun(messages, router: router, now: now)
    }

    func expireProcessedMessages(recordedBefore cutoff: Date) async throws(StoreError) -> Int {
        if let outage = state.withLock({ $0.outage }) { throw outage }
        return try await inner.expireProcessedMessages(recordedBefore: cutoff)
    }

    func checkAvailable() async throws(StoreError) {
        let held = await withCheckedContinuation { (continuation: CheckedContinuation<HeldCheck, Never>) in
            let holding = heldChecks.withLock { held -> Int? in
                guard held.holds else { return nil }
                held.waiting.append(continuation)
                return held.waiting.count
            }
            if let holding {
                heldCheckWaiters.changed(holding)
            } else {
                continuation.resume(returning: .notHeld)
            }
        }
        if case .answered(let failure) = held {
            let checks = state.withLock { state in
                state.checks += 1
                return state.checks
            }
            checkWaiters.changed(checks)
            if let failure { throw failure }
            return
        }
        let (outage, checks) = state.withLock { state -> (StoreError?, Int) in
            state.checks += 1
            return (state.outage, state.checks)
        }
        checkWaiters.changed(checks)
        if let outage { throw outage }
    }

    func close() async { await inner.close() }
}
