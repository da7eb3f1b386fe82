import AMQPTransport
import WalletRouting
import WalletStore

/// Everything that decides what happens to a delivery, from the moment a consumer hands it over until it leaves the
/// worker: stored, published, confirmed, retried or dead-lettered, acknowledged; held while the store is out and
/// given back before the broker's consumer timeout; isolated when it may be poison; finished on SIGTERM, or handed
/// over with its shard. Pure: inputs in (a batch, the store's answer, confirms, a timer, a session lost, a stop),
/// actions out (`LifecycleAction`); no I/O, no locks, no clock (every input carries `now`, a monotonic time), and
/// its randomness is seeded by its maker. A thin executor runs the actions (`LifecycleDriver`, `Pipeline`).
///
/// One machine serves every pipeline of the process, as the poison suspects and the store's availability are the
/// process's. A pipeline runs sessions (its connections, from connect to close) one after another; a work-queue
/// pipeline and a shard pipeline are two configurations of the same rules:
///
/// - Batches are stored one at a time, in order. A work-queue pipeline stores the next batch while earlier ones
///   wait for their confirms; a shard pipeline takes the next only when the last is settled, so a stop hands
///   the shard over with nothing in flight.
/// - Nothing is acknowledged before everything its fate depends on is confirmed; acknowledgements with `multiple`
///   never cover a delivery that is not settled with them (`UnsettledTags`).
/// - Of a batch the store fails part-way (one message at a time, after it refused some data), only the messages not
///   committed are held or retried: the committed ones are published and acknowledged.
/// - A transient store failure is checked (`checkStore`: a write that rolls back). When the store fails its check,
///   or the failure says the whole store is out (`StoreError.isOutage`), the store is out for the whole process:
///   batches are held, unacknowledged, and tried again when a probe passes; after `giveBackAfter` they are given
///   back and the pipeline pauses until the store answers. When the store passes its check but the batch keeps
///   failing, the failure is the batch's own: it goes to the retry queue.
/// - Deliveries whose results were not taken get a second publish (their retry copy or dead letter); those
///   confirmed are acknowledged at once, the rest requeued after a growing delay.
/// - Results refused for every message pause the worker (`ResultsAvailability`), and so does a message refused on
///   its last attempt while nothing shows the results route for others (`ResultsKillSwitch.lastAttemptRefused`):
///   what it holds goes back and a trial consumes again later; on a quorum work queue, where each give-back counts
///   toward the delivery limit, the refused deliveries are held instead and each trial publishes their results
///   again (`holdsRefusedThroughAPause`).
struct DeliveryLifecycle: Sendable {
    struct Configuration: Sendable {
        /// Exchange and queue names; each pipeline's retry queue is its `ConsumedQueue`'s.
        var topology: Topology
        var retry: RetrySchedule
        var reconnectBackoff = ReconnectBackoff()
        /// Waits between tries of a batch the store failed, and between probes of a store that is out.
        var storeCheckBackoff = ProbeBackoff()
        /// Transient failures of a batch while the store passes its check, before the failure counts as the batch's
        /// own. Default: 3.
        var attemptsWhileStoreAnswers = 3
        /// How long deliveries may be held for the store before they are given back: under the broker's consumer
        /// timeout. Default: 15 minutes.
        var giveBackAfter: Duration = .seconds(15 * 60)
        var requeueBackoff = RequeueBackoff()
        var poisonFailureLimit = 3
        var poisonCapacity = 10_000
        /// When a failure of the results is every message's (the pause) rather than one message's.
        var resultsKillSwitch = ResultsKillSwitch.Settings()
        /// The waits before each trial of paused results: doubling from 5 s up to 60 s (MassTransit's kill switch
        /// restarts after one minute).
        var resultsTrialBackoff = ProbeBackoff(first: .seconds(5), longest: .seconds(60))
        /// How long a session that follows a failed one waits, at most, for the broker to drop the failed one's
        /// consumer before it consumes (`ConsumerRelease.bound(heartbeat:)`); nil: it consumes at once.
        var consumerReleaseBound: Duration?
        /// Whether the refused deliveries are held through a results pause, their results published again at each
        /// trial, instead of given back at the pause and taken again by each trial. On a quorum work queue every
        /// give-back counts toward the delivery limit: a pause of more than `deliveryLimit` failed trials would have
        /// the broker dead-letter the messages at the head of the queue. Held, they are given back once per
        /// `giveBackAfter` at most. Default: for quorum queues only (a classic queue counts nothing, and the pause
        /// gives back what it holds, CONTRACT.md §8).
        var holdsRefusedThroughAPause: Bool
        /// How long the executor waits for a publish's confirms (`--confirm-timeout`): a trial that publishes held
        /// results waits this long past its window for their verdict. Default: 10 s.
        var confirmTimeout: Duration = .seconds(10)

        init(topology: Topology, retry: RetrySchedule) {
            self.topology = topology
            self.retry = retry
            holdsRefusedThroughAPause = topology.workQueueType == .quorum
        }
    }

    struct SessionID: Hashable, Sendable, CustomStringConvertible {
        var pipeline: Int
        var number: Int
        var description: String { "\(pipeline).\(number)" }
    }

    struct BatchID: Hashable, Sendable { var value: Int }
    struct PublishID: Hashable, Sendable { var value: Int }
    struct TimerID: Hashable, Sendable { var value: Int }
    struct CheckID: Hashable, Sendable { var value: Int }

    /// What a publish's confirms said.
    enum ConfirmResult: Sendable {
        /// One outcome per message, in order.
        case outcomes([AMQPPublishOutcome])
        /// The broker did not answer in time; the channel is still usable.
        case timedOut(after: Duration)
    }

    let configuration: Configuration
    private var pipelines: [PipelineState]
    private var suspects: PoisonSuspects
    private var store = StoreAvailability()
    private var results = ResultsAvailability()
    private var killSwitch: ResultsKillSwitch
    private var worker = WorkerCourse()
    private var random: LifecycleRandom
    private var lastID = 0
    private var timers: [TimerID: TimerPurpose] = [:]
    private var checks: [CheckID: CheckRequester] = [:]
    /// The current trial publishes the results of deliveries held through the pause (`publishHeldResults`): their
    /// confirms are its verdict, and no pipeline consumes until it comes.
    private var trialPublishesHeld = false

    init(configuration: Configuration, queues: [ConsumedQueue], seed: UInt64) {
        self.configuration = configuration
        pipelines = queues.map { queue in
            var topology = configuration.topology
            // A shard's retries wait in the shard's own retry queue, which dead-letters back to the shard.
            topology.retryQueue = queue.retryQueue
            return PipelineState(queue: queue, topology: topology, requeueBackoff: configuration.requeueBackoff)
        }
        suspects = PoisonSuspects(
            failureLimit: configuration.poisonFailureLimit, capacity: configuration.poisonCapacity)
        random = LifecycleRandom(seed: seed)
        killSwitch = ResultsKillSwitch(settings: configuration.resultsKillSwitch)
    }

    /// Whether the store is out (the pipelines hold their batches).
    var isStoreOut: Bool { store.isOut }

    /// Whether the results are paused: no trial consumes now.
    var isPausedForResults: Bool { results.isPaused }

    /// What a started timer is for (tests and diagnostics); nil once it has fired.
    func purpose(of timer: TimerID) -> TimerPurpose? { timers[timer] }

    // MARK: - Inputs

    /// The worker starts: every pipeline connects.
    mutating func start() -> [LifecycleAction] {
        var actions: [LifecycleAction] = []
        for index in pipelines.indices { connect(index, after: .zero, &actions) }
        return actions
    }

    /// A session is consuming; its publishing connection negotiated `frameMax`; the queue had `consumers` consumers
    /// right after its own consume (its own included; nil when not counted).
    mutating func sessionStarted(_ id: SessionID, frameMax: Int, consumers: Int? = nil, now: Duration)
        -> [LifecycleAction]
    {
        guard var session = takeSession(id) else { return [] }
        guard !session.course.hasEnded else {
            // Its connection failed as it opened: the session is closing, not consuming.
            putSession(session)
            return []
        }
        var actions: [LifecycleAction] = []
        session.frameMax = frameMax
        pipelines[id.pipeline].consumersWithLastSession = consumers
        pipelines[id.pipeline].release = nil
        // Stopped while connecting, it takes nothing (and `applyStop` finds the stop applied).
        session.course.started()
        actions.append(.report(.consuming(id, queue: pipelines[id.pipeline].queue.name)))
        if worker.isStopping {
            applyStop(&session, now: now, &actions)
        } else if results.isPaused || trialPublishesHeld {
            // It connected as the results paused (or for the store's end), or while a trial of held results is on
            // (after a failure, or the store's end): it takes nothing until a trial, or until that one's verdict.
            pauseForResults(&session, now: now, &actions)
        }
        finishIfDone(&session, &actions)
        putSession(session)
        return actions
    }

