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
            try await withResilienceTopology("inspect-undelivered") { topology, connection, channel in
                // One attempt: the first refusal dead-letters it. One message cannot trip the results pause.
                let worker = try await startOneAttemptWorker(
                    topology, database: database, label: "inspect-undelivered")
                defer {
                    worker.kill()
                    worker.process.removeLog()
                }
                try await channel.enableConfirms()
                let id = "undelivered-1"
                try await deadLetterAsTransientFailures(
                    [InboundSpec.cps(id, card: "UNDELIVERED-1", code: "CBP.info.tokenProvisioned")],
                    topology: topology, connection: connection, channel: channel, worker: worker)

                // The note is written once the dead letter is confirmed, beside the acknowledgement.
                func inspected() async throws -> [String: Any] {
                    let output = try await walletWorkerCommand(["inspect", "message", id, "--store", store]).output
                    return jsonObjects(output).first ?? [:]
                }
                var shown: [String: Any] = [:]
                try await waitUntil("inspect message to show it undelivered\n\(worker.logTail())") {
                    shown = try await inspected()
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
                    try await inspected()["undelivered"] is NSNull
                }
                #expect(try await readyCount(topology.deadLetterQueue, on: connection) == 0)
            }
        }
    }
}
