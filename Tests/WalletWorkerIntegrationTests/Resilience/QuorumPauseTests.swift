// A results pause on a quorum work queue. RabbitMQ counts every give-back of a delivery (a requeue, or a channel
// closed with it unacknowledged) toward the queue's `x-delivery-limit`, and dead-letters the message past it with
// `delivery_limit`, whatever the worker's contract says. A pause that gave back what it held and took the head of the
// queue again at each trial lost those messages to the dead-letter queue after `--delivery-limit` failed trials (about
// 17 minutes at the default 20). The worker now holds them through the pause and publishes their results again at
// each trial. The machine's rows: `DeliveryLifecycleHeldThroughPauseTests`; the executor's:
// `ExecutorHeldThroughPauseTests`. In `LongRuns` (about 50 s of trial backoff): `Resilience` is the longer chain.
import AMQPTransport
import BrokerTestSupport
import Foundation
import TestSupport
import Testing

extension LongRuns {
    @Suite("Results pause on a quorum work queue (delivery limit 2, three failed trials)", .timeLimit(.minutes(3)))
    struct QuorumPauseTests {
        @Test(
            "three failed trials with a delivery limit of 2 dead-letter nothing; bound again, every message's result is delivered"
        )
        func failedTrialsDoNotSpendTheDeliveryLimit() async throws {
            let quorum = ["--queue-type", "quorum", "--delivery-limit", "2"]
            try await withResilienceTopology("quorum-pause", declareFlags: quorum) { topology, connection, channel in
                let (worker, port) = try await startReadyWorker(
                    workerRunArguments(topology, store: "memory", prefetch: 50, extra: quorum),
                    amqpURL: TestBroker.urlText, label: "quorum-pause-worker")
                defer {
                    worker.kill()
                    worker.process.removeLog()
                }
                try await channel.enableConfirms()

                try await topology.unbindCapture(on: channel)
                let inbound = (0..<30).map { InboundSpec.action("quorum-pause-\($0)", action: "pause.refresh") }
                do {
                    try await publishConfirmed(inbound.map { $0.outbound(to: topology.inbound) }, on: channel)
                    // The pause and three trials: a worker that gave back at each would have had the broker count
                    // three give-backs against a limit of 2, and dead-letter the messages (after which no trial
                    // would fail: the queue would be empty).
                    try await waitUntil("three failed trials\n\(worker.logTail())", every: .milliseconds(200)) {
                        let failedTrials =
                            worker.log.components(separatedBy: "the trial found the results still refused").count - 1
                        let deadLetters = try await readyCount(topology.deadLetterQueue, on: connection)
                        return failedTrials >= 3 || deadLetters > 0
                    }
                    let deadLetters = try await readyCount(topology.deadLetterQueue, on: connection)
                    #expect(deadLetters == 0, "dead-lettered by the broker during the pause\n\(worker.logTail())")
                    #expect(
                        worker.log.contains("publishing the results of the deliveries held through the pause"),
                        "\(worker.logTail())")
                } catch {
                    try? await topology.bindCapture(on: channel)
                    throw error
                }

                try await topology.bindCapture(on: channel)
                let expected = Set(inbound.map { "\($0.id)/0" })
                try await waitUntil("every message's result\n\(worker.logTail())", every: .milliseconds(200)) {
                    try await readyCount(topology.capture, on: connection) >= expected.count
                }
                try await worker.waitForHTTP(port: port, path: "/readyz", status: 200, timeout: .seconds(60))
                let results = try await MessageCapture.drain(topology.capture, on: connection)
                #expect(Set(results.compactMap(\.properties.messageID)) == expected)
                #expect(try await readyCount(topology.deadLetterQueue, on: connection) == 0)
                #expect(try worker.metric(port: port, "wallet_dead_letters_total") == 0)
            }
        }
    }
}
