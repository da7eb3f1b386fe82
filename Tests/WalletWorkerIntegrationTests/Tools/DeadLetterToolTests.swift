import AMQPTransport
import BrokerTestSupport
import Foundation
import TestSupport
import Testing

extension Resilience {
    /// Issue 15, part 1: `wallet-worker dead-letters list|show|replay|purge` against the real broker, on dead
    /// letters the worker itself made: bad input (rejected) and messages that failed for the store (another
    /// process held the SQLite lock, one attempt allowed). The operator finds why each one is there, replays the
    /// store failures once the store is back (the worker processes them: all their results), and purges the rest;
    /// nothing the commands do not act on leaves the queue.
    @Suite("Dead-letter tool", .timeLimit(.minutes(3)))
    struct DeadLetterTool {
        private func command(
            _ arguments: [String], _ topology: ResilienceTopology, input: String? = nil
        ) async throws -> (exit: ChildExit, output: String) {
            try await walletWorkerCommand(arguments + topology.flags, input: input)
        }

        @Test(
            "list shows why each message was dead-lettered and takes nothing; replay --reason brings back the store failures, which the worker then processes; show prints one whole; purge asks first"
        )
        func operatorFindsReplaysAndPurges() async throws {
            let database = temporarySQLitePath("dead-letter-tool")
            defer { removeSQLite(database) }
            try await withResilienceTopology("dlt") { topology, connection, channel in
                let worker = try await startOneAttemptWorker(topology, database: database, label: "dlt-worker")
                defer {
                    worker.kill()
                    worker.process.removeLog()
                }
                try await channel.enableConfirms()

                // Four whose results cannot be routed (a transient failure), then three bad ones once they can.
                let storeFailures = (0..<4).map {
                    InboundSpec.mg("dlt-mg-\($0)", card: "DLT-\($0)")
                }
                try await deadLetterAsTransientFailures(
                    storeFailures, topology: topology, connection: connection, channel: channel, worker: worker)
                var bad = InboundSpec.action("dlt-bad-0", action: "x")
                let badOnes = (0..<3).map { index -> InboundSpec in
                    bad.messageID = "dlt-bad-\(index)"
                    bad.text = #"{"sender":"TNS","oops":"# + "\(index)"
                    return bad
                }
                try await publishConfirmed(badOnes.map { $0.outbound(to: topology.inbound) }, on: channel)
                try await waitUntil(
                    "readyCount(topology.deadLetterQueue) == 7\n\(worker.logTail())"
                ) {
                    try await readyCount(topology.deadLetterQueue, on: connection) == 7
                }
                let resultsBefore = try await readyCount(topology.capture, on: connection)

                // list: seven lines with their reasons; the queue keeps all seven.
                let list = try await command(["dead-letters", "list", "--json"], topology)
                #expect(list.exit == .exited(0), "\(list.output)")
                let listed = jsonObjects(list.output)
                #expect(listed.count == 7, "\(list.output)")
                let storeListed = listed.filter { ($0["reason"] as? String)?.contains("NO_ROUTE") == true }
                #expect(Set(storeListed.compactMap { $0["messageId"] as? String }) == Set(storeFailures.map(\.id)))
                #expect(
                    storeListed.allSatisfy {
                        $0["sender"] as? String == "MG" && $0["deadLetteredBy"] as? String == "worker"
                    })
                let badListed = listed.filter { ($0["reason"] as? String)?.contains("body is not JSON") == true }
                #expect(badListed.count == 3, "\(list.output)")
                #expect(try await readyCount(topology.deadLetterQueue, on: connection) == 7, "list took messages")

                // A filter with no match (exit status 1: nothing found), and the dry run: nothing moves.
                let none = try await command(["dead-letters", "list", "--json", "--sender", "CPS"], topology)
                #expect(jsonObjects(none.output).isEmpty && none.exit == .exited(1), "\(none.output)")
                let absent = try await command(["dead-letters", "show", "--message-id", "never-sent"], topology)
                #expect(absent.exit == .exited(1) && absent.output.contains("showed 0 of 7"), "\(absent.output)")
                let dry = try await command(
                    ["dead-letters", "replay", "--reason", "NO_ROUTE", "--dry-run", "--json"], topology)
                #expect(dry.exit == .exited(0) && jsonObjects(dry.output).count == 4, "\(dry.output)")
                #expect(try await readyCount(topology.deadLetterQueue, on: connection) == 7, "a dry run took messages")

                // show: one dead letter whole.
                let show = try await command(["dead-letters", "show", "--message-id", "dlt-bad-1"], topology)
                let shown = jsonObjects(show.output)
                #expect(shown.count == 1 && shown.first?["body"] as? String == badOnes[1].text, "\(show.output)")
                let headers = shown.first?["headers"] as? [String: Any]
                #expect((headers?["x-worker-error"] as? String)?.contains("body is not JSON") == true, "\(show.output)")

                // replay the transient failures: they leave the dead letters and the worker processes them.
                let replay = try await command(["dead-letters", "replay", "--reason", "NO_ROUTE"], topology)
                #expect(replay.exit == .exited(0), "\(replay.output)")
                #expect(replay.output.contains("replayed 4 of 7"), "no progress line: \(replay.output)")
                try await waitUntil(
                    "the replayed messages were not processed\n\(worker.logTail())"
                ) {
                    try await readyCount(topology.capture, on: connection) >= resultsBefore + 4
                }
                #expect(try await readyCount(topology.deadLetterQueue, on: connection) == 3)
                let results = try await MessageCapture.drain(topology.capture, on: connection)
                let accounting = ResultAccounting(results: results, inbound: storeFailures)
                #expect(
                    accounting.incomplete.isEmpty, "replayed messages without their results: \(accounting.incomplete)")

