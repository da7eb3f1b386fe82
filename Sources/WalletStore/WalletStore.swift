import Foundation
import WalletRouting

/// Where the worker keeps the wallet's state and the messages it has processed (CONTRACT.md §10).
///
/// One call processes one batch in one transaction: for each message in order, a `message_id` the store has
/// already recorded replays its recorded results and applies nothing; any other message is routed against the
/// transaction's state (which already holds the effects of the messages before it in the batch), its effects are
/// applied, and, unless it was rejected or has no `message_id`, it is recorded with its results. Either the whole
/// batch commits or nothing does, and then the call throws a `StoreError`.
public protocol WalletStore: Sendable {
    /// Routes and records `messages` in one transaction; one `StoredDecision` per message, in order.
    /// - Parameter now: the processing time passed to the router (results carry it as `processedAt`).
    func process(_ messages: [InboundMessage], router: NotificationRouter, now: Date) async throws(StoreError)
        -> [StoredDecision]

    /// Routes `messages` exactly as `process` would, against the same committed state, and keeps nothing: no
    /// effect is applied and no `message_id` recorded (`wallet-worker route` without `--commit`).
    func dryRun(_ messages: [InboundMessage], router: NotificationRouter, now: Date) async throws(StoreError)
        -> [StoredDecision]

    /// Forgets processed `message_id`s recorded before `cutoff` (the deduplication retention); returns how many.
    func expireProcessedMessages(recordedBefore cutoff: Date) async throws(StoreError) -> Int

    /// Keeps what `note` says beside the processed messages' records, outside any batch: a message dead-lettered
    /// after its effects were committed is noted as undelivered (a later note for the same id replaces it); a
    /// delivered one is forgotten. Notes of a message go when its record expires.
    func noteResultDelivery(_ note: ResultDeliveryNote) async throws(StoreError)

    /// Releases the store's connections. Calls after `close()` fail.
    func close() async

    /// Checks that the store can be used (reachable, schema migrated) before the first batch, so a permanent
    /// failure stops the worker at start rather than at its first message. `process` prepares by itself too.
    /// The file stores open ready; the default does nothing.
    func prepare() async throws(StoreError)

    /// Proves, outside any batch, that the store can do what a batch needs: a write, rolled back. When a batch fails
    /// transiently, this tells a store that cannot take writes (it fails too: the worker holds its batches) from a
    /// failure of that batch's own (it passes: the batch goes to the retry queue). The default does nothing.
    func checkAvailable() async throws(StoreError)
}

extension WalletStore {
    public func prepare() async throws(StoreError) {}
    public func checkAvailable() async throws(StoreError) {}
}

/// What the store decided for one message of a batch.
public struct StoredDecision: Sendable, Hashable {
    /// The router's decision, or for a replay the recorded one: no effects, the recorded results verbatim.
    public var decision: Decision
    /// True when the `message_id` was already processed: nothing was applied, the recorded results are returned.
    public var isReplay: Bool
    /// The `message_id` the decision is recorded under (a replay's, or a new one's that was recorded); nil when it
    /// is not recorded: no `message_id`, or a rejection.
    public var recordedMessageID: String?

    public init(decision: Decision, isReplay: Bool, recordedMessageID: String? = nil) {
        self.decision = decision
        self.isReplay = isReplay
        self.recordedMessageID = recordedMessageID
    }
}
