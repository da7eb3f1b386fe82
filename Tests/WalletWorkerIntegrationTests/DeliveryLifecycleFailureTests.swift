// Issue 23: the delivery lifecycle's failure paths where they cross the wire, against the real broker and store.
// The machine's own rules are unit-tested without a broker (Tests/WalletWorkerTests/Lifecycle).
import AMQPTransport
import BrokerTestSupport
import Foundation
import TestSupport
import Testing
import WalletStore
import WalletWorker

@Suite("Delivery lifecycle failure paths through the broker", .timeLimit(.minutes(3)))
struct DeliveryLifecycleFailureTests {
    /// Defect 2: the worker slept the requeue delay before acknowledging the deliveries whose retry copies or dead
    /// letters were already confirmed; a shutdown whose grace period ended the sleep acknowledged nothing, so such a
    /// message was redelivered and also sat in the dead-letter queue.
    @Test(
        "a stop during the requeue delay: the message whose dead letter was confirmed is acknowledged, not left beside its dead letter"
    )
    func stopDuringTheRequeueDelay() async throws {
        try await withWorkerEnvironment(
            "requeue-delay-stop",
            configure: {
                // The retry queue this test deletes must stay deleted.
                $0.declaresTopology = false
                $0.shutdownGracePeriod = .milliseconds(300)
                $0.retryAttempts = 5
            }
        ) { environment in
            let deadLetters = try await environment.deadLetterReader()
            // Nothing is bound to the result exchanges: every result comes back unroutable, a transient failure. And
            // with no retry queue, retry copies come back too: those deliveries are requeued after a delay.
            try await environment.channel.deleteQueue(environment.topology.retryQueue)
            // One batch of two: one with attempts left, one on its last attempt (its dead letter is confirmed).
            let fresh = InboundSpec(json: #"{"action":"refresh"}"#, messageID: "\(environment.prefix).fresh")
            var last = InboundSpec(json: #"{"action":"refresh"}"#, messageID: "\(environment.prefix).last")
            last.headers = [("x-retry-count", .int32(4))]
            try await environment.publish([fresh, last])

            let worker = try await environment.startWorker()
            let letters = try await deadLetters.waitFor(1, within: .seconds(10), "the last attempt's dead letter")
            #expect(letters.map(\.properties.messageID) == ["\(environment.prefix).last"])
            try await worker.stop()

            let inQueue = try await environment.messageCount(environment.topology.workQueue)
            #expect(
                inQueue == 1, "only the message with attempts left goes back; the dead-lettered one was acknowledged")
            try await Task.sleep(for: .milliseconds(200))
            #expect(deadLetters.count == 1)
        }
    }

    /// Defect 5: the worker fitted its dead letters to 131,072 bytes whatever frame size the broker agreed to; against
    /// a broker with a smaller `frame_max`, a dead letter whose headers fit the default but not the agreed frame was
    /// refused by the transport, and the delivery was requeued forever.
    @Test(
        "a broker with an 8 KiB frame_max: a dead letter whose headers outgrow the frame is fitted to it, not requeued forever"
    )
    func deadLettersFitTheNegotiatedFrameSize() async throws {
        let node = PrivateRabbitNode(port: 5782, frameMax: 8_192)
        try await withTeardown({ node.destroy() }) {
            try await node.start()
            try await withWorkerEnvironment("small-frame", brokerURL: node.url) { environment in
                try await environment.declareTopology()
                let deadLetters = try await environment.deadLetterReader()
                // The inbound content header fits the 8 KiB frame; its dead letter adds the worker's headers and does not.
                var bad = InboundSpec(json: #"{"action":"x"}"#, messageID: "\(environment.prefix).big-headers")
                bad.text = "not json"
                bad.headers = [("x-big", .string(String(repeating: "b", count: 8_060))), ("x-small", .string("kept"))]
                try await environment.publish(bad)
                let worker = try await environment.startWorker()
                let letters = try await deadLetters.waitFor(1, within: .seconds(15), "the fitted dead letter")
                let headers = try #require(letters.first?.headers)
                #expect(headers["x-big"] == nil, "dropped to fit the 8 KiB frame")
                #expect(headers["x-small"] == .string("kept"))
                let dropped = headers["x-worker-dropped-headers"].map { "\($0)" } ?? ""
                #expect(dropped.contains("x-big"), "\(headers)")
                #expect(headers["x-worker-error"] != nil)
                try await eventually("the delivery acknowledged, not requeued", within: .seconds(10)) {
                    try await environment.messageCount(environment.topology.workQueue) == 0
                }
                #expect(worker.metric("wallet_reconnects_total") == 0)
                try await worker.stop()
            }
        }
    }

    /// Defect 4: deliveries held for an outage of the store were never acknowledged, so the broker's consumer timeout
    /// closed the channel (406); the worker counted each close against the messages and after three dead-lettered
    /// valid notifications as poison. Now they are given back at half the timeout and the pipeline pauses.
    @Test(
        "held for a store outage past half the broker's consumer timeout: given back before it, the pipeline pauses, and resumes when the store answers; nothing is dead-lettered, no session fails",
        .enabled(
            if: ReplicaDatabase.isConfigured,
            "POSTGRES_URL is not set: scripts/test.sh starts a private PostgreSQL and sets it"))
    func heldDeliveriesAreGivenBackBeforeTheConsumerTimeout() async throws {
        // A node of its own: a 6 s consumer timeout, checked every second, would break every other test's consumers.
        let node = PrivateRabbitNode(port: 5772, consumerTimeout: .seconds(6))
        try await withTeardown({ node.destroy() }) {
            try await node.start()
            try await ReplicaDatabase.with("consumer_timeout") { database in
                let relay = try database.relay()
                defer { relay.close() }
                let store = try database.store(through: relay)
                try await withWorkerEnvironment(
                    "consumer-timeout", brokerURL: node.url,
                    configure: {
                        $0.store = store
                        $0.consumerTimeout = .seconds(6)
                        // The store's deadlines must be far under the consumer timeout (seconds against 30 minutes by
                        // default): a batch is given back only once the store has answered that it is out.
                        $0.storeStatementTimeout = .seconds(1)
                        $0.retryAttempts = 2
                        $0.retryDelay = .milliseconds(200)
                    }
                ) { environment in
                    try await environment.declareTopology()
                    let capture = try await environment.resultCapture()
                    let deadLetters = try await environment.deadLetterReader()
                    let worker = try await environment.startWorker()
                    try await environment.publish(
                        InboundSpec(json: #"{"action":"warm"}"#, messageID: "\(environment.prefix).warm"))
                    _ = try await capture.results.waitFor(1, within: .seconds(10), "the first result, store up")

                    relay.refuse()
                    let ids = (0..<5).map { "\(environment.prefix).held-\($0)" }
                    try await environment.publish(
                        ids.map { InboundSpec(json: #"{"action":"refresh"}"#, messageID: $0) })
                    try await eventually(
                        "the held messages were not given back to the queue",
                        within: .seconds(15), every: .milliseconds(100)
                    ) {
                        try await environment.messageCount(environment.topology.workQueue) == 5
                    }
                    #expect(!worker.health.isReady && worker.metric("wallet_store_available") == 0)
                    // Past two consumer timeouts: paused, the messages wait in the queue, no channel was closed under the
                    // worker (a session failing would reconnect).
                    try await Task.sleep(for: .seconds(12))
                    #expect(try await environment.messageCount(environment.topology.workQueue) == 5)
                    #expect(
                        worker.metric("wallet_reconnects_total") == 0,
                        "a session failed: the broker timed the consumer out"
                    )
                    #expect(deadLetters.count == 0)

                    relay.accept()
                    let results = try await capture.results.waitFor(
                        6, within: .seconds(60), "the held messages' results")
                    #expect(Set(results.compactMap(\.properties.messageID)).isSuperset(of: ids.map { "\($0)/0" }))
                    try await eventually("the worker ready again", within: .seconds(10)) { worker.health.isReady }
                    #expect(worker.metric("wallet_store_available") == 1)
                    #expect(worker.metric("wallet_store_outages_total") == 1)
                    #expect(deadLetters.count == 0)
                    try await worker.stop()
                }
            }
        }
    }
}
