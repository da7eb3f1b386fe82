import Foundation
import Synchronization
import WalletRouting

/// A store that lives and dies with the process: for `wallet-worker route` and tests.
/// Same rules as the durable stores. Its reads cannot fail, so a batch always completes.
public final class InMemoryWalletStore: WalletStore {
    private struct Contents: Sendable {
        var state = InMemoryWalletState()
        var processed: [String: (decision: Decision, recordedAt: Date)] = [:]
        var undelivered: [String: UndeliveredResults] = [:]
    }

    private let contents = Mutex(Contents())

    public init() {}

    public func process(_ messages: [InboundMessage], router: NotificationRouter, now: Date) async throws(StoreError)
        -> [StoredDecision]
    {
        do {
            return try contents.withLock { contents in
                // The state moves into the transaction and back, so it stays uniquely referenced and is updated in
                // place (a copy per batch would cost the whole state). Reads never fail here, so a batch cannot
                // stop half-way; the `defer` only keeps the state if a future change made one fail.
                let transaction = Transaction(contents: contents)
                contents = Contents()
                defer { contents = transaction.takeContents() }
                return try BatchRouting.process(messages, router: router, now: now, in: transaction)
            }
        } catch let error as StoreError {
            throw error
        } catch {
            throw StoreError(.permanent, "in-memory store: \(error)")
        }
    }

    public func dryRun(_ messages: [InboundMessage], router: NotificationRouter, now: Date) async throws(StoreError)
        -> [StoredDecision]
    {
        // A copy of the contents, discarded: the store's own stay as they were.
        let transaction = Transaction(contents: contents.withLock { $0 })
        do {
            return try BatchRouting.process(messages, router: router, now: now, in: transaction)
        } catch let error as StoreError {
            throw error
        } catch {
            throw StoreError(.permanent, "in-memory store: \(error)")
        }
    }

    public func expireProcessedMessages(recordedBefore cutoff: Date) async throws(StoreError) -> Int {
        contents.withLock { contents in
            let before = contents.processed.count
            contents.processed = contents.processed.filter { $0.value.recordedAt >= cutoff }
            contents.undelivered = contents.undelivered.filter { contents.processed[$0.key] != nil }
            return before - contents.processed.count
        }
    }

    public func noteResultDelivery(_ note: ResultDeliveryNote) async throws(StoreError) {
        contents.withLock { contents in
            for undelivered in note.undelivered where contents.processed[undelivered.messageID] != nil {
                contents.undelivered[undelivered.messageID] = undelivered
            }
            for messageID in note.delivered { contents.undelivered[messageID] = nil }
        }
    }

    /// The note of a processed message's results as undelivered (`noteResultDelivery`), for tests.
    public func undeliveredResults(_ messageID: String) -> UndeliveredResults? {
        contents.withLock { $0.undelivered[messageID] }
    }

    public func close() async {}

    /// The wallet state, for tests and the `route` command.
    public var state: InMemoryWalletState {
        contents.withLock { $0.state }
    }

    /// A reference box so the protocol's non-mutating methods can write to the batch's copy.
    private final class Transaction: WalletStoreTransaction {
        var contents: Contents
        init(contents: Contents) { self.contents = contents }

        func takeContents() -> Contents {
            defer { contents = Contents() }
            return contents
        }

        func card(_ digitalCardId: String) -> CardRecord? { contents.state.card(digitalCardId) }
        func hasTransaction(digitalCardId: String, recordId: String) -> Bool {
            contents.state.hasTransaction(digitalCardId: digitalCardId, recordId: recordId)
        }
        func newestTransactions(digitalCardId: String, auxiliary: Bool?, limit: Int) -> [TransactionRecord] {
            contents.state.newestTransactions(digitalCardId: digitalCardId, auxiliary: auxiliary, limit: limit)
        }
        func recordedDecision(messageID: String) -> Decision? { contents.processed[messageID]?.decision }
        func apply(_ effects: [Effect]) { contents.state.apply(effects) }
        func record(messageID: String, decision: Decision, at now: Date) {
            let recorded = Decision.recorded(
                results: decision.results, outcome: decision.outcome, sender: decision.sender,
                digitalCardId: decision.digitalCardId)
            contents.processed[messageID] = (recorded, now)
        }
    }
}
