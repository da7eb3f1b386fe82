import AMQPTransport
import Foundation
import TestSupport
import Testing
import WalletRouting
import WalletStore

@testable import WalletWorker

/// The lifecycle's promises over random input sequences: a simulated broker, store and clock answer the machine's
/// actions in a random order (store answers of every kind, confirms that fail, checks, timers, session failures,
/// consumer ends, a stop), and every step is checked:
///
/// - no delivery is acknowledged (by its tag or by a `multiple` acknowledgement) before everything it published
///   is confirmed, and none is settled twice (acknowledged and requeued, say);
/// - no effect is applied twice by the worker's own retries: no store call includes a delivery already committed;
/// - one store call at a time per session;
/// and at the end, after a stop: every delivery has exactly one end (`ended`), which agrees with how the channel
/// settled it: acknowledged, rejected, requeued, or left unsettled to the session's close (given back or dropped).
@Suite("Delivery lifecycle: random inputs") struct DeliveryLifecyclePropertyTests {
    @Test(arguments: 0..<300)
    func invariantsHoldOverRandomInputs(seed: Int) {
        var world = SimulatedWorld(seed: UInt64(seed), shards: seed % 3 == 0)
        world.run(steps: 400)
        #expect(
            world.violations.isEmpty,
            "seed \(seed): \(world.violations.prefix(5))\n\(world.trace.suffix(40).joined(separator: "\n"))")
    }
}

/// A broker, a store and a clock for `DeliveryLifecycle`, driven by a seeded generator.
struct SimulatedWorld {
    typealias SessionID = DeliveryLifecycle.SessionID

    /// What the simulated consume channel of one session knows.
    struct Channel {
        var nextTag: UInt64 = 1
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
        var consuming = false
        var cancelled = false
        var endRequested = false
        var closed = false
        /// Deliveries still in transit after a cancel.
        var inTransit = 0
    }

    var machine: DeliveryLifecycle
    var random: SplitMix64
    var now: Duration = .zero
    var channels: [SessionID: Channel] = [:]
    var connects: [SessionID] = []
    var stores: [(session: SessionID, batch: DeliveryLifecycle.BatchID, tags: [UInt64], oneAtATime: Bool)] = []
    var publishes: [(session: SessionID, id: DeliveryLifecycle.PublishID, tags: [UInt64], messages: Int)] = []
    var checks: [DeliveryLifecycle.CheckID] = []
    var timers: [(id: DeliveryLifecycle.TimerID, at: Duration)] = []
    var closing: [SessionID] = []
    var stoppedPipelines: Set<Int> = []
    var pipelines: Int
    var isStopping = false
    var failed = false
    var violations: [String] = []
    var trace: [String] = []

    init(seed: UInt64, shards: Bool) {
        random = SplitMix64(seed: seed)
        pipelines = shards ? 2 : 1
        let queues = (0..<pipelines).map {
            ConsumedQueue(name: shards ? "shard.\($0)" : "work", retryQueue: "retry.\($0)", isShard: shards)
        }
        var configuration = DeliveryLifecycle.Configuration(
            topology: Topology(), retry: RetrySchedule(firstDelay: .seconds(1), longestDelay: .seconds(10), attempts: 3)
        )
        configuration.giveBackAfter = .seconds(30)
        machine = DeliveryLifecycle(configuration: configuration, queues: queues, seed: seed)
    }

    mutating func run(steps: Int) {
        apply(machine.start(), "start")
        let stopAt = steps / 2 + random.next(below: steps / 2)
        for step in 0..<steps {
            if step == stopAt { stop() }
            self.step(allowDeliveries: !isStopping)
        }
        stop()
        // Quiescence: everything pending answered, no new work.
        var rounds = 0
        while hasPending, rounds < 5_000 {
            self.step(allowDeliveries: false)
            rounds += 1
        }
        if hasPending || stoppedPipelines.count < pipelines {
            violations.append(
                "not quiescent after the stop: \(stores.count) stores, \(publishes.count) publishes, "
                    + "\(checks.count) checks, \(timers.count) timers, \(connects.count) connects, \(closing.count) closing, "
                    + "stopped pipelines \(stoppedPipelines)")
        }
        checkEnds()
    }

    var hasPending: Bool {
        !stores.isEmpty || !publishes.isEmpty || !checks.isEmpty || !connects.isEmpty || !closing.isEmpty
            || channels.values.contains { $0.cancelled && !$0.closed && $0.consuming }
            || (!timers.isEmpty && stoppedPipelines.count < pipelines)
    }

    mutating func stop() {
        guard !isStopping else { return }
        isStopping = true
        apply(machine.stopRequested(now: now), "stop")
    }

    // MARK: - One random event

