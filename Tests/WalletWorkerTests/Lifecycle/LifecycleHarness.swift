import AMQPTransport
import Foundation
import WalletRouting
import WalletStore

@testable import WalletWorker

/// Drives a `DeliveryLifecycle` as its executor would, without any I/O: it keeps the actions the machine asked for
/// that wait for an answer (store calls, publishes, store checks, timers, sessions to open or close), answers them
/// on request, and writes every action as a short line (`summary`) for table-driven expectations.
struct LifecycleHarness {
    var machine: DeliveryLifecycle
    /// The clock: every input carries it.
    var now: Duration = .zero
    var session: DeliveryLifecycle.SessionID?
    /// Store calls not yet answered, oldest first.
    var stores:
        [(session: DeliveryLifecycle.SessionID, batch: DeliveryLifecycle.BatchID, tags: [UInt64], oneAtATime: Bool)] =
            []
    /// Publishes not yet confirmed, oldest first, with the number of messages each sent.
    var publishes:
        [(session: DeliveryLifecycle.SessionID, id: DeliveryLifecycle.PublishID, tags: [UInt64], messages: Int)] = []
    var checks: [DeliveryLifecycle.CheckID] = []
    var timers: [(id: DeliveryLifecycle.TimerID, purpose: String)] = []
    /// Every timer's delay so far, by purpose.
    var timerDelays: [String: [Duration]] = [:]
    var connects: [DeliveryLifecycle.SessionID] = []
    var endedSessions: [DeliveryLifecycle.SessionID] = []
    var failures: [String] = []
    /// What each delivery tag was received as.
    var deliveries: [UInt64: DeliveryLifecycle.Delivery] = [:]
    /// Every action so far, as lines.
    var log: [String] = []

    static let topology = Topology()

    init(
        queues: [ConsumedQueue] = [ConsumedQueue(name: "work", retryQueue: "work.retry", isShard: false)],
        configure: (inout DeliveryLifecycle.Configuration) -> Void = { _ in }
    ) {
        var configuration = DeliveryLifecycle.Configuration(
            topology: Self.topology,
            retry: RetrySchedule(firstDelay: .seconds(5), longestDelay: .seconds(300), attempts: 5))
        configuration.giveBackAfter = .seconds(60)
        configure(&configuration)
        machine = DeliveryLifecycle(configuration: configuration, queues: queues, seed: 42)
    }

    /// A pipeline connected and consuming: the first session of pipeline 0.
    static func consuming(shard: Bool = false, configure: (inout DeliveryLifecycle.Configuration) -> Void = { _ in })
        -> LifecycleHarness
    {
        var harness = LifecycleHarness(
            queues: [ConsumedQueue(name: shard ? "shard.0" : "work", retryQueue: "retry", isShard: shard)],
            configure: configure)
        _ = harness.start()
        _ = harness.started()
        return harness
    }

    // MARK: - Inputs

    @discardableResult
    mutating func start() -> [String] {
        apply(machine.start())
    }

    @discardableResult
    mutating func started(frameMax: Int = 131_072) -> [String] {
        let id = connects.removeFirst()
        session = id
        return apply(machine.sessionStarted(id, frameMax: frameMax, now: now))
    }

    /// Deliveries with these tags arrive on the current session.
    @discardableResult
    mutating func receive(_ tags: [UInt64], body: String = #"{"action":"refresh"}"#) -> [String] {
        let deliveries = tags.map { tag in
            DeliveryLifecycle.Delivery(
                tag: tag, original: Self.original(id: "m\(tag)", body: body), redelivered: false, receivedAt: now)
        }
        for delivery in deliveries { self.deliveries[delivery.tag] = delivery }
        return apply(machine.batchReceived(session!, deliveries, now: now))
    }

    /// The oldest store call answered: every message stored with `decision` (one result each, by default).
    @discardableResult
    mutating func stored(_ decision: (UInt64) -> StoredDecision = { Self.processed($0) }) -> [String] {
        let call = stores.removeFirst()
        return apply(
            machine.storeAnswered(
                call.session, call.batch, .stored(call.tags.map(decision)), now: now))
    }

