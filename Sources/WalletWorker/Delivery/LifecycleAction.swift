import AMQPTransport
import WalletStore

/// What `DeliveryLifecycle` asks its executor to do. A pipeline's actions are run one after another in the order
/// they were returned; each names the session it belongs to, and an executor drops those of a session that has ended.
enum LifecycleAction: Sendable {
    /// Open the pipeline's connections and channels, declare the topology and consume, after `delay`; then report
    /// `sessionStarted` (or `sessionFailed`). With `release`, the consume waits for the broker to drop the failed
    /// session's consumer (`ConsumerRelease`).
    case connect(DeliveryLifecycle.SessionID, after: Duration, release: ConsumerRelease?)
    /// Run the deliveries' messages through the store, in one transaction, or one transaction per message
    /// (`oneAtATime`, after the store refused some of the batch's data); report `storeAnswered`.
    case store(
        DeliveryLifecycle.SessionID, DeliveryLifecycle.BatchID, [DeliveryLifecycle.Delivery], oneAtATime: Bool)
    /// Publish every plan's messages, in order, on the confirm channel; report `confirmsArrived`. `tags` names the
    /// delivery of each plan.
    case publish(DeliveryLifecycle.SessionID, DeliveryLifecycle.PublishID, tags: [UInt64], plans: [DeliveryPlan])
    /// Send `reply_to` copies for direct reply-to requesters, unconfirmed, on the reply connection.
    case sendDirectReplies(DeliveryLifecycle.SessionID, [AMQPOutboundMessage])
    /// Acknowledge, requeue or reject deliveries on the consume channel, in this order.
    case settle(DeliveryLifecycle.SessionID, [Settlement])
    /// Ask the broker to stop sending (`basic.cancel`); report `consumerEnded` when the consumer's sequence ends.
    case cancelConsumer(DeliveryLifecycle.SessionID)
    /// Close the session: its consume channel first (the broker requeues what is not settled, in place, and a shard's
    /// standby takes over), then its connections; report `sessionClosed`.
    case endSession(DeliveryLifecycle.SessionID, SessionEnd)
    /// The pipeline is done: the worker is stopping.
    case stopPipeline(pipeline: Int)
    /// Report `timerFired` after `delay`.
    case startTimer(DeliveryLifecycle.TimerID, after: Duration)
    /// Prove the store can do what a batch needs (`WalletStore.checkAvailable`: a write that rolls back); report
    /// `storeChecked`.
    case checkStore(DeliveryLifecycle.CheckID)
    /// Tells the store what became of recorded messages' results (`RecordedResultsDelivery`), once their batch is
    /// settled: for `wallet-worker inspect message`, so best effort (a failure is logged, nothing waits for it).
    case noteResultDelivery([RecordedResultsDelivery])
    /// A failure no retry fixes (`StoreFailure`, a `TopologyError`): the worker exits with it once every pipeline
    /// has stopped.
    case failWorker(any Error)
    /// Something metrics, logs, spans and health observe.
    case report(LifecycleEvent)
}

/// How one delivery is settled with the broker.
enum Settlement: Sendable, Hashable {
    /// `basic.ack`; with `multiple`, every unsettled delivery up to `tag` on the channel.
    case ack(tag: UInt64, multiple: Bool)
    /// `basic.nack` with requeue: the broker delivers it again.
    case requeue(tag: UInt64)
    /// `basic.nack` without requeue: the work queue's dead-letter exchange gets it whole, with `x-death`.
    case reject(tag: UInt64)
}

/// Why a session ends.
enum SessionEnd: Sendable, Hashable {
    /// The worker is stopping: everything the session took on is finished (a shard's unstarted deliveries go back).
    case stopped
    /// The consumer ended without a stop (cancelled by us on a consumer the broker no longer knew): a new session.
    case consumerEnded
    /// The store has been out for long: held deliveries are given back before the broker's consumer timeout, and
    /// no session starts until the store answers.
    case pausedForStore
    /// The results are not taken (`ResultsAvailability`): held deliveries were given back, and no session starts
    /// until a trial (or, after the deliveries held through the pause were settled, at once).
    case pausedForResults
    /// A broker or transport failure: everything unsettled is redelivered by the broker.
    case failed(error: String)
}

