import AMQPTransport
import BrokerTestSupport
import Foundation
import TestSupport
import Testing

extension Resilience {
    /// The worker reconnects by itself after the broker goes away (Pipeline: backoff, re-declare, consume
    /// again), reports not-ready meanwhile, and loses nothing: durable queues, persistent messages, and the store's
    /// replay for what was in flight.
    ///
    /// Stopping a broker would break every other test sharing it, so this suite runs a node of its own
    /// (scripts/rabbitmq-local.sh on port 5742, its own data directory), stopped and removed at the end.
    @Suite("Broker restart", .timeLimit(.minutes(4)))
    struct BrokerRestart {
        static let port = 5742

        @Test(
            "the broker stops and starts during 10,000 messages: /readyz 503 while it is down, 200 after; the worker reconnects and nothing is lost"
        )
        func workerSurvivesABrokerRestart() async throws {
            let node = PrivateRabbitNode(port: Self.port)
            try await withTeardown({ node.destroy() }) {
                try await node.start()
                let database = temporarySQLitePath("restart")
                defer { removeSQLite(database) }

                try await withResilienceTopology("restart", url: node.url) { topology, connection, channel in
                    let inbound = (0..<10_000).map { index -> InboundSpec in
                        switch index % 4 {
                        case 0: .cps("restart-\(index)", card: "RESTART-\(index)", code: "CBP.info.tokenProvisioned")
                        case 1: .cps("restart-\(index)", card: "RESTART-\(index - 1)", code: "CBP.info.tokenSuspended")
                        case 2: .mg("restart-\(index)", card: "RESTART-\(index - 2)")
                        default: .action("restart-\(index)", action: "restart.refresh")
                        }
                    }
                    let totalResults = inbound.map(\.expectedResults).reduce(0, +)
                    try await channel.enableConfirms()
                    try await publishConfirmed(inbound.map { $0.outbound(to: topology.inbound) }, on: channel)
                    await connection.close(timeout: .seconds(5))

                    let worker = try WorkerProcess(
                        workerRunArguments(topology, store: "sqlite:\(database)", prefetch: 100), amqpURL: node.url,
                        label: "restart-worker")
                    defer {
                        worker.kill()
                        worker.process.removeLog()
                    }
                    let port = try await worker.operationsPort()
                    try await worker.waitForHTTP(port: port, path: "/readyz", status: 200, timeout: .seconds(30))

                    // Stop the node once about a fifth of the results are in.
                    let watcher = try await TestBroker.connect(purpose: "restart watcher", url: node.url)
                    do {
                        try await waitUntil(
                            "the worker to get going\n\(worker.logTail())",
                            every: .milliseconds(20)
                        ) {
                            try await readyCount(topology.capture, on: watcher) >= totalResults / 5
                        }
                    } catch {
                        await watcher.close(timeout: .seconds(2))
                        throw error
                    }
                    await watcher.close(timeout: .seconds(2))
                    try await node.stop()

                    try await worker.waitForHTTP(port: port, path: "/readyz", status: 503, timeout: .seconds(60))
                    // Messages finished before the outage: the rest must be processed after the restart.
                    let finishedBeforeOutage = try worker.metric(port: port, "wallet_messages_total")
                    #expect(
                        finishedBeforeOutage < Double(inbound.count),
                        "the worker had finished everything before the broker stopped: no restart was tested")
                    // Two reconnection attempts refused: the worker has been without a broker for a while.
                    try await waitForReconnectAttempt(3, of: worker)
                    #expect(try httpGet(port: port, path: "/readyz").status == 503)
                    #expect(try httpGet(port: port, path: "/healthz").status == 200, "reconnecting is not a failure")
                    #expect(worker.isRunning, "\(worker.logTail())")

                    try await node.start()
                    try await worker.waitForHTTP(port: port, path: "/readyz", status: 200, timeout: .seconds(60))
                    #expect(try worker.metric(port: port, "wallet_reconnects_total") >= 1)

                    // Finish, then stop the worker and account for every message.
                    let after = try await TestBroker.connect(purpose: "restart after", url: node.url)
                    defer { Task { await after.close(timeout: .seconds(2)) } }
                    try await waitUntil(
                        "the worker did not finish after the restart\n\(worker.logTail())", every: .milliseconds(100)
                    ) {
                        let ready = try await readyCount(topology.work, on: after)
                        let results = try await readyCount(topology.capture, on: after)
                        return ready == 0 && results >= totalResults
                    }
                    worker.terminate()
                    let ended = await worker.waitForExit(timeout: .seconds(30))
                    #expect(ended?.exit == .exited(0), "\(worker.logTail())")
                    #expect(try await readyCount(topology.work, on: after) == 0)
                    #expect(try await readyCount(topology.deadLetterQueue, on: after) == 0)

                    let results = try await MessageCapture.drain(topology.capture, on: after)
                    let accounting = ResultAccounting(results: results, inbound: inbound)
                    #expect(
                        accounting.incomplete.isEmpty,
                        "\(accounting.incomplete.count) messages lost results (id, expected, found): \(accounting.incomplete.prefix(5))"
                    )
                    #expect(accounting.unexpected.isEmpty, "unexpected results: \(accounting.unexpected.prefix(5))")
                    #expect(
                        accounting.differingDuplicates.isEmpty,
                        "results that differ between deliveries: \(accounting.differingDuplicates.prefix(2))")
                    let errors = results.filter { $0.routingKey == "card.errorEncountered" }
                    #expect(
                        errors.isEmpty, "a replayed or re-applied CPS message failed: \(errors.prefix(2).map(\.text))")

                    // SIGTERM while the broker is away: the worker is between reconnection attempts (or in one), holds
                    // nothing, and must still exit 0 promptly rather than wait out a backoff or a connect timeout.
                    let second = try WorkerProcess(
                        workerRunArguments(topology, store: "sqlite:\(database)", prefetch: 100), amqpURL: node.url,
                        label: "restart-worker-2")
                    defer {
                        second.kill()
                        second.process.removeLog()
                    }
                    let secondPort = try await second.operationsPort()
                    try await second.waitForHTTP(port: secondPort, path: "/readyz", status: 200, timeout: .seconds(30))
                    try await node.stop()
                    try await second.waitForHTTP(port: secondPort, path: "/readyz", status: 503, timeout: .seconds(60))
                    // One reconnection attempt refused: the worker is in a backoff, or already in its next attempt.
                    try await waitForReconnectAttempt(2, of: second)
                    second.terminate()
                    let secondEnded = await second.waitForExit(timeout: .seconds(30))
                    #expect(secondEnded?.exit == .exited(0), "\(second.logTail())")
                    #expect(
                        secondEnded.map { $0.elapsed < .seconds(5) } ?? false,
                        "SIGTERM with the broker down took \(String(describing: secondEnded?.elapsed))\n\(second.logTail())"
                    )
                }
            }
        }
    }
}

/// Waits for the worker's log to announce reconnection attempt `attempt` (1-based) of a pipeline: attempt 2 and on are
/// announced only after an attempt has failed, so this is the worker reconnecting to a broker that is still away.
private func waitForReconnectAttempt(_ attempt: Int, of worker: WorkerProcess) async throws {
    try await waitUntil("reconnection attempt \(attempt)\n\(worker.logTail())", every: .milliseconds(50)) {
        jsonObjects(worker.log).contains {
            $0["message"] as? String == "reconnecting" && $0["attempt"] as? String == "\(attempt)"
        }
    }
}