    /// Deliveries arrived, in the order of their tags.
    mutating func batchReceived(_ id: SessionID, _ deliveries: [Delivery], now: Duration) -> [LifecycleAction] {
        guard !deliveries.isEmpty, var session = takeSession(id) else { return [] }
        var actions: [LifecycleAction] = [.report(.received(id, deliveries))]
        for delivery in deliveries { session.unsettled.received(delivery.tag) }
        if session.course.handsBackWhatArrives {
            // The session is handing its queue back: the channel's close returns these, unprocessed.
            let reason = session.course.handBackReason
            actions.append(.report(.ended(deliveries.map { end($0, id, .requeued(reason: reason), now) })))
            if session.course.isGivingBackForTheResults { results.gaveBack(deliveries.count) }
            putSession(session)
            return actions
        }
        if suspects.isEmpty {
            session.batches.append(Batch(id: BatchID(value: nextID()), deliveries: deliveries, isSuspect: false))
        } else {
            let keys = deliveries.map { PoisonSuspects.key($0.original) }
            for segment in suspects.segments(keys) {
                session.batches.append(
                    Batch(
                        id: BatchID(value: nextID()), deliveries: Array(deliveries[segment.range]),
                        isSuspect: segment.isSuspect))
            }
        }
        advance(&session, now: now, &actions)
        putSession(session)
        return actions
    }

    /// The store answered a `store` action.
    mutating func storeAnswered(_ id: SessionID, _ batchID: BatchID, _ answer: StoreAnswer, now: Duration)
        -> [LifecycleAction]
    {
        guard var session = takeSession(id) else {
            return outageOfAnOrphanedAnswer(answer, now: now)
        }
        guard var index = session.batches.firstIndex(where: { $0.id == batchID }),
            case .storing(let oneAtATime) = session.batches[index].phase
        else {
            // The batch went with its session (it failed and is not closed yet).
            putSession(session)
            return outageOfAnOrphanedAnswer(answer, now: now)
        }
        var actions: [LifecycleAction] = []
        let topology = pipelines[id.pipeline].topology
        let count = session.batches[index].deliveries.count
        let done = min(answer.outcomes.count, count)
        let failure =
            answer.failure
            ?? (done < count ? StoreError(.transient, "the store answered for \(done) of \(count) messages") : nil)
        if done > 0 {
            let deliveries = session.batches[index].deliveries
            let plans = zip(deliveries, answer.outcomes).map { delivery, outcome in
                plan(delivery.original, outcome, topology: topology, frameMax: session.frameMax)
            }
            if done < deliveries.count {
                // Committed, whatever happens to the rest: these leave now, the rest stays behind them.
                let committed = Batch(
                    id: BatchID(value: nextID()), deliveries: Array(deliveries[..<done]),
                    isSuspect: session.batches[index].isSuspect)
                session.batches[index].deliveries.removeFirst(done)
                session.batches.insert(committed, at: index)
                publish(&session, at: index, plans, now: now, &actions)
            } else {
                publish(&session, at: index, plans, now: now, &actions)
            }
        }
        // Publishing may have settled (and removed) the committed part: find what is left.
        guard let failure, let tail = session.batches.firstIndex(where: { $0.id == batchID }) else {
            advance(&session, now: now, &actions)
            putSession(session)
            return actions
        }
        index = tail
        session.batches[index].lastStoreError = failure
        switch failure.kind {
        case .permanent:
            // Committed messages are finished; the rest goes back to the broker with everything else.
            session.batches[index].phase = .waiting
            putSession(session)
            fail(with: StoreFailure(failure), now: now, &actions)
            return actions
        case .refusedInput where !oneAtATime && session.batches[index].deliveries.count > 1:
            // Some message's data: the batch again, one transaction per message, to find it.
            actions.append(
                .report(
                    .storingOneAtATime(
                        id, messages: session.batches[index].deliveries.count, error: failure)))
            session.batches[index].phase = .storing(oneAtATime: true)
            actions.append(
                .store(
                    id, batchID, session.batches[index].deliveries, oneAtATime: true))
        case .refusedInput where session.batches[index].deliveries.count == 1:
            let plan = DeliveryPlan(
                original: session.batches[index].deliveries[0].original, storeRefusal: failure.message,
                topology: topology, frameMax: session.frameMax)
            publish(&session, at: index, [plan], now: now, &actions)
        case .transient, .refusedInput:
            session.batches[index].storeFailures += 1
            if session.course.stopRequested || session.course.handsBackWhatArrives {
                // Stopping, handing over or giving back: what failed is given back (with what waits behind it, so
                // nothing later overtakes it), not tried again.
                session.course.takeNoMore()
                session.batches[index].phase = .waiting
                abandonUncommitted(
                    &session, keepingRefused: keepsRefused(session), now: now, &actions)
                finishIfDone(&session, &actions)
                putSession(session)
                if failure.isOutage { beginOutage(failure, now: now, &actions) }
                return actions
            }
            if store.isOut || failure.isOutage {
                session.batches[index].phase = .held
                putSession(session)
                beginOutage(failure, now: now, &actions)
                return actions
            }
            let check = CheckID(value: nextID())
            checks[check] = .batch(id, batchID)
            session.batches[index].phase = .checkingStore(check)
            actions.append(.checkStore(check))
        }
        advance(&session, now: now, &actions)
        putSession(session)
        return actions
    }

    /// A `checkStore` action's answer: nil when the store passed, else why not.
    mutating func storeChecked(_ check: CheckID, failure: StoreError?, now: Duration) -> [LifecycleAction] {
        guard let requester = checks.removeValue(forKey: check) else { return [] }
        var actions: [LifecycleAction] = []
        switch requester {
        case .probe:
            guard !worker.isStopping else {
                store.probeAbandoned(check)
                return []
            }
            switch store.probeAnswered(check, passed: failure == nil, now: now) {
            case .ignored: return []
            case .back(let outage): endOutage(after: outage, now: now, &actions)
            case .stillOut(let attempt): startProbeTimer(attempt: attempt, &actions)
            }
        case .batch(let id, let batchID):
            guard var session = takeSession(id) else {
                return outageOfAnOrphanedCheck(failure, now: now)
            }
            guard let index = session.batches.firstIndex(where: { $0.id == batchID }),
                case .checkingStore(let current) = session.batches[index].phase, current == check
            else {
                putSession(session)
                return outageOfAnOrphanedCheck(failure, now: now)
            }
            if let failure {
                session.batches[index].phase = .held
                putSession(session)
                beginOutage(failure, now: now, &actions)
                return actions
            }
            session.batches[index].failuresWhileStoreAnswers += 1
            if store.isOut {
                session.batches[index].phase = .held
            } else if session.batches[index].failuresWhileStoreAnswers >= configuration.attemptsWhileStoreAnswers {
                // The store answers, yet this batch keeps failing: the failure is its own.
                let error = session.batches[index].lastStoreError ?? StoreError(.transient, "unknown store failure")
                actions.append(
                    .report(
                        .batchFailsWhileStoreAnswers(
                            id, messages: session.batches[index].deliveries.count, error: error)))
                let topology = pipelines[id.pipeline].topology
                let plans = session.batches[index].deliveries.map { delivery in
                    DeliveryPlan(
                        original: delivery.original, transientFailure: error.description, retry: configuration.retry,
                        jitter: random.fraction(), topology: topology, frameMax: session.frameMax)
                }
                publish(&session, at: index, plans, now: now, &actions)
            } else {
                let delay = configuration.storeCheckBackoff.delay(
                    attempt: session.batches[index].storeFailures, using: &random)
                let timer = startTimer(.retryStore(id, batchID), after: delay, &actions)
                session.batches[index].phase = .waitingToRetry(timer)
            }
            advance(&session, now: now, &actions)
            putSession(session)
        }
        return actions
    }