    mutating func step(allowDeliveries: Bool) {
        let pick = random.next(below: 100)
        switch pick {
        case 0..<25 where allowDeliveries: deliver()
        case 0..<40 where !stores.isEmpty: answerStore()
        case 40..<60 where !publishes.isEmpty: answerPublish()
        case 60..<65 where !checks.isEmpty: answerCheck()
        case 65..<72 where !timers.isEmpty: fireTimer()
        case 72..<80 where !connects.isEmpty: answerConnect()
        case 80..<85 where !closing.isEmpty: close()
        case 85..<88: endConsumers()
        case 88..<90: failSession()
        default:
            // Whatever is pending, oldest kind first, so a run always moves on.
            if !connects.isEmpty {
                answerConnect()
            } else if !closing.isEmpty {
                close()
            } else if !stores.isEmpty {
                answerStore()
            } else if !publishes.isEmpty {
                answerPublish()
            } else if !checks.isEmpty {
                answerCheck()
            } else if channels.values.contains(where: { $0.cancelled && !$0.closed && $0.consuming }) {
                endConsumers()
            } else if !timers.isEmpty {
                fireTimer()
            } else if allowDeliveries {
                deliver()
            }
        }
    }

    private var openSessions: [SessionID] {
        channels.filter { $0.value.consuming && !$0.value.endRequested && !$0.value.closed }.map(\.key)
            .sorted { ($0.pipeline, $0.number) < ($1.pipeline, $1.number) }
    }