                // purge asks; "no" deletes nothing; --yes deletes the matching ones.
                let refused = try await command(
                    ["dead-letters", "purge", "--reason", "not JSON"], topology, input: "no\n")
                #expect(refused.exit == .exited(1), "\(refused.output)")
                #expect(try await readyCount(topology.deadLetterQueue, on: connection) == 3)
                let purged = try await command(["dead-letters", "purge", "--reason", "not json", "--yes"], topology)
                #expect(purged.exit == .exited(0) && purged.output.contains("deleted 3 of 3"), "\(purged.output)")
                #expect(try await readyCount(topology.deadLetterQueue, on: connection) == 0)
                #expect(worker.isRunning)
            }
        }

        /// Issue 37: a message with `x-original-exchange: ""` and `x-original-routing-key` naming another queue,
        /// dead-lettered on its first delivery, kept those headers, and `replay --yes` published it into that queue
        /// with the operator's rights. The worker's dead letter now records the true first destination (a unit test
        /// of the copy, `OriginalDestinationTests`); what crosses the wire is the tool's replay: through the default
        /// exchange only to a queue the workers consume. No worker runs, so what the replay published stays where it
        /// went, and every count below is final once the command has exited (its publishes are confirmed).
        @Test("a dead letter's forged x-original-* headers never send a replay into the queue they name")
        func forgedDestinationIsNotFollowed() async throws {
            try await withResilienceTopology("dlf") { topology, connection, channel in
                // Left behind only if the test fails: the test broker goes with the run.
                let victim = "\(topology.prefix).victim"
                _ = try await channel.declareQueue(victim)
                try await channel.enableConfirms()
                let error: (String, AMQPFieldValue) = ("x-worker-error", .string("body is not JSON"))
                // As the worker now writes it: the first destination it saw.
                var recorded = InboundSpec.action("dlf-recorded", action: "x")
                recorded.headers = [
                    ("x-original-exchange", .string(topology.inbound)),
                    ("x-original-routing-key", .string(recorded.routingKey)), error,
                ]
                // As a publisher wrote it, kept on a dead letter (a broker-made one keeps the headers as they came).
                var forged = InboundSpec.action("dlf-forged", action: "x")
                forged.headers = [
                    ("x-original-exchange", .string("")), ("x-original-routing-key", .string(victim)), error,
                ]
                try await publishConfirmed(
                    [recorded, forged].map { $0.outbound(to: "", routingKey: topology.deadLetterQueue) }, on: channel)

                // Exit 1: not everything asked for was replayed (the refused one stays).
                let replay = try await command(["dead-letters", "replay", "--yes"], topology)
                #expect(replay.exit == .exited(1), "\(replay.output)")
                #expect(replay.output.contains("replayed 1 of 2"), "\(replay.output)")
                #expect(replay.output.contains("not a queue the workers consume"), "\(replay.output)")
                #expect(try await readyCount(victim, on: connection) == 0, "a replay followed a forged header")
                #expect(try await readyCount(topology.work, on: connection) == 1, "the recorded one, back in")
                #expect(try await readyCount(topology.deadLetterQueue, on: connection) == 1, "the forged one, kept")
                try await channel.deleteQueue(victim)
            }
        }

        /// Issue 37, item 4: a look at a quorum dead-letter queue without `--queue-type quorum` failed with two 406
        /// warnings and "e.g. another retry delay or queue type". It says which flag to pass now, and logs no
        /// warning of its own.
        @Test("a look at a quorum dead-letter queue with the classic settings says exactly which flag to pass")
        func theOtherQueueTypeIsNamed() async throws {
            let quorum = ["--queue-type", "quorum"]
            try await withResilienceTopology("dlt-type", declareFlags: quorum) { topology, _, _ in
                let look = try await command(["dead-letters", "list", "--json"], topology)
                #expect(look.exit == .exited(1), "\(look.output)")
                #expect(
                    look.output.contains("\(topology.deadLetterQueue) is a quorum queue")
                        && look.output.contains("pass --queue-type quorum"), "\(look.output)")
                #expect(!look.output.contains("warning") && !look.output.contains("e.g."), "\(look.output)")

                let right = try await command(["dead-letters", "list", "--json"] + quorum, topology)
                #expect(right.output.contains("listed 0 of 0"), "\(right.output)")
            }
        }
    }
}