    /// The broker answered a `publish` action (a failed channel or connection is `sessionFailed`).
    mutating func confirmsArrived(_ id: SessionID, _ publishID: PublishID, _ result: ConfirmResult, now: Duration)
        -> [LifecycleAction]
    {
        guard var session = takeSession(id) else { return [] }
        var actions: [LifecycleAction] = []
        guard let index = session.batches.firstIndex(where: { $0.publishID == publishID }) else {
            putSession(session)
            return []
        }
        switch session.batches[index].phase {
        case .publishing(_, let plans):
            let deliveries = session.batches[index].deliveries
            let failures = failures(of: plans, result, session: id, deliveries: deliveries, &actions)
            if failures.isEmpty {
                settle(&session, at: index, plans, requeue: [], now: now, &actions)
                let judgement = judgeResults(plans, result, deliveries, id, failures: [], now: now)
                guard case .resume(let after, let gaveBack) = judgement else { break }
                putSession(session)
                resumeResults(after: after, gaveBack: gaveBack, now: now, &actions)
                return actions
            }
            if session.course.isGivingBackForTheResults,
                !configuration.holdsRefusedThroughAPause || results.isPaused
            {
                // Published before the pause: what was refused goes back with the rest (or is held through the
                // pause), not to the retry queue. Held, while a trial is on it is the trial's evidence, and once
                // the results are taken again a refusal is the message's own: both are judged below.
                keepOrHandBackRefused(&session, at: index, plans, failures, now: now, &actions)
                advance(&session, now: now, &actions)
                putSession(session)
                return actions
            }
            switch judgeResults(plans, result, deliveries, id, failures: failures, now: now) {
            case .perMessage:
                publishAgain(&session, at: index, plans, failures, now: now, &actions)
            case .hold:
                session.batches[index].phase = .heldForResults(plans, failures: failures)
            case .resume(let after, let gaveBack):
                publishAgain(&session, at: index, plans, failures, now: now, &actions)
                putSession(session)
                // Advances every session, this one included.
                resumeResults(after: after, gaveBack: gaveBack, now: now, &actions)
                return actions
            case .handBack:
                handBackRefused(&session, at: index, plans, failures, now: now, &actions)
            case .pause(let cause):
                let batchID = session.batches[index].id
                putSession(session)
                pauseEveryPipeline(cause: cause, now: now, &actions)
                // This batch's confirms are in: what was refused goes back with everything else.
                guard var again = takeSession(id),
                    let current = again.batches.firstIndex(where: { $0.id == batchID })
                else { return actions }
                keepOrHandBackRefused(&again, at: current, plans, failures, now: now, &actions)
                advance(&again, now: now, &actions)
                putSession(again)
                return actions
            }
        case .republishing(_, var plans, let second):
            let secondPlans = second.map(\.plan)
            let secondDeliveries = second.map { session.batches[index].deliveries[$0.index] }
            let failures = failures(of: secondPlans, result, session: id, deliveries: secondDeliveries, &actions)
            let failed = Set(failures.map(\.index))
            var requeue: [Int] = []
            for (position, entry) in second.enumerated() {
                if failed.contains(position) { requeue.append(entry.index) } else { plans[entry.index] = entry.plan }
            }
            settle(&session, at: index, plans, requeue: requeue, now: now, &actions)
        default:
            break
        }
        advance(&session, now: now, &actions)
        putSession(session)
        return actions
    }

    /// A `startTimer` action's time has come.
    mutating func timerFired(_ timer: TimerID, now: Duration) -> [LifecycleAction] {
        guard let purpose = timers.removeValue(forKey: timer) else { return [] }
        var actions: [LifecycleAction] = []
        switch purpose {
        case .probeStore:
            guard store.probeIsDue, !worker.isStopping else { return [] }
            let check = CheckID(value: nextID())
            store.probeStarted(check)
            checks[check] = .probe
            actions.append(.checkStore(check))
        case .retryStore(let id, let batchID):
            guard var session = takeSession(id) else { return [] }
            if let index = session.batches.firstIndex(where: { $0.id == batchID }),
                case .waitingToRetry(let current) = session.batches[index].phase, current == timer
            {
                if store.isOut {
                    session.batches[index].phase = .held
                } else {
                    session.batches[index].phase = .storing(oneAtATime: false)
                    actions.append(
                        .store(
                            id, batchID, session.batches[index].deliveries, oneAtATime: false))
                }
            }
            putSession(session)
        case .requeue(let id, let batchID):
            guard var session = takeSession(id) else { return [] }
            if let index = session.batches.firstIndex(where: { $0.id == batchID }),
                case .requeueing(let current, let requeue, _) = session.batches[index].phase, current == timer
            {
                requeueNow(&session, at: index, requeue, now: now, &actions)
                advance(&session, now: now, &actions)
            }
            putSession(session)
        case .resultsTrial:
            guard !worker.isStopping else { return [] }
            let deadline = TimerID(value: nextID())
            guard results.trialBegins(deadline: deadline) else { return [] }
            timers[deadline] = .resultsTrialDeadline
            let held =
                configuration.holdsRefusedThroughAPause
                ? pipelines.reduce(0) { $0 + ($1.session?.heldForResults ?? 0) } : 0
            // Sessions that pause with batches still in hand (held, or published before the pause and awaiting
            // their confirms): those confirms are evidence of the same outage, and consuming beside them would take
            // deliveries only to give them back.
            trialPublishesHeld =
                configuration.holdsRefusedThroughAPause
                && pipelines.contains { pipeline in
                    pipeline.session.map { $0.course.isGivingBackForTheResults && !$0.batches.isEmpty } ?? false
                }
            // A trial of held results waits for their confirms, which come (or time out) within the confirm timeout.
            let window = configuration.resultsKillSwitch.window
            actions.append(
                .startTimer(deadline, after: trialPublishesHeld ? window + configuration.confirmTimeout : window))
            actions.append(.report(.trialBegan(.results, attempt: results.attempt ?? 1, held: held)))
            killSwitch.reset()
            // What is held is the trial: consuming beside it would take deliveries only to give them back (one
            // count each toward a quorum queue's delivery limit) if it fails. The others connect when it resumes.
            guard !trialPublishesHeld else {
                for index in pipelines.indices {
                    guard var session = pipelines[index].session else { continue }
                    pipelines[index].session = nil
                    publishHeldResults(&session, &actions)
                    putSession(session)
                }
                break
            }
            for index in pipelines.indices where pipelines[index].phase == .waitingForResults {
                pipelines[index].phase = .active
                connect(index, after: .zero, &actions)
            }
        case .resultsTrialDeadline:
            if results.isTrialDeadline(timer), let cause = heldOnTheirLastAttemptWithoutEvidence(now: now) {
                pauseEveryPipeline(cause: "in trial \(results.attempt ?? 1), \(cause)", now: now, &actions)
                break
            }
            guard case .resumes(let after, let gaveBack)? = results.trialDeadlinePassed(timer, now: now) else {
                return []
            }
            resumeResults(after: after, gaveBack: gaveBack, now: now, &actions)
        case .giveBackHeldResults(let id):
            guard var session = takeSession(id) else { return [] }
            guard session.heldResultsTimer == timer else {
                putSession(session)
                return []
            }
            session.heldResultsTimer = nil
            if !session.course.hasEnded, let oldest = session.oldestHeldForResults {
                let held = now - oldest
                if held >= configuration.giveBackAfter {
                    giveBackHeldResults(&session, heldFor: held, now: now, &actions)
                } else {
                    armHeldResultsGiveBack(&session, now: now, &actions)
                }
            }
            putSession(session)
        case .giveBack(let id):
            guard var session = takeSession(id) else { return [] }
            guard session.giveBackTimer == timer else {
                putSession(session)
                return []
            }
            session.giveBackTimer = nil
            if store.isOut, !session.course.hasEnded, !session.course.isGivingBackForTheStore,
                let oldest = session.oldestUncommitted
            {
                let held = now - oldest
                if held >= configuration.giveBackAfter {
                    giveBack(&session, heldFor: held, now: now, &actions)
                } else {
                    armGiveBack(&session, now: now, &actions)
                }
            }
            putSession(session)
        }
        return actions
    }

    /// The consumer's sequence ended: cancelled on our request, or on the broker's side without an error.
    mutating func consumerEnded(_ id: SessionID, now: Duration) -> [LifecycleAction] {
        guard var session = takeSession(id) else { return [] }
        var actions: [LifecycleAction] = []
        session.course.consumerEnded()
        advance(&session, now: now, &actions)
        putSession(session)
        return actions
    }

    /// The session cannot go on: a connection or channel failed, a confirm wait failed, the connect failed.
    /// Everything it has not settled is left to the broker, which redelivers it.
    mutating func sessionFailed(_ id: SessionID, error: any Error, now: Duration) -> [LifecycleAction] {
        guard var session = takeSession(id) else { return [] }
        var actions: [LifecycleAction] = []
        guard !session.course.hasEnded else {
            putSession(session)
            return []
        }
        let text = "\(error)"
        if let signature = PoisonSuspects.signature(of: error) {
            let inFlight = session.batches.filter { if case .waiting = $0.phase { false } else { true } }
                .flatMap(\.deliveries).map { PoisonSuspects.key($0.original) }
            if !inFlight.isEmpty { suspects.recordFailure(inFlight: inFlight, signature: signature, error: text) }
        }
        if session.course.isConsuming { actions.append(.report(.sessionFailed(id, error: text))) }
        let dropped = session.batches.flatMap { batch -> [Delivery] in
            if case .requeueing(_, let requeue, _) = batch.phase {
                requeue.map { batch.deliveries[$0] }
            } else {
                batch.deliveries
            }
        }
        if !dropped.isEmpty {
            actions.append(.report(.ended(dropped.map { end($0, id, .droppedWithSession(error: text), now) })))
        }
        session.batches = []
        if session.course.isConsuming, let bound = configuration.consumerReleaseBound,
            let consumers = pipelines[id.pipeline].consumersWithLastSession
        {
            // The broker may still hold the consumer, and deliveries it sent that never arrived: the next session
            // consumes once it has let go of them (CONTRACT.md §10).
            pipelines[id.pipeline].release = ConsumerRelease(
                consumersWithTheLastSession: consumers, failedAt: now, bound: bound)
        }
        session.course.end(.failed(error: text))
        actions.append(.endSession(id, .failed(error: text)))
        putSession(session)
        if error is TopologyError {
            // A topology that conflicts with the broker's is not fixed by reconnecting.
            fail(with: error, now: now, &actions)
        }
        return actions
    }