    /// The oldest store call answered with `answer` built from its tags.
    @discardableResult
    mutating func storeAnswers(_ answer: ([UInt64]) -> StoreAnswer) -> [String] {
        let call = stores.removeFirst()
        return apply(machine.storeAnswered(call.session, call.batch, answer(call.tags), now: now))
    }

    @discardableResult
    mutating func storeFails(_ error: StoreError) -> [String] {
        storeAnswers { _ in .failed(error) }
    }

    /// The oldest store check answered.
    @discardableResult
    mutating func checked(passes: Bool) -> [String] {
        let check = checks.removeFirst()
        return apply(
            machine.storeChecked(
                check, failure: passes ? nil : StoreError(.transient, "check failed", outage: true), now: now))
    }

    /// The oldest publish confirmed: every message `outcome`.
    @discardableResult
    mutating func confirmed(_ outcome: AMQPPublishOutcome = .confirmed) -> [String] {
        let publish = publishes.removeFirst()
        return apply(
            machine.confirmsArrived(
                publish.session, publish.id, .outcomes(Array(repeating: outcome, count: publish.messages)), now: now))
    }

    @discardableResult
    mutating func confirmsTimedOut() -> [String] {
        let publish = publishes.removeFirst()
        return apply(machine.confirmsArrived(publish.session, publish.id, .timedOut(after: .seconds(10)), now: now))
    }

    /// The oldest timer for `purpose` fires (after the clock moves on by `advance`).
    @discardableResult
    mutating func fire(_ purpose: String, advance: Duration = .zero) -> [String] {
        now += advance
        guard let index = timers.firstIndex(where: { $0.purpose == purpose }) else {
            return ["no \(purpose) timer"]
        }
        let timer = timers.remove(at: index)
        return apply(machine.timerFired(timer.id, now: now))
    }

    @discardableResult
    mutating func consumerEnded() -> [String] {
        apply(machine.consumerEnded(session!, now: now))
    }

    @discardableResult
    mutating func sessionFailed(_ error: any Error = AMQPError(code: .connectionLost, message: "reset")) -> [String] {
        apply(machine.sessionFailed(session!, error: error, now: now))
    }

    @discardableResult
    mutating func closed() -> [String] {
        let id = endedSessions.removeFirst()
        if session == id { session = nil }
        return apply(machine.sessionClosed(id, now: now))
    }

    @discardableResult
    mutating func stop() -> [String] {
        apply(machine.stopRequested(now: now))
    }

    /// The delays of the timers started for `purpose`, in order.
    func delays(_ purpose: String) -> [Duration] { timerDelays[purpose] ?? [] }

    // MARK: - Actions

    /// Records what waits for an answer, and returns the actions as lines.
    mutating func apply(_ actions: [LifecycleAction]) -> [String] {
        var lines: [String] = []
        for action in actions {
            switch action {
            case .connect(let id, _): connects.append(id)
            case .store(let id, let batch, let deliveries, let oneAtATime):
                stores.append((id, batch, deliveries.map(\.tag), oneAtATime))
            case .publish(let id, let publish, let tags, let plans):
                publishes.append((id, publish, tags, plans.reduce(0) { $0 + $1.messages.count }))
            case .checkStore(let check): checks.append(check)
            case .startTimer(let timer, let delay):
                let purpose = machine.purpose(of: timer).map(Self.name) ?? "?"
                timers.append((timer, purpose))
                timerDelays[purpose, default: []].append(delay)
            case .endSession(let id, _): endedSessions.append(id)
            case .failWorker(let error): failures.append("\(error)")
            default: break
            }
            if let line = summary(action) { lines += line.split(separator: "\n").map(String.init) }
        }
        log += lines
        return lines
    }

    /// An action as a line; nil for the reports a table does not look at.
    func summary(_ action: LifecycleAction) -> String? {
        Self.summary(action, machine: machine)
    }

