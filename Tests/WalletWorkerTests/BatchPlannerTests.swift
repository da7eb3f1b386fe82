import AMQPTransport
import Foundation
import Logging
import Synchronization
import Testing
import WalletRouting
import WalletStore

@testable import WalletWorker

/// A batch's plans from the store's answer; what a message the store refuses does to the rest of its batch.
@Suite struct BatchPlannerTests {
    let topology = Topology()
    let now = Date(timeIntervalSince1970: 1_790_000_000)

    func planner(_ store: some WalletStore) -> BatchPlanner {
        BatchPlanner(
            store: store, router: NotificationRouter(), topology: topology, retry: .attempts(5),
            logger: Logger(label: "batch-planner-tests", factory: { _ in SwiftLogNoOpLogHandler() }))
    }

    static func message(_ json: String, id: String) -> OriginalMessage {
        OriginalMessage(
            body: Array(json.utf8),
            properties: AMQPMessageProperties(contentType: "application/json", deliveryMode: .persistent, messageID: id),
            routingKey: "backend")
    }

    static func install(_ card: String) -> OriginalMessage {
        message(
            #"{"sender":"CPS","digitalCardId":"\#(card)","serverMessage":{"code":"CBP.info.tokenProvisioned","text":"t","severity":"info","params":[]}}"#,
            id: "install-\(card)")
    }

    static func replenish(_ card: String, id: String? = nil) -> OriginalMessage {
        message(#"{"sender":"MG","action":"MG:ReplenishmentNeededNotification","digitalCardId":"\#(card)"}"#,
                id: id ?? "mg-\(card)")
    }