    /// The executor closed a session after `endSession`: what the pipeline does next.
    mutating func sessionClosed(_ id: SessionID, now: Duration) -> [LifecycleAction] {
        guard pipelines.indices.contains(id.pipeline), let session = pipelines[id.pipeline].session,
            session.id == id
        else { return [] }
        pipelines[id.pipeline].session = nil
        let end = session.course.end ?? .failed(error: "closed")
        var actions: [LifecycleAction] = [.report(.sessionEnded(id, end, wasConsuming: session.course.hasConsumed))]
        if worker.isStopping {
            pipelines[id.pipeline].phase = .stopped
            actions.append(.stopPipeline(pipeline: id.pipeline))
            return actions
        }
        switch end {
        case .pausedForStore where store.isOut:
            pipelines[id.pipeline].phase = .waitingForStore
        case .pausedForStore where results.isPaused, .pausedForResults where results.isPaused || trialPublishesHeld:
            // During a trial of held results no pipeline consumes: it connects when the trial resumes.
            pipelines[id.pipeline].phase = .waitingForResults
        case .pausedForStore, .pausedForResults:
            connect(id.pipeline, after: .zero, &actions)
        case .failed, .consumerEnded, .stopped:
            let attempt = session.course.hasConsumed ? 1 : pipelines[id.pipeline].reconnectAttempt + 1
            pipelines[id.pipeline].reconnectAttempt = attempt
            let delay = configuration.reconnectBackoff.delay(attempt: attempt, using: &random)
            actions.append(.report(.reconnecting(pipeline: id.pipeline, attempt: attempt, delay: delay)))
            connect(id.pipeline, after: delay, &actions)
        }
        return actions
    }

    /// An answer whose batch is gone (with its session): what the store said about itself still holds for the
    /// whole process.
    private mutating func outageOfAnOrphanedAnswer(_ answer: StoreAnswer, now: Duration) -> [LifecycleAction] {
        var actions: [LifecycleAction] = []
        if let failure = answer.failure, failure.isOutage, !worker.isStopping {
            beginOutage(failure, now: now, &actions)
        }
        return actions
    }

    /// A check whose batch is gone (with its session): what it found still holds for the whole process, as it
    /// would have for the batch (a failed check begins an outage), unless the worker is stopping.
    private mutating func outageOfAnOrphanedCheck(_ failure: StoreError?, now: Duration) -> [LifecycleAction] {
        var actions: [LifecycleAction] = []
        if let failure, !worker.isStopping { beginOutage(failure, now: now, &actions) }
        return actions
    }

    /// SIGTERM (or a failure elsewhere): take no more work, finish what was taken on, and stop every pipeline.
    mutating func stopRequested(now: Duration) -> [LifecycleAction] {
        var actions: [LifecycleAction] = []
        if worker.stop() { stopEveryPipeline(now: now, &actions) }
        return actions
    }

    // MARK: - Scheduling

    /// Starts the next batch's store call when the session's rules allow, and ends the session when it is done.
    private mutating func advance(_ session: inout Session, now: Duration, _ actions: inout [LifecycleAction]) {
        startNextStore(&session, now: now, &actions)
        if store.isOut { armGiveBack(&session, now: now, &actions) }
        finishIfDone(&session, &actions)
    }

    private mutating func startNextStore(_ session: inout Session, now: Duration, _ actions: inout [LifecycleAction]) {
        guard session.course.takesWork, !store.isOut,
            !session.batches.contains(where: \.isAtTheStore),
            let index = session.batches.firstIndex(where: { if case .waiting = $0.phase { true } else { false } })
        else { return }
        // A shard takes the next batch only when the last is settled; a suspect is processed with nothing else in
        // flight, and nothing is processed beside it.
        let isFirst = index == 0
        if (session.isShard || session.batches[index].isSuspect) && !isFirst { return }
        if session.batches[..<index].contains(where: \.isSuspect) { return }
        let batch = session.batches[index]
        if batch.isSuspect, let record = suspects.condemned(PoisonSuspects.key(batch.deliveries[0].original)) {
            // Past the limit, its dead letter was published and failed alone the same way: only the broker's own
            // dead-lettering can take it.
            let plan =
                record.failures > suspects.failureLimit
                ? DeliveryPlan(
                    original: batch.deliveries[0].original, poisonEvenAsADeadLetter: record.error,
                    failures: record.failures)
                : DeliveryPlan(
                    original: batch.deliveries[0].original, poison: record.error, failures: record.failures,
                    topology: pipelines[session.id.pipeline].topology, frameMax: session.frameMax)
            publish(&session, at: index, [plan], now: now, &actions)
            return
        }
        // Everything that arrived meanwhile goes through the store with it, as one transaction: batches are as large
        // as the store's pace allows, never larger than the prefetch.
        if !batch.isSuspect {
            var next = index + 1
            while next < session.batches.count, !session.batches[next].isSuspect,
                case .waiting = session.batches[next].phase
            {
                next += 1
            }
            if next > index + 1 {
                for merged in session.batches[(index + 1)..<next] {
                    session.batches[index].deliveries += merged.deliveries
                }
                session.batches.removeSubrange((index + 1)..<next)
            }
        }
        session.batches[index].phase = .storing(oneAtATime: false)
        actions.append(.store(session.id, batch.id, session.batches[index].deliveries, oneAtATime: false))
    }

    /// Ends the session once what it took on is finished: after a stop, a give-back or the consumer's end.
    private func finishIfDone(_ session: inout Session, _ actions: inout [LifecycleAction]) {
        guard session.batches.isEmpty, let end = session.course.endOnceEmpty else { return }
        session.course.end(end)
        actions.append(.endSession(session.id, end))
    }

    // MARK: - Publishing and settling

    /// The batch's store work is done: its messages go out (if it has any), then it is settled on their confirms.
    private mutating func publish(
        _ session: inout Session, at index: Int, _ plans: [DeliveryPlan], now: Duration,
        _ actions: inout [LifecycleAction]
    ) {
        var hasMessages = false
        var hasDirectReplies = false
        for plan in plans {
            if !plan.messages.isEmpty { hasMessages = true }
            if !plan.directReplies.isEmpty { hasDirectReplies = true }
        }
        if hasMessages {
            let publish = PublishID(value: nextID())
            session.batches[index].phase = .publishing(publish, plans)
            actions.append(
                .publish(session.id, publish, tags: session.batches[index].deliveries.map(\.tag), plans: plans))
        }
        if hasDirectReplies { actions.append(.sendDirectReplies(session.id, plans.flatMap(\.directReplies))) }
        if !hasMessages { settle(&session, at: index, plans, requeue: [], now: now, &actions) }
    }

    /// Why each plan failed, by plan index: a message its fate depends on was not taken (permanent when it could not
    /// be encoded: no retry helps). A confirm timeout fails every plan that published anything.
    private func failures(
        of plans: [DeliveryPlan], _ result: ConfirmResult, session: SessionID, deliveries: [Delivery],
        _ actions: inout [LifecycleAction]
    ) -> [PublishFailure] {
        var failures: [PublishFailure] = []
        switch result {
        case .timedOut(let timeout):
            let reason = "publisher confirms timed out after \(timeout)"
            for index in plans.indices where !plans[index].messages.isEmpty {
                failures.append(PublishFailure(index: index, reason: reason, isPermanent: false))
                actions.append(.report(.publishNotConfirmed(session, deliveries[index], reason: reason)))
            }
        case .outcomes(let outcomes):
            var offset = 0
            var returnedCopies = 0
            // By index here and below: a plan copied out of the array costs a reference count per message, result
            // and string in it.
            for index in plans.indices {
                let count = plans[index].messages.count
                let end = min(offset + count, outcomes.count)
                let slice = outcomes[min(offset, end)..<end]
                if let failure = plans[index].failure(in: slice) {
                    failures.append(
                        PublishFailure(
                            index: index, reason: failure, isPermanent: plans[index].isUnpublishable(in: slice)))
                    actions.append(.report(.publishNotConfirmed(session, deliveries[index], reason: failure)))
                } else if let lost = plans[index].undeliveredResult(in: slice) {
                    actions.append(.report(.resultNotTaken(session, deliveries[index], reason: lost)))
                }
                returnedCopies += plans[index].returnedReplyCopies(in: slice)
                offset += count
            }
            if returnedCopies > 0 { actions.append(.report(.replyCopiesReturned(count: returnedCopies))) }
        }
        return failures
    }

