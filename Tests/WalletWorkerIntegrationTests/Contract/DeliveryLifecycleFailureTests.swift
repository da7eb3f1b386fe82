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
    // Defect 2 (a stop during the requeue delay) and defect 4 (deliveries held for the store given back before the
    // broker's consumer timeout) are the executor's decisions: they are tested in process, on a scripted broker and a
    // clock turned by hand (`ExecutorPublishFailureTests`, `ExecutorStoreOutageTests` in WalletWorkerTests). What
    // stays here crosses the wire: the frame size the broker negotiated.

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
                let letters = try await deadLetters.waitFor(1, "the fitted dead letter")
                let headers = try #require(letters.first?.headers)
                #expect(headers["x-big"] == nil, "dropped to fit the 8 KiB frame")
                #expect(headers["x-small"] == .string("kept"))
                let dropped = headers["x-worker-dropped-headers"].map { "\($0)" } ?? ""
                #expect(dropped.contains("x-big"), "\(headers)")
                #expect(headers["x-worker-error"] != nil)
                try await waitUntil("the delivery acknowledged, not requeued") {
                    try await environment.messageCount(environment.topology.workQueue) == 0
                }
                #expect(worker.metric("wallet_reconnects_total") == 0)
                try await worker.stop()
            }
        }
    }
}
