// A message whose data the PostgreSQL store cannot hold (a NUL in `digitalCardId`, which the router accepts):
// found in review to stop every replica that received its batch. Now it is dead-lettered alone.
import AMQPTransport
import BrokerTestSupport
import Foundation
import Testing
import WalletStore
import WalletWorker

@Suite(
    "Store-refused input through the broker (PostgreSQL)", .timeLimit(.minutes(3)),
    .enabled(
        if: ReplicaDatabase.isConfigured,
        "POSTGRES_URL is not set: scripts/test.sh starts a private PostgreSQL and sets it"))
struct StoreRefusedInputTests {
    @Test(
        "one message of a batch of 20 the store refuses: dead-lettered with the store's error, the rest applied in order, the worker runs on"
    )
    func aMessageTheStoreRefusesIsDeadLetteredAlone() async throws {
        try await ReplicaDatabase.with("refused") { database in
            let store = try StoreLocation(parsing: database.storeURL)
            try await withWorkerEnvironment("store-refused", configure: { $0.store = store }) { environment in
                try await environment.declareTopology()
                let capture = try await environment.resultCapture()
                let deadLetters = try await environment.deadLetterReader()

                // Install and replenish nine cards, the poison in the middle, an action last: 20 messages in the
                // queue before the worker starts, so they arrive in one batch or a few (what arrived together);
                // DeliveryLifecycleTests cover the one-at-a-time pass without depending on that.
                func pair(_ card: Int) -> [InboundSpec] {
                    [
                        InboundSpec(json: Self.install("DC-\(card)"), messageID: "install-\(card)"),
                        InboundSpec(json: Self.replenish("DC-\(card)"), messageID: "mg-\(card)"),
                    ]
                }
                let poison = InboundSpec(json: Self.replenish(#"DC\u0000X"#), messageID: "poison")
                let action = InboundSpec(json: #"{"action":"refresh"}"#, messageID: "action")
                let good = (0..<5).flatMap(pair) + (5..<9).flatMap(pair) + [action]
                let published = (0..<5).flatMap(pair) + [poison] + (5..<9).flatMap(pair) + [action]
                #expect(published.count == 20)
                try await environment.publish(published)
                let worker = try await environment.startWorker()

                // Two results per install, one per replenishment and one for the action.
                let results = try await capture.results.waitFor(
                    28, "every good message's results")
                let letters = try await deadLetters.waitFor(
                    1, "the refused message's dead letter")
                let extra = try await resultsBeforeSentinel(environment, capture)
                #expect(extra.count == 28, "unexpected results: \(extra.dropFirst(28).map(\.summary))")
                #expect(worker.health.isLive && worker.health.isReady, "the worker must keep running")

                // Results in publication order, the good messages' only; each card replenished after its install.
                let resultIDs = results.prefix(28).compactMap { $0.properties.messageID?.split(separator: "/").first }
                var expectedIDs: [Substring] = []
                for spec in good {
                    let id = Substring(spec.messageID!)
                    expectedIDs += id.hasPrefix("install-") ? [id, id] : [id]
                }
                #expect(resultIDs == expectedIDs)
                for card in 0..<9 {
                    let replenished = results.first { $0.properties.messageID == "mg-\(card)/0" }
                    #expect(replenished?.string("outcome") == "replenished", "\(replenished?.summary ?? "none")")
                }

                // Exactly one dead letter: the original, untouched, with the store's refusal. The sentinel's result
                // is in, so whatever the worker dead-lettered before it is in the queue, ahead of a marker.
                let allLetters = try await deadLetters.messagesBeforeAMarker()
                #expect(allLetters.count == 1, "dead letters: \(allLetters.map(\.summary))")
                let letter = try #require(letters.first)
                #expect(letter.properties.messageID == "poison")
                #expect(letter.body == poison.body)
                #expect(letter.routingKey == poison.routingKey)
                let reason = letter.stringHeader("x-worker-error") ?? ""
                #expect(
                    reason.hasPrefix("the store refused this message: ") && reason.contains("SQLSTATE 22021"),
                    "x-worker-error: \(reason)")
                #expect(worker.metric("wallet_dead_letters_total", labels: [#"reason="store_refused""#]) == 1)
                #expect(worker.metric("wallet_retries_total") == 0)

                // Nothing left unacknowledged (stopped, the worker would have handed it back), nothing retried.
                try await worker.stop()
                #expect(try await environment.messageCount(environment.topology.workQueue) == 0)
                #expect(try await environment.messageCount(environment.topology.retryQueue) == 0)
                // The good messages recorded as processed, the refused one not.
                let processed = Set(try await database.contents().processedIDs)
                #expect(processed.isSuperset(of: good.map { $0.messageID! }))
                #expect(!processed.contains("poison"))
            }
        }
    }

    static func install(_ card: String) -> String {
        #"{"sender":"CPS","digitalCardId":"\#(card)","serverMessage":{"code":"CBP.info.tokenProvisioned","text":"t","severity":"info","params":[]}}"#
    }

    static func replenish(_ card: String) -> String {
        #"{"sender":"MG","action":"MG:ReplenishmentNeededNotification","digitalCardId":"\#(card)"}"#
    }
}