    /// Settles a batch whose publishes are done: every delivery but those in `requeue` is acknowledged (or rejected
    /// to the broker) at once; those in `requeue` go back to the queue after the requeue delay.
    private mutating func settle(
        _ session: inout Session, at index: Int, _ plans: [DeliveryPlan], requeue: [Int], handBack: Bool = false,
        now: Duration, _ actions: inout [LifecycleAction]
    ) {
        let batch = session.batches[index]
        var acknowledged: [UInt64] = []
        acknowledged.reserveCapacity(batch.deliveries.count)
        var rejected: [UInt64] = []
        let requeued = Set(requeue)
        for (position, delivery) in batch.deliveries.enumerated() where !requeued.contains(position) {
            if plans[position].isRejectedToBroker {
                rejected.append(delivery.tag)
            } else {
                acknowledged.append(delivery.tag)
            }
        }
        var settlements = session.unsettled.acknowledge(acknowledged)
        if !rejected.isEmpty {
            session.unsettled.settled(rejected)
            settlements += rejected.map { .reject(tag: $0) }
        }
        if !settlements.isEmpty { actions.append(.settle(session.id, settlements)) }
        var ends: [DeliveryEnd] = []
        ends.reserveCapacity(acknowledged.count + rejected.count)
        for (position, delivery) in batch.deliveries.enumerated() where !requeued.contains(position) {
            var end = DeliveryEnd(
                session: session.id, delivery: delivery, fate: plans[position].fate, stored: plans[position].stored,
                skippedReplyCopies: plans[position].skippedReplyCopies, elapsed: now - delivery.receivedAt)
            if case .retried = plans[position].fate, !plans[position].messages.isEmpty {
                // Level 1 waits the queue's TTL (the copy has no expiration of its own).
                let copy = plans[position].messages[0]
                let wait =
                    copy.properties.expiration.flatMap { Int64($0) } ?? configuration.retry.firstDelay.milliseconds
                end.retryWait = (copy.routingKey, wait)
            }
            ends.append(end)
        }
        if !ends.isEmpty { actions.append(.report(.ended(ends))) }
        let resultDelivery = RecordedResultsDelivery.changes(settling: plans, except: requeued)
        if !resultDelivery.isEmpty { actions.append(.noteResultDelivery(resultDelivery)) }
        if !suspects.isEmpty { suspects.recordSettled(batch.deliveries.map { PoisonSuspects.key($0.original) }) }
        if requeue.isEmpty {
            pipelines[session.id.pipeline].requeueBackoff.reset()
            session.batches.remove(at: index)
            return
        }
        if handBack {
            // Left unsettled: the session takes no more, and its channel's close gives them back.
            session.batches.remove(at: index)
            return
        }
        // The retry queue or the dead-letter exchange refuses too: requeued at once, these would come straight back
        // and fail again at full speed.
        let delay = pipelines[session.id.pipeline].requeueBackoff.next()
        actions.append(.report(.requeueDelayed(session.id, deliveries: requeue.count, delay: delay)))
        if session.course.stopRequested {
            requeueNow(&session, at: index, requeue, now: now, &actions)
        } else {
            let timer = startTimer(.requeue(session.id, batch.id), after: delay, &actions)
            session.batches[index].phase = .requeueing(timer, requeue: requeue, plans: plans)
        }
    }

    private func requeueNow(
        _ session: inout Session, at index: Int, _ requeue: [Int], now: Duration, _ actions: inout [LifecycleAction]
    ) {
        let deliveries = requeue.map { session.batches[index].deliveries[$0] }
        session.unsettled.settled(deliveries.map(\.tag))
        actions.append(.settle(session.id, deliveries.map { .requeue(tag: $0.tag) }))
        let reason = "its retry and dead-letter publishes failed"
        actions.append(.report(.ended(deliveries.map { end($0, session.id, .requeued(reason: reason), now) })))
        session.batches.remove(at: index)
    }

    // MARK: - Stopping, giving back, failing

    /// The worker has begun to stop (`worker`): every session stops, and a pipeline without one stops now.
    private mutating func stopEveryPipeline(now: Duration, _ actions: inout [LifecycleAction]) {
        for index in pipelines.indices {
            if var session = pipelines[index].session {
                pipelines[index].session = nil
                applyStop(&session, now: now, &actions)
                putSession(session)
            } else if pipelines[index].phase != .stopped {
                pipelines[index].phase = .stopped
                actions.append(.stopPipeline(pipeline: index))
            }
        }
    }

    /// A work-queue session cancels its consumer and finishes everything it received (unless the store is out:
    /// then what is not committed is given back). A shard session finishes the batch in hand and hands the rest
    /// back by closing its channel. Batches waiting for the store are given back in both.
    private mutating func applyStop(_ session: inout Session, now: Duration, _ actions: inout [LifecycleAction]) {
        guard session.course.requestStop() else { return }
        let waitingForTheStore = session.batches.contains {
            switch $0.phase {
            case .checkingStore, .waitingToRetry, .held, .heldForResults: true
            default: false
            }
        }
        if session.isShard || worker.hasFailed || store.isOut || waitingForTheStore {
            giveBackForTheStop(&session, now: now, &actions)
        }
        // Before anything is requeued: the broker must not deliver it again to this consumer.
        if !session.isShard, session.course.requestCancel() {
            actions.append(.cancelConsumer(session.id))
        }
        for batch in session.batches {
            guard case .requeueing(_, let requeue, _) = batch.phase,
                let index = session.batches.firstIndex(where: { $0.id == batch.id })
            else { continue }
            requeueNow(&session, at: index, requeue, now: now, &actions)
        }
        // A requeue may have cleared the way for the batches behind it (a suspect's, a shard's).
        advance(&session, now: now, &actions)
    }

    /// A stopping session takes nothing more and gives back what it has not committed (a shard hands it over).
    private mutating func giveBackForTheStop(
        _ session: inout Session, now: Duration, _ actions: inout [LifecycleAction]
    ) {
        session.course.takeNoMore(session.isShard ? .shardHandedOver : .stopping)
        abandonUncommitted(&session, now: now, &actions)
    }

    /// The store has been out for long: the deliveries not committed go back to the queue before the broker's
    /// consumer timeout closes the channel, and the pipeline pauses until the store answers.
    private mutating func giveBack(
        _ session: inout Session, heldFor: Duration, now: Duration, _ actions: inout [LifecycleAction]
    ) {
        session.course.takeNoMore(.heldForTheStore(heldFor))
        let count = session.batches.filter(\.isUncommitted).reduce(0) { $0 + $1.deliveries.count }
        actions.append(.report(.givingBack(session.id, deliveries: count, heldFor: heldFor, cause: .store)))
        abandonUncommitted(&session, now: now, &actions)
        finishIfDone(&session, &actions)
    }

    /// What a session held through a results pause has been held for long: it goes back to the queue before the
    /// broker's consumer timeout (one count toward a quorum queue's delivery limit), with the channel's close.
    private mutating func giveBackHeldResults(
        _ session: inout Session, heldFor: Duration, now: Duration, _ actions: inout [LifecycleAction]
    ) {
        actions.append(
            .report(.givingBack(session.id, deliveries: session.heldForResults, heldFor: heldFor, cause: .results)))
        session.course.takeNoMore(.pausedForResults)
        handBackHeldForResults(&session, now: now, &actions)
        finishIfDone(&session, &actions)
    }

    /// Every batch held for the results' verdict is settled but for its refused deliveries, which go back with the
    /// channel's close (`handBackRefused`).
    private mutating func handBackHeldForResults(
        _ session: inout Session, now: Duration, _ actions: inout [LifecycleAction]
    ) {
        while let index = session.batches.firstIndex(where: {
            if case .heldForResults = $0.phase { true } else { false }
        }) {
            guard case .heldForResults(let plans, let failures) = session.batches[index].phase else { break }
            handBackRefused(&session, at: index, plans, failures, now: now, &actions)
        }
    }