    mutating func deliver() {
        let sessions = openSessions.filter { !channels[$0]!.cancelled || channels[$0]!.inTransit > 0 }
        guard !sessions.isEmpty else { return }
        let id = sessions[random.next(below: sessions.count)]
        var channel = channels[id]!
        let count = 1 + random.next(below: channel.cancelled ? 1 : 4)
        if channel.cancelled { channel.inTransit -= 1 }
        var deliveries: [DeliveryLifecycle.Delivery] = []
        for _ in 0..<count {
            let tag = channel.nextTag
            channel.nextTag += 1
            channel.unsettled.insert(tag)
            channel.received.append(tag)
            // A few identities, so redelivered messages meet their poison records.
            let identity = random.next(below: 12)
            deliveries.append(
                DeliveryLifecycle.Delivery(
                    tag: tag, original: LifecycleHarness.original(id: "m\(identity)", body: #"{"n":\#(identity)}"#),
                    redelivered: false, receivedAt: now))
        }
        channels[id] = channel
        apply(machine.batchReceived(id, deliveries, now: now), "received \(id) \(deliveries.map(\.tag))")
    }

    mutating func answerStore() {
        let call = stores.remove(at: random.next(below: min(stores.count, 2)))
        channels[call.session]?.storeCalls -= 1
        let roll = random.next(below: 100)
        let answer: StoreAnswer
        if call.oneAtATime {
            let done = random.next(below: call.tags.count + 1)
            var outcomes: [StoreAnswer.Outcome] = []
            for tag in call.tags.prefix(done) {
                outcomes.append(random.next(below: 4) == 0 ? .refused(reason: "NUL") : .stored(decision(tag)))
            }
            answer = StoreAnswer(outcomes: outcomes, failure: done == call.tags.count ? nil : failure(roll))
        } else {
            switch roll {
            case 0..<55:
                var decisions: [StoredDecision] = []
                for tag in call.tags { decisions.append(decision(tag)) }
                answer = .stored(decisions)
            case 55..<65: answer = .failed(LifecycleHarness.refused)
            default: answer = .failed(failure(roll))
            }
        }
        let committed = answer.outcomes.indices.map { call.tags[$0] }
        if channels[call.session]?.closed == false { channels[call.session]?.committed.formUnion(committed) }
        apply(
            machine.storeAnswered(call.session, call.batch, answer, now: now),
            "store answered \(call.session) \(call.tags) committed \(committed) failure \(answer.failure.map { "\($0.kind)" } ?? "none")"
        )
    }

    private mutating func failure(_ roll: Int) -> StoreError {
        switch random.next(below: 100) {
        case 0..<3 where !failed: LifecycleHarness.permanent
        case 0..<50: LifecycleHarness.outage
        default: LifecycleHarness.ownFailure
        }
    }

    private mutating func decision(_ tag: UInt64) -> StoredDecision {
        switch random.next(below: 10) {
        case 0: LifecycleHarness.ignored(tag)
        case 1: LifecycleHarness.rejected(tag)
        default: LifecycleHarness.processed(tag)
        }
    }

    mutating func answerPublish() {
        let publish = publishes.remove(at: random.next(below: min(publishes.count, 2)))
        let roll = random.next(below: 100)
        let result: DeliveryLifecycle.ConfirmResult
        let outcome: AMQPPublishOutcome
        switch roll {
        case 0..<75: outcome = .confirmed
        case 75..<85: outcome = .nacked
        case 85..<90: outcome = .returned(replyCode: 312, replyText: "NO_ROUTE")
        case 90..<95: outcome = .unencodable(reason: "too big")
        default: outcome = .nacked
        }
        result =
            roll >= 95 ? .timedOut(after: .seconds(10)) : .outcomes(Array(repeating: outcome, count: publish.messages))
        let confirmed = roll < 75
        if var channel = channels[publish.session] {
            for tag in publish.tags {
                channel.awaiting[tag, default: 0] -= 1
                channel.lastPublishConfirmed[tag] = confirmed
            }
            channels[publish.session] = channel
        }
        apply(
            machine.confirmsArrived(publish.session, publish.id, result, now: now),
            "confirms \(publish.session) \(publish.tags) \(confirmed ? "confirmed" : "failed")")
    }

    mutating func answerCheck() {
        let check = checks.removeFirst()
        let passes = random.next(below: 100) < 60
        apply(
            machine.storeChecked(check, failure: passes ? nil : LifecycleHarness.outage, now: now),
            "check \(passes ? "passed" : "failed")")
    }

    mutating func fireTimer() {
        let index = random.next(below: timers.count)
        let timer = timers.remove(at: index)
        now = max(now, timer.at)
        apply(machine.timerFired(timer.id, now: now), "timer fired")
    }

    mutating func answerConnect() {
        let id = connects.removeFirst()
        channels[id] = Channel()
        if random.next(below: 5) == 0 {
            channels[id]?.closed = false
            apply(
                machine.sessionFailed(id, error: AMQPError(code: .connectionFailed, message: "refused"), now: now),
                "connect failed \(id)")
        } else {
            channels[id]?.consuming = true
            apply(machine.sessionStarted(id, frameMax: 131_072, now: now), "started \(id)")
        }
    }

    mutating func endConsumers() {
        for id in channels.keys.sorted(by: { ($0.pipeline, $0.number) < ($1.pipeline, $1.number) }) {
            guard let channel = channels[id], channel.cancelled, channel.consuming, !channel.closed,
                channel.inTransit == 0
            else { continue }
            channels[id]?.consuming = false
            apply(machine.consumerEnded(id, now: now), "consumer ended \(id)")
            return
        }
    }

    mutating func failSession() {
        let sessions = openSessions
        guard !sessions.isEmpty else { return }
        let id = sessions[random.next(below: sessions.count)]
        let errors: [any Error] = [
            AMQPError(code: .connectionLost, message: "reset"),
            AMQPError(code: .connectionClosedByBroker, message: "internal", replyCode: 541),
            AMQPError(
                code: .channelClosedByBroker, message: "timeout", replyCode: 406,
                replyText: "PRECONDITION_FAILED - delivery acknowledgement on channel 1 timed out"),
        ]
        apply(machine.sessionFailed(id, error: errors[random.next(below: errors.count)], now: now), "failed \(id)")
    }

    mutating func close() {
        let id = closing.removeFirst()
        if var channel = channels[id] {
            channel.returned = channel.unsettled
            channel.closed = true
            channel.consuming = false
            channels[id] = channel
        }
        stores.removeAll { $0.session == id && random.next(below: 2) == 0 }
        apply(machine.sessionClosed(id, now: now), "closed \(id)")
    }

    // MARK: - Actions and the per-step invariants

    mutating func apply(_ actions: [LifecycleAction], _ input: String) {
        trace.append(input)
        for action in actions {
            if let line = LifecycleHarness.summary(action, machine: machine) { trace.append("  \(line)") }
            switch action {
            case .connect(let id, _):
                connects.append(id)
            case .store(let id, let batch, let deliveries, let oneAtATime):
                let tags = deliveries.map(\.tag)
                guard var channel = channels[id] else {
                    violations.append("store for unknown session \(id)")
                    break
                }
                let again = tags.filter { channel.committed.contains($0) }
                if !again.isEmpty { violations.append("\(id): stored again after commit: \(again)") }
                if channel.storeCalls > 0 { violations.append("\(id): two store calls at once") }
                channel.storeCalls += 1
                channels[id] = channel
                stores.append((id, batch, tags, oneAtATime))
            case .publish(let id, let publish, let tags, let plans):
                var published: [UInt64] = []
                var messages = 0
                for (tag, plan) in zip(tags, plans) where !plan.messages.isEmpty {
                    published.append(tag)
                    messages += plan.messages.count
                    channels[id]?.awaiting[tag, default: 0] += 1
                }
                publishes.append((id, publish, published, messages))
            case .settle(let id, let settlements):
                settle(id, settlements)
            case .cancelConsumer(let id):
                channels[id]?.cancelled = true
                channels[id]?.inTransit = random.next(below: 2)
            case .endSession(let id, _):
                channels[id]?.endRequested = true
                closing.append(id)
            case .stopPipeline(let pipeline):
                if !stoppedPipelines.insert(pipeline).inserted {
                    violations.append("pipeline \(pipeline) stopped twice")
                }
            case .startTimer(let timer, let delay):
                timers.append((timer, now + delay))
            case .checkStore(let check):
                checks.append(check)
            case .failWorker:
                failed = true
            case .sendDirectReplies:
                break
            case .report(let event):
                if case .ended(let ends) = event {
                    for end in ends {
                        guard channels[end.session] != nil else {
                            violations.append("an end for unknown session \(end.session)")
                            continue
                        }
                        channels[end.session]!.ends[end.delivery.tag, default: []].append(end.fate)
                    }
                }
            }
        }
    }

    mutating func settle(_ id: SessionID, _ settlements: [Settlement]) {
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
