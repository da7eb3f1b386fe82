import AMQPTransport
import BrokerTestSupport
import Foundation
import TestSupport
import Testing

extension Resilience {
    /// Issue 15, parts 2 and 5, the operator's side of the store, with the real worker, broker and stores:
    /// `migrate` as a deploy job does it and `run --no-migrate` refusing a store that is not this build's;
    /// `inspect card|message` showing what the running worker stored (decoded, equal to what it published);
    /// `route` against the production store changing nothing unless `--commit`.
    @Suite("Store tools: migrate, inspect, route --commit", .timeLimit(.minutes(3)))
    struct StoreTools {
        enum Store: String, CaseIterable, CustomTestStringConvertible {
            case sqlite, postgres
            var testDescription: String { rawValue }
        }

        @Test(
            "an operator migrates in a job, runs with --no-migrate, looks at a card and a message, and tries a payload without changing anything",
            arguments: Store.allCases)
        func operatorStory(_ kind: Store) async throws {
            switch kind {
            case .sqlite:
                let path = temporarySQLitePath("store-tools")
                defer { removeSQLite(path) }
                try await story(store: "sqlite:\(path)", label: "sqlite")
            case .postgres:
                guard ReplicaDatabase.isConfigured else {
                    Issue.record("POSTGRES_URL is not set: scripts/test.sh starts a private PostgreSQL and sets it")
                    return
                }
                try await ReplicaDatabase.with("store_tools") { database in
                    try await story(store: database.storeURL, label: "postgres")
                }
            }
        }

        private func story(store: String, label: String) async throws {
            try await withResilienceTopology("store-tools-\(label)") { topology, connection, channel in
                // 1. A runtime without DDL rights is not allowed to start on a store that was never migrated.
                let refused = try WorkerProcess(
                    workerRunArguments(topology, store: store, extra: ["--no-migrate"]), amqpURL: TestBroker.urlText,
                    label: "store-tools-refused")
                defer {
                    refused.kill()
                    refused.process.removeLog()
                }
                let ended = await refused.waitForExit(timeout: .seconds(30))
                // README, "Exit statuses": a SQLite file that does not exist cannot be used (2); a database without
                // this build's schema is refused (1).
                #expect(ended?.exit == .exited(label == "sqlite" ? 2 : 1), "\(refused.logTail())")
                #expect(refused.log.contains("wallet-worker migrate --store"), "\(refused.logTail())")

                let unmigrated = try await walletWorkerCommand(["migrate", "--check", "--store", store])
                #expect(
                    unmigrated.exit == .exited(1) && unmigrated.output.contains("schema none"), "\(unmigrated.output)")
                let migrated = try await walletWorkerCommand(["migrate", "--store", store])
                #expect(migrated.exit == .exited(0) && migrated.output.contains("applied v1"), "\(migrated.output)")
                #expect(
                    !migrated.output.contains("wallet@") || migrated.output.contains(":***@"), "no password printed")
                let again = try await walletWorkerCommand(["migrate", "--store", store])
                #expect(
                    again.exit == .exited(0) && again.output.contains("nothing to apply; schema current"),
                    "\(again.output)")
                let checked = try await walletWorkerCommand(["migrate", "--check", "--store", store])
                #expect(checked.exit == .exited(0), "\(checked.output)")

                // 2. The worker runs with --no-migrate and processes a card's life.
                let worker = try WorkerProcess(
                    workerRunArguments(topology, store: store, extra: ["--no-migrate"]), amqpURL: TestBroker.urlText,
                    label: "store-tools-worker")
                defer {
                    worker.kill()
                    worker.process.removeLog()
                }
                let port = try await worker.operationsPort()
                try await worker.waitForHTTP(port: port, path: "/readyz", status: 200, timeout: .seconds(30))
                try await channel.enableConfirms()
                let card = "ST-\(label)"
                let inbound: [InboundSpec] = [
                    .cps("st-install", card: card, code: "CBP.info.tokenProvisioned"),
                    .tns("st-tns-1", card: card, record: (id: "R-1", date: "2026-11-20T10:00:00Z", amount: 12.5)),
                    .tns("st-tns-2", card: card, record: (id: "R-2", date: "2026-11-21T09:30:00+01:00", amount: 3.2)),
                    .mg("st-mg", card: card),
                ]
                for notification in inbound {
                    try await publishConfirmed([notification.outbound(to: topology.inbound)], on: channel)
                }
                let expected = inbound.map(\.expectedResults).reduce(0, +)
                try await waitUntil("\(expected) results captured\n\(worker.logTail())") {
                    try await readyCount(topology.capture, on: connection) >= expected
                }
                let published = try await MessageCapture.drain(topology.capture, on: connection)

