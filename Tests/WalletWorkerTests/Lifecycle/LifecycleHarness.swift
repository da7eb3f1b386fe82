import AMQPTransport
import Foundation
import WalletMessages
import WalletRouting
import WalletStore

@testable import WalletWorker

/// Drives a `DeliveryLifecycle` as its executor would, without any I/O: it keeps the actions the machine asked for
/// that wait for an answer (store calls, publishes, store checks, timers, sessions to open or close), answers them
/// on request, and writes every action as a short line (`summary`) for table-driven expectations. What the channel
/// and the store saw through its inputs is checked against the lifecycle's promises (`invariants`).
struct LifecycleHarness {
    var machine: DeliveryLifecycle
    /// The clock: every input carries it.
    var now: Duration = .zero
    var session: DeliveryLifecycle.SessionID?
    /// Store calls not yet answered, oldest first.
    var stores:
        [(session: DeliveryLifecycle.SessionID, batch: DeliveryLifecycle.BatchID, tags: [UInt64], oneAtATime: Bool)] =
            []
    /// Publishes not yet confirmed, oldest first, with the deliveries that publish messages and how many it sent.
    var publishes:
        [(
            session: DeliveryLifecycle.SessionID, id: DeliveryLifecycle.PublishID, tags: [UInt64], published: [UInt64],
            messages: Int
        )] = []
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
    /// The lifecycle's promises over the inputs given through the harness (not over those given to `machine`).
    var invariants = LifecycleInvariants()

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
        invariants.opened(id)
        return apply(machine.sessionStarted(id, frameMax: frameMax, now: now))
    }

    /// Deliveries with these tags arrive on the current session.
    /// `failedAttempts`: each one's retry count header, as its earlier trips through the retry queue left it.
    @discardableResult
    mutating func receive(_ tags: [UInt64], body: String = #"{"action":"refresh"}"#, failedAttempts: Int = 0)
        -> [String]
    {
        receive(tags, body: body, failedAttempts: Dictionary(uniqueKeysWithValues: tags.map { ($0, failedAttempts) }))
    }

    /// One batch whose deliveries have each its own retry count header (none for a tag not listed).
    @discardableResult
    mutating func receive(_ tags: [UInt64], body: String = #"{"action":"refresh"}"#, failedAttempts: [UInt64: Int])
        -> [String]
    {
        let deliveries = tags.map { tag in
            var original = Self.original(id: "m\(tag)", body: body)
            if let count = failedAttempts[tag], count > 0 {
                original.properties.headers = [WorkerHeaders.retryCount: .int32(Int32(count))]
            }
            return DeliveryLifecycle.Delivery(tag: tag, original: original, redelivered: false, receivedAt: now)
        }
        for delivery in deliveries {
            self.deliveries[delivery.tag] = delivery
            invariants.received(session!, delivery.tag)
        }
        return apply(machine.batchReceived(session!, deliveries, now: now))
    }

    /// The oldest store call answered: every message stored with `decision` (one result each, by default).
    @discardableResult
    mutating func stored(_ decision: (UInt64) -> StoredDecision = { Self.processed($0) }) -> [String] {
        storeAnswers { tags in .stored(tags.map(decision)) }
    }

    /// The oldest store call answered with `answer` built from its tags.
    @discardableResult
    mutating func storeAnswers(_ answer: ([UInt64]) -> StoreAnswer) -> [String] {
        let call = stores.removeFirst()
        let answer = answer(call.tags)
        invariants.storeAnswered(call.session, committed: answer.outcomes.indices.map { call.tags[$0] })
        return apply(machine.storeAnswered(call.session, call.batch, answer, now: now))
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
        let confirmed = if case .confirmed = outcome { true } else { false }
        invariants.publishAnswered(publish.session, publish.published, confirmed: confirmed)
        return apply(
            machine.confirmsArrived(
                publish.session, publish.id, .outcomes(Array(repeating: outcome, count: publish.messages)), now: now))
    }

    /// The oldest publish confirmed, but the messages of the deliveries in `refused` returned 312 `NO_ROUTE` (every
    /// plan publishing one message, as `processed` decisions do).
    @discardableResult
    mutating func confirmed(returning refused: Set<UInt64>) -> [String] {
        let publish = publishes.removeFirst()
        precondition(publish.messages == publish.tags.count, "one message per delivery")
        let outcomes = publish.tags.map { tag -> AMQPPublishOutcome in
            refused.contains(tag) ? .returned(replyCode: 312, replyText: "NO_ROUTE") : .confirmed
        }
        invariants.publishAnswered(
            publish.session, publish.published.filter { !refused.contains($0) }, confirmed: true)
        invariants.publishAnswered(publish.session, publish.published.filter(refused.contains), confirmed: false)
        return apply(machine.confirmsArrived(publish.session, publish.id, .outcomes(outcomes), now: now))
    }

    @discardableResult
    mutating func confirmsTimedOut() -> [String] {
        let publish = publishes.removeFirst()
        invariants.publishAnswered(publish.session, publish.published, confirmed: false)
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
        invariants.closed(id)
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
            invariants.observe(action)
            switch action {
            case .connect(let id, _, _): connects.append(id)
            case .store(let id, let batch, let deliveries, let oneAtATime):
                stores.append((id, batch, deliveries.map(\.tag), oneAtATime))
            case .publish(let id, let publish, let tags, let plans):
                publishes.append(
                    (
                        id, publish, tags, LifecycleInvariants.published(tags, plans),
                        plans.reduce(0) { $0 + $1.messages.count }
                    ))
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
        case .connect(let id, _, let release): "connect \(id)" + (release == nil ? "" : " after the release")
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
        case .noteResultDelivery(let changes):
            "note "
                + changes.map {
                    switch $0 {
                    case .undelivered(let id, let reason, _): "\(id) undelivered (\(reason))"
                    case .delivered(let id): "\(id) delivered"
                    }
                }.joined(separator: ", ")
        case .failWorker: "fail worker"
        case .report(let event): summary(event)
        }
    }

    static func summary(_ event: LifecycleEvent) -> String? {
        switch event {
        case .ended(let ends): ends.map { "\($0.delivery.tag) \($0.fate.name)" }.joined(separator: "\n")
        case .storeOutageBegan: "outage began"
        case .storeOutageEnded: "outage ended"
        case .givingBack(_, let count, _, _): "giving back \(count)"
        case .requeueDelayed(_, let count, _): "requeue delayed \(count)"
        case .sessionFailed: "session failed"
        case .reconnecting(_, let attempt, _): "reconnecting \(attempt)"
        case .storingOneAtATime: "one at a time"
        case .batchFailsWhileStoreAnswers: "the batch's own failure"
        case .resultNotTaken(_, let delivery, _): "result not taken \(delivery.tag)"
        case .paused(let cause, _, let failedTrial, _):
            failedTrial.map { "trial \($0) failed: paused for the \(cause.rawValue)" }
                ?? "paused for the \(cause.rawValue)"
        case .trialBegan(_, let attempt, _): "trial \(attempt)"
        case .resumed(_, _, let gaveBack): "resumed, gave back \(gaveBack)"
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
        case .giveBackHeldResults: "give back held results"
        case .resultsTrial: "results trial"
        case .resultsTrialDeadline: "trial deadline"
        }
    }

    static func name(_ end: SessionEnd) -> String {
        switch end {
        case .stopped: "stopped"
        case .consumerEnded: "consumer ended"
        case .pausedForStore: "paused for the store"
        case .pausedForResults: "paused for the results"
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
            // As the store records it: under the delivery's id ("m" and its tag), unless it is a rejection.
            isReplay: false, recordedMessageID: disposition == .acknowledge ? "m\(tag)" : nil)
    }

    static let outage = StoreError(.transient, "SQLite busy: database is locked", outage: true)
    static let ownFailure = StoreError(.transient, "PostgreSQL lock not available (SQLSTATE 55P03)")
    static let refused = StoreError(.refusedInput, "PostgreSQL data exception (SQLSTATE 22021)")
    static let permanent = StoreError(.permanent, "SQLite corrupt")
}

/// The lifecycle's promises, checked on what a channel saw: the deliveries it received, the actions the machine
/// returned and the answers it was given (`DeliveryLifecyclePropertyTests` and the fresh-input matrix share it).
///
/// - no delivery is acknowledged (by its tag or by a `multiple` acknowledgement) before everything it published
///   is confirmed, and none is settled twice (acknowledged and requeued, say);
/// - no effect is applied twice by the worker's own retries: no store call includes a delivery already committed;
/// - one store call at a time per session;
/// and at the end (`checkEnds`, once every session is closed): every delivery has exactly one end (`ended`), which
/// agrees with how the channel settled it: acknowledged, rejected, requeued, or left unsettled to the session's close
/// (given back or dropped).
struct LifecycleInvariants {
    typealias SessionID = DeliveryLifecycle.SessionID

    /// What the consume channel of one session knows.
    struct Channel {
        var unsettled: Set<UInt64> = []
        var received: [UInt64] = []
        var acknowledged: Set<UInt64> = []
        var rejected: Set<UInt64> = []
        var requeued: Set<UInt64> = []
        /// Unsettled when the session closed: returned by the broker.
        var returned: Set<UInt64> = []
        var ends: [UInt64: [DeliveryFate]] = [:]
        /// Committed by the store in this session.
        var committed: Set<UInt64> = []
        /// Publishes containing the delivery's messages not yet answered.
        var awaiting: [UInt64: Int] = [:]
        /// Whether the last answered publish with the delivery's messages was confirmed whole.
        var lastPublishConfirmed: [UInt64: Bool] = [:]
        var storeCalls = 0
        var closed = false
    }

    var channels: [SessionID: Channel] = [:]
    var violations: [String] = []

    // MARK: - What the channel and the store did

    /// The session is consuming (or its connect failed): its channel exists.
    mutating func opened(_ id: SessionID) {
        channels[id] = Channel()
    }

    mutating func received(_ id: SessionID, _ tag: UInt64) {
        channels[id]?.unsettled.insert(tag)
        channels[id]?.received.append(tag)
    }

    /// The store answered a store call of `id`, committing `committed`.
    mutating func storeAnswered(_ id: SessionID, committed: [UInt64]) {
        channels[id]?.storeCalls -= 1
        if channels[id]?.closed == false { channels[id]?.committed.formUnion(committed) }
    }

    /// The broker answered a publish with the messages of `tags`: confirmed whole, or not.
    mutating func publishAnswered(_ id: SessionID, _ tags: [UInt64], confirmed: Bool) {
        guard var channel = channels[id] else { return }
        for tag in tags {
            channel.awaiting[tag, default: 0] -= 1
            channel.lastPublishConfirmed[tag] = confirmed
        }
        channels[id] = channel
    }

    /// The session closed: what it left unsettled goes back to the queue.
    mutating func closed(_ id: SessionID) {
        guard var channel = channels[id] else { return }
        channel.returned = channel.unsettled
        channel.closed = true
        channels[id] = channel
    }

    /// The deliveries of a publish that publish messages (those whose confirms they wait for).
    static func published(_ tags: [UInt64], _ plans: [DeliveryPlan]) -> [UInt64] {
        zip(tags, plans).filter { !$0.1.messages.isEmpty }.map(\.0)
    }

    // MARK: - The per-action invariants

    /// An action of the machine, in the order returned.
    mutating func observe(_ action: LifecycleAction) {
        switch action {
        case .store(let id, _, let deliveries, _):
            let tags = deliveries.map(\.tag)
            guard var channel = channels[id] else {
                violations.append("store for unknown session \(id)")
                return
            }
            let again = tags.filter { channel.committed.contains($0) }
            if !again.isEmpty { violations.append("\(id): stored again after commit: \(again)") }
            if channel.storeCalls > 0 { violations.append("\(id): two store calls at once") }
            channel.storeCalls += 1
            channels[id] = channel
        case .publish(let id, _, let tags, let plans):
            for tag in Self.published(tags, plans) { channels[id]?.awaiting[tag, default: 0] += 1 }
        case .settle(let id, let settlements):
            settle(id, settlements)
        case .report(.ended(let ends)):
            for end in ends {
                guard channels[end.session] != nil else {
                    violations.append("an end for unknown session \(end.session)")
                    continue
                }
                channels[end.session]!.ends[end.delivery.tag, default: []].append(end.fate)
            }
        default:
            break
        }
    }

    private mutating func settle(_ id: SessionID, _ settlements: [Settlement]) {
        guard var channel = channels[id], !channel.closed else {
            violations.append("settle on a closed or unknown session \(id)")
            return
        }
        for settlement in settlements {
            switch settlement {
            case .ack(let tag, let multiple):
                guard channel.unsettled.contains(tag) else {
                    violations.append("\(id): ack of \(tag), not unsettled")
                    continue
                }
                let covered = multiple ? channel.unsettled.filter { $0 <= tag } : [tag]
                for covered in covered {
                    if channel.awaiting[covered, default: 0] > 0 {
                        violations.append("\(id): \(covered) acknowledged while its publish awaits confirms")
                    }
                    if channel.lastPublishConfirmed[covered] == false {
                        violations.append("\(id): \(covered) acknowledged though its last publish was not confirmed")
                    }
                    channel.unsettled.remove(covered)
                    channel.acknowledged.insert(covered)
                }
            case .requeue(let tag):
                if channel.unsettled.remove(tag) == nil { violations.append("\(id): requeue of \(tag), not unsettled") }
                channel.requeued.insert(tag)
            case .reject(let tag):
                if channel.unsettled.remove(tag) == nil { violations.append("\(id): reject of \(tag), not unsettled") }
                channel.rejected.insert(tag)
            }
        }
        channels[id] = channel
    }

    // MARK: - The final invariants

    mutating func checkEnds() {
        for (id, channel) in channels {
            for tag in channel.received {
                let ends = channel.ends[tag] ?? []
                guard ends.count == 1, let fate = ends.first else {
                    violations.append("\(id): \(tag) ended \(ends.count) times: \(ends.map(\.name))")
                    continue
                }
                if channel.acknowledged.contains(tag) {
                    if !fate.leavesTheQueue || fate.name == "rejected_to_broker" {
                        violations.append("\(id): \(tag) acknowledged but ended \(fate.name)")
                    }
                } else if channel.rejected.contains(tag) {
                    if fate.name != "rejected_to_broker" {
                        violations.append("\(id): \(tag) rejected but ended \(fate.name)")
                    }
                } else if channel.requeued.contains(tag) || channel.returned.contains(tag) {
                    if fate.leavesTheQueue {
                        violations.append("\(id): \(tag) went back to the queue but ended \(fate.name)")
                    }
                } else {
                    violations.append("\(id): \(tag) never settled nor returned (ended \(fate.name))")
                }
            }
        }
    }
}
