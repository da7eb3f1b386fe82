import WalletStore

extension DeliveryLifecycle {
    /// Deliveries that go through the store together, and where they are on their way out.
    struct Batch: Sendable {
        let id: BatchID
        var deliveries: [Delivery]
        /// A delivery that failed a session before (`PoisonSuspects`): alone in its batch, processed with nothing
        /// else in flight.
        let isSuspect: Bool
        var phase: Phase = .waiting
        /// Transient store failures of this batch so far.
        var storeFailures = 0
        /// Of those, the ones after which the store passed its check: the failure looks like the batch's own.
        var failuresWhileStoreAnswers = 0
        /// The last of those failures, for the retry copies' `x-worker-last-error`.
        var lastStoreError: StoreError?

        enum Phase: Sendable {
            /// Received, not yet stored: behind another batch, or waiting for the store.
            case waiting
            /// Its store call is out.
            case storing(oneAtATime: Bool)
            /// It failed transiently; a store check is out to tell an outage from the batch's own failure.
            case checkingStore(CheckID)
            /// The store answers but the batch failed: tried again when the timer fires.
            case waitingToRetry(TimerID)
            /// The store is out: stored again when it answers its check.
            case held
            /// Committed; its messages are out, their confirms awaited.
            case publishing(PublishID, [DeliveryPlan])
            /// Its results were refused during a trial of the results (`ResultsAvailability`): held, unsettled, for
            /// the trial's verdict; then the failed ones are retried (the results are taken) or given back (paused
            /// again). `failures` are its first publish's.
            case heldForResults([DeliveryPlan], failures: [PublishFailure])
            /// Some of its messages were not taken: the failed deliveries' retry copies or dead letters are out.
            case republishing(PublishID, [DeliveryPlan], second: [(index: Int, plan: DeliveryPlan)])
            /// Settled but for the deliveries in `requeue`, whose second publish failed too: they are requeued
            /// when the timer fires.
            case requeueing(TimerID, requeue: [Int], plans: [DeliveryPlan])
        }

        /// Between its store call and the store's final answer: no other batch of the session is stored meanwhile.
        var isAtTheStore: Bool {
            switch phase {
            case .storing, .checkingStore, .waitingToRetry, .held: true
            case .waiting, .publishing, .republishing, .requeueing, .heldForResults: false
            }
        }

        /// Nothing of it committed yet: it can be given back whole.
        var isUncommitted: Bool {
            switch phase {
            case .waiting, .checkingStore, .waitingToRetry, .held: true
            case .storing, .publishing, .republishing, .requeueing, .heldForResults: false
            }
        }
    }

    /// Why one plan of a publish failed: `index` is the plan's; permanent when no retry can help (a message AMQP
    /// cannot encode).
    struct PublishFailure: Sendable {
        var index: Int
        var reason: String
        var isPermanent: Bool
    }

    /// One delivery as the lifecycle keeps it. Immutable, and a reference: the lifecycle hands a delivery from its
    /// batch to actions, reports and ends, and each of those copies is one reference count, not one per property.
    final class Delivery: Sendable {
        /// The consume channel's delivery tag.
        let tag: UInt64
        let original: OriginalMessage
        let redelivered: Bool
        /// When the lifecycle received it.
        let receivedAt: Duration

        init(tag: UInt64, original: OriginalMessage, redelivered: Bool, receivedAt: Duration) {
            self.tag = tag
            self.original = original
            self.redelivered = redelivered
            self.receivedAt = receivedAt
        }
    }
}