                // 3. inspect card: state, keys, history newest first, while the worker runs.
                let cardOutput = try await walletWorkerCommand(["inspect", "card", card, "--store", store])
                #expect(cardOutput.exit == .exited(0), "\(cardOutput.output)")
                let shown = try #require(jsonObjects(cardOutput.output).first, "\(cardOutput.output)")
                #expect(shown["state"] as? String == "active")
                #expect(shown["tokenizedCardId"] as? String == "TK-\(card)")
                let keys = shown["paymentKeys"] as? [String: Any]
                #expect(keys?["numberOfPaymentsLeft"] as? Int == 10 && keys?["expired"] as? Bool == false, "\(shown)")
                #expect(shown["transactionCount"] as? Int == 2)
                let history = (shown["transactions"] as? [[String: Any]])?.compactMap { $0["id"] as? String }
                #expect(history == ["R-2", "R-1"], "newest first: \(shown)")

                // 4. inspect message: the recorded results are the published ones, decoded.
                let messageOutput = try await walletWorkerCommand(["inspect", "message", "st-tns-2", "--store", store])
                #expect(messageOutput.exit == .exited(0), "\(messageOutput.output)")
                let message = try #require(jsonObjects(messageOutput.output).first, "\(messageOutput.output)")
                #expect(message["outcome"] as? String == "processed" && message["sender"] as? String == "TNS")
                #expect(message["undelivered"] is NSNull, "its results were delivered: \(message)")
                let recorded = try #require(message["results"] as? [[String: Any]])
                let sent = published.filter { $0.inboundID == "st-tns-2" }
                #expect(recorded.count == 1 && sent.count == 1)
                if let first = recorded.first, let result = sent.first {
                    #expect(first["exchange"] as? String == topology.transactions)
                    #expect(first["routingKey"] as? String == result.routingKey)
                    #expect(((first["properties"] as? [String: Any])?["messageId"] as? String) == result.messageID)
                    let recordedBody = first["body"] as? NSDictionary
                    #expect(recordedBody == (result.jsonObject as NSDictionary), "the stored body is the published one")
                }
                let missing = try await walletWorkerCommand(["inspect", "message", "never-sent", "--store", store])
                #expect(missing.exit == .exited(1) && missing.output.contains("no processed message never-sent"))
                // Rejected and dead-lettered messages are never recorded: the answer says where to look (issue 25).
                #expect(missing.output.contains("dead-letters show --message-id never-sent"), "\(missing.output)")

                // 5. route against the production store: a dry run shows the deletion and changes nothing.
                let delete =
                    #"{"properties":{"messageId":"st-try-delete"},"body":{"sender":"CPS","digitalCardId":"\#(card)","serverMessage":{"code":"CBP.info.tokenDeleted","text":"t","severity":"info"}}}"#
                let dryRun = try await walletWorkerCommand(["route", "--store", store], input: delete + "\n")
                #expect(dryRun.exit == .exited(0), "\(dryRun.output)")
                #expect(
                    dryRun.output.contains("dry run") && dryRun.output.contains(#""state":"deleted""#),
                    "\(dryRun.output)")
                let afterDryRun = try await walletWorkerCommand(["inspect", "card", card, "--store", store])
                #expect(jsonObjects(afterDryRun.output).first?["state"] as? String == "active", "\(afterDryRun.output)")
                let notRecorded = try await walletWorkerCommand([
                    "inspect", "message", "st-try-delete", "--store", store,
                ])
                #expect(notRecorded.exit == .exited(1), "a dry run records no message_id: \(notRecorded.output)")
                // The worker was not held up meanwhile: a card's next message is processed at once.
                try await publishConfirmed(
                    [InboundSpec.mg("st-mg-2", card: card).outbound(to: topology.inbound)], on: channel)
                try await waitUntil("readyCount(topology.capture) >= 1\n\(worker.logTail())") {
                    try await readyCount(topology.capture, on: connection) >= 1
                }

                let committed = try await walletWorkerCommand(
                    ["route", "--commit", "--store", store], input: delete + "\n")
                #expect(committed.exit == .exited(0) && !committed.output.contains("dry run"), "\(committed.output)")
                let afterCommit = try await walletWorkerCommand(["inspect", "card", card, "--store", store])
                #expect(
                    jsonObjects(afterCommit.output).first?["state"] as? String == "deleted", "\(afterCommit.output)")
            }
        }
    }
}
