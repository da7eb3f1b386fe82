import Foundation
import Logging
import WalletRouting
import WalletStore

/// Runs a `store` action: the batch through the store, in one transaction or one per message, and what the store
/// made of it (`StoreAnswer`). It decides nothing: what a failure means is `DeliveryLifecycle`'s.
struct BatchStorage: Sendable {
    var store: any WalletStore
    var router: NotificationRouter
    var metrics: WorkerMetrics
    /// Times each transaction.
    var clock: WorkerClock
    var logger: Logger

    /// One transaction for the batch; with `oneAtATime`, one per message, in order, until one fails for a reason
    /// other than its own data (the store is busy or gone: trying each would wait out its deadline once per message).
    func store(_ originals: [OriginalMessage], oneAtATime: Bool) async -> StoreAnswer {
        let messages = originals.map(InboundMessage.init)
        guard oneAtATime else {
            do throws(StoreError) {
                return .stored(
                    try await timed { () async throws(StoreError) in
                        try await store.process(messages, router: router, now: Date())
                    })
            } catch {
                return .failed(error)
            }
        }
        var outcomes: [StoreAnswer.Outcome] = []
        for message in messages {
            do throws(StoreError) {
                let stored = try await timed { () async throws(StoreError) in
                    try await store.process([message], router: router, now: Date())
                }
                outcomes.append(.stored(stored[0]))
            } catch {
                guard error.kind == .refusedInput else { return StoreAnswer(outcomes: outcomes, failure: error) }
                outcomes.append(.refused(reason: error.message))
            }
        }
        return StoreAnswer(outcomes: outcomes, failure: nil)
    }

    /// Proves the store takes writes (`WalletStore.checkAvailable`); nil when it does.
    func check() async -> StoreError? {
        do {
            try await store.checkAvailable()
            metrics.storeChecksPassed.increment()
            return nil
        } catch {
            metrics.storeChecksFailed.increment()
            return error
        }
    }

    /// Tells the store what became of recorded messages' results (`RecordedResultsDelivery`). Best effort: the
    /// messages are settled already, and a note that fails only leaves `inspect message` without it.
    func noteResultDelivery(_ changes: [RecordedResultsDelivery]) async {
        do throws(StoreError) {
            try await store.noteResultDelivery(changes.note(at: Date()))
        } catch {
            logger.warning(
                "could not note in the store which recorded results were delivered",
                metadata: ["error": "\(error)", "messages": "\(changes.count)"])
        }
    }

    /// One store transaction, timed whether it commits or fails (`wallet_store_batch_seconds{outcome}`).
    private func timed<T>(_ body: () async throws(StoreError) -> T) async throws(StoreError) -> T {
        let began = clock.now
        do throws(StoreError) {
            let result = try await body()
            metrics.recordStoreBatch(clock.now - began, committed: true)
            return result
        } catch {
            metrics.recordStoreBatch(clock.now - began, committed: false)
            throw error
        }
    }
}
