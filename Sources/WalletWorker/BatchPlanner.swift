import Foundation
import Logging
import WalletRouting
import WalletStore

/// Runs a batch through the store and plans each delivery from the answer: its results, or what a store failure
/// means for it. No broker: `BatchProcessor` publishes and acknowledges what this plans.
struct BatchPlanner: Sendable {
    var store: any WalletStore
    var router: NotificationRouter
    var topology: Topology
    /// The waits between a message's attempts, and how many it gets.
    var retry: RetrySchedule
    var logger: Logger

    /// One store transaction for the batch. A transient failure throws `TransientStoreFailure` (or, when the task
    /// is cancelled, `CancellationError`: the batch is left unacknowledged); a permanent one throws
    /// `FatalStoreError`. Data the store refuses (`refusedInput`) belongs to some message of the batch: the
    /// batch is stored again one message at a time, so one poison message is dead-lettered instead of stopping
    /// every replica that receives the batch.
    func plan(_ originals: [OriginalMessage], now: Date) async throws -> [DeliveryPlan] {
        let messages = originals.map(InboundMessage.init)
        do {
            let stored = try await store.process(messages, router: router, now: now)
            return zip(originals, stored).map { DeliveryPlan(original: $0, stored: $1, topology: topology) }
        } catch {
            switch error.kind {
            case .permanent:
                throw BatchProcessor.FatalStoreError(underlying: error)
            case .transient where Task.isCancelled:
                // The worker is being cancelled, the store is fine: no retry attempt spent, the broker redelivers.
                throw CancellationError()
            case .transient:
                // Held and tried again by `BatchProcessor` (see `StoreCircuit`), or retried through the queue.
                throw TransientStoreFailure(error: error)
            case .refusedInput where originals.count == 1:
                return [DeliveryPlan(original: originals[0], storeRefusal: error.message, topology: topology)]
            case .refusedInput:
                logger.warning("the store refused the batch; storing its messages one at a time",
                               metadata: ["error": "\(error)", "batch": "\(originals.count)"])
                return try await planOneAtATime(originals, messages, now: now)
            }
        }
    }

    /// The batch again, one store transaction per message, in order: the messages the store accepts are applied
    /// and published as usual, a message it refuses alone is dead-lettered. After a transient failure that message
    /// and the rest go to the retry queue (the store is busy or gone: trying each would wait out its deadline once
    /// per message); a permanent one is fatal, as for a batch.
    private func planOneAtATime(_ originals: [OriginalMessage], _ messages: [InboundMessage], now: Date)
        async throws -> [DeliveryPlan]
    {
        var plans: [DeliveryPlan] = []
        for index in originals.indices {
            do {
                let stored = try await store.process([messages[index]], router: router, now: now)
                plans.append(DeliveryPlan(original: originals[index], stored: stored[0], topology: topology))
            } catch {
                switch error.kind {
                case .permanent:
                    throw BatchProcessor.FatalStoreError(underlying: error)
                case .refusedInput:
                    plans.append(
                        DeliveryPlan(original: originals[index], storeRefusal: error.message, topology: topology))
                case .transient where Task.isCancelled:
                    throw CancellationError()
                case .transient:
                    // The messages before this one are committed: held again, they replay their results.
                    throw TransientStoreFailure(error: error)
                }
            }
        }
        return plans
    }

    /// The store failed the batch transiently; nothing of it is acknowledged yet.
    struct TransientStoreFailure: Error {
        var error: StoreError
    }

    /// The batch's own transient failure (the store answers otherwise): every delivery goes to the retry queue,
    /// or after its last attempt to the dead-letter exchange.
    func retryPlans(_ originals: ArraySlice<OriginalMessage>, error: StoreError) -> [DeliveryPlan] {
        originals.map {
            DeliveryPlan(
                original: $0, transientFailure: error.description, retry: retry,
                jitter: .random(in: 0..<1), topology: topology)
        }
    }
}
