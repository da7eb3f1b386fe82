import AMQPTransport
import BrokerTestSupport
import Foundation
import TestSupport
import Testing

extension Resilience {
    /// CONTRACT.md §10: on SIGTERM the worker stops taking deliveries, finishes and acknowledges what it holds,
    /// and exits within the grace period.
    @Suite("SIGTERM drain", .timeLimit(.minutes(3)))
    struct Drain {
        @Test(
            "SIGTERM while processing 5,000 messages: exit 0 within the grace period, nothing left unacknowledged, every acknowledged message has all its results"
        )
        func sigtermDrainsWhatItHolds() async throws {
            let database = temporarySQLitePath("drain")
            defer { removeSQLite(database) }
            try await withResilienceTopology("drain") { topology, connection, channel in
                // Half the messages install a card (two results each), half trigger an action (one result).
                let inbound = (0..<5_000).map { index -> InboundSpec in
                    index.isMultiple(of: 2)
                        ? .cps("drain-\(index)", card: "DRAIN-\(index)", code: "CBP.info.tokenProvisioned")
                        : .action("drain-\(index)", action: "refresh\(index)")
                }
                try await channel.enableConfirms()
                try await publishConfirmed(inbound.map { $0.outbound(to: topology.inbound) }, on: channel)
                #expect(try await readyCount(topology.work, on: connection) == 5_000)

                let worker = try WorkerProcess(
                    workerRunArguments(topology, store: "sqlite:\(database)", prefetch: 200),
                    amqpURL: TestBroker.urlText,
                    label: "drain-worker")
                defer {
                    worker.kill()
                    worker.process.removeLog()
                }

                // SIGTERM once processing is well under way (about 1,500 of ~7,500 results), not at the end.
                try await waitUntil(
                    "the worker did not get going\n\(worker.logTail())", every: .milliseconds(20)
                ) {
                    try await readyCount(topology.capture, on: connection) >= 1_500
                }
                worker.terminate()
                let ended = await worker.waitForExit(timeout: .seconds(30))
                let (exit, elapsed) = try #require(ended, "no exit within 30 s of SIGTERM\n\(worker.logTail())")
                #expect(exit == .exited(0), "\(worker.logTail())")
                #expect(elapsed < .seconds(25), "the drain took \(elapsed), over the 25 s grace period")
                #expect(worker.log.contains("stopped: every batch in hand acknowledged"), "\(worker.logTail())")

                // What is left in the work queue is ready (the worker's connections are gone, so nothing is
                // unacknowledged) and, as checked below, has no results. Deliveries the broker had already sent
                // when the consumer was cancelled are given back by the transport (basic.reject with requeue:
                // ConnectionCore.dispatch), so they come back marked `redelivered`; there can be at most a
                // prefetch window of them.
                let probe = try await connection.openChannel()
                let workStatus = try await probe.queueStatus(topology.work)
                #expect(workStatus.consumerCount == 0)
                let leftDeliveries = try await MessageCapture.drain(topology.work, on: connection)
                #expect(leftDeliveries.count == Int(workStatus.messageCount))
                let redelivered = leftDeliveries.filter(\.redelivered)
                #expect(
                    redelivered.count <= 200,
                    "\(redelivered.count) messages were delivered to the worker and given back, more than the prefetch window\n\(worker.logTail(25))"
                )
                #expect(try await readyCount(topology.retry, on: connection) == 0)
                #expect(try await readyCount(topology.deadLetterQueue, on: connection) == 0)
                let left = Set(leftDeliveries.compactMap(\.properties.messageID))
                #expect(left.count == leftDeliveries.count)
                #expect(!left.isEmpty, "SIGTERM came too late to test a drain: the queue was already empty")

                // Every message not in the queue was processed: its results are all there, exactly once.
                let results = try await MessageCapture.drain(topology.capture, on: connection)
                let processed = Set(inbound.map(\.id)).subtracting(left)
                let accounting = ResultAccounting(results: results, inbound: inbound, considering: processed)
                #expect(
                    accounting.incomplete.isEmpty,
                    "acknowledged without all their results (id, expected, found): \(accounting.incomplete.prefix(5))")
                #expect(accounting.unexpected.isEmpty, "unexpected results: \(accounting.unexpected.prefix(5))")
                let resultsForLeft = Set(accounting.distinctByInbound.keys).intersection(left)
                #expect(
                    resultsForLeft.isEmpty,
                    "results published for messages still in the queue: \(resultsForLeft.prefix(5))")
                let expectedCount = inbound.filter { processed.contains($0.id) }.map(\.expectedResults).reduce(0, +)
                #expect(
                    results.count == expectedCount,
                    "\(results.count) results for \(processed.count) processed messages, expected \(expectedCount)")
                #expect(accounting.differingDuplicates.isEmpty)
                #expect(left.isSubset(of: Set(inbound.map(\.id))), "unknown messages in the work queue")
                try? await probe.close()
            }
        }
    }
}