    /// Batches with nothing committed leave the session unsettled: the consume channel's close returns them. Those
    /// held for a trial's verdict are settled but for their refused deliveries, which go back too, or, when
    /// `keepingRefused`, stay held through the pause (`holdRefused`).
    private mutating func abandonUncommitted(
        _ session: inout Session, keepingRefused: Bool = false, now: Duration, _ actions: inout [LifecycleAction]
    ) {
        let reason = session.course.handBackReason
        var given = 0
        session.batches.removeAll { batch in
            guard batch.isUncommitted else { return false }
            given += batch.deliveries.count
            actions.append(
                .report(.ended(batch.deliveries.map { end($0, session.id, .requeued(reason: reason), now) })))
            return true
        }
        if session.course.isGivingBackForTheResults { results.gaveBack(given) }
        if keepingRefused {
            // Held for a trial's verdict that will not come now: what was taken is settled, the refused stay held.
            for index in session.batches.indices {
                guard case .heldForResults(let plans, let failures) = session.batches[index].phase,
                    failures.count < session.batches[index].deliveries.count
                else { continue }
                holdRefused(&session, at: index, plans, failures, now: now, &actions)
            }
            armHeldResultsGiveBack(&session, now: now, &actions)
            return
        }
        // Held for a trial's verdict that will not come now: what was taken is settled, what was refused goes back.
        handBackHeldForResults(&session, now: now, &actions)
    }

    private mutating func fail(with error: any Error, now: Duration, _ actions: inout [LifecycleAction]) {
        switch worker.fail("\(error)") {
        case .alreadyFailed:
            return
        case .stopsTheWorker:
            actions.append(.failWorker(error))
            stopEveryPipeline(now: now, &actions)
        case .duringTheStop:
            actions.append(.failWorker(error))
            // Nothing more may be stored anywhere.
            for index in pipelines.indices {
                guard var session = pipelines[index].session else { continue }
                pipelines[index].session = nil
                if session.course.isConsuming {
                    session.course.takeNoMore()
                    abandonUncommitted(&session, now: now, &actions)
                    finishIfDone(&session, &actions)
                }
                putSession(session)
            }
        }
    }

    // MARK: - The store's availability

    private mutating func beginOutage(_ error: StoreError, now: Duration, _ actions: inout [LifecycleAction]) {
        guard store.wentOut(now: now) else { return }
        actions.append(.report(.storeOutageBegan(error: error)))
        startProbeTimer(attempt: 1, &actions)
        for index in pipelines.indices {
            guard var session = pipelines[index].session else { continue }
            pipelines[index].session = nil
            if session.course.stopRequested, session.course.takesWork {
                // Stopping, and the store went out since: what the stop would have given back had the store been
                // out then goes back now (what is at the store finishes), not when the give-back timer fires.
                giveBackForTheStop(&session, now: now, &actions)
                finishIfDone(&session, &actions)
            } else {
                armGiveBack(&session, now: now, &actions)
            }
            putSession(session)
        }
    }

    /// The probe passed: the store is back (`StoreAvailability` is available again).
    private mutating func endOutage(after outage: Duration, now: Duration, _ actions: inout [LifecycleAction]) {
        actions.append(.report(.storeOutageEnded(after: outage)))
        for index in pipelines.indices {
            if pipelines[index].phase == .waitingForStore {
                pipelines[index].phase = .active
                connect(index, after: .zero, &actions)
                continue
            }
            guard var session = pipelines[index].session else { continue }
            pipelines[index].session = nil
            session.giveBackTimer = nil
            if let held = session.batches.firstIndex(where: { if case .held = $0.phase { true } else { false } }) {
                session.batches[held].phase = .storing(oneAtATime: false)
                actions.append(
                    .store(
                        session.id, session.batches[held].id, session.batches[held].deliveries,
                        oneAtATime: false))
            }
            advance(&session, now: now, &actions)
            putSession(session)
        }
    }

    private mutating func startProbeTimer(attempt: Int, _ actions: inout [LifecycleAction]) {
        let delay = configuration.storeCheckBackoff.delay(attempt: attempt, using: &random)
        _ = startTimer(.probeStore, after: delay, &actions)
    }

    private mutating func armGiveBack(_ session: inout Session, now: Duration, _ actions: inout [LifecycleAction]) {
        guard store.isOut, !session.course.hasEnded, !session.course.isGivingBackForTheStore,
            session.giveBackTimer == nil,
            let oldest = session.oldestUncommitted
        else { return }
        let remaining = oldest + configuration.giveBackAfter - now
        session.giveBackTimer = startTimer(.giveBack(session.id), after: max(remaining, .zero), &actions)
    }

    // MARK: - The results' availability

    /// What a batch's first publish means for the results' side, and so for the batch's refused deliveries.
    private enum ResultsJudgement {
        /// A refusal is the message's own: retried, then dead-lettered.
        case perMessage
        /// A trial is on and has no verdict yet: the refused deliveries wait for it, unsettled.
        case hold
        /// A trial found the results taken: the pause ends.
        case resume(after: Duration, gaveBack: Int)
        /// Every message fails: the worker pauses (again).
        case pause(cause: String)
        /// Paused already, and a refused delivery on its last attempt has nothing to show the failure is its own:
        /// the refused go back rather than to the retry path (a stopping session's publish).
        case handBack
    }

    /// Feeds the batch's first publish to the kill switch (while results are taken) or to the trial (while one is
    /// on). `failures` are the publish's (`failures(of:)`); none: every result the kill switch counts was delivered
    /// (the hot path: counted, not looked at one by one).
    private mutating func judgeResults(
        _ plans: [DeliveryPlan], _ result: ConfirmResult, _ deliveries: [Delivery], _ session: SessionID,
        failures: [PublishFailure], now: Duration
    ) -> ResultsJudgement {
        if failures.isEmpty {
            let delivered = plans.reduce(0) { $0 + ($1.dependsOnResults ? 1 : 0) }
            guard delivered > 0 else { return .perMessage }
            killSwitch.recordDelivered(delivered, now: now)
            if results.isTrying, case .resumes(let after, let gaveBack) = results.trialDelivered(now: now) {
                return .resume(after: after, gaveBack: gaveBack)
            }
            return .perMessage
        }
        var outcomes: [(key: String?, tag: UInt64, lastAttempt: Bool, outcome: ResultsKillSwitch.Outcome)] = []
        switch result {
        case .timedOut:
            if let position = plans.firstIndex(where: \.dependsOnResults),
                let reason = failures.first(where: { $0.index == position })?.reason
            {
                let delivery = deliveries[position]
                outcomes.append(
                    (delivery.original.properties.messageID, delivery.tag, false, .confirmTimedOut(reason: reason)))
            }
        case .outcomes(let confirms):
            var offset = 0
            for (position, plan) in plans.enumerated() {
                let end = min(offset + plan.messages.count, confirms.count)
                defer { offset += plan.messages.count }
                guard let outcome = plan.resultsOutcome(in: confirms[min(offset, end)..<end]) else { continue }
                let delivery = deliveries[position]
                // Only a refusal asks whether it is the last attempt (the retry count is a header to read).
                let lastAttempt = outcome != .delivered && isLastAttempt(delivery.original)
                outcomes.append((delivery.original.properties.messageID, delivery.tag, lastAttempt, outcome))
            }
        }
        guard !outcomes.isEmpty else { return .perMessage }
        if results.isPaused {
            // Published before the pause by a session that goes on (stopping, or giving back for the store): what
            // was taken is evidence, and a last attempt refused without any goes back rather than to a dead letter.
            killSwitch.recordDelivered(outcomes.count { $0.outcome == .delivered }, now: now)
            for entry in outcomes {
                guard case .refused(_, let reason) = entry.outcome else { continue }
                if let key = entry.key { killSwitch.noteRefused(key: key) }
                if entry.lastAttempt, case .trips = lastAttemptRefused(key: entry.key, reason, now: now) {
                    return .handBack
                }
            }
            return .perMessage
        }
        if !results.isTrying {
            var cause: String?
            for entry in outcomes {
                if case .trips(let trip) = killSwitch.record(entry.outcome, key: entry.key, now: now), cause == nil {
                    cause = trip
                }
            }
            // After every outcome of the batch is in: a result taken beside it is the evidence a dead letter needs.
            for entry in outcomes where cause == nil && entry.lastAttempt {
                guard case .refused(_, let reason) = entry.outcome,
                    case .trips(let trip) = lastAttemptRefused(key: entry.key, reason, now: now)
                else { continue }
                cause = trip
            }
            return cause.map { .pause(cause: $0) } ?? .perMessage
        }
        let taken = outcomes.count { $0.outcome == .delivered }
        if taken > 0 {
            killSwitch.recordDelivered(taken, now: now)
            if case .resumes(let after, let gaveBack) = results.trialDelivered(now: now) {
                return .resume(after: after, gaveBack: gaveBack)
            }
        }
        for entry in outcomes {
            switch entry.outcome {
            case .delivered:
                continue
            case .refused(_, let reason) where trialPublishesHeld:
                // Results refused at the pause and refused again: the dependency is still out, however few were
                // held (a trial of held results consumes nothing that could add to the activation count). One
                // message's own route, held alone, pauses the worker until the hold limit gives it back at most.
                return .pause(
                    cause: "the held deliveries' results were refused again in trial \(results.attempt ?? 1): \(reason)"
                )
            case .confirmTimedOut(let reason):
                return .pause(
                    cause: "the broker confirmed no result in time, in trial \(results.attempt ?? 1): \(reason)")
            case .refused(_, let reason):
                // A message without an id is a message of its own: its session and tag name it.
                let key = entry.key ?? "\u{0}\(session)/\(entry.tag)"
                if let key = entry.key { killSwitch.noteRefused(key: key) }
                let verdict = results.trialRefused(
                    key: key, reason: reason, activation: configuration.resultsKillSwitch.activation)
                if case .pausesAgain(let cause) = verdict { return .pause(cause: cause) }
            }
        }
        return .hold
    }