/// What the lifecycle tells observers: metrics, logs, spans, health.
enum LifecycleEvent: Sendable {
    /// A session is consuming.
    case consuming(DeliveryLifecycle.SessionID, queue: String)
    /// A session ended (after consuming, when `wasConsuming`).
    case sessionEnded(DeliveryLifecycle.SessionID, SessionEnd, wasConsuming: Bool)
    /// A session failed: why, once (its deliveries end with `droppedWithSession`).
    case sessionFailed(DeliveryLifecycle.SessionID, error: String)
    /// A pipeline will connect again after a failure.
    case reconnecting(pipeline: Int, attempt: Int, delay: Duration)
    /// Deliveries arrived (a message span starts for each).
    case received(DeliveryLifecycle.SessionID, [DeliveryLifecycle.Delivery])
    /// Deliveries left the worker, or were given back: each one's fate, the store's decision, and the time since it
    /// arrived. One event per batch settled (not one per delivery: this is the hot path).
    case ended([DeliveryEnd])
    /// A message a delivery's fate depends on was not taken by the broker: it goes to the retry queue (or is
    /// dead-lettered).
    case publishNotConfirmed(DeliveryLifecycle.SessionID, DeliveryLifecycle.Delivery, reason: String)
    /// A rejected delivery's `rejected` result was not taken, though its dead letter was (logged, not retried).
    case resultNotTaken(DeliveryLifecycle.SessionID, DeliveryLifecycle.Delivery, reason: String)
    /// `reply_to` copies the broker returned: the requester's queue is gone.
    case replyCopiesReturned(count: Int)
    /// The store refused data of a batch: it is stored again one message at a time.
    case storingOneAtATime(DeliveryLifecycle.SessionID, messages: Int, error: StoreError)
    /// A batch failed transiently and the store check passed too often: the failure is the batch's own, it goes to
    /// the retry queue.
    case batchFailsWhileStoreAnswers(DeliveryLifecycle.SessionID, messages: Int, error: StoreError)
    /// The store cannot take writes: the pipelines hold their batches and take no more.
    case storeOutageBegan(error: StoreError)
    /// The store answers its check again: held batches are stored, paused pipelines consume.
    case storeOutageEnded(after: Duration)
    /// Deliveries held for long, for the store or through a results pause, are given back to their queue before the
    /// broker's consumer timeout.
    case givingBack(DeliveryLifecycle.SessionID, deliveries: Int, heldFor: Duration, cause: PauseCause)
    /// A dependency failed every message (`ResultsKillSwitch` tripped): the pipelines give back what they hold (or,
    /// on a quorum work queue, hold what was refused) and take no more. `trial` is nil when the pause begins, else the trial that failed; the next is in `nextTrial`.
    case paused(PauseCause, reason: String, failedTrial: Int?, nextTrial: Duration)
    /// The pause's trial `attempt` begins: the results of the `held` deliveries held through the pause are published
    /// again, or, with none held, the pipelines consume again; the first results taken end the pause.
    case trialBegan(PauseCause, attempt: Int, held: Int)
    /// The pause ended after `after`; `gaveBack` deliveries were given back during it.
    case resumed(PauseCause, after: Duration, gaveBack: Int)
    /// Deliveries whose retry or dead-letter publish failed too wait `delay` before they are requeued.
    case requeueDelayed(DeliveryLifecycle.SessionID, deliveries: Int, delay: Duration)
}

/// Which dependency paused the worker: the `cause` label of `wallet_paused` and the cause `/readyz` names.
enum PauseCause: String, Sendable, CaseIterable {
    /// The store does not take writes (`StoreAvailability`).
    case store
    /// The result exchanges refuse what every message publishes (`ResultsAvailability`).
    case results
}

/// One delivery's end, as observers see it.
struct DeliveryEnd: Sendable {
    var session: DeliveryLifecycle.SessionID
    var delivery: DeliveryLifecycle.Delivery
    var fate: DeliveryFate
    /// The store's decision, when it made one.
    var stored: StoredDecision?
    /// `reply_to` copies not published (a malformed direct reply-to address, a `reply_to` that is not UTF-8).
    var skippedReplyCopies: Int
    /// From its arrival to its end.
    var elapsed: Duration
    /// For a delivery sent to the retry queue: which level's queue, and how long its copy waits there.
    var retryWait: (queue: String, milliseconds: Int64)? = nil
}
