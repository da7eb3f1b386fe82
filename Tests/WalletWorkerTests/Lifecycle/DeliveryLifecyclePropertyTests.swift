import AMQPTransport
import Foundation
import TestSupport
import Testing
import WalletMessages
import WalletRouting
import WalletStore

@testable import WalletWorker

/// The lifecycle's promises over random input sequences: a simulated broker, store and clock answer the machine's
/// actions in a random order (store answers of every kind, confirms that fail, checks, timers, session failures,
/// consumer ends, a stop), and every step is checked (`LifecycleInvariants`):
///
/// - no delivery is acknowledged (by its tag or by a `multiple` acknowledgement) before everything it published
///   is confirmed, and none is settled twice (acknowledged and requeued, say);
/// - no effect is applied twice by the worker's own retries: no store call includes a delivery already committed;
/// - one store call at a time per session;
/// and at the end, after a stop: every delivery has exactly one end (`ended`), which agrees with how the channel
/// settled it: acknowledged, rejected, requeued, or left unsettled to the session's close (given back or dropped).
/// The run is also quiescent after the stop, and no pipeline is stopped twice.
@Suite("Delivery lifecycle: random inputs", .cpuBound) struct DeliveryLifecyclePropertyTests {
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

    /// What the simulated consume channel of one session does (what it knows for the invariants is `invariants`).
    struct Channel {
        var nextTag: UInt64 = 1
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
    var invariants = LifecycleInvariants()
    var violations: [String] { invariants.violations }
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
        // Half the runs hold refused deliveries through a results pause (a quorum work queue's way).
        configuration.holdsRefusedThroughAPause = seed % 2 == 1
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
            invariants.violations.append(
                "not quiescent after the stop: \(stores.count) stores, \(publishes.count) publishes, "
                    + "\(checks.count) checks, \(timers.count) timers, \(connects.count) connects, \(closing.count) closing, "
                    + "stopped pipelines \(stoppedPipelines)")
        }
        invariants.checkEnds()
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
            invariants.received(id, tag)
            // A few identities, so redelivered messages meet their poison records; a quarter of them on their last
            // attempt, so refusals meet the rule that will not dead-letter them while nothing is taken.
            let identity = random.next(below: 12)
            var original = LifecycleHarness.original(id: "m\(identity)", body: #"{"n":\#(identity)}"#)
            if identity % 4 == 0 { original.properties.headers = [WorkerHeaders.retryCount: .int32(2)] }
            deliveries.append(
                DeliveryLifecycle.Delivery(tag: tag, original: original, redelivered: false, receivedAt: now))
        }
        channels[id] = channel
        apply(machine.batchReceived(id, deliveries, now: now), "received \(id) \(deliveries.map(\.tag))")
    }

    mutating func answerStore() {
        let call = stores.remove(at: random.next(below: min(stores.count, 2)))
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
        invariants.storeAnswered(call.session, committed: committed)
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
        invariants.publishAnswered(publish.session, publish.tags, confirmed: confirmed)
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
        invariants.opened(id)
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
            channel.closed = true
            channel.consuming = false
            channels[id] = channel
        }
        invariants.closed(id)
        stores.removeAll { $0.session == id && random.next(below: 2) == 0 }
        apply(machine.sessionClosed(id, now: now), "closed \(id)")
    }

    // MARK: - Actions and the per-step invariants

    mutating func apply(_ actions: [LifecycleAction], _ input: String) {
        trace.append(input)
        for action in actions {
            if let line = LifecycleHarness.summary(action, machine: machine) { trace.append("  \(line)") }
            invariants.observe(action)
            switch action {
            case .connect(let id, _, _):
                connects.append(id)
            case .store(let id, let batch, let deliveries, let oneAtATime):
                // A store for an unknown session is a violation (`invariants`), and never answered.
                if invariants.channels[id] != nil { stores.append((id, batch, deliveries.map(\.tag), oneAtATime)) }
            case .publish(let id, let publish, let tags, let plans):
                let messages = plans.reduce(0) { $0 + $1.messages.count }
                publishes.append((id, publish, LifecycleInvariants.published(tags, plans), messages))
            case .settle, .noteResultDelivery:
                break
            case .cancelConsumer(let id):
                channels[id]?.cancelled = true
                channels[id]?.inTransit = random.next(below: 2)
            case .endSession(let id, _):
                channels[id]?.endRequested = true
                closing.append(id)
            case .stopPipeline(let pipeline):
                if !stoppedPipelines.insert(pipeline).inserted {
                    invariants.violations.append("pipeline \(pipeline) stopped twice")
                }
            case .startTimer(let timer, let delay):
                timers.append((timer, now + delay))
            case .checkStore(let check):
                checks.append(check)
            case .failWorker:
                failed = true
            case .sendDirectReplies, .report:
                break
            }
        }
    }
}
