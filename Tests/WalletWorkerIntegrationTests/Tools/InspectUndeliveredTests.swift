import AMQPTransport
import BrokerTestSupport
import Foundation
import TestSupport
import Testing

extension Resilience {
    /// Issue 36, item 4, across the wire: a message whose result the broker refuses until its attempts run out is
    /// dead-lettered with its effects committed. `wallet-worker inspect message` says its results were never
    /// delivered; once the route is back and its dead letter is replayed, the recorded result arrives and
    /// `undelivered` is null again. In process: `ExecutorPublishFailureTests`.
    @Suite("inspect message after a dead letter", .timeLimit(.minutes(3)))
    struct InspectUndelivered {
        @Test("a message dead-lettered after its commit shows its results undelivered until a replay delivers them")
        func undeliveredUntilReplayed() async throws {
            let database = temporarySQLitePath("inspect-undelivered")
            defer { removeSQLite(database) }
            let store = "sqlite:\(database)"
            // One attempt: the first refusal dead-letters it. One message cannot trip the results pause.
            let oneAttempt = ["--retry-attempts", "1"]
            try await withResilienceTopology("inspect-undelivered", declareFlags: oneAttempt) {
                topology, connection, channel in
                let worker = try WorkerProcess(
                    workerRunArguments(topology, store: store, extra: oneAttempt), amqpURL: TestBroker.urlText,
                    label: "inspect-undelivered")
                defer {
                    worker.kill()
                    worker.process.removeLog()
                }
                let port = try await worker.operationsPort()
                try await worker.waitForHTTP(port: port, path: "/readyz", status: 200, timeout: .seconds(30))
                try await channel.enableConfirms()

                try await topology.unbindCapture(on: channel)
                let id = "undelivered-1"
                let message = InboundSpec.cps(id, card: "UNDELIVERED-1", code: "CBP.info.tokenProvisioned")
                try await publishConfirmed([message.outbound(to: topology.inbound)], on: channel)
                do {
                    try await waitUntil("its dead letter\n\(worker.logTail())") {
                        try await readyCount(topology.deadLetterQueue, on: connection) >= 1
                    }
                } catch {
                    try? await topology.bindCapture(on: channel)
                    throw error
                }
                try await topology.bindCapture(on: channel)

                // The note is written once the dead letter is confirmed, after the acknowledgement.
                var shown: [String: Any] = [:]
                try await waitUntil("inspect message to show it undelivered\n\(worker.logTail())") {
                    let output = try await walletWorkerCommand(["inspect", "message", id, "--store", store]).output
                    shown = jsonObjects(output).first ?? [:]
                    return shown["undelivered"] is [String: Any]
                }
                let undelivered = shown["undelivered"] as? [String: Any]
                #expect(shown["outcome"] as? String == "processed", "its effects are committed: \(shown)")
                #expect(undelivered?["reason"] as? String == "retries_exhausted", "\(shown)")
                #expect((undelivered?["error"] as? String)?.contains("NO_ROUTE") == true, "\(shown)")
                #expect((undelivered?["replay"] as? String)?.contains("dead-letters replay --message-id \(id)") == true)
                let recorded = (shown["results"] as? [[String: Any]])?.count ?? 0
                #expect(recorded >= 1, "\(shown)")

                // The route is back: the replay publishes the recorded results, and the note goes.
                let replay = try await walletWorkerCommand(
                    ["dead-letters", "replay", "--message-id", id] + topology.flags)
                #expect(replay.exit == .exited(0), "\(replay.output)")
                try await waitUntil("the replayed results\n\(worker.logTail())") {
                    try await readyCount(topology.capture, on: connection) >= recorded
                }
                try await waitUntil("inspect message to show it delivered\n\(worker.logTail())") {
                    let output = try await walletWorkerCommand(["inspect", "message", id, "--store", store]).output
                    return jsonObjects(output).first?["undelivered"] is NSNull
                }
                #expect(try await readyCount(topology.deadLetterQueue, on: connection) == 0)
            }
        }
    }
}