    static func summary(_ action: LifecycleAction, machine: DeliveryLifecycle) -> String? {
        switch action {
        case .connect(let id, _): "connect \(id)"
        case .store(_, _, let deliveries, let oneAtATime):
            (oneAtATime ? "store one by one " : "store ") + tags(deliveries.map(\.tag))
        case .publish(_, _, let tags, let plans):
            "publish " + zip(tags, plans).map { "\($0)×\($1.messages.count)" }.joined(separator: ",")
        case .sendDirectReplies(_, let copies): "direct replies \(copies.count)"
        case .settle(_, let settlements):
            "settle "
                + settlements.map {
                    switch $0 {
                    case .ack(let tag, let multiple): multiple ? "ack ≤\(tag)" : "ack \(tag)"
                    case .requeue(let tag): "requeue \(tag)"
                    case .reject(let tag): "reject \(tag)"
                    }
                }.joined(separator: ", ")
        case .cancelConsumer: "cancel consumer"
        case .endSession(_, let end): "end session \(name(end))"
        case .stopPipeline(let pipeline): "stop pipeline \(pipeline)"
        case .startTimer(let timer, _): "timer " + (machine.purpose(of: timer).map(name) ?? "?")
        case .checkStore: "check store"
        case .failWorker: "fail worker"
        case .report(let event): summary(event)
        }
    }

    static func summary(_ event: LifecycleEvent) -> String? {
        switch event {
        case .ended(let ends): ends.map { "\($0.delivery.tag) \($0.fate.name)" }.joined(separator: "\n")
        case .storeOutageBegan: "outage began"
        case .storeOutageEnded: "outage ended"
        case .givingBack(_, let count, _): "giving back \(count)"
        case .requeueDelayed(_, let count, _): "requeue delayed \(count)"
        case .sessionFailed: "session failed"
        case .reconnecting(_, let attempt, _): "reconnecting \(attempt)"
        case .storingOneAtATime: "one at a time"
        case .batchFailsWhileStoreAnswers: "the batch's own failure"
        case .resultNotTaken(_, let delivery, _): "result not taken \(delivery.tag)"
        case .received, .consuming, .sessionEnded, .publishNotConfirmed, .replyCopiesReturned: nil
        }
    }

    static func tags(_ tags: [UInt64]) -> String { tags.map(String.init).joined(separator: ",") }

    static func name(_ purpose: DeliveryLifecycle.TimerPurpose) -> String {
        switch purpose {
        case .retryStore: "retry store"
        case .requeue: "requeue"
        case .probeStore: "probe"
        case .giveBack: "give back"
        }
    }

    static func name(_ end: SessionEnd) -> String {
        switch end {
        case .stopped: "stopped"
        case .consumerEnded: "consumer ended"
        case .pausedForStore: "paused for the store"
        case .failed: "failed"
        }
    }

    // MARK: - Messages and decisions

    static func original(id: String?, body: String = #"{"action":"refresh"}"#) -> OriginalMessage {
        OriginalMessage(
            body: Array(body.utf8),
            properties: AMQPMessageProperties(contentType: "application/json", messageID: id),
            routingKey: "notification")
    }

    /// One result, acknowledged.
    static func processed(_ tag: UInt64) -> StoredDecision {
        decision(tag, results: 1, disposition: .acknowledge, outcome: .processed)
    }

    /// No result (an ignored notification), acknowledged.
    static func ignored(_ tag: UInt64) -> StoredDecision {
        decision(tag, results: 0, disposition: .acknowledge, outcome: .ignored)
    }

    /// Bad input: its `rejected` result, then its dead letter.
    static func rejected(_ tag: UInt64) -> StoredDecision {
        decision(tag, results: 1, disposition: .deadLetter(reason: "body is not JSON"), outcome: .rejected)
    }

    static func decision(_ tag: UInt64, results: Int, disposition: Disposition, outcome: Outcome) -> StoredDecision {
        let result = OutboundResult(
            exchange: topology.resultExchanges.actions, routingKey: "action.refresh", body: Array("{}".utf8),
            properties: OutboundProperties(
                messageID: "m\(tag)/0", correlationID: nil, type: "actionTriggered", traceparent: nil))
        return StoredDecision(
            decision: Decision(
                effects: [], results: Array(repeating: result, count: results), disposition: disposition,
                outcome: outcome, sender: nil, digitalCardId: nil),
            isReplay: false)
    }

    static let outage = StoreError(.transient, "SQLite busy: database is locked", outage: true)
    static let ownFailure = StoreError(.transient, "PostgreSQL lock not available (SQLSTATE 55P03)")
    static let refused = StoreError(.refusedInput, "PostgreSQL data exception (SQLSTATE 22021)")
    static let permanent = StoreError(.permanent, "SQLite corrupt")
}