    /// Whether a failure of `original`'s would dead-letter it rather than retry it (its attempts are spent).
    private func isLastAttempt(_ original: OriginalMessage) -> Bool {
        original.failedAttempts + 1 >= configuration.retry.attempts
    }

    /// The kill switch's word on a message refused on its last attempt: dead-lettered only while results are taken
    /// for others (`ResultsKillSwitch.lastAttemptRefused`).
    private func lastAttemptRefused(key: String?, _ reason: String, takenAfter: Duration? = nil, now: Duration)
        -> ResultsKillSwitch.Verdict
    {
        killSwitch.lastAttemptRefused(
            key: key, attempts: configuration.retry.attempts, reason: reason, takenAfter: takenAfter,
            horizon: configuration.retry.shortestWait(beforeAttempt: configuration.retry.attempts), now: now)
    }

    /// A trial without a verdict would resume, and its held deliveries on their last attempt would be dead-lettered:
    /// unless results were taken for others meanwhile, the cause to pause again instead.
    private func heldOnTheirLastAttemptWithoutEvidence(now: Duration) -> String? {
        for pipeline in pipelines {
            guard let session = pipeline.session else { continue }
            for batch in session.batches {
                guard case .heldForResults(let plans, let failures) = batch.phase else { continue }
                for failure in failures where !failure.isPermanent {
                    let original = plans[failure.index].original
                    guard plans[failure.index].dependsOnResults, isLastAttempt(original),
                        // A result taken during the trial would have resumed it: what counts is taken since the
                        // pause began, and there is none.
                        case .trips(let cause) = lastAttemptRefused(
                            key: original.properties.messageID, failure.reason, takenAfter: results.pausedSince,
                            now: now)
                    else { continue }
                    return cause
                }
            }
        }
        return nil
    }

    /// The kill switch tripped, or a trial failed: every consuming session gives back what it holds (or holds what
    /// was refused, `pauseForResults`) and takes no more, and the next trial waits for its timer.
    private mutating func pauseEveryPipeline(cause: String, now: Duration, _ actions: inout [LifecycleAction]) {
        trialPublishesHeld = false
        let attempt = results.pause(now: now, cause: cause)
        let delay = configuration.resultsTrialBackoff.delay(attempt: attempt, using: &random)
        actions.append(
            .report(.paused(.results, reason: cause, failedTrial: attempt > 1 ? attempt - 1 : nil, nextTrial: delay)))
        _ = startTimer(.resultsTrial, after: delay, &actions)
        for index in pipelines.indices {
            guard var session = pipelines[index].session else { continue }
            pipelines[index].session = nil
            pauseForResults(&session, now: now, &actions)
            // A stopping session goes on as it was, but no trial will judge what it holds for a verdict: it goes back.
            if session.course.stopRequested { handBackHeldForResults(&session, now: now, &actions) }
            finishIfDone(&session, &actions)
            putSession(session)
        }
    }

    /// One consuming session pauses for the results: it takes nothing more, and what it has not committed, or
    /// holds for a trial's verdict, goes back. A stopping session, or one giving back for the store, goes on as it
    /// was. What is at the store or awaits its confirms finishes: taken results are acknowledged, refused ones go
    /// back (`handBackRefused`). On a quorum work queue the refused are held instead (`holdRefused`), and the
    /// session, its consumer cancelled, stays open for them.
    private mutating func pauseForResults(_ session: inout Session, now: Duration, _ actions: inout [LifecycleAction]) {
        guard session.course.isConsuming, !session.course.stopRequested, !session.course.isGivingBackForTheStore
        else { return }
        session.course.takeNoMore(.pausedForResults)
        let holds = configuration.holdsRefusedThroughAPause
        abandonUncommitted(&session, keepingRefused: holds, now: now, &actions)
        if holds, !session.isShard, !session.batches.isEmpty, session.course.requestCancel() {
            // It stays open for what it holds: the broker must send nothing more meanwhile. (A shard keeps its
            // consumer: cancelled, it would hand the shard to a standby with its head held here.)
            actions.append(.cancelConsumer(session.id))
        }
    }

    /// A trial found the results taken: the pause ends, and what was held for the verdict is retried message by
    /// message.
    private mutating func resumeResults(
        after: Duration, gaveBack: Int, now: Duration, _ actions: inout [LifecycleAction]
    ) {
        actions.append(.report(.resumed(.results, after: after, gaveBack: gaveBack)))
        trialPublishesHeld = false
        killSwitch.reset()
        for index in pipelines.indices {
            guard var session = pipelines[index].session else { continue }
            pipelines[index].session = nil
            while let held = session.batches.firstIndex(where: {
                if case .heldForResults = $0.phase { true } else { false }
            }) {
                guard case .heldForResults(let plans, let failures) = session.batches[held].phase else { break }
                publishAgain(&session, at: held, plans, failures, now: now, &actions)
            }
            advance(&session, now: now, &actions)
            putSession(session)
        }
        // Pipelines that held nothing waited while the held results were tried (`publishHeldResults`).
        for index in pipelines.indices where pipelines[index].phase == .waitingForResults {
            pipelines[index].phase = .active
            connect(index, after: .zero, &actions)
        }
    }

    /// A batch some of whose deliveries' messages were not taken: those deliveries' second publish (their retry
    /// copy, or their dead letter when no retry can help) goes out; the batch is settled on its confirms.
    private mutating func publishAgain(
        _ session: inout Session, at index: Int, _ plans: [DeliveryPlan], _ failures: [PublishFailure], now: Duration,
        _ actions: inout [LifecycleAction]
    ) {
        let topology = pipelines[session.id.pipeline].topology
        let frameMax = session.frameMax
        let second = failures.map { failure -> (index: Int, plan: DeliveryPlan) in
            let original = plans[failure.index].original
            var plan =
                failure.isPermanent
                ? DeliveryPlan(
                    original: original, unpublishable: failure.reason, topology: topology, frameMax: frameMax)
                : DeliveryPlan(
                    original: original, transientFailure: failure.reason, retry: configuration.retry,
                    jitter: random.fraction(), topology: topology, frameMax: frameMax)
            plan.committed = plans[failure.index].stored ?? plans[failure.index].committed
            return (failure.index, plan)
        }
        if second.allSatisfy({ $0.plan.messages.isEmpty }) {
            var settled = plans
            for entry in second { settled[entry.index] = entry.plan }
            settle(&session, at: index, settled, requeue: [], now: now, &actions)
            return
        }
        let republish = PublishID(value: nextID())
        session.batches[index].phase = .republishing(republish, plans, second: second)
        actions.append(
            .publish(
                session.id, republish, tags: second.map { session.batches[index].deliveries[$0.index].tag },
                plans: second.map(\.plan)))
    }

    /// A batch whose publish is done while its session pauses for the results: its refused deliveries are held through
    /// the pause when the configuration says so (`holdRefused`), else handed back (`handBackRefused`). A session that
    /// stops, or gives back for the store, hands them back.
    private mutating func keepOrHandBackRefused(
        _ session: inout Session, at index: Int, _ plans: [DeliveryPlan], _ failures: [PublishFailure], now: Duration,
        _ actions: inout [LifecycleAction]
    ) {
        if keepsRefused(session) {
            holdRefused(&session, at: index, plans, failures, now: now, &actions)
            armHeldResultsGiveBack(&session, now: now, &actions)
        } else {
            handBackRefused(&session, at: index, plans, failures, now: now, &actions)
        }
    }

    /// Whether a session holds its refused deliveries through the pause rather than handing them back: on a quorum
    /// work queue, while it pauses for the results (not stopping, not giving back for the store).
    private func keepsRefused(_ session: Session) -> Bool {
        configuration.holdsRefusedThroughAPause && session.course.isGivingBackForTheResults
            && !session.course.stopRequested && (results.isPaused || results.isTrying)
    }

