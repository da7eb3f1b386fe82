// The broker cancels the worker's consumer when its queue is deleted (consumer_cancel_notify): the worker must
// notice, leave readiness, re-declare the topology and consume again, without a restart.
import AMQPTransport
import BrokerTestSupport
import TestSupport
import Testing
import WalletWorker

@Suite struct ConsumerCancelTests {
    @Test(.timeLimit(.minutes(2)))
    func aDeletedWorkQueueIsDeclaredAgainAndConsumed() async throws {
        try await withWorkerEnvironment(
            "consumer-cancel",
            configure: {
                $0.reconnectBackoff.initial = .milliseconds(50)
            }
        ) { environment in
            let capture = try await environment.resultCapture()
            let worker = try await environment.startWorker()
            let before = reconnects(worker)

            _ = try await environment.channel.deleteQueue(environment.topology.workQueue)

            // The pipeline loses its consumer, reconnects (re-declaring the queue and its binding) and consumes.
            try await waitUntil(
                "the worker to reconnect (counted) and consume again after its queue was deleted; reconnects "
                    + "\(reconnects(worker) - before), ready \(worker.health.isReady)", every: .milliseconds(20)
            ) { reconnects(worker) > before && worker.health.isReady }

            // The new queue is bound to the inbound exchange again: a message published now is processed.
            try await environment.publish(InboundSpec(json: #"{"action":"afterCancel"}"#, messageID: "after-cancel"))
            try await capture.results.waitFor(1, "the result of a message sent after the cancel")
            #expect(capture.results.messages.first?.properties.messageID == "after-cancel/0")
        }
    }
}

/// `wallet_reconnects_total` from the worker's Prometheus exposition.
private func reconnects(_ worker: RunningWorker) -> Double {
    worker.metric("wallet_reconnects_total")
}