    @Test func aMessageTheStoreRefusesIsDeadLetteredAndTheRestOfItsBatchIsAppliedInOrder() async throws {
        let store = ScriptedStore(failing: ["poison": .refusedInput])
        let batch = [Self.install("DC-1"), Self.replenish("DC-X", id: "poison"), Self.replenish("DC-1"),
                     Self.install("DC-2"), Self.replenish("DC-2")]
        let plans = try await planner(store).plan(batch, now: now)

        #expect(store.batchSizes == [5, 1, 1, 1, 1, 1], "the batch, then each message alone")
        #expect(plans.map(\.original) == batch)
        #expect(plans.map(\.route) == [
            .results, .storeRefused(reason: "the store refused this message: poison refused"), .results, .results,
            .results,
        ])
        #expect(plans[1].messages.first?.properties.headers?["x-worker-error"]
                    == .string("the store refused this message: poison refused"))
        // Each replenishment saw its card's install, stored just before it.
        for index in [2, 4] {
            let outcome = plans[index].stored?.decision.outcome
            #expect(outcome == .processed, "\(String(describing: plans[index].stored))")
        }
    }

    @Test func aBatchOfOneTheStoreRefusesIsNotStoredAgain() async throws {
        let store = ScriptedStore(failing: ["poison": .refusedInput])
        let plans = try await planner(store).plan([Self.replenish("DC-X", id: "poison")], now: now)
        #expect(store.batchSizes == [1])
        #expect(plans.map(\.route) == [.storeRefused(reason: "the store refused this message: poison refused")])
    }

    @Test func aStoreFailureUnderCancellationLeavesTheBatchToTheBrokerInsteadOfSpendingARetry() async throws {
        // A cancelled store call fails as transient ("access cancelled"); the store is fine, the worker is stopping.
        let store = ScriptedStore(failing: ["busy": .transient, "poison": .refusedInput])
        let planner = planner(store)
        let now = now
        for batch in [[Self.replenish("DC-1", id: "busy")],
                      [Self.replenish("DC-X", id: "poison"), Self.replenish("DC-1", id: "busy")]] {
            let planning = Task {
                withUnsafeCurrentTask { $0?.cancel() }
                return try await planner.plan(batch, now: now)
            }
            await #expect(throws: CancellationError.self, "\(batch.map(\.properties.messageID))") {
                try await planning.value
            }
        }
        // Not cancelled: the same failure is handed to `BatchProcessor`, which holds the batch (`StoreCircuit`).
        await #expect(throws: BatchPlanner.TransientStoreFailure.self) {
            try await planner.plan([Self.replenish("DC-1", id: "busy")], now: now)
        }
    }

    @Test func aTransientFailureDuringTheOneAtATimePassHandsTheBatchBack() async throws {
        let store = ScriptedStore(failing: ["poison": .refusedInput, "busy": .transient])
        let batch = [Self.install("DC-1"), Self.replenish("DC-X", id: "poison"), Self.replenish("DC-1", id: "busy"),
                     Self.install("DC-2")]
        await #expect(throws: BatchPlanner.TransientStoreFailure.self) {
            try await planner(store).plan(batch, now: now)
        }
        #expect(store.batchSizes == [4, 1, 1, 1], "nothing tried after the store became unavailable")
        // Held and tried again, the committed first message replays; the retry plans, when the failure is the
        // batch's own, are the planner's too.
        let plans = planner(store).retryPlans(batch[2...], error: StoreError(.transient, "busy failed"))
        #expect(plans.map(\.route) == Array(repeating: .retry(attempt: 1, error: "store unavailable: busy failed"), count: 2))
    }

    @Test func aPermanentFailureDuringTheOneAtATimePassStopsTheWorker() async throws {
        let store = ScriptedStore(failing: ["poison": .refusedInput, "broken": .permanent])
        let batch = [Self.install("DC-1"), Self.replenish("DC-X", id: "poison"), Self.replenish("DC-1", id: "broken")]
        await #expect(throws: BatchProcessor.FatalStoreError.self) {
            try await planner(store).plan(batch, now: now)
        }
    }

    @Test func transientAndPermanentFailuresOfTheWholeBatchAreHandledAsBefore() async throws {
        let busy = ScriptedStore(failing: ["busy": .transient])
        await #expect(throws: BatchPlanner.TransientStoreFailure.self) {
            try await planner(busy).plan([Self.install("DC-1"), Self.replenish("DC-1", id: "busy")], now: now)
        }
        #expect(busy.batchSizes == [2])

        let broken = ScriptedStore(failing: ["broken": .permanent])
        await #expect(throws: BatchProcessor.FatalStoreError.self) {
            try await planner(broken).plan([Self.install("DC-1"), Self.replenish("DC-1", id: "broken")], now: now)
        }
        #expect(broken.batchSizes == [2])
    }
}

/// An in-memory store that fails any batch holding one of the scripted `message_id`s (the first in the batch
/// decides), with that kind and the message "<id> refused" or "<id> failed"; it remembers each batch's size.
final class ScriptedStore: WalletStore {
    private let inner = InMemoryWalletStore()
    private let failing: [String: StoreError.Kind]
    private let sizes = Mutex<[Int]>([])

    init(failing: [String: StoreError.Kind]) {
        self.failing = failing
    }

    var batchSizes: [Int] { sizes.withLock { $0 } }

    func process(_ messages: [InboundMessage], router: NotificationRouter, now: Date) async throws(StoreError)
        -> [StoredDecision]
    {
        sizes.withLock { $0.append(messages.count) }
        for message in messages {
            guard let id = message.properties.messageID, let kind = failing[id] else { continue }
            throw StoreError(kind, "\(id) \(kind == .refusedInput ? "refused" : "failed")")
        }
        return try await inner.process(messages, router: router, now: now)
    }

    func dryRun(_ messages: [InboundMessage], router: NotificationRouter, now: Date) async throws(StoreError)
        -> [StoredDecision]
    {
        try await inner.dryRun(messages, router: router, now: now)
    }

    func expireProcessedMessages(recordedBefore cutoff: Date) async throws(StoreError) -> Int {
        try await inner.expireProcessedMessages(recordedBefore: cutoff)
    }

    func close() async {
        await inner.close()
    }
}