    /// A batch whose results were refused while the worker pauses for them: what was taken is acknowledged; the
    /// refused deliveries stay, unsettled, as a batch of their own with their plans, for the next trial to publish
    /// again (`publishHeldResults`). Given back, each would count toward a quorum queue's delivery limit once per
    /// trial.
    private mutating func holdRefused(
        _ session: inout Session, at index: Int, _ plans: [DeliveryPlan], _ failures: [PublishFailure], now: Duration,
        _ actions: inout [LifecycleAction]
    ) {
        let batch = session.batches[index]
        let refused = failures.map(\.index)
        let held = Batch(
            id: batch.id, deliveries: refused.map { batch.deliveries[$0] }, isSuspect: batch.isSuspect,
            phase: .heldForResults(
                refused.map { plans[$0] },
                failures: failures.enumerated().map { position, failure in
                    PublishFailure(index: position, reason: failure.reason, isPermanent: failure.isPermanent)
                }))
        // Removes the batch, acknowledging what was taken; the refused stay unsettled in `unsettled`.
        settle(&session, at: index, plans, requeue: refused, handBack: true, now: now, &actions)
        session.batches.insert(held, at: index)
    }

    /// A trial begins: each batch a session holds through the pause publishes its recorded results again, the same
    /// plans byte for byte; its confirms are the trial's evidence (`confirmsArrived`).
    private mutating func publishHeldResults(_ session: inout Session, _ actions: inout [LifecycleAction]) {
        for index in session.batches.indices {
            guard case .heldForResults(let plans, let failures) = session.batches[index].phase,
                failures.count == session.batches[index].deliveries.count
            else { continue }
            let publish = PublishID(value: nextID())
            session.batches[index].phase = .publishing(publish, plans)
            actions.append(
                .publish(session.id, publish, tags: session.batches[index].deliveries.map(\.tag), plans: plans))
        }
    }

    /// Arms the timer that gives back what a session holds through a results pause before the broker's consumer
    /// timeout (as `armGiveBack` does for the store).
    private mutating func armHeldResultsGiveBack(
        _ session: inout Session, now: Duration, _ actions: inout [LifecycleAction]
    ) {
        guard session.heldResultsTimer == nil, !session.course.hasEnded, let oldest = session.oldestHeldForResults
        else { return }
        let remaining = oldest + configuration.giveBackAfter - now
        session.heldResultsTimer = startTimer(
            .giveBackHeldResults(session.id), after: max(remaining, .zero), &actions)
    }

    /// A batch whose publish is done while its session takes no more: what was taken is acknowledged, the
    /// deliveries whose messages were refused go back to the queue with the channel's close, unsettled (the
    /// results recorded for them are published again by the replay when they come back).
    private mutating func handBackRefused(
        _ session: inout Session, at index: Int, _ plans: [DeliveryPlan], _ failures: [PublishFailure], now: Duration,
        _ actions: inout [LifecycleAction]
    ) {
        let refused = failures.map(\.index)
        let deliveries = refused.map { session.batches[index].deliveries[$0] }
        settle(&session, at: index, plans, requeue: refused, handBack: true, now: now, &actions)
        if !deliveries.isEmpty {
            let reason = session.course.handBackReason
            actions.append(.report(.ended(deliveries.map { end($0, session.id, .requeued(reason: reason), now) })))
            if session.course.isGivingBackForTheResults { results.gaveBack(deliveries.count) }
        }
    }

    // MARK: - Bookkeeping

    private mutating func connect(_ pipeline: Int, after delay: Duration, _ actions: inout [LifecycleAction]) {
        pipelines[pipeline].sessionCount += 1
        let id = SessionID(pipeline: pipeline, number: pipelines[pipeline].sessionCount)
        pipelines[pipeline].session = Session(id: id, isShard: pipelines[pipeline].queue.isShard)
        actions.append(.connect(id, after: delay, release: pipelines[pipeline].release))
    }

    private mutating func startTimer(
        _ purpose: TimerPurpose, after delay: Duration, _ actions: inout [LifecycleAction]
    ) -> TimerID {
        let timer = TimerID(value: nextID())
        timers[timer] = purpose
        actions.append(.startTimer(timer, after: delay))
        return timer
    }

    private mutating func nextID() -> Int {
        lastID += 1
        return lastID
    }

    private mutating func takeSession(_ id: SessionID) -> Session? {
        guard pipelines.indices.contains(id.pipeline), let session = pipelines[id.pipeline].session,
            session.id == id
        else { return nil }
        // Taken out, so that changing it does not copy its arrays.
        pipelines[id.pipeline].session = nil
        return session
    }

    private mutating func putSession(_ session: Session) {
        pipelines[session.id.pipeline].session = session
    }

    private func plan(_ original: OriginalMessage, _ outcome: StoreAnswer.Outcome, topology: Topology, frameMax: Int)
        -> DeliveryPlan
    {
        switch outcome {
        case .stored(let decision):
            DeliveryPlan(original: original, stored: decision, topology: topology, frameMax: frameMax)
        case .refused(let reason):
            DeliveryPlan(original: original, storeRefusal: reason, topology: topology, frameMax: frameMax)
        }
    }

    private func end(_ delivery: Delivery, _ session: SessionID, _ fate: DeliveryFate, _ now: Duration) -> DeliveryEnd {
        DeliveryEnd(
            session: session, delivery: delivery, fate: fate, stored: nil, skippedReplyCopies: 0,
            elapsed: now - delivery.receivedAt)
    }
}

// MARK: - State

extension DeliveryLifecycle {
    struct PipelineState: Sendable {
        let queue: ConsumedQueue
        let topology: Topology
        var requeueBackoff: RequeueBackoff
        /// From `connect` until `sessionClosed`.
        var session: Session?
        var sessionCount = 0
        /// Connection attempts since the last session that consumed.
        var reconnectAttempt = 0
        /// The queue's consumers right after the last session's own consume.
        var consumersWithLastSession: Int?
        /// Set when a consuming session failed: the sessions that follow wait for the broker to drop its consumer,
        /// until one consumes.
        var release: ConsumerRelease?
        var phase = Phase.active

        enum Phase: Sendable, Equatable {
            /// Connecting, consuming, or waiting to reconnect.
            case active
            /// Paused after a give-back: connects when the store answers.
            case waitingForStore
            /// Paused for the results: connects when their trial begins.
            case waitingForResults
            /// The worker stops: the pipeline has ended, or ends with its session.
            case stopped
        }

        init(queue: ConsumedQueue, topology: Topology, requeueBackoff: RequeueBackoff) {
            self.queue = queue
            self.topology = topology
            self.requeueBackoff = requeueBackoff
        }
    }

    struct Session: Sendable {
        let id: SessionID
        let isShard: Bool
        var frameMax = AMQPConnectionConfiguration.defaultFrameMax
        /// Connecting, consuming (taking work or handing back), ended.
        var course = SessionCourse()
        var giveBackTimer: TimerID?
        /// Gives back the deliveries held through a results pause before the broker's consumer timeout.
        var heldResultsTimer: TimerID?
        /// Not yet settled, in arrival order.
        var batches: [Batch] = []
        var unsettled = UnsettledTags()

        init(id: SessionID, isShard: Bool) {
            self.id = id
            self.isShard = isShard
        }

        /// When the oldest delivery with nothing committed arrived.
        var oldestUncommitted: Duration? {
            batches.first(where: \.isUncommitted)?.deliveries.first?.receivedAt
        }

        /// When the oldest delivery held for the results' verdict arrived.
        var oldestHeldForResults: Duration? {
            batches.lazy.compactMap { batch -> Duration? in
                if case .heldForResults = batch.phase { batch.deliveries.first?.receivedAt } else { nil }
            }.min()
        }

        /// Deliveries held for the results' verdict.
        var heldForResults: Int {
            batches.reduce(0) { count, batch in
                if case .heldForResults = batch.phase { count + batch.deliveries.count } else { count }
            }
        }
    }

    enum TimerPurpose: Sendable {
        case retryStore(SessionID, BatchID)
        case requeue(SessionID, BatchID)
        case probeStore
        case giveBack(SessionID)
        /// The deliveries a session holds through a results pause have been held for `giveBackAfter`.
        case giveBackHeldResults(SessionID)
        /// The paused results' next trial begins.
        case resultsTrial
        /// A trial of the results saw no verdict in its window: it resumes.
        case resultsTrialDeadline
    }

    enum CheckRequester: Sendable {
        case batch(SessionID, BatchID)
        case probe
    }
}

extension DeliveryLifecycle.Batch {
    /// The publish whose confirms the batch awaits, if any.
    var publishID: DeliveryLifecycle.PublishID? {
        switch phase {
        case .publishing(let id, _), .republishing(let id, _, _): id
        default: nil
        }
    }
}
